// Numeric checks on the CPU plugin for the embedding-bag lowerings: the four
// outputs of _embedding_bag in sum, mean and max mode (padding, per-sample
// weights, include_last_offset, NaN and tie rules of max), the runtime index
// and offset checks, and the three backward ops. Every expected value is
// worked out by hand from PyTorch's CPU kernel (EmbeddingBag.cpp).
#include <gtest/gtest.h>

#include <cmath>

#include "harness.h"

namespace torch_pjrt {
namespace {

using hlo::Dims;
using hlo::DType;
using testing::any_failed;
using testing::Arg;
using testing::expect_values;
using testing::Host;
using testing::Prog;
using testing::run_op;
using testing::hosts::f32;
using testing::hosts::i32;
using testing::hosts::i64;

const double kNaN = std::nan("");

// The running example: 4 rows of 2, indices [0 2 1 3 3] in bags {0 2}, {}, {1 3 3}.
Host weight() { return f32({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8}); }
Host indices() { return i64({5}, {0, 2, 1, 3, 3}); }
Host offsets() { return i64({3}, {0, 2, 2}); }

// _embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse,
// per_sample_weights, include_last_offset, padding_idx)
std::vector<Arg> bag_args(Prog& p, Host w, Host idx, Host off, int64_t mode, const Host* psw = nullptr,
                          bool include_last = false, int64_t padding_idx = -1) {
  return {p.t(std::move(w)),        p.t(std::move(idx)), p.t(std::move(off)),           Arg::boolean(false),
          Arg::integer(mode),       Arg::boolean(false), psw ? p.t(*psw) : Arg::none(), Arg::boolean(include_last),
          Arg::integer(padding_idx)};
}

// ---- forward

TEST(EmbeddingBag, Sum) {
  Prog p;
  auto r = run_op(p, "aten::_embedding_bag", bag_args(p, weight(), indices(), offsets(), 0));
  ASSERT_EQ(r.outs.size(), 4u);
  expect_values(r.outs[0], DType::F32, {3, 2}, {6, 8, 0, 0, 17, 20});
  expect_values(r.outs[1], DType::I64, {5}, {0, 0, 2, 2, 2});
  expect_values(r.outs[2], DType::I64, {3}, {0, 0, 0});  // CPU zeroes bag_size in sum mode
  expect_values(r.outs[3], DType::I64, {3}, {0, 0, 0});
  EXPECT_FALSE(any_failed(r));
}

TEST(EmbeddingBag, Mean) {
  Prog p;
  auto r = run_op(p, "aten::_embedding_bag", bag_args(p, weight(), indices(), offsets(), 1));
  expect_values(r.outs[0], DType::F32, {3, 2}, {3, 4, 0, 0, 17.0 / 3, 20.0 / 3});
  expect_values(r.outs[1], DType::I64, {5}, {0, 0, 2, 2, 2});
  expect_values(r.outs[2], DType::I64, {3}, {2, 0, 3});
  expect_values(r.outs[3], DType::I64, {3}, {2, 0, 3});  // a copy of bag_size
}

TEST(EmbeddingBag, MaxPerColumnWithWordIndices) {
  Prog p;
  Host w = f32({4, 2}, {1, 9, 3, 4, 5, 6, 7, 0});
  auto r = run_op(p, "aten::_embedding_bag", bag_args(p, w, indices(), offsets(), 2));
  // bag 0 = rows 0, 2; bag 1 empty (zeros, index 0); bag 2 = rows 1, 3, 3.
  expect_values(r.outs[0], DType::F32, {3, 2}, {5, 9, 0, 0, 7, 4});
  expect_values(r.outs[2], DType::I64, {3}, {2, 0, 3});
  expect_values(r.outs[3], DType::I64, {3, 2}, {2, 0, 0, 0, 3, 1});
}

TEST(EmbeddingBag, MaxTiesKeepTheFirstAndOnlyALeadingNaNWins) {
  // CPU keeps the bag's first row, then takes a later row only when strictly greater.
  Prog p;
  Host w = f32({3, 2}, {static_cast<float>(kNaN), 1, 2, 1, 2, static_cast<float>(kNaN)});
  auto r = run_op(p, "aten::_embedding_bag", bag_args(p, w, i64({6}, {0, 1, 2, 1, 2, 0}), i64({2}, {0, 3}), 2));
  // bag 0 = rows 0 1 2: col 0 starts with NaN (kept); col 1 is 1 1 NaN (first 1).
  // bag 1 = rows 1 2 0: col 0 is 2 2 NaN (first 2); col 1 is 1 NaN 1 (first 1).
  expect_values(r.outs[0], DType::F32, {2, 2}, {kNaN, 1, 2, 1});
  expect_values(r.outs[3], DType::I64, {2, 2}, {0, 0, 1, 1});
}

TEST(EmbeddingBag, MaxSkipsPaddingAndAllPaddingBagsAreEmpty) {
  Prog p;
  Host w = f32({4, 2}, {1, 9, 3, 4, 5, 6, 7, 0});
  // padding_idx 3: bag 2 = {1}; a bag of only padding would be all zeros.
  auto r = run_op(p, "aten::_embedding_bag",
                  bag_args(p, w, i64({5}, {0, 2, 3, 1, 3}), i64({3}, {0, 2, 3}), 2, nullptr, false, 3));
  expect_values(r.outs[0], DType::F32, {3, 2}, {5, 9, 0, 0, 3, 4});
  expect_values(r.outs[2], DType::I64, {3}, {2, 0, 1});
  expect_values(r.outs[3], DType::I64, {3, 2}, {2, 0, 0, 0, 1, 1});
}

TEST(EmbeddingBag, MeanLeavesOutPadding) {
  Prog p;
  auto r = run_op(p, "aten::_embedding_bag", bag_args(p, weight(), indices(), offsets(), 1, nullptr, false, 3));
  expect_values(r.outs[0], DType::F32, {3, 2}, {3, 4, 0, 0, 3, 4});
  expect_values(r.outs[2], DType::I64, {3}, {2, 0, 1});
}

TEST(EmbeddingBag, PerSampleWeights) {
  Prog p;
  Host psw = f32({5}, {1, 0.5, 2, -1, 1});
  auto r = run_op(p, "aten::_embedding_bag", bag_args(p, weight(), indices(), offsets(), 0, &psw));
  expect_values(r.outs[0], DType::F32, {3, 2}, {3.5, 5, 0, 0, 6, 8});
}

TEST(EmbeddingBag, IncludeLastOffset) {
  Prog p;
  auto r = run_op(p, "aten::_embedding_bag", bag_args(p, weight(), indices(), i64({3}, {0, 2, 5}), 1, nullptr, true));
  expect_values(r.outs[0], DType::F32, {2, 2}, {3, 4, 17.0 / 3, 20.0 / 3});
  expect_values(r.outs[1], DType::I64, {5}, {0, 0, 1, 1, 1});
  expect_values(r.outs[2], DType::I64, {2}, {2, 3});
}

TEST(EmbeddingBag, Int32IndicesGiveInt32Bookkeeping) {
  Prog p;
  auto r = run_op(p, "aten::_embedding_bag", bag_args(p, weight(), i32({5}, {0, 2, 1, 3, 3}), i32({3}, {0, 2, 2}), 1));
  expect_values(r.outs[0], DType::F32, {3, 2}, {3, 4, 0, 0, 17.0 / 3, 20.0 / 3});
  expect_values(r.outs[1], DType::I32, {5}, {0, 0, 2, 2, 2});
  expect_values(r.outs[2], DType::I32, {3}, {2, 0, 3});
}

TEST(EmbeddingBag, ForwardOnlySumSizesBagSizeLikeOffsets) {
  Prog p;
  auto r = run_op(p, "aten::_embedding_bag_forward_only",
                  bag_args(p, weight(), indices(), i64({3}, {0, 2, 5}), 0, nullptr, true));
  expect_values(r.outs[0], DType::F32, {2, 2}, {6, 8, 17, 20});
  expect_values(r.outs[2], DType::I64, {3}, {0, 0, 0});
  expect_values(r.outs[3], DType::I64, {3}, {0, 0, 0});
}

TEST(EmbeddingBag, Offset2BagOverManyIndices) {
  // Long enough for several prefix-sum steps, with empty bags in the middle.
  const int64_t n = 37;
  std::vector<int64_t> offs = {0, 5, 5, 20, 20, 20, 36};
  std::vector<int64_t> idx(n, 0);
  std::vector<double> want;
  for (int64_t i = 0; i < n; ++i) {
    int64_t bag = -1;
    for (int64_t o : offs) bag += o <= i;
    want.push_back(static_cast<double>(bag));
  }
  Prog p;
  auto r = run_op(p, "aten::_embedding_bag", bag_args(p, f32({1, 1}, {1}), i64({n}, idx), i64({7}, offs), 1));
  expect_values(r.outs[1], DType::I64, {n}, want);
  expect_values(r.outs[2], DType::I64, {7}, {5, 0, 15, 0, 0, 16, 1});
}

TEST(EmbeddingBag, NoIndices) {
  Prog p;
  auto r = run_op(p, "aten::_embedding_bag", bag_args(p, weight(), i64({0}, {}), i64({2}, {0, 0}), 2));
  expect_values(r.outs[0], DType::F32, {2, 2}, {0, 0, 0, 0});
  expect_values(r.outs[1], DType::I64, {0}, {});
  expect_values(r.outs[3], DType::I64, {2, 2}, {0, 0, 0, 0});
  EXPECT_FALSE(any_failed(r));
}

TEST(EmbeddingBag, RuntimeChecks) {
  {
    Prog p;  // index 4 of 4 rows; padding indices are range-checked too, as on CPU
    auto r = run_op(p, "aten::_embedding_bag", bag_args(p, weight(), i64({5}, {0, 2, 1, 4, 3}), offsets(), 0));
    EXPECT_TRUE(any_failed(r));
  }
  {
    Prog p;
    auto r = run_op(p, "aten::_embedding_bag", bag_args(p, weight(), i64({2}, {0, -1}), i64({1}, {0}), 1));
    EXPECT_TRUE(any_failed(r));
  }
  {
    Prog p;  // offsets[0] must be 0
    auto r = run_op(p, "aten::_embedding_bag", bag_args(p, weight(), indices(), i64({2}, {1, 2}), 0));
    ASSERT_EQ(r.checks.size(), 3u);
    EXPECT_TRUE(r.checks[0]);
    EXPECT_FALSE(r.checks[1]);
    EXPECT_FALSE(r.checks[2]);
    EXPECT_NE(r.messages[0].find("offsets[0] has to be 0"), std::string::npos);
  }
  {
    Prog p;  // offsets[-1] past the indices
    auto r = run_op(p, "aten::_embedding_bag", bag_args(p, weight(), indices(), i64({2}, {0, 6}), 0));
    ASSERT_EQ(r.checks.size(), 3u);
    EXPECT_FALSE(r.checks[0]);
    EXPECT_TRUE(r.checks[1]);
    EXPECT_EQ(r.messages[1], "aten::_embedding_bag: offsets[-1] can not be greater than input's length 5");
  }
}

TEST(EmbeddingBag, StaticErrors) {
  {
    Prog p;
    Host psw = f32({5}, {1, 1, 1, 1, 1});
    EXPECT_THROW(run_op(p, "aten::_embedding_bag", bag_args(p, weight(), indices(), offsets(), 1, &psw)),
                 lowering::LoweringError);
  }
  {
    Prog p;
    EXPECT_THROW(run_op(p, "aten::_embedding_bag", bag_args(p, weight(), indices(), offsets(), 3)),
                 lowering::LoweringError);
  }
  {
    Prog p;
    EXPECT_THROW(run_op(p, "aten::_embedding_bag", bag_args(p, weight(), f32({5}, {0, 1, 2, 3, 3}), offsets(), 0)),
                 lowering::LoweringError);
  }
}

// ---- backward

Host grad() { return f32({3, 2}, {1, 2, 3, 4, 5, 6}); }

// _embedding_bag_dense_backward(grad, indices, offset2bag, bag_size,
// maximum_indices, num_weights, scale_grad_by_freq, mode, per_sample_weights,
// padding_idx)
std::vector<Arg> dense_args(Prog& p, Host bag_size, Host max_indices, int64_t mode, bool scale = false,
                            const Host* psw = nullptr, int64_t padding_idx = -1) {
  return {p.t(grad()),
          p.t(indices()),
          p.t(i64({5}, {0, 0, 2, 2, 2})),
          p.t(std::move(bag_size)),
          p.t(std::move(max_indices)),
          Arg::integer(4),
          Arg::boolean(scale),
          Arg::integer(mode),
          psw ? p.t(*psw) : Arg::none(),
          Arg::integer(padding_idx)};
}

TEST(EmbeddingBagBackward, DenseSum) {
  Prog p;
  auto r = run_op(p, "aten::_embedding_bag_dense_backward", dense_args(p, i64({3}, {0, 0, 0}), i64({3}, {0, 0, 0}), 0));
  // row 0 and 2 get grad of bag 0; row 1 once and row 3 twice grad of bag 2.
  expect_values(r.outs[0], DType::F32, {4, 2}, {1, 2, 5, 6, 1, 2, 10, 12});
}

TEST(EmbeddingBagBackward, DenseMeanDividesByBagSize) {
  Prog p;
  auto r = run_op(p, "aten::_embedding_bag_dense_backward", dense_args(p, i64({3}, {2, 0, 3}), i64({3}, {2, 0, 3}), 1));
  expect_values(r.outs[0], DType::F32, {4, 2}, {0.5, 1, 5.0 / 3, 2, 0.5, 1, 10.0 / 3, 4});
}

TEST(EmbeddingBagBackward, ScaleGradByFreqAndPadding) {
  {
    Prog p;  // row 3 occurs twice: its two contributions are halved
    auto r = run_op(p, "aten::_embedding_bag_dense_backward",
                    dense_args(p, i64({3}, {0, 0, 0}), i64({3}, {0, 0, 0}), 0, true));
    expect_values(r.outs[0], DType::F32, {4, 2}, {1, 2, 5, 6, 1, 2, 5, 6});
  }
  {
    Prog p;
    auto r = run_op(p, "aten::_embedding_bag_dense_backward",
                    dense_args(p, i64({3}, {0, 0, 0}), i64({3}, {0, 0, 0}), 0, false, nullptr, 3));
    expect_values(r.outs[0], DType::F32, {4, 2}, {1, 2, 5, 6, 1, 2, 0, 0});
  }
}

TEST(EmbeddingBagBackward, PerSampleWeightsScaleTheWeightGradient) {
  Prog p;
  Host psw = f32({5}, {1, 0.5, 2, -1, 1});
  auto r = run_op(p, "aten::_embedding_bag_dense_backward",
                  dense_args(p, i64({3}, {0, 0, 0}), i64({3}, {0, 0, 0}), 0, false, &psw));
  expect_values(r.outs[0], DType::F32, {4, 2}, {1, 2, 10, 12, 0.5, 1, 0, 0});
}

TEST(EmbeddingBagBackward, DenseMaxRoutesToTheArgmaxRows) {
  Prog p;
  auto r = run_op(p, "aten::_embedding_bag_dense_backward",
                  dense_args(p, i64({3}, {2, 0, 3}), i64({3, 2}, {2, 0, 0, 0, 3, 1}), 2));
  // bag 1 is empty and adds nothing.
  expect_values(r.outs[0], DType::F32, {4, 2}, {0, 2, 0, 6, 1, 0, 5, 0});
}

TEST(EmbeddingBagBackward, BackwardRecomputesAnEmptyOffset2Bag) {
  // _embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size,
  // maximum_indices, num_weights, scale_grad_by_freq, mode, sparse,
  // per_sample_weights, padding_idx): CPU's fast sum path leaves offset2bag empty.
  Prog p;
  auto r = run_op(p, "aten::_embedding_bag_backward",
                  {p.t(grad()), p.t(indices()), p.t(offsets()), p.t(i64({0}, {})), p.t(i64({3}, {0, 0, 0})),
                   p.t(i64({3}, {0, 0, 0})), Arg::integer(4), Arg::boolean(false), Arg::integer(0), Arg::boolean(false),
                   Arg::none(), Arg::integer(-1)});
  expect_values(r.outs[0], DType::F32, {4, 2}, {1, 2, 5, 6, 1, 2, 10, 12});
}

TEST(EmbeddingBagBackward, SparseIsRefused) {
  Prog p;
  EXPECT_THROW(run_op(p, "aten::_embedding_bag_backward",
                      {p.t(grad()), p.t(indices()), p.t(offsets()), p.t(i64({5}, {0, 0, 2, 2, 2})),
                       p.t(i64({3}, {0, 0, 0})), p.t(i64({3}, {0, 0, 0})), Arg::integer(4), Arg::boolean(false),
                       Arg::integer(0), Arg::boolean(true), Arg::none(), Arg::integer(-1)}),
               lowering::LoweringError);
}

TEST(EmbeddingBagBackward, PerSampleWeightsGradient) {
  // _embedding_bag_per_sample_weights_backward(grad, weight, indices, offsets,
  // offset2bag, mode, padding_idx): grad[bag of i] . weight[indices[i]].
  for (int64_t padding_idx : {-1, 3}) {
    Prog p;
    auto r = run_op(p, "aten::_embedding_bag_per_sample_weights_backward",
                    {p.t(grad()), p.t(weight()), p.t(indices()), p.t(offsets()), p.t(i64({5}, {0, 0, 2, 2, 2})),
                     Arg::integer(0), Arg::integer(padding_idx)});
    if (padding_idx < 0)
      expect_values(r.outs[0], DType::F32, {5}, {5, 17, 39, 83, 83});
    else
      expect_values(r.outs[0], DType::F32, {5}, {5, 17, 39, 0, 0});
  }
}

}  // namespace
}  // namespace torch_pjrt
