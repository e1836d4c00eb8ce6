// torch's float32 matmul precision (torch.set_float32_matmul_precision)
// passed to the engine as hlo::Precision.
#include <atomic>

#include "torch/common.h"

namespace torch_pjrt::glue {

void follow_matmul_precision() {
  static std::atomic<int> last{static_cast<int>(at::Float32MatmulPrecision::HIGHEST)};
  const auto p = at::globalContext().float32MatmulPrecision();
  if (static_cast<int>(p) == last.load(std::memory_order_relaxed)) return;
  last.store(static_cast<int>(p), std::memory_order_relaxed);
  Engine::get().set_matmul_precision(p == at::Float32MatmulPrecision::HIGHEST ? hlo::Precision::Highest
                                     : p == at::Float32MatmulPrecision::HIGH  ? hlo::Precision::High
                                                                              : hlo::Precision::Default);
}

}  // namespace torch_pjrt::glue
