// Storage, view and copy kernels: the ops that change what a tensor views
// (empty, as_strided, view, resize_, set_) or move bytes between host and
// device (copy_, _copy_from, _local_scalar_dense), registered explicitly.
#include <ATen/EmptyTensor.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/_to_copy_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/util/strides.h>

#include <mutex>
#include <unordered_map>

#include "torch/ops.h"

namespace torch_pjrt::glue {
namespace {

using Kind = CallArg::Kind;

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout, std::optional<at::Device> device,
                               std::optional<bool> pin, std::optional<at::MemoryFormat> memory_format) {
  c10::DeviceIndex d = device && device->has_index() ? device->index() : current_device();
  // Inside a graph with symbolic sizes, a new storage whose sizes change
  // from call to call has its buckets' capacity (Engine::graph_capacity).
  if (memory_format.value_or(at::MemoryFormat::Contiguous) == at::MemoryFormat::Contiguous &&
      c10::multiply_integers(size) > 0) {
    std::vector<int64_t> sizes(size.begin(), size.end());
    const at::ScalarType type = c10::dtype_or_default(dtype);
    if (const int64_t capacity = Engine::get().graph_capacity(to_hlo(type), sizes))
      return new_tensor(size, type, d, nullptr, capacity);
  }
  c10::DeviceIndex saved = current_device();
  set_current_device(d);
  at::Tensor t = at::detail::empty_generic(size, tpu_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           c10::dtype_or_default(dtype), memory_format);
  set_current_device(saved);
  return t;
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout> layout, std::optional<at::Device> device, std::optional<bool> pin) {
  c10::DeviceIndex d = device && device->has_index() ? device->index() : current_device();
  if (c10::multiply_integers(size) > 0 && stride == c10::IntArrayRef(c10::contiguous_strides(size))) {
    std::vector<int64_t> sizes(size.begin(), size.end());
    const at::ScalarType type = c10::dtype_or_default(dtype);
    if (const int64_t capacity = Engine::get().graph_capacity(to_hlo(type), sizes))
      return new_tensor(size, type, d, nullptr, capacity);  // as empty_memory_format
  }
  c10::DeviceIndex saved = current_device();
  set_current_device(d);
  at::Tensor t = at::detail::empty_strided_generic(
      size, stride, tpu_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), c10::dtype_or_default(dtype));
  set_current_device(saved);
  return t;
}

at::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                      std::optional<int64_t> offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, offset);
}

at::Tensor view(const at::Tensor& self, c10::IntArrayRef size) { return at::native::view(self, size); }

at::Tensor reshape_alias(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

at::Tensor unfold(const at::Tensor& self, int64_t dim, int64_t size, int64_t step) {
  return at::native::unfold(self, dim, size, step);
}

// Grows the storage when needed (keeping its bytes), then sets contiguous sizes.
const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size, std::optional<at::MemoryFormat>) {
  int64_t numel = c10::multiply_integers(size);
  int64_t needed = (numel + self.storage_offset()) * static_cast<int64_t>(self.element_size());
  if (numel > 0 && needed > static_cast<int64_t>(self.storage().nbytes())) {
    // An empty storage sized inside a graph with symbolic sizes (an out=
    // tensor of arange): its buckets' capacity (Engine::graph_capacity).
    if (self.storage().nbytes() == 0 && self.storage_offset() == 0) {
      std::vector<int64_t> sizes(size.begin(), size.end());
      if (const int64_t capacity = Engine::get().graph_capacity(to_hlo(self.scalar_type()), sizes))
        needed = capacity * static_cast<int64_t>(self.element_size());
    }
    resize_storage(self.storage(), needed, to_hlo(self.scalar_type()));
  }
  self.unsafeGetTensorImpl()->set_sizes_contiguous(size);
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source, int64_t offset, c10::IntArrayRef size,
                        c10::IntArrayRef stride) {
  self.unsafeGetTensorImpl()->set_storage_keep_dtype(std::move(source));
  self.unsafeGetTensorImpl()->set_sizes_and_strides(size, stride, offset);
  return self;
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes()) / static_cast<int64_t>(self.element_size());
  return set_storage(self, std::move(source), 0, {n}, {1});
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& src) {
  return set_storage(self, src.storage(), src.storage_offset(), src.sizes(), src.strides());
}

