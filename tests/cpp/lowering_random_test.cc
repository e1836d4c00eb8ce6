// Statistical and determinism checks for the random lowerings on the CPU
// plugin. Expected values come from the distributions' definitions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "harness.h"

namespace torch_pjrt {
namespace {

using hlo::DType;
using testing::Arg;
using testing::lower;
using testing::read;
using testing::run_all;
using testing::upload;
using testing::buffers::f32;
using testing::buffers::f64;

constexpr int64_t kN = 10000;

runtime::BufferPtr state(uint64_t seed, uint64_t offset = 0) {
  return upload(std::vector<uint64_t>{seed, offset}, DType::U64, {2});
}
Arg rng(hlo::Builder& b) { return Arg::rng(b.parameter({DType::U64, {2}})); }
Arg scalar(hlo::Builder& b) { return Arg::scalar(b.parameter({DType::F64, {}})); }

struct Moments {
  double mean = 0, std = 0, min = INFINITY, max = -INFINITY;
};
template <typename T>
Moments moments(const std::vector<T>& v) {
  Moments m;
  for (T x : v) {
    m.mean += x;
    m.min = std::min<double>(m.min, x);
    m.max = std::max<double>(m.max, x);
  }
  m.mean /= v.size();
  for (T x : v) m.std += (x - m.mean) * (x - m.mean);
  m.std = std::sqrt(m.std / v.size());
  return m;
}

// ---- dropout

TEST(RandomDropout, KeepsAboutOneMinusPAndScalesKeptValues) {
  auto l = lower("aten::native_dropout", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {100, 100}})), scalar(b), Arg::boolean(true), rng(b)};
  });
  ASSERT_EQ(l.results.size(), 2u);
  EXPECT_EQ(l.results[1].type, (hlo::TensorType{DType::Bool, {100, 100}}));
  std::vector<float> x(kN);
  for (int64_t i = 0; i < kN; ++i) x[i] = 1.0f + static_cast<float>(i % 17);
  double p = 0.3;
  auto r = run_all(l, {upload(x, DType::F32, {100, 100}), f64(p), state(42)});
  auto out = read<float>(r[0], kN);
  auto mask = read<uint8_t>(r[1], kN);
  int64_t kept = 0;
  for (int64_t i = 0; i < kN; ++i) {
    if (mask[i]) {
      ++kept;
      EXPECT_FLOAT_EQ(out[i], static_cast<float>(x[i] / (1 - p))) << i;
    } else {
      EXPECT_EQ(out[i], 0.f) << i;
    }
  }
  // Binomial(10000, 0.7): sd ~ 46, so +-0.02 is over 4 sd.
  EXPECT_NEAR(static_cast<double>(kept) / kN, 1 - p, 0.02);
}

TEST(RandomDropout, EdgeProbabilities) {
  auto l = lower("aten::native_dropout", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1000}})), scalar(b), Arg::none(), rng(b)};
  });
  std::vector<float> x(1000, 2.f);
  auto none_dropped = run_all(l, {upload(x, DType::F32, {1000}), f64(0.0), state(1)});
  for (float v : read<float>(none_dropped[0], 1000)) EXPECT_EQ(v, 2.f);
  auto all_dropped = run_all(l, {upload(x, DType::F32, {1000}), f64(1.0), state(1)});
  for (float v : read<float>(all_dropped[0], 1000)) EXPECT_EQ(v, 0.f);  // scale 0, not nan
  for (uint8_t m : read<uint8_t>(all_dropped[1], 1000)) EXPECT_EQ(m, 0);
}

TEST(RandomDropout, EvalModeReturnsInputAndAllTrueMask) {
  auto l = lower("aten::native_dropout", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {4}})), scalar(b), Arg::boolean(false), rng(b)};
  });
  EXPECT_EQ(l.results[0].id, l.builder.parameters()[0].id);
  EXPECT_EQ(l.results[1].dtype(), DType::Bool);
  auto r = run_all(l, {upload(std::vector<float>{1, 2, 3, 4}, DType::F32, {4}), f64(0.5), state(3)});
  EXPECT_EQ(read<float>(r[0], 4), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(read<uint8_t>(r[1], 4), (std::vector<uint8_t>{1, 1, 1, 1}));
}

TEST(RandomDropout, BackwardScalesByMask) {
  auto l = lower("aten::native_dropout_backward", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {3}})), Arg::tensor(b.parameter({DType::Bool, {3}})),
                            Arg::scalar(b.parameter({DType::F64, {}}))};
  });
  std::vector<uint8_t> mask = {1, 0, 1};
  auto g = read<float>(run_all(l, {f32({1, 2, 3}, {3}), upload(mask, DType::Bool, {3}), f64(2.0)})[0], 3);
  EXPECT_EQ(g, (std::vector<float>{2, 0, 6}));
}

