// The engine's settings that its parts read on every call: the eager mode,
// the float32 matmul precision, the plugin's identity word that begins every
// key, and whether shape buckets are on. Owned by the Engine; the fused
// scheduler reads them.
//
// Thread-safety: mode and precision are atomics set from any thread; the
// rest is fixed at startup.
#pragma once

#include <atomic>
#include <cstdint>

#include "hlo/builder.h"

namespace torch_pjrt::engine {

// The eager modes: one program per op, waited for (Debug) or async
// (Strict); or ops joined into regions that run as one program (Fused).
enum class Mode { Debug, Strict, Fused };

struct Settings {
  std::atomic<Mode> mode{Mode::Strict};
  // torch.set_float32_matmul_precision (part of every key; the default,
  // Highest, is exact float32 as on CPU).
  std::atomic<hlo::Precision> precision{hlo::Precision::Highest};
  int64_t identity = 0;  // plugin_identity (key.h)
  bool buckets = true;   // shape buckets (bucket.h); off with TORCH_PJRT_SHAPE_BUCKETS=0

  // The first word of every key: the plugin's identity and the precision.
  int64_t key_identity() const { return identity ^ (static_cast<int64_t>(precision.load()) << 56); }
};

}  // namespace torch_pjrt::engine
