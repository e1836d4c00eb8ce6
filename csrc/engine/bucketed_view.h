// The StableHLO of bucketed views: reading a view at its buckets' sizes with
// runtime true sizes, scattering into one, and compacting a bucketed fresh
// result into its storage (bucket.h says when a call runs bucketed). Plain
// functions of the builder, used by ProgramBuilder.
#pragma once

#include "engine/bucket_plan.h"
#include "hlo/builder.h"

namespace torch_pjrt::engine {

// The view of `ref` (true sizes and strides in `shape`, i64[2 * rank];
// rank-0 i64 `offset`) read from the flat storage value `flat`: a value of
// ref.padded sizes whose bucketed dims carry their true sizes.
hlo::Value read_bucketed_view(hlo::Builder& b, hlo::Value flat, const BucketedRef& ref, hlo::Value shape,
                              hlo::Value offset);
// `flat` with the view of `ref` (true sizes and strides in `shape`, offset
// `offset`, as read_bucketed_view takes them) overwritten by `update`, a
// value of ref.padded sizes whose bucketed dims may carry true sizes: a
// scatter whose padded elements index past the storage and are dropped.
hlo::Value write_bucketed_view(hlo::Builder& b, hlo::Value flat, hlo::Value update, const BucketedRef& ref,
                               hlo::Value shape, hlo::Value offset);
// A result `r` with dynamic dims padded (or cut) to `buckets` in those dims,
// as one flat buffer: first the true result's elements in row-major order of
// its true sizes `sizes` (i64[rank]), then unspecified ones. Its length is
// the elements at those sizes (capacity_of).
hlo::Value compact_bucketed_result(hlo::Builder& b, hlo::Value r, hlo::Value sizes, const hlo::Dims& buckets);
// r's dims with its dynamic ones at `buckets`.
hlo::TensorType capacity_of(const hlo::TensorType& r, const hlo::Dims& buckets);
// `r` cut or padded to `buckets` in its dynamic dims, which keep their true
// sizes `sizes` (i64[rank]): the value a forwarded argument reads.
hlo::Value fit_to_buckets(hlo::Builder& b, hlo::Value r, hlo::Value sizes, const hlo::Dims& buckets);

}  // namespace torch_pjrt::engine
