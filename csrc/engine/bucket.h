// Shape buckets: a size that changes from call to call compiles O(log n)
// programs, not n.
//
// A decode loop appends one token to its KV cache per step, so the same op
// (cat, the attention matmuls, softmax) sees a new sequence length on every
// call, and exact programs would compile once per length. ShapeHistory
// watches each op structure with its sizes and strides left out (the
// shape-free structure): once a size of one of its views has taken a
// value one off an earlier one (a KV cache growing by a token, a sweep over
// lengths) or more than eight values, that size is dynamic for
// good, with the strides that changed with it, and a call whose exact
// program is not compiled already runs bucketed:
//   - its key holds each dynamic size rounded up to its bucket (bucket_of),
//     never the size itself, and no dynamic stride;
//   - the program reads such a view at its bucketed sizes with a gather
//     whose indices come from the true sizes, strides and offset (runtime
//     parameters), then marks the bucketed dims with their true sizes
//     (stablehlo.set_dimension_size), so XLA's reductions, softmax,
//     dot_general and concatenate respect the true extent and padding never
//     reaches a value;
//   - a fresh result with dynamic dims is padded to its bounds and written
//     into a flat buffer in the row-major order of its true sizes (another
//     runtime parameter), so the tensor is a plain contiguous tensor whose
//     storage is larger than its elements (its capacity: the elements at
//     the bounds). Later bucketed calls read that storage through its
//     capacity, which is also bucketed, so their keys stay fixed.
//   - a write into an existing storage (an in-place op, copy_) scatters
//     the value at the bucketed sizes, and the padded elements' indices
//     point past the storage, so XLA drops them.
// Only ops whose lowering is shape-generic (Traits::shape_generic) run
// bucketed. The builder
// refuses dynamic operands in every op that does not type them
// (hlo/builder.h), a result whose static dims differ from the exact call's
// is refused too, and a refused structure runs exact programs from then on
// (per pattern of bucketed dims: cat(dynamic, static) may bucket where
// cat(static, dynamic) is refused).
//
// The plans a bucketed call runs by are bucket_plan.h; the StableHLO that
// reads and writes bucketed views is bucketed_view.h.
//
// Thread-safety: ShapeHistory and UploadHistory guard themselves.
#pragma once

#include <atomic>
#include <climits>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/bucket_plan.h"
#include "engine/call.h"
#include "engine/program.h"

namespace torch_pjrt::engine {

// Bucket sizes: powers of two up to kBucketCap, then multiples of it; with
// `multiple` > 0 (torch.compile's bucket_size option), multiples of that.
constexpr int64_t kBucketCap = 4096;
int64_t bucket_of(int64_t n, int64_t multiple = 0);

// This thread's scratch plan: ShapeHistory::observe fills it for the call at
// hand, and the strict and fused paths run or join that call by it.
BucketPlan& bucket_scratch();
// plan.results: the exact call's result sizes, each at bucket_of(d, multiple).
void bucket_results(BucketPlan& plan, const Signature& exact, int64_t multiple);
// Whether a bucketed signature serves the exact call: the same checks (kinds,
// from the same calls, so the exact messages name what it finds), and fresh
// result types that hold the exact ones (equal, except that a dynamic dim is
// at least the exact extent).
bool bucketed_signature_fits(const Signature& bucketed, const Signature& exact);
// Whether a failed bucketed lowering or compile refuses the dynamic dims for
// good (not a transient failure such as out-of-memory).
bool refuses_dynamic(const std::exception& e);

// What ShapeHistory::observe found for a call.
enum class Shapes : uint8_t {
  Static,    // no size of its shape-free structure changed
  Dynamic,   // a size changed, and the call runs exact
  Bucketed,  // a size changed, and the call runs bucketed by its plan
};

// Only a new shape can make a size dynamic: one that is not among the
// structure's kRecent most recently seen distinct shapes. A dynamic size
// settles again when the calls stop bringing new shapes: a training loop
// cycles through a few shapes per op structure (layers of many widths,
// spatial sizes 2 and 1, an optimizer over parameters of many sizes, or the
// models before this one), while a sweep over lengths brings a new one on
// every call. Once a structure has gone twice as long without a new shape
// as it went between its last two new shapes, plus kSettleCalls (counted in
// observed calls of all structures, so that an op called once per step
// settles as fast as the loop does), its sizes are static again: its calls
// run exact, and fused mode decides
// their placements anew (generation()). A growing length (three
// consecutive values taken one after another) never settles, so a second
// generate() over the same lengths stays bucketed; nor does a size that
// changed in a graph that Dynamo traced with symbolic sizes (observe's
// `eager`). kRecent is large enough
// for the shapes that one structure (an mm, an optimizer's addcdiv) cycles
// through in a process that trains several models. All of it is a function
// of the op stream, never of time.
class ShapeHistory {
 public:
  // Records the sizes, strides and storage sizes of `call`'s views and says
  // whether one of them changed since an earlier call of its shape-free
  // structure. Bucketed, with `plan` filled, when the call can run
  // bucketed: its op is shape-generic, no
  // bucketed size is 0, a dynamic view is off its exact program (see
  // observe's body), and bucketing was not refused for the structure and
  // its pattern of bucketed dims.
  // `eager`: a size that takes a new value is dynamic at once (a call of a
  // graph that Dynamo traced with symbolic sizes). `multiple`: bucket_of's.
  Shapes observe(const OpCall& call, BucketPlan& plan, bool eager = false, int64_t multiple = 0);
  // Runs calls of `plan`'s structure with its pattern of bucketed dims
  // exact from now on (their bucketed lowering or compile is refused).
  void refuse(const BucketPlan& plan);
  // Forgets every structure.
  void clear();
  // Counts the structures whose sizes settled (see above); a placement
  // decided under another generation is stale. Any thread.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

