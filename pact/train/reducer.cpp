#include "pact/train/reducer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <variant>

namespace pact::train {

// Note [Gradient buckets]
// Data-parallel training averages every gradient over the ranks before the optimizer step, so that all
// ranks keep identical parameters. As PyTorch's DistributedDataParallel does, the gradients travel in
// buckets of a capped size, filled in reverse order of the parameters (backward finishes the last layers'
// gradients first), and a bucket's reduction starts, non-blocking, as soon as backward has finished every
// gradient in it (Tape::OnFinal), so communication overlaps the rest of backward. Buckets start in bucket
// order on every rank (a complete bucket waits for its predecessors): collectives must be issued in the
// same order everywhere. A bucket is one flat Pact tensor per dtype, prepared for host writes for the
// whole step: the gradients are copied in, the communicator reduces the bytes in place, and after the
// wait each gradient becomes its bucket slice divided by the rank count.

namespace {

constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// The bucket's flat elements as a host span, valid while `Hold` lives.
template <class T>
PreparedContiguousWrite<T> hold(Tensor& values) {
  auto prepared = values.prepare_host_mut<T>();
  if (!prepared) throw_error(ErrorCode::internal, "train.reduce", "a gradient bucket is borrowed elsewhere");
  return std::get<PreparedContiguousWrite<T>>(std::move(prepared).value());
}

// Copies `gradient`'s elements, in logical order, to `dst`.
template <class T>
void gather(const TensorView& gradient, T* dst) {
  auto prepared = TensorView(gradient).prepare_host<T>();
  if (!prepared) throw_error(ErrorCode::internal, "train.reduce", "a gradient could not be read");
  std::visit(
      [&](const auto& p) {
        using P = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<P, PreparedContiguousRead<T>>) {
          std::copy(p.begin(), p.end(), dst);
        } else {
          p.gather(dst);
        }
      },
      prepared.value());
}

// Writes `src[i] * scale` over `gradient`'s elements in logical order.
template <class T>
void scatter_scaled(Tensor& gradient, const T* src, T scale) {
  auto prepared = gradient.prepare_host_mut<T>();
  if (!prepared) throw_error(ErrorCode::internal, "train.reduce", "a gradient could not be written");
  std::visit(
      [&](const auto& p) {
        using P = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<P, PreparedContiguousWrite<T>>) {
          for (T& v : p.as_span()) v = *src++ * scale;
        } else {
          p.for_each([&](T& v) { v = *src++ * scale; });
        }
      },
      prepared.value());
}

}  // namespace

GradientReducer::GradientReducer(Communicator& comm, const std::vector<std::optional<ops::TensorType>>& entries,
                                 std::size_t bucket_bytes)
    : comm_(comm), where_(entries.size(), {kNone, kNone}), copied_(entries.size(), false) {
  // Reverse pack order; a new bucket when the dtype changes or the cap would be passed.
  for (std::size_t k = entries.size(); k-- > 0;) {
    if (!entries[k]) continue;
    const DType dtype = entries[k]->dtype;
    if (dtype != DType::f32 && dtype != DType::f64)
      throw_error(
          ErrorCode::unsupported, "train.reduce",
          fmt::format("data-parallel training reduces f32 and f64 gradients; entry {} is {}", k, dtype_name(dtype)));
    const std::int64_t n = ops::numel(entries[k]->shape);
    const auto bytes = static_cast<std::size_t>(n) * dtype_size(dtype);
    if (buckets_.empty() || buckets_.back().dtype != dtype ||
        (buckets_.back().elements > 0 &&
         static_cast<std::size_t>(buckets_.back().elements) * dtype_size(dtype) + bytes > bucket_bytes)) {
      buckets_.push_back(Bucket{dtype, {}, {}, 0, Tensor::zeros(Dims{1}, dtype), 0, nullptr, {}});
    }
    Bucket& b = buckets_.back();
    where_[k] = {buckets_.size() - 1, b.entries.size()};
    b.entries.push_back(k);
    b.offsets.push_back(b.elements);
    b.elements += n;
  }
  for (auto& b : buckets_) b.values = Tensor::zeros(Dims{std::max<std::int64_t>(b.elements, 1)}, b.dtype);
}

std::vector<std::vector<std::size_t>> GradientReducer::buckets() const {
  std::vector<std::vector<std::size_t>> out;
  for (const auto& b : buckets_) out.push_back(b.entries);
  return out;
}

double GradientReducer::calibrate(int repeats) {
  std::vector<double> times;
  for (int k = 0; k < std::max(1, repeats); ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    for (auto& b : buckets_) {
      start(b);
      b.inflight->wait();
      b.inflight.reset();
      b.lent = std::monostate{};
    }
    times.push_back(seconds_since(t0));
  }
  std::sort(times.begin(), times.end());
  blocking_seconds_ = times[times.size() / 2];
  return blocking_seconds_;
}

