#pragma once
// Shared plumbing of the CPU providers: reading inputs through prepared access, writing fresh outputs,
// broadcasting index walks. No floating-point arithmetic lives here, so every provider can include it
// whatever its numerical policy.

#include <fmt/format.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "pact/core/tensor.hpp"
#include "pact/kernels/annotate.hpp"
#include "pact/kernels/cpu/parallel.hpp"
#include "pact/kernels/guards.hpp"
#include "pact/kernels/spatial.hpp"
#include "pact/ops/op_table.hpp"

namespace pact::kernels::cpu {

/// Prepared host read access to a kernel operand: a dtype other than T is dtype_mismatch, and a failed
/// preparation keeps its code, both naming the op and the operand.
template <class T>
PreparedHostRead<T> prepare_read(const TensorView& view, std::string_view op, std::string_view operand) {
  hit(kGuardPreparedLayout);
  if (view.dtype() != dtype_of_v<T>) {
    throw_error(
        ErrorCode::dtype_mismatch, std::string(op),
        fmt::format("operand '{}' is {}; expected {}", operand, dtype_name(view.dtype()), dtype_name(dtype_of_v<T>)));
  }
  auto prepared = TensorView(view).prepare_host<T>();
  if (!prepared) {
    Error e = std::move(prepared).error().error;
    throw_error(e.code(), std::string(op), fmt::format("operand '{}': {}", operand, e.what()), e.span());
  }
  return std::move(prepared).value();
}

/// Copies of at least this many elements are shared among the threads (gather_shared, copy_shared).
inline constexpr std::int64_t kShareCopyElements = std::int64_t{1} << 16;

/// The elements of a strided view, in logical order, into dst: a large view (64K elements or more) gathered
/// by the threads together, by ranges of its outermost plan dimension longer than one (those before it
/// have one index), each range a plan of its own (the same dimensions, that one shortened) gathered into
/// its part of dst: the elements of indices [b, e) there are elements [b inner, e inner) of the logical
/// order. A permuted activation (ConvNeXt's channels-last layer norms read NCHW as NHWC, 1.2 MB) took
/// 0.32-0.35 ms a call on one thread and as long on two; shared, 0.23-0.24 on two (its layer scales, a
/// product with such a view, 0.29-0.30 -> 0.23-0.26; Intel Xeon, minimum per node over four interleaved
/// runs). A copy, so the result does not depend on the thread count.
template <class T>
void gather_shared(const PreparedStridedRead<T>& strided, T* dst) {
  const StridedPlan& plan = strided.plan();
  int d = 0;
  while (d + 1 < plan.rank && plan.extent[static_cast<std::size_t>(d)] == 1) ++d;
  const auto k = static_cast<std::size_t>(d);
  const std::int64_t outer = plan.rank > 0 ? plan.extent[k] : 0;
  parallel_ranges(outer, plan.count >= kShareCopyElements, [&](std::int64_t b, std::int64_t e) {
    if (b == 0 && e == outer) {
      strided.gather(dst);
      return;
    }
    StridedPlan part = plan;
    const std::int64_t inner = plan.count / outer;
    part.extent[k] = e - b;
    part.wrap[k] = part.extent[k] * part.stride[k];
    part.count = (e - b) * inner;
    gather_strided(strided.unsafe_base() + b * plan.stride[k], part, dst + b * inner);
  });
}

/// n contiguous elements from src to dst, shared among the threads from kShareCopyElements on.
template <class T>
void copy_shared(const T* src, std::int64_t n, T* dst) {
  parallel_ranges(n, n >= kShareCopyElements,
                  [&](std::int64_t b, std::int64_t e) { std::copy(src + b, src + e, dst + b); });
}

/// Every element of prepared read access, in logical order, into dst (gather_shared or copy_shared).
template <class T>
void read_shared(const PreparedHostRead<T>& prepared, T* dst) {
  if (const auto* c = std::get_if<PreparedContiguousRead<T>>(&prepared))
    copy_shared(c->begin(), static_cast<std::int64_t>(c->as_span().size()), dst);
  else
    gather_shared(std::get<PreparedStridedRead<T>>(prepared), dst);
}

/// A row-major read of a view: the prepared span when the view is contiguous, otherwise one gather
/// through the prepared strided cursor into kernel scratch (not a tensor: no ledger event).
template <class T>
class Dense {
 public:
  Dense(const TensorView& view, std::string_view op, std::string_view operand) : shape_(view.shape()) {
    PreparedHostRead<T> prepared = prepare_read<T>(view, op, operand);
    if (auto* c = std::get_if<PreparedContiguousRead<T>>(&prepared)) {
      data_ = c->as_span();
      keep_.emplace(std::move(prepared));
    } else {
      const auto n = static_cast<std::size_t>(view.numel());
      scratch_ = std::make_unique<T[]>(n);  // not std::vector: Dense<bool> reads bool masks
      gather_shared(std::get<PreparedStridedRead<T>>(prepared), scratch_.get());
      data_ = std::span<const T>(scratch_.get(), n);
    }
  }
  Dense(Dense&&) = default;

