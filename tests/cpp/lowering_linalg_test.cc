// Golden StableHLO text and numeric checks on the CPU plugin for the
// matrix products, cross and addr (linalg.cc). Expected values are worked
// out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "harness.h"

namespace torch_pjrt {
namespace {

using hlo::DType;
using testing::Arg;
using testing::bytes;
using testing::exec;
using testing::f32_args;
using testing::lower;
using testing::lowering_error;
using testing::scalar;
using testing::tensor;
using testing::values;

// A = [[1, 2, 3], [4, 5, 6]], B = [[7, 8], [9, 10], [11, 12]]:
// A @ B = [[58, 64], [139, 154]].
const std::vector<float> kA = {1, 2, 3, 4, 5, 6};
const std::vector<float> kB = {7, 8, 9, 10, 11, 12};

TEST(Linalg, MmGolden) {
  auto l = lower("aten::mm", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 3}), tensor(b, DType::F32, {3, 4})};
  });
  EXPECT_EQ(l.text,
            "module @torch_pjrt {\n"
            "  func.func public @main(%0: tensor<2x3xf32>, %1: tensor<3x4xf32>) -> (tensor<2x4xf32>) {\n"
            "    %2 = \"stablehlo.dot_general\"(%0, %1) {dot_dimension_numbers = #stablehlo.dot<"
            "lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>} : "
            "(tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>\n"
            "    \"func.return\"(%2) : (tensor<2x4xf32>) -> ()\n"
            "  }\n"
            "}\n");
}

TEST(Linalg, Mm) {
  auto l = lower("aten::mm", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 3}), tensor(b, DType::F32, {3, 2})};
  });
  EXPECT_EQ(values<float>(exec(l, {bytes(kA), bytes(kB)})[0]), (std::vector<float>{58, 64, 139, 154}));
}

TEST(Linalg, MmOfInt64) {
  auto l = lower("aten::mm", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::I64, {2, 2}), tensor(b, DType::I64, {2, 2})};
  });
  ASSERT_EQ(l.results[0].dtype(), DType::I64);
  // [[1, 2], [3, 4]] @ [[5, 6], [7, 8]] = [[19, 22], [43, 50]]
  EXPECT_EQ(values<int64_t>(exec(l, {bytes(std::vector<int64_t>{1, 2, 3, 4}), bytes(std::vector<int64_t>{5, 6, 7, 8})})[0]),
            (std::vector<int64_t>{19, 22, 43, 50}));
}

TEST(Linalg, MmOfHalfAccumulatesInFloat32) {
  auto l = lower("aten::mm", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F16, {1, 3}), tensor(b, DType::F16, {3, 1})};
  });
  ASSERT_EQ(l.results[0].dtype(), DType::F16);
  EXPECT_NE(l.text.find("-> tensor<1x1xf32>"), std::string::npos);
  // [2048, 1, 1] . [1, 1, 1] = 2050 (0x6801); a float16 accumulator would give 2048.
  auto out = exec(l, {bytes(std::vector<uint16_t>{0x6800, 0x3C00, 0x3C00}), bytes(std::vector<uint16_t>{0x3C00, 0x3C00, 0x3C00})});
  EXPECT_EQ(values<uint16_t>(out[0]), (std::vector<uint16_t>{0x6801}));
}

TEST(Linalg, MmDtypeMismatchFails) {
  auto msg = lowering_error("aten::mm", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 3}), tensor(b, DType::F64, {3, 2})};
  });
  EXPECT_NE(msg.find("expected m1 and m2 to have the same dtype, but got: float32 != float64"), std::string::npos) << msg;
}

TEST(Linalg, MmShapeMismatchFails) {
  auto msg = lowering_error("aten::mm", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 3}), tensor(b, DType::F32, {4, 5})};
  });
  EXPECT_NE(msg.find("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"), std::string::npos) << msg;
  msg = lowering_error("aten::mm", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {3}), tensor(b, DType::F32, {3, 5})};
  });
  EXPECT_NE(msg.find("mat1 must be a matrix"), std::string::npos) << msg;
}

