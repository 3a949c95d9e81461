#include "pact/core/tensor.hpp"

#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "pact/core/checked_math.hpp"

namespace pact {

namespace core {

void require_dtype(const char* operation, DType actual, DType wanted) {
  if (actual != wanted) {
    throw_error(ErrorCode::dtype_mismatch, operation,
                fmt::format("view holds {}, access asked for {}", dtype_name(actual), dtype_name(wanted)));
  }
}

std::optional<Error> host_refusal(const char* operation, const core::Claim& claim, const CheckedLayout& layout,
                                  DType wanted, bool write) {
  const Provider& provider = claim.root->provider();
  if (layout.dtype() != wanted) {
    return Error(ErrorCode::dtype_mismatch, operation,
                 fmt::format("view holds {}, access asked for {}", dtype_name(layout.dtype()), dtype_name(wanted)),
                 claim.identity());
  }
  if (!provider.has_bytes()) {
    return Error(ErrorCode::no_host_bytes, operation, "meta storage has geometry only", claim.identity());
  }
  if (!provider.host_accessible()) {
    return Error(ErrorCode::not_host_accessible, operation,
                 fmt::format("{} storage is not host-accessible; transfer it to cpu", provider.name()),
                 claim.identity());
  }
  if (write && !layout.is_injective()) {
    return Error(ErrorCode::not_injective, operation,
                 fmt::format("layout {} strides {} is not provably injective", layout.shape().to_string(),
                             layout.strides().to_string()),
                 claim.identity());
  }
  return std::nullopt;
}

}  // namespace core

namespace {

// Copies every element of `src` (its element 0 at s) into `dst` (its element 0 at d) in logical order, both
// host memory. One contiguous pair is one memmove.
void host_copy(const std::byte* s, const CheckedLayout& src, std::byte* d, const CheckedLayout& dst) {
  const auto elem = static_cast<std::int64_t>(dtype_size(src.dtype()));
  if (src.is_contiguous() && dst.is_contiguous()) {
    std::memmove(d, s, static_cast<std::size_t>(src.numel() * elem));
    return;
  }
  const int rank = src.rank();
  std::array<std::int64_t, kMaxRank> coord{};
  std::int64_t so = 0, dof = 0;
  for (std::int64_t n = src.numel(); n > 0; --n) {
    std::memcpy(d + dof * elem, s + so * elem, static_cast<std::size_t>(elem));
    for (int k = rank - 1; k >= 0; --k) {
      auto i = static_cast<std::size_t>(k);
      so += src.strides()[k];
      dof += dst.strides()[k];
      if (++coord[i] < src.shape()[k]) break;
      so -= src.shape()[k] * src.strides()[k];
      dof -= dst.shape()[k] * dst.strides()[k];
      coord[i] = 0;
    }
  }
}

// Copies every element of `src` into `dst` in logical order (same shape and dtype), through each
// provider's copy engine. Host providers' bytes are copied here; a device provider's move through its
// driver: a contiguous pair on one device is one device copy, anything else is staged through host
// memory over the layout's byte envelope (a strided destination's envelope is read first, so the bytes
// between its elements are kept).
void copy_elements(const core::Claim& src_claim, const CheckedLayout& src, const core::Claim& dst_claim,
                   const CheckedLayout& dst) {
  if (src.numel() == 0) return;
  Provider& sp = src_claim.root->provider();
  Provider& dp = dst_claim.root->provider();
  const ProviderAllocation& sa = src_claim.root->allocation();
  const ProviderAllocation& da = dst_claim.root->allocation();
  if (sp.host_copy_engine() && dp.host_copy_engine()) {
    host_copy(sp.unsafe_copy_base(sa) + src_claim.begin + src.byte_offset(), src,
              dp.unsafe_copy_base(da) + dst_claim.begin + dst.byte_offset(), dst);
    return;
  }
  const std::uint64_t bytes = static_cast<std::uint64_t>(src.numel()) * dtype_size(src.dtype());
  if (&sp == &dp && src.is_contiguous() && dst.is_contiguous()) {
    dp.copy_within(da, dst_claim.begin + dst.byte_offset(), sa, src_claim.begin + src.byte_offset(), bytes);
    return;
  }
  std::vector<std::byte> src_stage;
  const std::byte* s = nullptr;
  if (sp.host_copy_engine()) {
    s = sp.unsafe_copy_base(sa) + src_claim.begin + src.byte_offset();
  } else {
    src_stage.resize(src.envelope_end() - src.envelope_begin());
    sp.copy_out(src_stage.data(), sa, src_claim.begin + src.envelope_begin(), src_stage.size());
    s = src_stage.data() + (src.byte_offset() - src.envelope_begin());
  }
  if (dp.host_copy_engine()) {
    host_copy(s, src, dp.unsafe_copy_base(da) + dst_claim.begin + dst.byte_offset(), dst);
    return;
  }
  std::vector<std::byte> dst_stage(dst.envelope_end() - dst.envelope_begin());
  if (!dst.is_contiguous()) dp.copy_out(dst_stage.data(), da, dst_claim.begin + dst.envelope_begin(), dst_stage.size());
  host_copy(s, src, dst_stage.data() + (dst.byte_offset() - dst.envelope_begin()), dst);
  dp.copy_in(da, dst_claim.begin + dst.envelope_begin(), dst_stage.data(), dst_stage.size());
}

LayoutRequest request_of(const CheckedLayout& layout) {
  return LayoutRequest{layout.dtype(), layout.shape(), layout.strides(), layout.byte_offset()};
}

// The sealed scalar-pair rule for reinterpretation (see TensorView::reinterpret_view).
LayoutRequest reinterpret_request(const CheckedLayout& from, DType to, const core::Claim& claim) {
  LayoutRequest r = request_of(from);
  const DType f = from.dtype();
  auto fail = [&](const std::string& why) -> LayoutRequest {
    throw_error(ErrorCode::reinterpret_invalid, "tensor.reinterpret",
                fmt::format("{} -> {}: {}", dtype_name(f), dtype_name(to), why), claim.identity());
  };
  auto pair = [&](DType a, DType b) { return (f == a && to == b) || (f == b && to == a); };
  r.dtype = to;
  if (f == to || pair(DType::f32, DType::i32) || pair(DType::f64, DType::i64)) return r;
  if (f == DType::c64 && to == DType::f32) {
    if (r.shape.size() == kMaxRank) return fail("result would exceed the maximum rank");
    for (int d = 0; d < r.strides.size(); ++d) {
      // Strides of extent <= 1 dimensions are unconstrained by the envelope and may be huge: they are
      // irrelevant, so normalise them; other strides are bounded by the checked envelope.
      auto doubled = r.shape[d] <= 1 ? std::optional<std::int64_t>(0) : core::checked_mul(r.strides[d], 2);
      if (!doubled) return fail(fmt::format("stride of dimension {} overflows when doubled", d));
      r.strides[d] = *doubled;
    }
    r.shape.push_back(2);
    r.strides.push_back(1);
    return r;
  }
  if (f == DType::f32 && to == DType::c64) {
    const int last = r.shape.size() - 1;
    if (last < 0 || r.shape[last] != 2 || r.strides[last] != 1) {
      return fail("needs a trailing dimension of extent 2 and stride 1");
    }
    Dims shape, strides;
    for (int d = 0; d < last; ++d) {
      if (r.shape[d] > 1 && r.strides[d] % 2 != 0) return fail(fmt::format("stride of dimension {} is odd", d));
      shape.push_back(r.shape[d]);
      strides.push_back(r.strides[d] / 2);
    }
    r.shape = shape;
    r.strides = strides;
    return r;
  }
  return fail("not a sealed scalar pair (f32<->i32, f64<->i64, c64<->f32)");
}

void write_scalar(DType dtype, double value, std::byte* dst) {
  if (dtype == DType::c64) {
    std::complex<float> c(static_cast<float>(value), 0.0f);
    std::memcpy(dst, &c, sizeof c);
    return;
  }
  convert_element(DType::f64, reinterpret_cast<const std::byte*>(&value), dtype, dst);
}

// Byte offset of `index` from element [0...], after checking it (O(rank)).
std::int64_t checked_index_offset(const char* operation, const CheckedLayout& layout, const Dims& index,
                                  const core::Claim& claim) {
  if (index.size() != layout.rank()) {
    throw_error(
        ErrorCode::index_out_of_range, operation,
        fmt::format("index {} has {} entries for a rank-{} view", index.to_string(), index.size(), layout.rank()),
        claim.identity());
  }
  std::int64_t offset = 0;
  for (int d = 0; d < index.size(); ++d) {
    if (index[d] < 0 || index[d] >= layout.shape()[d]) {
      throw_error(ErrorCode::index_out_of_range, operation,
                  fmt::format("index {} outside shape {}", index.to_string(), layout.shape().to_string()),
                  claim.identity());
    }
    offset += index[d] * layout.strides()[d];  // within the checked envelope: cannot overflow
  }
  return layout.byte_offset() + offset * static_cast<std::int64_t>(dtype_size(layout.dtype()));
}

std::byte* map_claim(const char* operation, const core::Claim& claim) {
  Provider& provider = claim.root->provider();
  if (!provider.has_bytes()) {
    throw_error(ErrorCode::no_host_bytes, operation, "meta storage has geometry only", claim.identity());
  }
  if (!provider.host_accessible()) {
    throw_error(ErrorCode::not_host_accessible, operation,
                fmt::format("{} storage is not host-accessible; transfer it to cpu", provider.name()),
                claim.identity());
  }
  std::byte* root = provider.map_host(claim.root->allocation());
  provider.synchronize(claim.root->allocation());
  return root + claim.begin;
}

void require_same_geometry(const char* operation, const CheckedLayout& a, const CheckedLayout& b) {
  if (!(a.shape() == b.shape()) || a.dtype() != b.dtype()) {
    throw_error(ErrorCode::invalid_argument, operation,
                fmt::format("source {}{} and destination {}{} differ", dtype_name(a.dtype()), a.shape().to_string(),
                            dtype_name(b.dtype()), b.shape().to_string()));
  }
}

Tensor copy_to_new(const core::Claim& claim, const CheckedLayout& layout, std::shared_ptr<Provider> provider,
                   CopyReason copy_reason, AllocationReason allocation_reason);

}  // namespace

// ---- TensorView ------------------------------------------------------------------------------------

std::uint64_t TensorView::nbytes() const noexcept {
  return static_cast<std::uint64_t>(layout_.numel()) * dtype_size(layout_.dtype());
}

SpanIdentity TensorView::span_identity() const noexcept {
  return {claim_->root->diagnostics().id, claim_->begin + layout_.envelope_begin(),
          claim_->begin + layout_.envelope_end()};
}

std::byte* TensorView::mapped_base(const char* operation) const {
  return map_claim(operation, *claim_) + layout_.byte_offset();
}

Scalar TensorView::get(const Dims& index) const {
  constexpr const char* op = "tensor.get";
  const std::int64_t offset = checked_index_offset(op, layout_, index, *claim_);
  const std::byte* p = map_claim(op, *claim_) + offset;
  Scalar s;
  s.dtype = layout_.dtype();
  switch (s.dtype) {
    case DType::c64: {
      std::complex<float> c;
      std::memcpy(&c, p, sizeof c);
      s.real = c.real();
      s.imag = c.imag();
      return s;
    }
    case DType::i64:
      std::memcpy(&s.integer, p, 8);
      break;
    case DType::i32: {
      std::int32_t v;
      std::memcpy(&v, p, 4);
      s.integer = v;
      break;
    }
    case DType::u8: {
      std::uint8_t v;
      std::memcpy(&v, p, 1);
      s.integer = v;
      break;
    }
    case DType::i8: {
      std::int8_t v;
      std::memcpy(&v, p, 1);
      s.integer = v;  // NOLINT(bugprone-signed-char-misuse): i8 is signed; the sign extension is the value
      break;
    }
    case DType::boolean: {
      std::uint8_t v;
      std::memcpy(&v, p, 1);
      s.integer = v != 0;
      break;
    }
    default:
      break;
  }
  convert_element(s.dtype, p, DType::f64, reinterpret_cast<std::byte*>(&s.real));
  return s;
}

TensorView TensorView::derive(const char* operation, const LayoutRequest& request) const {
  return TensorView(claim_, claim_->check(operation, request), borrow_);
}

TensorView TensorView::slice(int dim, std::int64_t start, std::int64_t stop, std::int64_t step) const {
  constexpr const char* op = "tensor.slice";
  if (dim < 0 || dim >= rank() || step <= 0 || start < 0 || stop < start || stop > layout_.shape()[dim]) {
    throw_error(ErrorCode::invalid_argument, op,
                fmt::format("slice dim {} [{}, {}) step {} of shape {}", dim, start, stop, step, shape().to_string()),
                claim_->identity());
  }
  LayoutRequest r = request_of(layout_);
  const std::int64_t span = stop - start;  // 0 <= span <= extent: no overflow
  r.shape[dim] = span / step + (span % step != 0 ? 1 : 0);
  // start < extent keeps this offset inside the checked envelope.
  r.byte_offset += start * layout_.strides()[dim] * static_cast<std::int64_t>(dtype_size(dtype()));
  // With two or more elements, step < extent, so stride*step is bounded by the checked extent*stride.
  r.strides[dim] = r.shape[dim] > 1 ? layout_.strides()[dim] * step : layout_.strides()[dim];
  return derive(op, r);
}

TensorView TensorView::transpose(int a, int b) const {
  constexpr const char* op = "tensor.transpose";
  if (a < 0 || b < 0 || a >= rank() || b >= rank()) {
    throw_error(ErrorCode::invalid_argument, op, fmt::format("dims {} and {} of a rank-{} view", a, b, rank()));
  }
  LayoutRequest r = request_of(layout_);
  std::swap(r.shape[a], r.shape[b]);
  std::swap(r.strides[a], r.strides[b]);
  return derive(op, r);
}

TensorView TensorView::reshape(const Dims& shape) const {
  constexpr const char* op = "tensor.reshape";
  std::optional<std::int64_t> count = 1;
  for (int d = 0; d < shape.size() && count; ++d)
    count = shape[d] < 0 ? std::nullopt : core::checked_mul(*count, shape[d]);
  if (count != numel()) {
    throw_error(ErrorCode::invalid_argument, op,
                fmt::format("shape {} does not hold the {} elements of {}", shape.to_string(), numel(),
                            this->shape().to_string()));
  }
  if (!is_contiguous()) {
    throw_error(ErrorCode::invalid_argument, op,
                fmt::format("a strided view of shape {} has no zero-copy reshape", this->shape().to_string()),
                claim_->identity());
  }
  return derive(op, LayoutRequest{dtype(), shape, contiguous_strides(shape), byte_offset()});
}

TensorView TensorView::flip(int dim) const {
  constexpr const char* op = "tensor.flip";
  if (dim < 0 || dim >= rank()) {
    throw_error(ErrorCode::invalid_argument, op, fmt::format("dim {} of a rank-{} view", dim, rank()));
  }
  LayoutRequest r = request_of(layout_);
  if (r.shape[dim] > 0) {
    r.byte_offset += (r.shape[dim] - 1) * r.strides[dim] * static_cast<std::int64_t>(dtype_size(dtype()));
  }
  r.strides[dim] = -r.strides[dim];
  return derive(op, r);
}

Expected<PreparedDevice, Returned<TensorView>> TensorView::prepare_device() && {
  try {
    Provider& provider = claim_->root->provider();
    if (!provider.device_bindable()) {
      throw_error(ErrorCode::unsupported, "tensor.prepare_device",
                  fmt::format("{} storage has no device binding", provider.name()), claim_->identity());
    }
    std::uint64_t binding = provider.bind_device(claim_->root->allocation());
    return PreparedDevice(claim_, layout_, binding, false, std::move(borrow_));
  } catch (Error& e) {
    return Unexpected(Returned<TensorView>{std::move(*this), std::move(e)});
  }
}

std::uint64_t PreparedDevice::unsafe_device_address() const noexcept {
  return binding_ + claim_->begin + layout_.byte_offset();
}

Expected<DeviceBinding, Returned<PreparedDevice>> DeviceBinding::bind(PreparedDevice&& prepared) {
  try {
    prepared.claim_->root->provider().attach(prepared.binding_);
    return DeviceBinding(std::move(prepared));
  } catch (Error& e) {
    return Unexpected(Returned<PreparedDevice>{std::move(prepared), std::move(e)});
  }
}

Tensor TensorView::duplicate() const {
  return copy_to_new(*claim_, layout_, claim_->root->provider_ptr(), CopyReason::ExplicitDuplicate,
                     AllocationReason::ExplicitDuplicateDestination);
}

Tensor TensorView::transfer_to(std::shared_ptr<Provider> provider) const {
  return copy_to_new(*claim_, layout_, std::move(provider), CopyReason::Transfer,
                     AllocationReason::TransferDestination);
}

Tensor TensorView::to_host() const { return device() == DeviceKind::cpu ? duplicate() : transfer_to(cpu_provider()); }

Tensor placed_on(Tensor t, DeviceKind device) {
  if (t.device() == device) return t;
  return t.transfer_to(provider_for(device));
}

std::vector<double> TensorView::to_doubles() const {
  const Tensor d = convert(DType::f64);
  auto prepared = d.prepare_host<double>();
  if (!prepared) throw std::move(prepared).error().error;
  const auto span = std::get<PreparedContiguousRead<double>>(prepared.value()).as_span();
  return {span.begin(), span.end()};
}

namespace {

// The conversions between floating dtypes over a contiguous source, one typed loop per pair instead of
// convert_element's two switches per element: the same values (bf16 and f16 widen exactly, narrowing rounds
// to nearest even once, as convert_element does), and a checkpoint's 125M weights convert in a tenth of the
// time. False for any other pair.
template <class S, class D, class F>
void convert_loop(const std::byte* src, std::byte* dst, std::int64_t n, F&& f) {
  const S* s = reinterpret_cast<const S*>(src);
  D* d = reinterpret_cast<D*>(dst);
  for (std::int64_t i = 0; i < n; ++i) d[i] = f(s[i]);
}

bool convert_floats(DType from, const std::byte* src, DType to, std::byte* dst, std::int64_t n) {
  if (from == DType::bf16 && to == DType::f32) {
    convert_loop<BFloat16, float>(src, dst, n, [](BFloat16 v) { return from_bf16(v); });
  } else if (from == DType::f32 && to == DType::bf16) {
    convert_loop<float, BFloat16>(src, dst, n, [](float v) { return to_bf16(v); });
  } else if (from == DType::f16 && to == DType::f32) {
    convert_loop<Half, float>(src, dst, n, [](Half v) { return from_f16(v); });
  } else if (from == DType::f32 && to == DType::f16) {
    convert_loop<float, Half>(src, dst, n, [](float v) { return to_f16(v); });
  } else if (from == DType::f32 && to == DType::f64) {
    convert_loop<float, double>(src, dst, n, [](float v) { return static_cast<double>(v); });
  } else if (from == DType::f64 && to == DType::f32) {
    convert_loop<double, float>(src, dst, n, [](double v) { return static_cast<float>(v); });
  } else {
    return false;
  }
  return true;
}

}  // namespace

Tensor TensorView::convert(DType to) const {
  constexpr const char* op = "tensor.convert";
  if (to == dtype()) return duplicate();
  const std::byte* src = map_claim(op, *claim_) + layout_.byte_offset();
  if ((to == DType::c64) != (dtype() == DType::c64)) {
    throw_error(ErrorCode::unsupported, op,
                fmt::format("no conversion {} -> {}; reinterpret c64 as f32 pairs instead", dtype_name(dtype()),
                            dtype_name(to)),
                claim_->identity());
  }
  Tensor out = Tensor::empty(shape(), to, cpu_provider());
  {
    TensorViewMut dst = out.as_view_mut();
    std::byte* d = dst.mapped_base(op);
    if (layout_.is_contiguous() && convert_floats(dtype(), src, to, d, numel())) return out;
    const auto in_size = static_cast<std::int64_t>(dtype_size(dtype()));
    const auto out_size = static_cast<std::int64_t>(dtype_size(to));
    std::int64_t n = 0;
    for_each_offset(layout_.plan(), [&](std::int64_t offset) {
      convert_element(dtype(), src + offset * in_size, to, d + (n++) * out_size);
    });
  }
  return out;
}

TensorView TensorView::reinterpret_view(DType to) const {
  return derive("tensor.reinterpret_view", reinterpret_request(layout_, to, *claim_));
}

std::string TensorView::to_string() const {
  return fmt::format("{}{} {}", dtype_name(dtype()), shape().to_string(), provider_name());
}

// ---- TensorViewMut ---------------------------------------------------------------------------------

TensorView TensorViewMut::as_view() const {
  return TensorView(claim_, layout_, core::BorrowToken(freeze_state(), core::BorrowKind::reborrow, "tensor.as_view"));
}

std::byte* TensorViewMut::mapped_base(const char* operation) const {
  return map_claim(operation, *claim_) + layout_.byte_offset();
}

Tensor TensorViewMut::duplicate() const { return as_view().duplicate(); }
Tensor TensorViewMut::transfer_to(std::shared_ptr<Provider> provider) const {
  return as_view().transfer_to(std::move(provider));
}
Tensor TensorViewMut::to_host() const { return as_view().to_host(); }

void TensorViewMut::set(const Dims& index, double value) {
  constexpr const char* op = "tensor.set";
  core::require_unfrozen(op, freeze_state());
  const std::int64_t offset = checked_index_offset(op, layout_, index, *claim_);
  write_scalar(layout_.dtype(), value, map_claim(op, *claim_) + offset);
}

void TensorViewMut::fill(double value) {
  constexpr const char* op = "tensor.fill";
  core::require_unfrozen(op, freeze_state());
  if (!layout_.is_injective()) {
    // Writing the same value twice is harmless, but a write layout must still be injective (SPEC §4).
    throw_error(ErrorCode::not_injective, op, "layout is not provably injective", claim_->identity());
  }
  std::array<std::byte, 8> bytes{};
  write_scalar(layout_.dtype(), value, bytes.data());
  const auto elem = dtype_size(layout_.dtype());
  std::byte* base = mapped_base(op);
  const auto size = static_cast<std::int64_t>(elem);
  for_each_offset(layout_.plan(), [&](std::int64_t offset) { std::memcpy(base + offset * size, bytes.data(), elem); });
}

void TensorViewMut::copy_from(const TensorView& source) {
  constexpr const char* op = "tensor.copy_from";
  core::require_unfrozen(op, freeze_state());
  require_same_geometry(op, source.layout_, layout_);
  if (!layout_.is_injective()) {
    throw_error(ErrorCode::not_injective, op, "destination layout is not provably injective", claim_->identity());
  }
  copy_elements(*source.claim_, source.layout_, *claim_, layout_);
  const bool same_provider = source.claim_->root->provider_ptr() == claim_->root->provider_ptr();
  record_copy(CopyEvent{same_provider ? CopyReason::ExplicitDuplicate : CopyReason::Transfer,
                        source.claim_->root->diagnostics().id, claim_->root->diagnostics().id, nbytes()});
}

Expected<PreparedDevice, Returned<TensorViewMut>> TensorViewMut::prepare_device_mut() && {
  try {
    core::require_unfrozen("tensor.prepare_device_mut", freeze_state());
    Provider& provider = claim_->root->provider();
    if (!provider.device_bindable()) {
      throw_error(ErrorCode::unsupported, "tensor.prepare_device_mut",
                  fmt::format("{} storage has no device binding", provider.name()), claim_->identity());
    }
    if (!layout_.is_injective()) {
      throw_error(ErrorCode::not_injective, "tensor.prepare_device_mut", "layout is not provably injective",
                  claim_->identity());
    }
    std::uint64_t binding = provider.bind_device(claim_->root->allocation());
    return PreparedDevice(claim_, layout_, binding, true, std::move(borrow_));
  } catch (Error& e) {
    return Unexpected(Returned<TensorViewMut>{std::move(*this), std::move(e)});
  }
}

TensorViewMut TensorViewMut::slice_mut(int dim, std::int64_t start, std::int64_t stop, std::int64_t step) && {
  CheckedLayout sliced = as_view().slice(dim, start, stop, step).layout_;
  TensorViewMut out(claim_, sliced, std::move(borrow_));
  out.freeze_ = freeze_;
  out.freeze_block_ = std::move(freeze_block_);
  return out;
}

Expected<TensorViewMut, Returned<TensorViewMut>> TensorViewMut::reinterpret(TensorViewMut&& view, DType to) {
  try {
    core::require_unfrozen("tensor.reinterpret_mut", view.freeze_state());
    CheckedLayout layout =
        view.claim_->check("tensor.reinterpret_mut", reinterpret_request(view.layout_, to, *view.claim_));
    if (!layout.is_injective()) {
      throw_error(ErrorCode::not_injective, "tensor.reinterpret_mut", "result layout is not provably injective",
                  view.claim_->identity());
    }
    TensorViewMut out(view.claim_, layout, std::move(view.borrow_));
    out.freeze_ = view.freeze_;
    out.freeze_block_ = std::move(view.freeze_block_);
    return out;
  } catch (Error& e) {
    return Unexpected(Returned<TensorViewMut>{std::move(view), std::move(e)});
  }
}

// ---- Tensor ----------------------------------------------------------------------------------------

Tensor Tensor::empty(const Dims& shape, DType dtype, std::shared_ptr<Provider> provider, AllocationReason reason) {
  LayoutRequest request = LayoutRequest::contiguous(dtype, shape);
  // Size the allocation with checked arithmetic before allocating.
  std::int64_t count = 1;
  for (std::int64_t e : shape) {
    auto n = e < 0 ? std::nullopt : core::checked_mul(count, e);
    if (!n) throw_error(ErrorCode::layout_overflow, "tensor.empty", fmt::format("shape {}", shape.to_string()));
    count = *n;
  }
  auto bytes = core::checked_mul(count, static_cast<std::int64_t>(dtype_size(dtype)));
  if (!bytes) throw_error(ErrorCode::layout_overflow, "tensor.empty", fmt::format("shape {}", shape.to_string()));
  Storage storage = Storage::allocate(std::move(provider), static_cast<std::uint64_t>(*bytes), reason);
  CheckedLayout layout = storage.claim_->check("tensor.empty", request);
  return Tensor(std::move(storage), layout);
}

Tensor Tensor::zeros(const Dims& shape, DType dtype, std::shared_ptr<Provider> provider) {
  Tensor t = empty(shape, dtype, std::move(provider));
  Provider& provider_ref = t.storage_.provider();
  if (provider_ref.has_bytes() && t.nbytes() > 0) {
    if (provider_ref.host_copy_engine())
      std::memset(provider_ref.unsafe_copy_base(t.storage_.claim_->root->allocation()), 0, t.nbytes());
    else
      provider_ref.clear(t.storage_.claim_->root->allocation(), 0, t.nbytes());
  }
  return t;
}

Tensor Tensor::full(const Dims& shape, DType dtype, double value, std::shared_ptr<Provider> provider) {
  Tensor t = empty(shape, dtype, std::move(provider));
  t.fill(value);
  return t;
}

Expected<Tensor, Returned<Storage>> Tensor::from_storage(Storage&& storage, const LayoutRequest& request) {
  try {
    if (storage.empty()) throw_error(ErrorCode::invalid_argument, "tensor.from_storage", "moved-from storage");
    CheckedLayout layout = storage.claim_->check("tensor.from_storage", request);
    return Tensor(std::move(storage), layout);
  } catch (Error& e) {
    return Unexpected(Returned<Storage>{std::move(storage), std::move(e)});
  }
}

TensorView Tensor::as_view() const {
  return TensorView(storage_.claim_.get(), layout_,
                    core::BorrowToken(&storage_.claim_->borrows, core::BorrowKind::shared, "tensor.as_view"));
}

TensorViewMut Tensor::as_view_mut() {
  return TensorViewMut(storage_.claim_.get(), layout_,
                       core::BorrowToken(&storage_.claim_->borrows, core::BorrowKind::exclusive, "tensor.as_view_mut"));
}

Expected<Tensor, Returned<Tensor>> Tensor::reinterpret(Tensor&& owner, DType to) {
  try {
    const core::Claim& claim = *owner.storage_.claim_;
    CheckedLayout layout = claim.check("tensor.reinterpret", reinterpret_request(owner.layout_, to, claim));
    if (!layout.is_injective()) {
      throw_error(ErrorCode::not_injective, "tensor.reinterpret", "result layout is not provably injective",
                  claim.identity());
    }
    return Tensor(std::move(owner.storage_), layout);
  } catch (Error& e) {
    return Unexpected(Returned<Tensor>{std::move(owner), std::move(e)});
  }
}

Storage Tensor::into_storage() && {
  if (!storage_.empty()) core::require_no_views("tensor.into_storage", storage_.claim_->borrows, "the tensor");
  return std::move(storage_);
}

// ---- copies ----------------------------------------------------------------------------------------

struct core::TensorAccess {
  static const core::Claim& claim(const TensorViewMut& v) { return *v.claim_; }
};

namespace {
Tensor copy_to_new(const core::Claim& claim, const CheckedLayout& layout, std::shared_ptr<Provider> provider,
                   CopyReason copy_reason, AllocationReason allocation_reason) {
  // Refuse before allocating, so a failed copy leaves no unpaired allocation event.
  if (!claim.root->provider().has_bytes() || !provider->has_bytes()) {
    throw_error(ErrorCode::no_host_bytes,
                copy_reason == CopyReason::Transfer ? "tensor.transfer_to" : "tensor.duplicate",
                "meta storage has geometry only; there are no bytes to copy", claim.identity());
  }
  Tensor out = Tensor::empty(layout.shape(), layout.dtype(), std::move(provider), allocation_reason);
  {
    TensorViewMut dst = out.as_view_mut();
    const core::Claim& dst_claim = core::TensorAccess::claim(dst);
    copy_elements(claim, layout, dst_claim, dst.layout());
    record_copy(CopyEvent{copy_reason, claim.root->diagnostics().id, dst_claim.root->diagnostics().id,
                          static_cast<std::uint64_t>(layout.numel()) * dtype_size(layout.dtype())});
  }
  return out;
}
}  // namespace

}  // namespace pact