  std::span<const T> span() const noexcept { return data_; }
  const T* data() const noexcept { return data_.data(); }
  const T& operator[](std::int64_t i) const noexcept { return data_[static_cast<std::size_t>(i)]; }
  const Dims& shape() const noexcept { return shape_; }
  std::int64_t size() const noexcept { return static_cast<std::int64_t>(data_.size()); }

 private:
  Dims shape_;
  std::span<const T> data_;
  std::unique_ptr<T[]> scratch_;
  std::optional<PreparedHostRead<T>> keep_;
};

/// A batch of matrices (the last two dimensions of a view; the leading ones are the batch) read in place
/// through the view's own strides, so a permuted or sliced view reaches a GEMM without a gather. Matrix
/// b starts at base(b); element (i, j) of it is at base(b) + i * row_stride() + j * col_stride(). Views
/// with a negative stride or a rank below 2 are gathered once into scratch (Dense) instead.
template <class T>
class InPlaceMatrices {
 public:
  InPlaceMatrices(const TensorView& view, std::string_view op, std::string_view operand) {
    const Dims strides = view.strides(), shape = view.shape();
    bool in_place = shape.size() >= 2;
    for (int d = 0; d < strides.size(); ++d) in_place = in_place && strides[d] >= 0;
    if (in_place) {
      PreparedHostRead<T> prepared = prepare_read<T>(view, op, operand);
      if (auto* c = std::get_if<PreparedContiguousRead<T>>(&prepared))
        base_ = c->begin();
      else
        base_ = std::get<PreparedStridedRead<T>>(prepared).unsafe_base();
      keep_.emplace(std::move(prepared));
      set(shape, strides);
    } else {
      dense_.emplace(view, op, operand);
      base_ = dense_->data();
      set(shape, contiguous_strides(shape));
    }
  }
  /// The first element of matrix b (b in [0, batch())).
  const T* base(std::int64_t b) const noexcept {
    std::int64_t offset = 0;
    for (int d = batch_shape_.size() - 1; d >= 0; --d) {
      offset += (b % batch_shape_[d]) * batch_strides_[d];
      b /= batch_shape_[d];
    }
    return base_ + offset;
  }
  std::int64_t batch() const noexcept { return batch_; }
  std::int64_t row_stride() const noexcept { return row_stride_; }
  std::int64_t col_stride() const noexcept { return col_stride_; }

 private:
  void set(const Dims& shape, const Dims& strides) {
    const int r = shape.size();
    for (int d = 0; d + 2 < r; ++d) {
      batch_shape_.push_back(shape[d]);
      batch_strides_.push_back(strides[d]);
      batch_ *= shape[d];
    }
    row_stride_ = r >= 2 ? strides[r - 2] : 0;
    col_stride_ = r >= 1 ? strides[r - 1] : 1;
  }
  const T* base_ = nullptr;
  Dims batch_shape_, batch_strides_;
  std::int64_t batch_ = 1, row_stride_ = 0, col_stride_ = 1;
  std::optional<PreparedHostRead<T>> keep_;
  std::optional<Dense<T>> dense_;
};

/// A fresh contiguous cpu output (one OperationOutput allocation) with write access to its elements.
template <class T>
class Out {
 public:
  explicit Out(const Dims& shape, bool zero = false)
      : tensor_(zero ? Tensor::zeros(shape, dtype_of_v<T>) : Tensor::empty(shape, dtype_of_v<T>)),
        prepared_(prepare(tensor_)),
        data_(std::get<PreparedContiguousWrite<T>>(prepared_).as_span()) {}
  std::span<T> span() const noexcept { return data_; }
  T* data() const noexcept { return data_.data(); }
  T& operator[](std::int64_t i) const noexcept { return data_[static_cast<std::size_t>(i)]; }
  std::int64_t size() const noexcept { return static_cast<std::int64_t>(data_.size()); }
  /// Releases write access and returns the owner.
  Tensor finish() && {
    { PreparedHostWrite<T> released = std::move(prepared_); }  // the moved-to object ends the borrow
    return std::move(tensor_);
  }

