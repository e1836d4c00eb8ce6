// Builder behaviour the lowerings rely on, checked on the CPU plugin.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/bucket.h"
#include "engine/bucketed_view.h"
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

// Bounded dynamism (shape buckets): the type text, the ops that take dynamic
// operands, and a softmax over a padded row that runs on the CPU plugin and
// ignores what lies past the true size.
TEST(Builder, DynamicDimTypeText) {
  hlo::TensorType t{DType::F32, {4, 128}, 0b10};
  EXPECT_EQ(t.str(), "tensor<4x?xf32, #stablehlo.bounds<?, 128>>");
  EXPECT_EQ(t.numel(), 512);
}

TEST(Builder, OpsWithoutDynamicTypingRefuseDynamicOperands) {
  hlo::Builder b;
  auto x = b.parameter({DType::F32, {4, 8}});
  auto n = b.parameter({DType::I32, {}});
  auto d = b.set_dimension_size(x, n, 1);
  EXPECT_EQ(d.type.str(), "tensor<4x?xf32, #stablehlo.bounds<?, 8>>");
  EXPECT_EQ(b.add(d, x).type.dynamic, 0b10u);
  EXPECT_EQ(b.reduce(d, b.constant(0, DType::F32), {0}, "stablehlo.add").type.dynamic, 0b1u);
  EXPECT_EQ(b.transpose(d, {1, 0}).type.dynamic, 0b1u);
  EXPECT_EQ(b.reshape(d, {1, 4, 8}).type.dynamic, 0b100u);
  EXPECT_THROW(b.reshape(d, {32}), hlo::BuildError);
  EXPECT_THROW(b.slice(d, {0, 0}, {4, 4}, {1, 1}), hlo::BuildError);
  EXPECT_THROW(b.take_along(d, b.parameter({DType::I64, {2}}), 0), hlo::BuildError);
  EXPECT_THROW(b.iota(d.type, 0), hlo::BuildError);
  // XLA's dynamic padder aborts on a static operand before a dynamic one.
  EXPECT_THROW(b.concatenate({x, d}, 1), hlo::BuildError);
  EXPECT_EQ(b.concatenate({d, x}, 1).type.str(), "tensor<4x?xf32, #stablehlo.bounds<?, 16>>");
  EXPECT_EQ(b.to_static(d).type.str(), "tensor<4x8xf32>");
}

TEST(Builder, SoftmaxOverADynamicDimIgnoresPadding) {
  hlo::Builder b;
  auto x = b.parameter({DType::F32, {2, 8}});
  auto n = b.parameter({DType::I32, {}});
  auto d = b.set_dimension_size(x, n, 1);
  auto m = b.broadcast_in_dim(b.reduce(d, b.constant(-1e30, DType::F32), {1}, "stablehlo.maximum"), {2, 8}, {0});
  auto e = b.exp(b.sub(d, m));
  auto s = b.broadcast_in_dim(b.reduce(e, b.constant(0, DType::F32), {1}, "stablehlo.add"), {2, 8}, {0});
  b.set_results({b.to_static(b.div(e, s))});
  auto exe = testing::client().compile(b.module_text(), 0);
  for (int32_t size : {1, 3, 8}) {
    float in[16], out[16];
    for (int i = 0; i < 16; ++i) in[i] = (i % 8) < size ? static_cast<float>(i % 8) : 1000.f;
    auto bx = testing::client().from_host(in, runtime::ElementType::F32, {2, 8}, 0);
    auto bn = testing::client().from_host(&size, runtime::ElementType::S32, {}, 0);
    exe->execute({bx->get(), bn->get()})[0]->to_host(out, sizeof out);
    double total = 0, expected_sum = 0;
    for (int j = 0; j < size; ++j) expected_sum += std::exp(static_cast<double>(j));
    for (int j = 0; j < size; ++j) {
      EXPECT_NEAR(out[j], std::exp(static_cast<double>(j)) / expected_sum, 1e-6) << size;
      total += out[j];
    }
    EXPECT_NEAR(total, 1.0, 1e-5) << size;
  }
}

// cumsum over a dynamic dim: the scan runs over the padded value, and a
// true size equal to its bound (where XLA's own dynamic reduce_window summed
// wrongly) gives the prefix sums too.
TEST(Builder, ScanOverADynamicDimIgnoresPadding) {
  hlo::Builder b;
  auto x = b.parameter({DType::F32, {2, 8}});
  auto n = b.parameter({DType::I32, {}});
  auto r = b.scan(b.set_dimension_size(x, n, 1), b.constant(0, DType::F32), 1, "stablehlo.add");
  EXPECT_EQ(r.type.dynamic, 0b10u);
  b.set_results({b.to_static(r)});
  auto exe = testing::client().compile(b.module_text(), 0);
  for (int32_t size : {1, 3, 8}) {
    float in[16], out[16];
    for (int i = 0; i < 16; ++i) in[i] = (i % 8) < size ? static_cast<float>(i + 1) : 1000.f;
    auto bx = testing::client().from_host(in, runtime::ElementType::F32, {2, 8}, 0);
    auto bn = testing::client().from_host(&size, runtime::ElementType::S32, {}, 0);
    exe->execute({bx->get(), bn->get()})[0]->to_host(out, sizeof out);
    for (int row = 0; row < 2; ++row) {
      float sum = 0;
      for (int j = 0; j < size; ++j) {
        sum += in[row * 8 + j];
        EXPECT_EQ(out[row * 8 + j], sum) << size << " " << row << " " << j;
      }
    }
  }
}

// A bucketed write of a [2, n] view (strides [n, 1]) padded to [2, 8]: the
// padded elements would land on the next row's elements, and must be dropped.
TEST(Builder, BucketedWriteDropsPadding) {
  hlo::Builder b;
  auto flat = b.parameter({DType::F32, {16}});
  auto upd = b.parameter({DType::F32, {2, 8}});
  auto shape = b.parameter({DType::I64, {4}});
  auto n = b.parameter({DType::I32, {}});
  engine::BucketedRef ref;
  ref.dynamic = true;
  ref.dynamic_sizes = 0b10;
  ref.padded = {2, 8};
  auto offset = b.constant(1, DType::I64);
  b.set_results({engine::write_bucketed_view(b, flat, b.set_dimension_size(upd, n, 1), ref, shape, offset)});
  auto exe = testing::client().compile(b.module_text(), 0);
  for (int32_t size : {1, 3, 7}) {
    float base[16], in[16], out[16];
    for (int i = 0; i < 16; ++i) base[i] = -1.f, in[i] = static_cast<float>(i);
    int64_t view_shape[4] = {2, size, size, 1};
    auto bf = testing::client().from_host(base, runtime::ElementType::F32, {16}, 0);
    auto bu = testing::client().from_host(in, runtime::ElementType::F32, {2, 8}, 0);
    auto bs = testing::client().from_host(view_shape, runtime::ElementType::S64, {4}, 0);
    auto bn = testing::client().from_host(&size, runtime::ElementType::S32, {}, 0);
    exe->execute({bf->get(), bu->get(), bs->get(), bn->get()})[0]->to_host(out, sizeof out);
    float want[16];
    for (int i = 0; i < 16; ++i) want[i] = -1.f;
    for (int row = 0; row < 2; ++row)
      for (int j = 0; j < size; ++j) want[1 + row * size + j] = in[row * 8 + j];
    for (int i = 0; i < 16; ++i) EXPECT_EQ(out[i], want[i]) << size << " " << i;
  }
}

}  // namespace
}  // namespace torch_pjrt
