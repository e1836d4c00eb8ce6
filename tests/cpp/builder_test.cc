// Builder behaviour the lowerings rely on, checked on the CPU plugin.
#include <gtest/gtest.h>

#include "harness.h"

namespace torch_pjrt {
namespace {

using hlo::DType;

// Compares of constants are folded by XLA; without an explicit signed
// comparison_type it folds negative integers as unsigned.
TEST(Builder, ComparesNegativeIntegerConstantsAsSigned) {
  hlo::Builder b;
  b.set_results({b.compare(b.constant(-1, DType::I64), b.constant(0, DType::I64), "LT")});
  auto exe = testing::client().compile(b.module_text(), 0);
  bool out = false;
  exe->execute({})[0]->to_host(&out, 1);
  EXPECT_TRUE(out);
}

TEST(Builder, ComparisonTypeFollowsDType) {
  hlo::Builder b;
  auto x = b.parameter({DType::U8, {2}});
  auto y = b.parameter({DType::F32, {2}});
  b.set_results({b.compare(x, x, "LT"), b.compare(y, y, "EQ")});
  std::string text = b.module_text();
  EXPECT_NE(text.find("comparison_type UNSIGNED"), std::string::npos);
  EXPECT_NE(text.find("comparison_type FLOAT"), std::string::npos);
}

}  // namespace
}  // namespace torch_pjrt
