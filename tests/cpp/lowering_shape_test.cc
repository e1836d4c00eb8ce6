// Shape ops (shape.cc) on the CPU plugin: cat, flip, roll, tril/triu,
// repeat, unfold's backward and channel_shuffle. Every expected value below
// is worked out by hand from PyTorch's documented semantics.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "harness.h"

namespace torch_pjrt {
namespace {

using hlo::Dims;
using hlo::DType;
using testing::any_failed;
using testing::Arg;
using testing::bytes;
using testing::exec;
using testing::expect_values;
using testing::lower;
using testing::Prog;
using testing::read;
using testing::run_all;
using testing::run_op;
using testing::tensor;
using testing::values;
using testing::hosts::arange;
using testing::hosts::f32;
using testing::hosts::i32;
using testing::hosts::i64;
namespace buffers = testing::buffers;

// ---- cat

TEST(ShapeCat, PromotesAndSkipsLegacyEmpty) {
  Prog p;
  auto r = run_op(p, "aten::cat",
                  {Arg::tensor_list({p.in(f32({2, 2}, {1, 2, 3, 4})), p.in(f32({0}, {})), p.in(i64({1, 2}, {5, 6}))}),
                   Arg::integer(0)});
  expect_values(r.outs[0], DType::F32, {3, 2}, {1, 2, 3, 4, 5, 6});
}

TEST(ShapeCat, NegativeDimAndIntPromotion) {
  Prog p;
  auto r = run_op(p, "aten::cat",
                  {Arg::tensor_list({p.in(i32({2, 1}, {1, 2})), p.in(i64({2, 2}, {3, 4, 5, 6}))}), Arg::integer(-1)});
  expect_values(r.outs[0], DType::I64, {2, 3}, {1, 3, 4, 2, 5, 6});
}

TEST(ShapeCat, MismatchedSizesFail) {
  Prog p;
  EXPECT_THROW(run_op(p, "aten::cat",
                      {Arg::tensor_list({p.in(arange({2, 2})), p.in(arange({2, 3}))}), Arg::integer(0)}),
               lowering::LoweringError);
}

// ---- flip, roll, triangles, repeat

TEST(ShapeFlip, Dims) {
  {
    Prog p;
    auto r = run_op(p, "aten::flip", {p.t(f32({2, 3}, {1, 2, 3, 4, 5, 6})), p.ints({-1})});
    expect_values(r.outs[0], DType::F32, {2, 3}, {3, 2, 1, 6, 5, 4});
  }
  {
    Prog p;
    auto r = run_op(p, "aten::flip", {p.t(f32({2, 3}, {1, 2, 3, 4, 5, 6})), p.ints({0, 1})});
    expect_values(r.outs[0], DType::F32, {2, 3}, {6, 5, 4, 3, 2, 1});
  }
}

TEST(ShapeRoll, AlongDimsAndFlattened) {
  {
    Prog p;
    auto r = run_op(p, "aten::roll", {p.t(f32({2, 3}, {1, 2, 3, 4, 5, 6})), p.ints({1}), p.ints({1})});
    expect_values(r.outs[0], DType::F32, {2, 3}, {3, 1, 2, 6, 4, 5});
  }
  {
    Prog p;
    auto r = run_op(p, "aten::roll", {p.t(f32({2, 3}, {1, 2, 3, 4, 5, 6})), p.ints({-1}), p.ints({})});
    expect_values(r.outs[0], DType::F32, {2, 3}, {2, 3, 4, 5, 6, 1});
  }
  {
    Prog p;  // rows swap, then columns roll by 4 = 1 (mod 3)
    auto r = run_op(p, "aten::roll", {p.t(f32({2, 3}, {1, 2, 3, 4, 5, 6})), p.ints({1, 4}), p.ints({0, 1})});
    expect_values(r.outs[0], DType::F32, {2, 3}, {6, 4, 5, 3, 1, 2});
  }
}

TEST(ShapeTriangle, TrilTriu) {
  std::vector<float> m{1, 2, 3, 4, 5, 6, 7, 8, 9};
  {
    Prog p;
    auto r = run_op(p, "aten::tril", {p.t(f32({3, 3}, m)), Arg::integer(0)});
    expect_values(r.outs[0], DType::F32, {3, 3}, {1, 0, 0, 4, 5, 0, 7, 8, 9});
  }
  {
    Prog p;
    auto r = run_op(p, "aten::tril", {p.t(f32({3, 3}, m)), Arg::integer(-1)});
    expect_values(r.outs[0], DType::F32, {3, 3}, {0, 0, 0, 4, 0, 0, 7, 8, 0});
  }
  {
    Prog p;
    auto r = run_op(p, "aten::triu", {p.t(f32({3, 3}, m)), Arg::integer(1)});
    expect_values(r.outs[0], DType::F32, {3, 3}, {0, 2, 3, 0, 0, 6, 0, 0, 0});
  }
  {
    Prog p;  // batched, non-square
    auto r = run_op(p, "aten::triu", {p.t(i64({2, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})), Arg::integer(0)});
    expect_values(r.outs[0], DType::I64, {2, 2, 3}, {1, 2, 3, 0, 5, 6, 7, 8, 9, 0, 11, 12});
  }
}

TEST(ShapeRepeat, TilesAndAddsLeadingDims) {
  {
    Prog p;
    auto r = run_op(p, "aten::repeat", {p.t(f32({2}, {1, 2})), p.ints({2, 3})});
    expect_values(r.outs[0], DType::F32, {2, 6}, {1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2});
  }
  {
    Prog p;
    auto r = run_op(p, "aten::repeat", {p.t(f32({2, 1}, {1, 2})), p.ints({2, 2})});
    expect_values(r.outs[0], DType::F32, {4, 2}, {1, 1, 2, 2, 1, 1, 2, 2});
  }
}

// ---- unfold_backward

// x.unfold(0, 2, 1) of a 4-vector has windows [0,1], [1,2], [2,3]: the
// middle elements are in two windows each.
TEST(Shape, UnfoldBackward) {
  auto l = lower("aten::unfold_backward", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {3, 2}), Arg::integers({4}), Arg::integer(0), Arg::integer(2),
                            Arg::integer(1)};
  });
  EXPECT_EQ(values<float>(exec(l, {bytes(std::vector<float>(6, 1))})[0]), (std::vector<float>{1, 2, 2, 1}));
}

