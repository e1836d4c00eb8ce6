// Foreach ops (foreach.cc): a foreach call runs its per-tensor op's lowering
// once per list position, and lists of other lengths are refused as on CPU.
#include <gtest/gtest.h>

#include "harness.h"

namespace torch_pjrt {
namespace {

using hlo::DType;
using testing::Arg;
using testing::lower;
using testing::run_all;
using testing::upload;

// _foreach_addcdiv.ScalarList over two tensors of different shapes: the
// Scalar[] arrives as its length, its elements as the last arguments.
TEST(Foreach, AddcdivScalarListIsOnePerTensorCallPerPosition) {
  auto l = lower("aten::_foreach_addcdiv.ScalarList", [](hlo::Builder& b) {
    auto list = [&] { return Arg::tensor_list({b.parameter({DType::F32, {2}}), b.parameter({DType::F32, {1}})}); };
    std::vector<Arg> args{list(), list(), list(), Arg::integer(2)};
    args.push_back(Arg::scalar(b.parameter({DType::F64, {}})));
    args.push_back(Arg::scalar(b.parameter({DType::F64, {}})));
    return args;
  });
  ASSERT_EQ(l.results.size(), 2u);
  EXPECT_EQ(l.results[0].dims(), hlo::Dims{2});
  EXPECT_EQ(l.results[1].dims(), hlo::Dims{1});
  float s0[2] = {1.f, 2.f}, s1[1] = {3.f}, a0[2] = {4.f, 6.f}, a1[1] = {9.f}, d0[2] = {2.f, 3.f}, d1[1] = {3.f};
  double v0 = 0.5, v1 = -2.0;
  auto out = run_all(l, {upload(s0, DType::F32, {2}), upload(s1, DType::F32, {1}), upload(a0, DType::F32, {2}),
                         upload(a1, DType::F32, {1}), upload(d0, DType::F32, {2}), upload(d1, DType::F32, {1}),
                         upload(&v0, DType::F64, {}), upload(&v1, DType::F64, {})});
  float r0[2], r1[1];
  out[0]->to_host(r0, sizeof r0);
  out[1]->to_host(r1, sizeof r1);
  EXPECT_FLOAT_EQ(r0[0], 1.f + 0.5f * 4.f / 2.f);  // self + value * t1 / t2, value = scalars[0]
  EXPECT_FLOAT_EQ(r0[1], 2.f + 0.5f * 6.f / 3.f);
  EXPECT_FLOAT_EQ(r1[0], 3.f - 2.f * 9.f / 3.f);  // scalars[1]
}

TEST(Foreach, ListsOfOtherLengthsAreRefusedAsOnCpu) {
  auto f32 = [](hlo::Builder& b) { return b.parameter({DType::F32, {2}}); };
  EXPECT_EQ(testing::lowering_error(
                "aten::_foreach_add.List",
                [&](hlo::Builder& b) {
                  return std::vector<Arg>{Arg::tensor_list({f32(b), f32(b)}), Arg::tensor_list({f32(b)}), Arg::none()};
                }),
            "aten::_foreach_add.List: Tensor lists must have the same number of tensors, got 2 and 1");
  EXPECT_EQ(testing::lowering_error("aten::_foreach_mul.ScalarList",
                                    [&](hlo::Builder& b) {
                                      return std::vector<Arg>{Arg::tensor_list({f32(b), f32(b)}), Arg::integer(1),
                                                              Arg::scalar(b.parameter({DType::F64, {}}))};
                                    }),
            "aten::_foreach_mul.ScalarList: Tensor list must have same number of elements as scalar list.");
}

}  // namespace
}  // namespace torch_pjrt
