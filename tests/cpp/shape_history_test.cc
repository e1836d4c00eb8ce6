// ShapeHistory (engine/bucket.h): which sizes of an op structure become
// dynamic from the stream of its calls, and when they settle again. No
// plugin: the history only reads the calls' views.
#include <gtest/gtest.h>

#include <vector>

#include "engine/bucket.h"

namespace torch_pjrt {
namespace {

using engine::BucketPlan;
using engine::CallArg;
using engine::OpCall;
using engine::OpDef;
using engine::ShapeHistory;
using engine::Shapes;
using engine::Slot;
using engine::ViewSpec;

const OpDef& mul() {
  static OpDef* def = [] {
    auto* d = new OpDef("aten::mul.Tensor", nullptr);
    d->shape_generic = true;
    return d;
  }();
  return *def;
}

// x * x over a contiguous [rows, n] view of its own storage.
Shapes observe(ShapeHistory& h, int64_t rows, int64_t n) {
  static Slot slot(0, 1 << 20);
  CallArg a;
  a.kind = CallArg::Kind::Tensor;
  a.tensor = {&slot, ViewSpec{hlo::DType::F32, {rows, n}, {n, 1}, 0}};
  OpCall call;
  call.op = &mul();
  call.args = {a, a};
  BucketPlan plan;
  return h.observe(call, plan);
}

// An optimizer over parameters of twelve widths: its first pass makes the
// width dynamic (more than eight values), and once the passes only repeat
// those widths, it settles and stays static.
TEST(ShapeHistory, ACycleOfManyWidthsSettles) {
  ShapeHistory h;
  const std::vector<int64_t> widths = {32, 48, 64, 96, 128, 160, 192, 256, 320, 384, 512, 640};
  int dynamic_in_first_pass = 0;
  for (int64_t w : widths) dynamic_in_first_pass += observe(h, 4, w) != Shapes::Static;
  EXPECT_GT(dynamic_in_first_pass, 0);
  const uint64_t before = h.generation();
  for (int pass = 0; pass < 4; ++pass)
    for (int64_t w : widths) observe(h, 4, w);
  EXPECT_GT(h.generation(), before);
  for (int pass = 0; pass < 4; ++pass)
    for (int64_t w : widths) EXPECT_EQ(observe(h, 4, w), Shapes::Static) << w;
}

// Spatial sizes 2 and 1 are one apart, yet a loop that repeats them settles.
TEST(ShapeHistory, SmallSizesOneApartSettle) {
  ShapeHistory h;
  for (int64_t s : {8, 4, 2, 1}) observe(h, s, 16);
  for (int step = 0; step < 20; ++step)
    for (int64_t s : {8, 4, 2, 1}) observe(h, s, 16);
  for (int64_t s : {8, 4, 2, 1}) EXPECT_EQ(observe(h, s, 16), Shapes::Static) << s;
}

// Several models in one process: one structure cycles through small sizes
// that include 1, 2, 3 and 4 (head counts, spatial sizes), taken in no
// growing order. It is no growing length: it settles.
TEST(ShapeHistory, SmallSizesOfSeveralModelsSettle) {
  ShapeHistory h;
  const std::vector<int64_t> sizes = {4, 32, 2, 24, 7, 3, 1, 11};
  for (int pass = 0; pass < 30; ++pass)
    for (int64_t s : sizes) observe(h, s, 16);
  for (int64_t s : sizes) EXPECT_EQ(observe(h, s, 16), Shapes::Static) << s;
}

// One structure (an mm) that cycles through more distinct shapes than a
// handful of layers have: 96 of them. Once the cycle repeats, none is new,
// and it settles.
TEST(ShapeHistory, AManyShapedCycleSettles) {
  ShapeHistory h;
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (int64_t rows : {8, 16, 32, 64, 96, 128, 192, 256})
    for (int64_t n : {32, 48, 64, 96, 128, 172, 256, 384, 512, 640, 768, 1024}) shapes.push_back({rows, n});
  for (int pass = 0; pass < 8; ++pass)
    for (auto [rows, n] : shapes) observe(h, rows, n);
  for (auto [rows, n] : shapes) EXPECT_EQ(observe(h, rows, n), Shapes::Static) << rows << "x" << n;
}

// A length that grows by one (a KV cache) stays dynamic, also when a second
// decode repeats the same lengths, and also during each step's many calls
// of one length (a deep model's layers).
TEST(ShapeHistory, AGrowingLengthStaysDynamicThroughRepeats) {
  ShapeHistory h;
  for (int run = 0; run < 3; ++run) {
    for (int64_t t = 8; t < 24; ++t) {
      for (int layer = 0; layer < 40; ++layer) {
        const Shapes s = observe(h, 2, t);
        if (run > 0 || t > 9) EXPECT_NE(s, Shapes::Static) << run << " " << t << " " << layer;
      }
    }
  }
}

// Lengths that keep coming (a sweep) stay dynamic.
TEST(ShapeHistory, ASweepOverNewLengthsStaysDynamic) {
  ShapeHistory h;
  int dynamic = 0;
  for (int64_t t = 5; t < 200; t += 3) dynamic += observe(h, 2, t) != Shapes::Static;
  EXPECT_GT(dynamic, 50);
  for (int64_t t = 200; t < 260; t += 3) EXPECT_NE(observe(h, 2, t), Shapes::Static) << t;
}

}  // namespace
}  // namespace torch_pjrt
