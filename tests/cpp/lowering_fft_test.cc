// Complex dtypes and the FFT lowerings: the dtype table's complex facts,
// golden StableHLO text for _fft_r2c/_fft_c2c/_fft_c2r, and numeric checks
// on the CPU plugin. Expected values are worked out by hand from the DFT
// definition X[k] = sum_j x[j] exp(-2 pi i j k / n).
#include <gtest/gtest.h>

#include <complex>
#include <string>
#include <vector>

#include "harness.h"

namespace torch_pjrt {
namespace {

using hlo::DType;
using testing::Arg;
using testing::Bytes;
using testing::bytes;
using testing::exec;
using testing::lower;
using testing::tensor;
using testing::values;
using c64 = std::complex<float>;

void expect_near(const std::vector<c64>& got, const std::vector<c64>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i].real(), want[i].real(), 1e-5) << "element " << i;
    EXPECT_NEAR(got[i].imag(), want[i].imag(), 1e-5) << "element " << i;
  }
}

TEST(ComplexDType, TableFacts) {
  EXPECT_EQ(hlo::mlir_name(DType::C64), "complex<f32>");
  EXPECT_EQ(hlo::mlir_name(DType::C128), "complex<f64>");
  EXPECT_EQ(hlo::byte_size(DType::C64), 8);
  EXPECT_EQ(hlo::byte_size(DType::C128), 16);
  EXPECT_EQ(hlo::pjrt_code(DType::C64), 14);   // PJRT_Buffer_Type_C64 in pjrt_c_api.h
  EXPECT_EQ(hlo::pjrt_code(DType::C128), 15);  // PJRT_Buffer_Type_C128
  EXPECT_EQ(hlo::real_type(DType::C64), DType::F32);
  EXPECT_EQ(hlo::complex_type(DType::F64), DType::C128);
  EXPECT_EQ(hlo::opmath_type(DType::C64), DType::C64);
  EXPECT_EQ(hlo::literal(2.5, DType::C64), "(2.50000000000000000e+00, 0.00000000000000000e+00)");
}

TEST(ComplexDType, PromotesLikeTorch) {
  // torch.promote_types
  EXPECT_EQ(hlo::promote_types(DType::C64, DType::F32), DType::C64);
  EXPECT_EQ(hlo::promote_types(DType::BF16, DType::C64), DType::C64);
  EXPECT_EQ(hlo::promote_types(DType::C64, DType::F64), DType::C128);
  EXPECT_EQ(hlo::promote_types(DType::I64, DType::C64), DType::C64);
  EXPECT_EQ(hlo::promote_types(DType::C64, DType::C128), DType::C128);
  EXPECT_FALSE(hlo::can_cast(DType::C64, DType::F64));
  EXPECT_TRUE(hlo::can_cast(DType::F64, DType::C64));
  // torch.result_type(float64 tensor, zero-dim complex64 tensor) is complex128.
  hlo::ResultType rt;
  rt.add(DType::F64, hlo::ResultType::Kind::Dimensioned);
  rt.add(DType::C64, hlo::ResultType::Kind::ZeroDim);
  EXPECT_EQ(rt.result(), DType::C128);
  // float32 tensor + Python complex -> complex64.
  hlo::ResultType w;
  w.add(DType::F32, hlo::ResultType::Kind::Dimensioned);
  w.add(DType::C128, hlo::ResultType::Kind::Wrapped);
  EXPECT_EQ(w.result(), DType::C64);
}

TEST(FftLowering, R2cOnesidedGoldenAndValues) {
  // _fft_r2c(x, dim=[0], normalization=none, onesided=true) over dim 0 of a
  // [4, 1] input: the dim moves to the end, RFFT, and moves back.
  auto l = lower("aten::_fft_r2c", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {4, 1}), Arg::integers({0}), Arg::integer(0), Arg::boolean(true)};
  });
  EXPECT_NE(l.text.find("\"stablehlo.transpose\""), std::string::npos) << l.text;
  EXPECT_NE(l.text.find("\"stablehlo.fft\"(%1) {fft_type = #stablehlo<fft_type RFFT>, fft_length = array<i64: 4>} : "
                        "(tensor<1x4xf32>) -> tensor<1x3xcomplex<f32>>"),
            std::string::npos)
      << l.text;
  EXPECT_EQ(l.results[0].type.str(), "tensor<3x1xcomplex<f32>>");
  // rfft([1, 2, 3, 4]) = [10, -2+2i, -2].
  expect_near(values<c64>(exec(l, {bytes<float>({1, 2, 3, 4})})[0]), {{10, 0}, {-2, 2}, {-2, 0}});
}