// ---- uniform

std::vector<Arg> uniform_args(hlo::Builder& b, DType t, const hlo::Dims& dims) {
  return {Arg::tensor(b.parameter({t, dims})), scalar(b), scalar(b), rng(b)};
}

TEST(RandomUniform, InRangeWithMeanInTheMiddle) {
  auto l = lower("aten::uniform", [](hlo::Builder& b) { return uniform_args(b, DType::F32, {kN}); });
  EXPECT_EQ(l.results[0].type, (hlo::TensorType{DType::F32, {kN}}));
  std::vector<float> self(kN, 0.f);
  auto v = read<float>(run_all(l, {upload(self, DType::F32, {kN}), f64(-2), f64(3), state(7)})[0], kN);
  Moments m = moments(v);
  EXPECT_GE(m.min, -2.0);
  EXPECT_LT(m.max, 3.0);
  EXPECT_NEAR(m.mean, 0.5, 0.05);         // sd of the mean: 5 / sqrt(12 * 1e4) ~ 0.014
  EXPECT_NEAR(m.std, 5 / std::sqrt(12.0), 0.05);
}

TEST(RandomUniform, SameStateSameNumbersOtherStateOtherNumbers) {
  auto l = lower("aten::uniform", [](hlo::Builder& b) { return uniform_args(b, DType::F32, {64}); });
  std::vector<float> self(64, 0.f);
  auto draw = [&](uint64_t seed, uint64_t offset) {
    return read<float>(run_all(l, {upload(self, DType::F32, {64}), f64(0), f64(1), state(seed, offset)})[0], 64);
  };
  auto a = draw(5, 0), b = draw(5, 0), c = draw(5, 1), d = draw(6, 0);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
}

TEST(RandomUniform, Float64AndBFloat16StayBelowOne) {
  auto l = lower("aten::uniform", [](hlo::Builder& b) { return uniform_args(b, DType::F64, {kN}); });
  std::vector<double> self(kN, 0.0);
  auto v = read<double>(run_all(l, {upload(self, DType::F64, {kN}), f64(0), f64(1), state(9)})[0], kN);
  Moments m = moments(v);
  EXPECT_GE(m.min, 0.0);
  EXPECT_LT(m.max, 1.0);
  EXPECT_NEAR(m.mean, 0.5, 0.02);
  // Doubles carry more than 24 random bits: some value is not a float.
  bool finer = false;
  for (double x : v) finer |= static_cast<double>(static_cast<float>(x)) != x;
  EXPECT_TRUE(finer);

  auto h = lower("aten::uniform", [](hlo::Builder& b) { return uniform_args(b, DType::BF16, {kN}); });
  EXPECT_EQ(h.results[0].dtype(), DType::BF16);
  std::vector<uint16_t> hs(kN, 0);
  auto bits = read<uint16_t>(run_all(h, {upload(hs, DType::BF16, {kN}), f64(0), f64(1), state(9)})[0], kN);
  double sum = 0;
  for (uint16_t x : bits) {
    uint32_t w = static_cast<uint32_t>(x) << 16;
    float f;
    std::memcpy(&f, &w, 4);
    EXPECT_GE(f, 0.f);
    EXPECT_LT(f, 1.f);
    sum += f;
  }
  EXPECT_NEAR(sum / kN, 0.5, 0.02);
}

// ---- normal, exponential

TEST(RandomNormal, MeanAndStdNearTargets) {
  auto l = lower("aten::normal_functional", [](hlo::Builder& b) { return uniform_args(b, DType::F32, {kN}); });
  std::vector<float> self(kN, 0.f);
  auto v = read<float>(run_all(l, {upload(self, DType::F32, {kN}), f64(3), f64(2), state(11)})[0], kN);
  Moments m = moments(v);
  EXPECT_NEAR(m.mean, 3.0, 0.08);  // sd of the mean 0.02
  EXPECT_NEAR(m.std, 2.0, 0.08);
  int64_t within1 = 0;
  for (float x : v) within1 += std::abs(x - 3) < 2;
  EXPECT_NEAR(static_cast<double>(within1) / kN, 0.6827, 0.02);
  for (float x : v) ASSERT_TRUE(std::isfinite(x));
}

TEST(RandomExponential, MeanIsOneOverLambda) {
  auto l = lower("aten::exponential", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {kN}})), scalar(b), rng(b)};
  });
  std::vector<float> self(kN, 0.f);
  auto v = read<float>(run_all(l, {upload(self, DType::F32, {kN}), f64(4), state(13)})[0], kN);
  Moments m = moments(v);
  EXPECT_GE(m.min, 0.0);
  EXPECT_NEAR(m.mean, 0.25, 0.015);
  EXPECT_NEAR(m.std, 0.25, 0.02);
}

// ---- Bernoulli and integers