// May `self` take `from`'s data by `self.data = from`? TensorImpl's own rule
// knows only the built-in dense backends, so CPU <-> tpu would be "no" and
// nn.Module.to("tpu") would make new Parameters, untying shared weights.
// Dense CPU and dense tpu tensors are compatible, as CPU and CUDA are.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](const at::Tensor& t) {
    c10::DispatchKeySet ks = t.key_set();
    return ks.has(c10::DispatchKey::Dense) && t.layout() == at::kStrided &&
           (ks.has_backend(c10::BackendComponent::CPUBit) || ks.has_backend(c10::BackendComponent::PrivateUse1Bit));
  };
  return (dense(self) && dense(from)) || self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

const engine::OpDef& op_def(const char* name) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::unique_ptr<engine::OpDef>> defs;
  std::lock_guard<std::mutex> g(mu);
  auto& d = defs[name];
  if (!d) {
    const lowering::Entry* entry = lowering::find_entry(name);
    TORCH_INTERNAL_ASSERT(entry, "missing lowering ", name);
    d = std::make_unique<engine::OpDef>(name, entry->fn);
    d->shape_generic = entry->traits.shape_generic;
    Engine::get().register_op(d.get());
  }
  return *d;
}

// Runs a one-tensor lowering (clone, copy) through the engine; returns its
// fresh results.
c10::SmallVector<at::Tensor, 4> run_simple(const char* name, const std::vector<at::Tensor>& inputs,
                                           const at::Tensor* target) {
  PooledCall pooled;
  OpCall& call = *pooled;
  call.op = &op_def(name);
  call.device = inputs[0].device().index();
  call.fusable = true;
  PooledCall::size_args(call, inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    call.args[i].kind = Kind::Tensor;
    set_ref(call.args[i].tensor, inputs[i]);
  }
  if (target) PooledCall::add_target(call, *target);
  return fresh_tensors(call, Engine::get().run(call));
}

}  // namespace

at::Tensor apply_bits(const at::Tensor& t, bool conj, bool neg) {
  at::Tensor r = t;
  for (const char* name : {conj ? "aten::_conj_physical" : nullptr, neg ? "aten::neg" : nullptr}) {
    if (!name || r.numel() == 0) continue;
    r = run_simple(name, {r}, nullptr)[0];
  }
  if (r.is_same(t)) r = new_tensor(t.sizes(), t.scalar_type(), t.device().index());  // empty
  return r;
}