void GradientReducer::begin() {
  for (auto& b : buckets_) {
    b.pending = b.entries.size();
    b.inflight.reset();
  }
  std::fill(copied_.begin(), copied_.end(), false);
  next_ = 0;
  timing_ = ReductionTiming{static_cast<int>(buckets_.size()), 0, -1, 0, 0, 0, blocking_seconds_};
  began_ = std::chrono::steady_clock::now();
}

void GradientReducer::start(Bucket& b) {
  const auto bytes = static_cast<std::size_t>(b.elements) * dtype_size(b.dtype);
  std::span<std::byte> data;
  // The bucket stays borrowed for the reduction until finish() has waited for it.
  if (b.dtype == DType::f32) {
    data = std::as_writable_bytes(b.lent.emplace<PreparedContiguousWrite<float>>(hold<float>(b.values)).as_span());
  } else {
    data = std::as_writable_bytes(b.lent.emplace<PreparedContiguousWrite<double>>(hold<double>(b.values)).as_span());
  }
  if (timing_.first_start_seconds < 0) timing_.first_start_seconds = seconds_since(began_);
  b.inflight = comm_.start_sum(data.first(bytes), b.dtype);
}

void GradientReducer::start_ready() {
  while (next_ < buckets_.size() && buckets_[next_].pending == 0) start(buckets_[next_++]);
}

void GradientReducer::gradient_final(std::size_t entry, const TensorView& gradient) {
  if (entry >= where_.size() || where_[entry].first == kNone || copied_[entry]) return;
  Bucket& b = buckets_[where_[entry].first];
  const std::size_t j = where_[entry].second;
  const std::int64_t offset = b.offsets[j];
  const std::int64_t count = (j + 1 < b.offsets.size() ? b.offsets[j + 1] : b.elements) - offset;
  if (gradient.numel() != count || gradient.dtype() != b.dtype)
    throw_error(ErrorCode::internal, "train.reduce",
                fmt::format("entry {}'s gradient is {}{}, not {} {} elements", entry, dtype_name(gradient.dtype()),
                            gradient.shape().to_string(), count, dtype_name(b.dtype)));
  if (b.dtype == DType::f32) {
    auto held = hold<float>(b.values);
    gather<float>(gradient, held.as_span().data() + offset);
  } else {
    auto held = hold<double>(b.values);
    gather<double>(gradient, held.as_span().data() + offset);
  }
  copied_[entry] = true;
  if (timing_.first_start_seconds >= 0) ++timing_.gradients_after_first_start;
  if (--b.pending == 0) start_ready();
  if (next_ > 0) comm_.progress();
}

ReductionTiming GradientReducer::finish(std::vector<std::optional<Tensor>>& gradients) {
  timing_.backward_seconds = seconds_since(began_);
  timing_.started_in_backward = static_cast<int>(next_);
  // Entries backward gave no gradient (a parameter this batch did not reach) reduce as zeros.
  for (auto& b : buckets_) {
    if (b.pending == 0) continue;
    for (std::size_t j = 0; j < b.entries.size(); ++j) {
      if (copied_[b.entries[j]]) continue;
      const std::int64_t end = j + 1 < b.offsets.size() ? b.offsets[j + 1] : b.elements;
      if (b.dtype == DType::f32) {
        auto held = hold<float>(b.values);
        std::fill(held.begin() + b.offsets[j], held.begin() + end, 0.0f);
      } else {
        auto held = hold<double>(b.values);
        std::fill(held.begin() + b.offsets[j], held.begin() + end, 0.0);
      }
    }
    b.pending = 0;
  }
  start_ready();
  const auto waiting = std::chrono::steady_clock::now();
  for (auto& b : buckets_) {
    if (b.inflight) b.inflight->wait();
    b.inflight.reset();
    b.lent = std::monostate{};
  }
  timing_.wait_seconds = seconds_since(waiting);
  const double ranks = comm_.size();
  for (auto& b : buckets_) {
    for (std::size_t j = 0; j < b.entries.size(); ++j) {
      auto& g = gradients.at(b.entries[j]);
      if (!g) continue;
      if (b.dtype == DType::f32) {
        auto held = hold<float>(b.values);
        const float* src = held.as_span().data() + b.offsets[j];
        scatter_scaled<float>(*g, src, static_cast<float>(1.0 / ranks));
      } else {
        auto held = hold<double>(b.values);
        scatter_scaled<double>(*g, held.as_span().data() + b.offsets[j], 1.0 / ranks);
      }
    }
  }
  return timing_;
}

}  // namespace pact::train