TEST(Linalg, Bmm) {
  auto l = lower("aten::bmm", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 1, 2}), tensor(b, DType::F32, {2, 2, 2})};
  });
  ASSERT_EQ(l.results[0].dims(), (hlo::Dims{2, 1, 2}));
  // batch 0: [1, 2] @ [[1, 0], [0, 1]] = [1, 2]; batch 1: [3, 4] @ [[1, 2], [3, 4]] = [15, 22]
  auto out = exec(l, {bytes(std::vector<float>{1, 2, 3, 4}), bytes(std::vector<float>{1, 0, 0, 1, 1, 2, 3, 4})});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{1, 2, 15, 22}));
}

TEST(Linalg, BmmShapeMismatchFails) {
  auto msg = lowering_error("aten::bmm", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 1, 2}), tensor(b, DType::F32, {3, 2, 2})};
  });
  EXPECT_NE(msg.find("Expected size for first two dimensions of batch2 tensor to be: [2, 2] but got: [3, 2]"),
            std::string::npos)
      << msg;
}

TEST(Linalg, AddmmWithBiasAndRuntimeScalars) {
  auto l = lower("aten::addmm", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2}), tensor(b, DType::F32, {2, 3}), tensor(b, DType::F32, {3, 2}),
                            scalar(b, DType::F64), scalar(b, DType::I64)};
  });
  ASSERT_EQ(l.results[0].dims(), (hlo::Dims{2, 2}));
  // 0.5 * [10, 20] + 2 * [[58, 64], [139, 154]]
  auto out = exec(l, {bytes(std::vector<float>{10, 20}), bytes(kA), bytes(kB), bytes(std::vector<double>{0.5}),
                      bytes(std::vector<int64_t>{2})});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{121, 138, 283, 318}));
}

TEST(Linalg, AddmmDefaultsAndBetaZeroIgnoresNaN) {
  auto def = lower("aten::addmm", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 2}), tensor(b, DType::F32, {2, 3}), tensor(b, DType::F32, {3, 2}),
                            Arg::none(), Arg::none()};
  });
  EXPECT_EQ(values<float>(exec(def, {bytes(std::vector<float>{1, 1, 1, 1}), bytes(kA), bytes(kB)})[0]),
            (std::vector<float>{59, 65, 140, 155}));
  auto l = lower("aten::addmm", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 2}), tensor(b, DType::F32, {2, 3}), tensor(b, DType::F32, {3, 2}),
                            scalar(b, DType::I64), scalar(b, DType::I64)};
  });
  float nan = std::numeric_limits<float>::quiet_NaN();
  auto out = exec(l, {bytes(std::vector<float>{nan, nan, nan, nan}), bytes(kA), bytes(kB),
                      bytes(std::vector<int64_t>{0}), bytes(std::vector<int64_t>{1})});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{58, 64, 139, 154}));
}

TEST(Linalg, AddmmSelfDtypeMismatchFails) {
  auto msg = lowering_error("aten::addmm", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F64, {2, 2}), tensor(b, DType::F32, {2, 3}), tensor(b, DType::F32, {3, 2}),
                            Arg::none(), Arg::none()};
  });
  EXPECT_NE(msg.find("same dtype"), std::string::npos) << msg;
}

TEST(Linalg, Baddbmm) {
  auto l = lower("aten::baddbmm", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {1}), tensor(b, DType::F32, {2, 1, 2}), tensor(b, DType::F32, {2, 2, 1}),
                            scalar(b, DType::I64), scalar(b, DType::F64)};
  });
  ASSERT_EQ(l.results[0].dims(), (hlo::Dims{2, 1, 1}));
  // batch 0: [1, 2] . [3, 4] = 11; batch 1: [5, 6] . [7, 8] = 83; 3 * 100 + 0.5 * that.
  auto out = exec(l, {bytes(std::vector<float>{100}), bytes(std::vector<float>{1, 2, 5, 6}),
                      bytes(std::vector<float>{3, 4, 7, 8}), bytes(std::vector<int64_t>{3}), bytes(std::vector<double>{0.5})});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{305.5f, 341.5f}));
}

TEST(Linalg, Addbmm) {
  auto l = lower("aten::addbmm", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {1, 1}), tensor(b, DType::F32, {2, 1, 2}), tensor(b, DType::F32, {2, 2, 1}),
                            Arg::none(), Arg::none()};
  });
  ASSERT_EQ(l.results[0].dims(), (hlo::Dims{1, 1}));
  // 11 + 83 summed over the batch, plus self 1.
  auto out = exec(l, {bytes(std::vector<float>{1}), bytes(std::vector<float>{1, 2, 5, 6}), bytes(std::vector<float>{3, 4, 7, 8})});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{95}));
}