 private:
  static PreparedHostWrite<T> prepare(Tensor& t) { return std::move(t.prepare_host_mut<T>()).value(); }
  Tensor tensor_;
  PreparedHostWrite<T> prepared_;
  std::span<T> data_;
};

/// Row-major strides of a shape, with 0 for the dimensions a smaller broadcast operand lacks or has as 1.
inline Dims broadcast_strides(const Dims& in, const Dims& out) {
  Dims strides;
  const Dims contiguous = contiguous_strides(in);
  for (int i = 0; i < out.size(); ++i) {
    const int j = i - (out.size() - in.size());
    strides.push_back(j >= 0 && in[j] != 1 ? contiguous[j] : 0);
  }
  return strides;
}

/// Calls f(out_index, offset_a, offset_b) for every element of `out` in row-major order, with the
/// row-major offsets of the broadcast operands a and b.
template <class F>
void for_each_broadcast(const Dims& out, const Dims& a, const Dims& b, F&& f) {
  const Dims sa = broadcast_strides(a, out), sb = broadcast_strides(b, out);
  const std::int64_t n = ops::numel(out);
  std::array<std::int64_t, kMaxRank> coord{};
  std::int64_t oa = 0, ob = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    f(i, oa, ob);
    for (int d = out.size() - 1; d >= 0; --d) {
      auto k = static_cast<std::size_t>(d);
      oa += sa[d];
      ob += sb[d];
      if (++coord[k] < out[d]) break;
      oa -= sa[d] * out[d];
      ob -= sb[d] * out[d];
      coord[k] = 0;
    }
  }
}

/// The outer/axis/inner decomposition of a shape around one dimension: element (o, k, i) is at
/// (o * axis + k) * inner + i.
struct AxisSplit {
  std::int64_t outer = 1, axis = 1, inner = 1;
};
inline AxisSplit split_at(const Dims& shape, int dim) {
  AxisSplit s;
  for (int d = 0; d < shape.size(); ++d) {
    if (d < dim)
      s.outer *= shape[d];
    else if (d == dim)
      s.axis = shape[d];
    else
      s.inner *= shape[d];
  }
  return s;
}

/// A deterministic per-element uniform in [0, 1) from a seed and an element index (splitmix64), so
/// dropout masks do not depend on thread count or traversal order.
inline double uniform01(std::uint64_t seed, std::uint64_t index) {
  std::uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
}

// Note [Live attention columns]
// Attention under a boolean mask needs only the key columns some row attends to: a KV cache planned at its
// full capacity (Note [Decoder step graph] in pact/llm/decoder.cpp) is read, widened and scored up to its
// filled part. The columns cut are masked in every row, so they would add exp(-inf) = 0 to every softmax:
// the result is the same. Returns scaled_dot_product_attention's operands (query, key, value, mask) with
// key, value and mask cut to one past the last column any row attends to (at least one), or nullopt when
// nothing would be cut (no boolean mask, a mask that broadcasts along the columns, every column live).
inline std::optional<std::vector<TensorView>> attention_live_cut(std::span<const TensorView> in) {
  if (in.size() != 4 || in[3].dtype() != DType::boolean) return std::nullopt;
  const int r = in[1].rank(), mr = in[3].rank();
  const std::int64_t s = in[1].shape()[r - 2];
  if (mr == 0 || in[3].shape()[mr - 1] != s || s < 2) return std::nullopt;
  const Dense<bool> mask(in[3], "scaled_dot_product_attention", "mask");
  std::int64_t live = 1;
  for (std::int64_t row = 0; row < mask.size() / s; ++row) {
    for (std::int64_t j = s - 1; j >= live; --j) {
      if (mask.data()[row * s + j]) {
        live = j + 1;
        break;
      }
    }
  }
  if (live == s) return std::nullopt;
  return std::vector<TensorView>{in[0], in[1].slice(r - 2, 0, live), in[2].slice(r - 2, 0, live),
                                 in[3].slice(mr - 1, 0, live)};
}

}  // namespace pact::kernels::cpu