 private:
  static constexpr int kDistinct = 8;
  static constexpr size_t kRecent = 256;
  static constexpr int64_t kSettleCalls = 16;
  static constexpr int64_t kNone = INT64_MIN;
  // Why a position is dynamic: a size by its values' count, by one off
  // another, or by changing in a graph with symbolic sizes (which never
  // settles); a stride by following its view's dynamic sizes.
  static constexpr uint8_t kMany = 1, kAdjacent = 2, kFollows = 3, kGraph = 4;
  struct Record {
    std::vector<int64_t> last;      // per reference: sizes, strides, storage elements
    std::vector<int64_t> seen;      // per position of `last`: the first kDistinct values it took (kNone: none)
    std::vector<uint8_t> dynamic;   // per position of `last`: 0 or why it is dynamic
    std::vector<uint64_t> refused;  // patterns (BucketPlan::pattern)
    std::vector<uint64_t> recent;   // hashes of the last kRecent distinct shapes, most recent first
    uint64_t last_new = 0;          // the clock at its last new shape
    uint64_t gap = 0;               // the clock between its last two new shapes
    // Moves `shape` to the front of `recent`; true when it was not there.
    bool remember(uint64_t shape);
  };
  // Makes `r`'s settled sizes static (see above); `shapes` as observe
  // records them, `is_size`: which positions are sizes.
  void settle(Record& r, const std::vector<int64_t>& shapes, const std::vector<uint8_t>& is_size);
  // observe's steps: which sizes a new shape makes dynamic; the strides that
  // follow them; the bucketing of a call with dynamic sizes (`structure`:
  // its shape-free hash).
  void mark_sizes(Record& r, const std::vector<int64_t>& shapes, const std::vector<uint8_t>& is_size, bool eager);
  static void mark_strides(const OpCall& call, Record& r, const std::vector<int64_t>& shapes);
  static Shapes plan_buckets(const OpCall& call, const Record& r, uint64_t structure, int64_t multiple,
                             BucketPlan& plan);
  std::mutex mu_;
  std::unordered_map<uint64_t, Record> records_;
  uint64_t clock_ = 0;  // observe calls of every structure
  std::atomic<uint64_t> generation_{0};
};

// Uploads whose sizes change from call to call: a batch of a new sequence
// length, copied from the host into a new storage. Exact storages would key
// every bucketed program that reads them by their size (a program's
// parameter is its storage at its exact size), so each length would compile
// its own programs. Once a dim of an upload has taken a value one off an
// earlier one, or more than kDistinct values, while the other dims and the
// dtype stayed the same, the dim is dynamic and later uploads with that
// pattern get storages of their capacity: the elements with each dynamic dim
// at its bucket, the tensor's own elements first (as a bucketed result's).
// Weights of a model (a few widths each) stay exact.
//
// Thread-safety: guards itself.
class UploadHistory {
 public:
  // The capacity in elements for an upload of `sizes`, or 0 when no dim of
  // it is dynamic (the storage is exact). Records the sizes. `eager`: a dim
  // that takes a second value is dynamic at once, bucketed by
  // bucket_of(n, multiple) (new storages inside a graph with symbolic sizes).
  int64_t capacity(hlo::DType dtype, const hlo::Dims& sizes, bool eager = false, int64_t multiple = 0);
  // Makes dims `dims` of uploads like `sizes` dynamic now, bucketed by
  // bucket_of(n, multiple).
  void mark(hlo::DType dtype, const hlo::Dims& sizes, const hlo::Dims& dims, int64_t multiple = 0);
  void clear();

 private:
  static constexpr int kDistinct = 8;
  struct Record {
    std::vector<int64_t> seen;  // the values the dim took, up to kDistinct
    bool dynamic = false;
    int64_t multiple = 0;  // bucket_of's, from mark()
  };
  std::mutex mu_;
  std::unordered_map<uint64_t, Record> records_;  // by (dtype, dim, the other sizes): key_of
  static uint64_t key_of(hlo::DType dtype, const hlo::Dims& sizes, size_t dim);
};

}  // namespace torch_pjrt::engine
