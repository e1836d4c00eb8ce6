// A bucketed call's plan: how its program reaches each tensor reference
// (bucket.h says when a call runs bucketed and why). Plain values: the
// key (key.h), the builder (program.h) and fused regions read them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hlo/builder.h"

namespace torch_pjrt::engine {

// How a bucketed program reaches one tensor reference of its call.
struct BucketedRef {
  // Read with runtime sizes and strides (a ViewShape parameter) at `padded`
  // sizes; false: read exactly as an exact program would.
  bool dynamic = false;
  uint32_t dynamic_sizes = 0;  // bit d: dim d is bucketed
  hlo::Dims padded;            // the sizes, bucketed dims at their bucket
  // A fused region's fresh result (a whole write of its new storage, whose
  // capacity is `padded`): the value is compacted into the storage as a
  // bucketed call's fresh result is (compact_bucketed_result).
  bool fresh = false;
  // An argument that reads a storage exactly as a fresh result of the same
  // region wrote it (the same sizes, contiguous, at offset 0): it takes
  // that value itself instead of gathering it back from the storage.
  bool forward = false;
};

// A call's bucketing: per tensor reference, in for_each_ref order.
struct BucketPlan {
  uint64_t structure = 0;  // the call's shape-free hash (ShapeHistory)
  uint64_t pattern = 0;    // which of its views' dims are bucketed
  std::vector<BucketedRef> refs;
  // Per fresh result: its exact sizes, each rounded up to its bucket. A
  // dynamic result dim is padded to this (the storage's capacity follows
  // the true size's bucket, so the next step's reader sees the capacity of
  // its own bucket).
  std::vector<hlo::Dims> results;
  // The exact call's check messages, in order (a joined call: its bucketed
  // lowering knows only the bounds, and an error names the true sizes).
  std::vector<std::string> check_messages;
};
// Per call of a sequence, its bucketing or nullptr (exact).
using Plans = std::vector<const BucketPlan*>;

}  // namespace torch_pjrt::engine