namespace {

// `src`'s elements, a row-major run at `offset` of `slot`'s storage, as a
// CPU tensor of src's sizes. A storage larger than the run (a part of it, or
// a bucketed result's capacity) is read whole and sliced on the host.
at::Tensor download_run(Slot& slot, const at::Tensor& src, int64_t offset) {
  at::Tensor out = at::empty(src.sizes(), src.options().device(at::kCPU));
  if (out.numel() == 0) return out;
  Engine::get().ensure_buffer(slot, to_hlo(src.scalar_type()));
  if (static_cast<int64_t>(slot.nbytes) == static_cast<int64_t>(out.nbytes())) {
    Engine::get().download(slot, out.data_ptr());
    return out;
  }
  at::Tensor host = at::empty({static_cast<int64_t>(slot.nbytes) / src.element_size()}, out.options());
  Engine::get().download(slot, host.data_ptr());
  return host.narrow(0, offset, src.numel()).view(src.sizes());
}

// The bytes of a tpu tensor as a contiguous CPU tensor of the same dtype.
at::Tensor to_cpu(const at::Tensor& src) {
  engine::ViewSpec v = view_of(src);
  Slot* slot = slot_of(src);
  const int64_t storage_numel = static_cast<int64_t>(slot->nbytes) / src.element_size();
  at::Tensor out;
  // A contiguous part of a storage of up to 64 MiB (a narrowed nonzero or
  // unique result, a row): read the whole storage and slice it on the host,
  // so no copy program is compiled per view size (per data-dependent count).
  if (src.numel() > 0 && !v.covers(storage_numel) && v.is_contiguous() && v.offset + v.numel() <= storage_numel &&
      slot->nbytes <= (int64_t{64} << 20))
    return download_run(*slot, src, v.offset);
  if (v.covers(storage_numel)) {
    out = download_run(*slot, src, 0);
  } else {
    at::Tensor whole = run_simple("aten::clone", {src}, nullptr)[0];
    out = download_run(*slot_of(whole), src, 0);
  }
  // Lazy conjugate/negative views keep their bit: the CPU resolves it.
  if (src.is_conj()) out = out.conj();
  if (src.is_neg()) out = out._neg_view();
  return out;
}

// The pinned block that holds all of a dense CPU tensor's bytes, or null.
engine::HostBlockPtr pinned_block_of(const at::Tensor& t) {
  if (!t.is_cpu() || !t.is_contiguous() || t.is_conj() || t.is_neg()) return nullptr;
  engine::HostBlockPtr block = engine::HostMemory::find(t.data_ptr());
  if (!block) return nullptr;
  auto begin = static_cast<const char*>(t.data_ptr()), end = begin + t.nbytes();
  return end <= static_cast<const char*>(block->data) + block->bytes ? block : nullptr;
}

// non_blocking=True between a tpu tensor and pinned host memory, as CUDA
// does it: the copy is enqueued and the call returns; the data is valid once
// a stream or event synchronises (or at any sync point). Returns false for
// what needs a blocking copy (pageable memory, a dtype change, a partial
// storage on the host-to-device side), which the caller then does.
bool copy_non_blocking(const at::Tensor& self, const at::Tensor& dst) {
  if (self.scalar_type() != dst.scalar_type() || self.sizes() != dst.sizes() || self.is_conj() || self.is_neg() ||
      dst.is_conj() || dst.is_neg())
    return false;
  const hlo::DType dtype = to_hlo(dst.scalar_type());
  if (dst.is_privateuseone()) {  // host -> device
    engine::HostBlockPtr block = pinned_block_of(self);
    Slot* slot = slot_of(dst);
    if (!block || !dst.is_contiguous() || dst.storage_offset() != 0 ||
        static_cast<int64_t>(dst.nbytes()) != static_cast<int64_t>(slot->nbytes))
      return false;
    Engine::get().upload_async(*slot, self.data_ptr(), dtype, std::move(block));
    return true;
  }
  engine::HostBlockPtr block = pinned_block_of(dst);  // device -> host
  if (!block) return false;
  at::Tensor src = self;
  Slot* slot = slot_of(src);
  if (!view_of(src).covers(static_cast<int64_t>(slot->nbytes) / src.element_size()) ||
      static_cast<int64_t>(src.nbytes()) != static_cast<int64_t>(slot->nbytes)) {
    src = run_simple("aten::clone", {src}, nullptr)[0];
    slot = slot_of(src);
    if (static_cast<int64_t>(slot->nbytes) != static_cast<int64_t>(dst.nbytes())) return false;  // bucketed
  }
  Engine::get().ensure_buffer(*slot, dtype);
  Engine::get().download_async(*slot, dst.data_ptr(), std::move(block));
  return true;
}

// A new storage that a host upload fills whole (x.to("tpu") makes one) takes
// the capacity the engine asks for when the upload's sizes change from call
// to call (Engine::upload_capacity): the storage grows before anyone saw its
// data, the tensor keeps its sizes, and its elements come first, then
// zeros, as in a bucketed result's storage. Returns the host data for the
// storage (padded when it grew).
at::Tensor fit_upload(const at::Tensor& dst, const at::Tensor& host) {
  const c10::Storage& storage = dst.storage();
  Slot* slot = slot_of(dst);
  if (!dst.is_contiguous() || dst.storage_offset() != 0 || storage.use_count() != 1 || slot->has_buffer() ||
      slot->region_index() >= 0)
    return host;
  std::vector<int64_t> sizes(dst.sizes().begin(), dst.sizes().end());
  const int64_t capacity = Engine::get().upload_capacity(to_hlo(dst.scalar_type()), sizes);
  if (capacity == 0) return host;
  const size_t nbytes = static_cast<size_t>(capacity) * dst.element_size();
  c10::DeviceIndex saved = current_device();
  set_current_device(dst.device().index());
  c10::DataPtr grown = tpu_allocator()->allocate(nbytes);
  set_current_device(saved);
  c10::Storage(storage).set_data_ptr_noswap(std::move(grown));
  c10::Storage(storage).set_nbytes(nbytes);
  at::Tensor padded = at::zeros({capacity}, host.options());
  padded.narrow(0, 0, host.numel()).copy_(host.reshape(-1));
  return padded;
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  return translate_errors("aten::_copy_from", [&] {
    if (dst.numel() == 0) return dst;
    if (non_blocking && self.is_privateuseone() != dst.is_privateuseone() && copy_non_blocking(self, dst)) return dst;
    if (self.is_privateuseone() && dst.is_privateuseone()) {
      // Raw values move; conjugate/negative bits that differ between self
      // and dst are applied on the way (both are involutions).
      bool conj = self.is_conj() != dst.is_conj(), neg = self.is_neg() != dst.is_neg();
      if (self.device() == dst.device()) {
        at::Tensor src = conj || neg ? apply_bits(self, conj, neg) : self;
        run_simple("aten::copy", {dst, src}, &dst);
        return dst;
      }
      at::Tensor moved = to_cpu(self).resolve_conj().resolve_neg();
      if (dst.is_conj()) moved = moved.conj().resolve_conj();
      if (dst.is_neg()) moved = moved.neg();
      run_simple("aten::copy", {dst, moved.to(dst.device())}, &dst);
      return dst;
    }
    if (dst.is_privateuseone()) {  // host -> device
      at::Tensor host = self.resolve_conj().resolve_neg();
      if (dst.is_conj()) host = host.conj().resolve_conj();
      if (dst.is_neg()) host = host.neg();
      host = host.to(dst.scalar_type()).expand(dst.sizes()).contiguous();
      Slot* slot = slot_of(dst);
      if (view_of(dst).covers(static_cast<int64_t>(slot->nbytes) / dst.element_size())) {
        host = fit_upload(dst, host);
        slot = slot_of(dst);
        Engine::get().upload(*slot, host.data_ptr(), to_hlo(dst.scalar_type()));
        return dst;
      }
      at::Tensor staged = new_tensor(dst.sizes(), dst.scalar_type(), dst.device().index());
      Engine::get().upload(*slot_of(staged), host.data_ptr(), to_hlo(dst.scalar_type()));
      run_simple("aten::copy", {dst, staged}, &dst);
      return dst;
    }
    // device -> host
    at::Tensor host = to_cpu(self);
    const_cast<at::Tensor&>(dst).copy_(host);
    return dst;
  });
}

// x.to(dtype) and x.to(same device): one fresh contiguous result, so shape
// buckets may run it (a growing mask's .long() then keeps one program per
// bucket). Anything else (another device or layout, pinned memory, a
// strided result that preserve_format keeps, conjugate or negative bits, a
// complex value losing its imaginary part, no elements) goes the composite
// way: empty_like and copy_.
at::Tensor to_copy(const at::Tensor& self, std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                   std::optional<at::Device> device, std::optional<bool> pin_memory, bool non_blocking,
                   std::optional<at::MemoryFormat> memory_format) {
  const at::ScalarType to = dtype.value_or(self.scalar_type());
  const bool contiguous_result =
      memory_format == at::MemoryFormat::Contiguous ||
      ((!memory_format || *memory_format == at::MemoryFormat::Preserve) && self.is_contiguous());
  const bool here = self.is_privateuseone() && (!device || *device == self.device()) &&
                    (!layout || *layout == at::kStrided) && !pin_memory.value_or(false) && contiguous_result &&
                    !self.is_conj() && !self.is_neg() && self.numel() > 0 &&
                    !(at::isComplexType(self.scalar_type()) && !at::isComplexType(to));
  if (!here) return at::native::_to_copy(self, dtype, layout, device, pin_memory, non_blocking, memory_format);
  return translate_errors("aten::_to_copy", [&] {
    PooledCall pooled;
    OpCall& call = *pooled;
    call.op = &op_def("aten::_to_copy");
    call.device = self.device().index();
    call.fusable = true;
    PooledCall::size_args(call, 2);
    call.args[0].kind = Kind::Tensor;
    set_ref(call.args[0].tensor, self);
    call.args[1].kind = Kind::DType;
    call.args[1].i = static_cast<int64_t>(to_hlo(to));
    return fresh_tensors(call, Engine::get().run(call))[0];
  });
}

// copy_ into a lazy conjugate/negative view writes the raw values of its
// storage: through the plain view, of src with the same bits applied. The
// default copy_ would call _copy_from, whose schema does not mark `dst` as
// written, so the Conjugate/Negative fallbacks would hand it a clone and the
// write would be lost.
at::Tensor& copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  if (!self.is_same(src)) at::assert_no_internal_overlap(self);  // as CPU's copy kernel
  if (!self.is_conj() && !self.is_neg()) return at::native::copy_(self, src, non_blocking);
  at::Tensor raw = self, from = src;
  if (self.is_conj()) raw = raw.conj(), from = from.conj();
  if (self.is_neg()) raw = raw._neg_view(), from = from._neg_view();
  raw.copy_(from, non_blocking);
  return self;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) const_cast<at::Tensor&>(dst).resize_(self.sizes());
  return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  return translate_errors("aten::_local_scalar_dense", [&] { return to_cpu(self).item(); });
}