TEST(RandomBernoulli, ScalarProbability) {
  auto l = lower("aten::bernoulli.p", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {kN}})), scalar(b), rng(b)};
  });
  EXPECT_EQ(l.results[0].dtype(), DType::F32);
  std::vector<float> self(kN, 5.f);
  auto v = read<float>(run_all(l, {upload(self, DType::F32, {kN}), f64(0.25), state(17)})[0], kN);
  double ones = 0;
  for (float x : v) {
    ASSERT_TRUE(x == 0.f || x == 1.f);
    ones += x;
  }
  EXPECT_NEAR(ones / kN, 0.25, 0.02);
}

TEST(RandomBernoulli, TensorProbabilities) {
  auto l = lower("aten::bernoulli", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {3, kN}})), rng(b)};
  });
  std::vector<float> p(3 * kN);
  for (int64_t i = 0; i < kN; ++i) p[i] = 0.f, p[kN + i] = 1.f, p[2 * kN + i] = 0.5f;
  auto v = read<float>(run_all(l, {upload(p, DType::F32, {3, kN}), state(19)})[0], 3 * kN);
  double half = 0;
  for (int64_t i = 0; i < kN; ++i) {
    EXPECT_EQ(v[i], 0.f);
    EXPECT_EQ(v[kN + i], 1.f);
    half += v[2 * kN + i];
  }
  EXPECT_NEAR(half / kN, 0.5, 0.02);
}

TEST(RandomInt, FromToCoversTheRangeOnly) {
  auto l = lower("aten::random.from", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::I64, {kN}})), Arg::integer(-3), Arg::integer(4), rng(b)};
  });
  std::vector<int64_t> self(kN, 0);
  auto v = read<int64_t>(run_all(l, {upload(self, DType::I64, {kN}), state(23)})[0], kN);
  std::vector<int64_t> count(7, 0);
  for (int64_t x : v) {
    ASSERT_GE(x, -3);
    ASSERT_LT(x, 4);
    ++count[x + 3];
  }
  for (int64_t c : count) EXPECT_NEAR(static_cast<double>(c) / kN, 1.0 / 7, 0.02);
}

TEST(RandomInt, DefaultRangeOfUint8AndFullInt64) {
  auto l = lower("aten::random", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::U8, {kN}})), rng(b)};
  });
  std::vector<uint8_t> self(kN, 0);
  auto v = read<uint8_t>(run_all(l, {upload(self, DType::U8, {kN}), state(29)})[0], kN);
  int hi = 0;
  for (uint8_t x : v) hi += x >= 128;
  EXPECT_NEAR(static_cast<double>(hi) / kN, 0.5, 0.03);

  auto full = lower("aten::random.from", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::I64, {kN}})),
                            Arg::integer(std::numeric_limits<int64_t>::min()), Arg::none(), rng(b)};
  });
  std::vector<int64_t> s64(kN, 0);
  auto w = read<int64_t>(run_all(full, {upload(s64, DType::I64, {kN}), state(31)})[0], kN);
  int neg = 0;
  for (int64_t x : w) neg += x < 0;
  EXPECT_NEAR(static_cast<double>(neg) / kN, 0.5, 0.03);
}

TEST(RandomInt, FromNotBelowToIsRefused) {
  EXPECT_THROW(lower("aten::random.from",
                     [](hlo::Builder& b) {
                       return std::vector<Arg>{Arg::tensor(b.parameter({DType::I64, {4}})), Arg::integer(4),
                                               Arg::integer(4), rng(b)};
                     }),
               lowering::LoweringError);
}

TEST(RandomShapes, ScalarAndEmptySelf) {
  auto l = lower("aten::uniform", [](hlo::Builder& b) { return uniform_args(b, DType::F32, {}); });
  EXPECT_EQ(l.results[0].rank(), 0);
  auto v = read<float>(run_all(l, {upload(std::vector<float>{0}, DType::F32, {}), f64(2), f64(3), state(1)})[0], 1);
  EXPECT_GE(v[0], 2.f);
  EXPECT_LT(v[0], 3.f);
  auto e = lower("aten::native_dropout", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::BF16, {0, 3}})), scalar(b), Arg::boolean(true), rng(b)};
  });
  // As on CPU: an empty input in training gives a mask of its own dtype.
  EXPECT_EQ(e.results[1].type, (hlo::TensorType{DType::BF16, {0, 3}}));
  EXPECT_NO_THROW(testing::client().compile(e.text, 0));
}

TEST(RandomShapes, IntegerSelfIsRefusedForFloatDistributions) {
  EXPECT_THROW(lower("aten::normal_functional", [](hlo::Builder& b) { return uniform_args(b, DType::I64, {4}); }),
               lowering::LoweringError);
}

}  // namespace
}  // namespace torch_pjrt