// ---- channel_shuffle

TEST(ShapeChannelShuffle, InterleavesGroups) {
  auto l = lower("aten::channel_shuffle", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 6, 1}})), Arg::integer(2)};
  });
  auto out = read<float>(run_all(l, {buffers::f32({0, 1, 2, 3, 4, 5}, {1, 6, 1})})[0], 6);
  EXPECT_EQ(out, (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

// ---- edge cases: scalars, empty tensors

TEST(ShapeEdge, ZeroDimRoll) {
  {
    Prog p;
    auto r = run_op(p, "aten::roll", {p.t(f32({}, {5})), p.ints({3}), p.ints({})});
    expect_values(r.outs[0], DType::F32, {}, {5});
  }
}

TEST(ShapeEdge, EmptyResults) {
  {
    Prog p;
    auto r = run_op(p, "aten::cat", {Arg::tensor_list({p.in(f32({0}, {})), p.in(i64({0}, {}))}), Arg::integer(0)});
    expect_values(r.outs[0], DType::F32, {0}, {});
  }
  {
    Prog p;
    auto r = run_op(p, "aten::repeat", {p.t(f32({2}, {1, 2})), p.ints({0, 2})});
    expect_values(r.outs[0], DType::F32, {0, 4}, {});
  }
}

TEST(ShapeEdge, OpsWithoutIndicesRegisterNoChecks) {
  Prog p;
  auto r = run_op(p, "aten::flip", {p.t(f32({2}, {1, 2})), p.ints({0})});
  EXPECT_TRUE(r.checks.empty());
}

}  // namespace
}  // namespace torch_pjrt
