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

// torch.set_float32_matmul_precision reaches float32 dots as their
// precision_config; other dtypes and the Default precision carry none. The
// CPU plugin compiles each form.
TEST(Builder, PrecisionConfigOfFloat32Dots) {
  for (auto p : {hlo::Precision::Default, hlo::Precision::High, hlo::Precision::Highest}) {
    for (DType t : {DType::F32, DType::F64}) {
      hlo::Builder b;
      b.set_precision(p);
      auto x = b.parameter({t, {2, 3}});
      b.set_results({b.dot_general(x, x, {}, {}, {1}, {1}, t)});
      std::string text = b.module_text();
      const char* want = p == hlo::Precision::Highest ? "precision_config = [#stablehlo<precision HIGHEST>, "
                                                        "#stablehlo<precision HIGHEST>]"
                                                      : "precision_config = [#stablehlo<precision HIGH>, "
                                                        "#stablehlo<precision HIGH>]";
      if (p == hlo::Precision::Default || t != DType::F32)
        EXPECT_EQ(text.find("precision_config"), std::string::npos) << text;
      else
        EXPECT_NE(text.find(want), std::string::npos) << text;
      EXPECT_NO_THROW(testing::client().compile(text, 0));
    }
  }
}

}  // namespace
}  // namespace torch_pjrt