TEST(FftLowering, C2cInverseScalesLikeTorch) {
  // _fft_c2c(x, [0], normalization=none, forward=false): XLA's IFFT divides
  // by n, PyTorch's unnormalised inverse does not, so the result is scaled by n.
  auto l = lower("aten::_fft_c2c", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::C64, {2}), Arg::integers({0}), Arg::integer(0), Arg::boolean(false)};
  });
  EXPECT_NE(l.text.find("fft_type = #stablehlo<fft_type IFFT>"), std::string::npos) << l.text;
  EXPECT_NE(l.text.find("dense<(2.00000000000000000e+00, 0.00000000000000000e+00)> : tensor<complex<f32>>"),
            std::string::npos)
      << l.text;
  // sum_j x[j] exp(+2 pi i j k / 2) of [1, i]: [1+i, 1-i].
  expect_near(values<c64>(exec(l, {bytes<c64>({{1, 0}, {0, 1}})})[0]), {{1, 1}, {1, -1}});
}

TEST(FftLowering, C2cForwardByRootN) {
  auto l = lower("aten::_fft_c2c", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::C64, {2, 2}), Arg::integers({0, 1}), Arg::integer(1), Arg::boolean(true)};
  });
  EXPECT_NE(l.text.find("fft_length = array<i64: 2, 2>"), std::string::npos) << l.text;
  // 2-D DFT of [[1, 0], [0, 0]] is all ones; by 1/sqrt(4) it is 0.5.
  expect_near(values<c64>(exec(l, {bytes<c64>({{1, 0}, {0, 0}, {0, 0}, {0, 0}})})[0]),
              {{0.5, 0}, {0.5, 0}, {0.5, 0}, {0.5, 0}});
}

TEST(FftLowering, C2rGoldenAndValues) {
  // _fft_c2r(X, [0], normalization=by_n, last_dim_size=4): irfft back to
  // [1, 2, 3, 4]. XLA's IRFFT already divides by n, so no extra scaling.
  auto l = lower("aten::_fft_c2r", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::C64, {3}), Arg::integers({0}), Arg::integer(2), Arg::integer(4)};
  });
  EXPECT_NE(l.text.find("{fft_type = #stablehlo<fft_type IRFFT>, fft_length = array<i64: 4>} : "
                        "(tensor<3xcomplex<f32>>) -> tensor<4xf32>"),
            std::string::npos)
      << l.text;
  EXPECT_EQ(l.text.find("stablehlo.multiply"), std::string::npos) << l.text;
  auto got = values<float>(exec(l, {bytes<c64>({{10, 0}, {-2, 2}, {-2, 0}})})[0]);
  std::vector<float> want = {1, 2, 3, 4};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5);
}

TEST(FftLowering, ComplexAndPolar) {
  auto l = lower("aten::complex", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2}), tensor(b, DType::F32, {2})};
  });
  EXPECT_NE(l.text.find("\"stablehlo.complex\"(%0, %1) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xcomplex<f32>>"),
            std::string::npos)
      << l.text;
  auto p = lower("aten::polar", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {1}), tensor(b, DType::F32, {1})};
  });
  // polar(2, pi/2) = 2i.
  auto auto_exec = [&](const testing::Lowered& low, const std::vector<Bytes>& in) {
    return values<c64>(exec(low, in)[0]);
  };
  expect_near(auto_exec(p, {bytes<float>({2}), bytes<float>({static_cast<float>(M_PI / 2)})}), {{0, 2}});
}

TEST(FftLowering, RefusesBadInput) {
  EXPECT_THROW(lower("aten::_fft_c2c",
                     [](hlo::Builder& b) {
                       return std::vector<Arg>{tensor(b, DType::F32, {2}), Arg::integers({0}), Arg::integer(0),
                                               Arg::boolean(true)};
                     }),
               lowering::LoweringError);
  EXPECT_THROW(lower("aten::_fft_r2c",
                     [](hlo::Builder& b) {
                       return std::vector<Arg>{tensor(b, DType::BF16, {2}), Arg::integers({0}), Arg::integer(0),
                                               Arg::boolean(true)};
                     }),
               lowering::LoweringError);
}

}  // namespace
}  // namespace torch_pjrt