// scaled_dot_product_attention asks which fused kernel to use; the math
// path decomposes into matmul, softmax and dropout, which are all lowered
// (and differentiable), so XLA sees and fuses the whole attention.
int64_t fused_sdp_choice(const at::Tensor&, const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                         double, bool, std::optional<double>, bool) {
  return 0;  // sdp::SDPBackend::math
}

}  // namespace

void resize_storage(const c10::Storage& storage, int64_t nbytes, hlo::DType dtype) {
  TORCH_CHECK(nbytes >= 0, "resize_: the new size must be non-negative, got ", nbytes);
  TORCH_CHECK(storage.resizable(), "Trying to resize storage that is not resizable");
  const int64_t old_bytes = static_cast<int64_t>(storage.nbytes());
  if (nbytes == old_bytes) return;
  const int64_t keep = std::min(old_bytes, nbytes);
  Slot* old = static_cast<Slot*>(storage.data_ptr().get_context());
  std::vector<uint8_t> bytes;
  if (keep > 0 && old && Engine::get().has_data(*old)) {
    bytes.assign(std::max(old_bytes, nbytes), 0);
    Engine::get().download(*old, bytes.data());
    bytes.resize(nbytes);
    std::fill(bytes.begin() + keep, bytes.end(), 0);
  }
  c10::DeviceIndex saved = current_device();
  set_current_device(storage.device().index());
  c10::DataPtr fresh = tpu_allocator()->allocate(nbytes);
  set_current_device(saved);
  if (!bytes.empty()) {
    if (nbytes % hlo::byte_size(dtype) != 0) dtype = hlo::DType::U8;
    Engine::get().upload(*static_cast<Slot*>(fresh.get_context()), bytes.data(), dtype);
  }
  c10::Storage(storage).set_data_ptr_noswap(std::move(fresh));
  c10::Storage(storage).set_nbytes(nbytes);
}

}  // namespace torch_pjrt::glue

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace torch_pjrt::glue;
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("as_strided", as_strided);
  m.impl("view", view);
  // Metadata-only views that reinterpret a complex storage as (real, imag)
  // pairs and back; the engine re-types a storage's buffer when it is read
  // with another dtype.
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
  m.impl("_reshape_alias", reshape_alias);
  m.impl("unfold", unfold);
  m.impl("resize_", resize_);
  m.impl("set_.source_Storage_storage_offset", set_storage);
  m.impl("set_.source_Storage", set_source_storage);
  m.impl("set_.source_Tensor", set_source_tensor);
  m.impl("_copy_from", copy_from);
  m.impl("_to_copy", to_copy);
  m.impl("copy_", copy_);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
  m.impl("_fused_sdp_choice", fused_sdp_choice);
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
}