TEST(Linalg, Mv) {
  auto l = lower("aten::mv", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F64, {2, 3}), tensor(b, DType::F64, {3})};
  });
  ASSERT_EQ(l.results[0].dims(), (hlo::Dims{2}));
  // [[1, 2, 3], [4, 5, 6]] @ [1, 0, -1] = [-2, -2]
  auto out = exec(l, {bytes(std::vector<double>{1, 2, 3, 4, 5, 6}), bytes(std::vector<double>{1, 0, -1})});
  EXPECT_EQ(values<double>(out[0]), (std::vector<double>{-2, -2}));
}

TEST(Linalg, MvShapeMismatchFails) {
  auto msg = lowering_error("aten::mv", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 3}), tensor(b, DType::F32, {4})};
  });
  EXPECT_NE(msg.find("size mismatch"), std::string::npos) << msg;
}

TEST(Linalg, Addmv) {
  auto l = lower("aten::addmv", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2}), tensor(b, DType::F32, {2, 3}), tensor(b, DType::F32, {3}),
                            scalar(b, DType::I64), scalar(b, DType::I64)};
  });
  // 2 * [1, 1] + 3 * ([[1, 2, 3], [4, 5, 6]] @ [1, 1, 1] = [6, 15])
  auto out = exec(l, {bytes(std::vector<float>{1, 1}), bytes(kA), bytes(std::vector<float>{1, 1, 1}),
                      bytes(std::vector<int64_t>{2}), bytes(std::vector<int64_t>{3})});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{20, 47}));
}

TEST(Linalg, Dot) {
  auto l = lower("aten::dot", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::I32, {3}), tensor(b, DType::I32, {3})};
  });
  ASSERT_EQ(l.results[0].rank(), 0);
  ASSERT_EQ(l.results[0].dtype(), DType::I32);
  EXPECT_EQ(values<int32_t>(exec(l, {bytes(std::vector<int32_t>{1, 2, 3}), bytes(std::vector<int32_t>{4, -5, 6})})[0]),
            (std::vector<int32_t>{12}));
}

TEST(Linalg, DotErrors) {
  auto msg = lowering_error("aten::dot", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {3}), tensor(b, DType::F32, {4})};
  });
  EXPECT_NE(msg.find("inconsistent tensor size"), std::string::npos) << msg;
  msg = lowering_error("aten::dot", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {3}), tensor(b, DType::F64, {3})};
  });
  EXPECT_NE(msg.find("dot : expected both vectors to have same dtype"), std::string::npos) << msg;
  msg = lowering_error("aten::dot", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {1, 3}), tensor(b, DType::F32, {3})};
  });
  EXPECT_NE(msg.find("1D tensors expected, but got 2D and 1D tensors"), std::string::npos) << msg;
}

// ---- cross, addr

TEST(Linalg, Cross) {
  auto l = lower("aten::linalg_cross", [](hlo::Builder& b) {
    auto args = f32_args(b, {{3}, {3}});
    args.push_back(Arg::integer(-1));
    return args;
  });
  auto out = exec(l, {bytes(std::vector<float>{1, 0, 0}), bytes(std::vector<float>{0, 1, 0})});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{0, 0, 1}));
}

TEST(Linalg, AddrIgnoresSelfWhenBetaIsZero) {
  auto l = lower("aten::addr", [](hlo::Builder& b) {
    auto args = f32_args(b, {{2, 2}, {2}, {2}});
    args.push_back(scalar(b, DType::F64));
    args.push_back(scalar(b, DType::F64));
    return args;
  });
  float nan = std::numeric_limits<float>::quiet_NaN();
  auto out = exec(l, {bytes(std::vector<float>{nan, 1, 1, 1}), bytes(std::vector<float>{1, 2}),
                      bytes(std::vector<float>{3, 4}), bytes(std::vector<double>{0}), bytes(std::vector<double>{2})});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{6, 8, 12, 16}));
}

}  // namespace
}  // namespace torch_pjrt
