#include "pact/kernels/kernel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <mutex>

#include "pact/kernels/guards.hpp"
#include "pact/kernels/ranks.hpp"

namespace pact::kernels {

namespace {
std::atomic<std::uint64_t> g_macs{0};
thread_local RankSum* t_batch_norm_ranks = nullptr;
}  // namespace

RankSum* batch_norm_ranks() noexcept { return t_batch_norm_ranks; }
BatchNormRanks::BatchNormRanks(RankSum* ranks) noexcept : previous_(t_batch_norm_ranks) { t_batch_norm_ranks = ranks; }
BatchNormRanks::~BatchNormRanks() { t_batch_norm_ranks = previous_; }

std::uint64_t macs_performed() noexcept { return g_macs.load(std::memory_order_relaxed); }

void count_macs(std::int64_t macs) noexcept {
  if (macs > 0) g_macs.fetch_add(static_cast<std::uint64_t>(macs), std::memory_order_relaxed);
}

const Handler* find_handler(std::span<const Handler> handlers, ops::OpTag op) noexcept {
  for (const auto& h : handlers) {
    if (h.op == op) return &h;
  }
  return nullptr;
}

TensorView derive_view(ops::OpTag op, const TensorView& x, const ops::Attributes& a) {
  const Dims s = x.shape();
  const int r = s.size();
  switch (op) {
    case ops::OpTag::transpose: {
      if (r == 0) return x;
      return x.transpose(ops::normalize_dim("transpose", a.get_int("transpose", "dim0"), r),
                         ops::normalize_dim("transpose", a.get_int("transpose", "dim1"), r));
    }
    case ops::OpTag::permute: {
      // A permutation is a sequence of transpositions applied to a working view.
      auto dims = a.get_ints("permute", "dims");
      std::vector<int> current(static_cast<std::size_t>(r));
      for (int i = 0; i < r; ++i) current[static_cast<std::size_t>(i)] = i;
      TensorView v = x;
      for (int i = 0; i < r; ++i) {
        const int want = ops::normalize_dim("permute", dims[static_cast<std::size_t>(i)], r);
        const int at = static_cast<int>(std::find(current.begin(), current.end(), want) - current.begin());
        if (at != i) {
          v = v.transpose(i, at);
          std::swap(current[static_cast<std::size_t>(i)], current[static_cast<std::size_t>(at)]);
        }
      }
      return v;
    }
    case ops::OpTag::slice: {
      const int d = ops::normalize_dim("slice", a.get_int("slice", "dim"), r);
      const std::int64_t n = s[d];
      std::int64_t step = a.get_int("slice", "step", 1);
      auto clampi = [&](std::int64_t v) { return std::clamp<std::int64_t>(v < 0 ? v + n : v, 0, n); };
      const std::int64_t start = clampi(a.get_int("slice", "start", 0));
      const std::int64_t stop =
          std::max(start, clampi(a.get_int("slice", "end", std::numeric_limits<std::int64_t>::max())));
      return x.slice(d, start, stop, step);
    }
    default:
      return x;
  }
}

std::optional<TensorView> view_result(ops::OpTag op, const TensorView& x, const ops::Attributes& a) {
  switch (op) {
    case ops::OpTag::reshape:
    case ops::OpTag::flatten:
    case ops::OpTag::transpose:
    case ops::OpTag::permute:
    case ops::OpTag::slice:
      break;
    default:
      return std::nullopt;
  }
  const std::vector<ops::TensorType> in{{x.dtype(), x.shape()}};
  const Dims shape = ops::infer_type(op, in, a).shape;
  if (op == ops::OpTag::reshape || op == ops::OpTag::flatten) {
    if (!x.is_contiguous()) return std::nullopt;
    return x.reshape(shape);
  }
  TensorView v = derive_view(op, x, a);
  if (!(v.shape() == shape)) {  // the derivation and the shape rule are one contract
    throw_error(
        ErrorCode::invalid_argument, std::string(ops::op_kind(op)),
        fmt::format("derived view {} disagrees with the shape rule's {}", v.shape().to_string(), shape.to_string()));
  }
  return v;
}

namespace {
std::vector<ops::TensorType> types_of(std::span<const TensorView> inputs) {
  std::vector<ops::TensorType> t;
  t.reserve(inputs.size());
  for (const auto& v : inputs) t.push_back({v.dtype(), v.shape()});
  return t;
}
}  // namespace

Tensor run_forward(const Handler& handler, std::span<const TensorView> inputs, const ops::Attributes& attrs,
                   const KernelContext& ctx) {
  if (handler.forward == nullptr) {
    throw_error(ErrorCode::unsupported, std::string(ops::op_kind(handler.op)),
                "this handler has no forward (an update op: run_update)");
  }
  const ops::TensorType expected = ops::infer_type(handler.op, types_of(inputs), attrs);
  hit(kGuardInputDevice);
  for (const auto& v : inputs) {
    if (v.device() != handler.device) {
      throw_error(ErrorCode::provider_mismatch, std::string(ops::op_kind(handler.op)),
                  fmt::format("a {} input reached the {} handler on {}", v.provider_name(), handler.provider,
                              device_name(handler.device)));
    }
  }
  Tensor out = handler.forward(inputs, attrs, ctx);
  hit(kGuardShapeRule);
  if (out.dtype() != expected.dtype || !(out.shape() == expected.shape)) {
    throw_error(
        ErrorCode::invalid_argument, std::string(ops::op_kind(handler.op)),
        fmt::format("{} handler produced {}{}; the shape rule says {}{}", handler.provider, dtype_name(out.dtype()),
                    out.shape().to_string(), dtype_name(expected.dtype), expected.shape.to_string()));
  }
  return out;
}

namespace {
struct Substitutions {
  std::mutex mu;
  std::vector<std::pair<const Handler*, const Handler*>> live;  // (original, mutant), innermost last
};
Substitutions& substitutions() {
  static Substitutions s;
  return s;
}
}  // namespace

ScopedHandlerSubstitution::ScopedHandlerSubstitution(const Handler& original, const Handler& mutant)
    : original_(&original) {
  if (original.op != mutant.op || original.provider != mutant.provider || original.device != mutant.device) {
    throw_error(ErrorCode::provider_mismatch, "substitute",
                fmt::format("a mutant of the {} {} handler must have its op, provider and device", original.provider,
                            ops::op_kind(original.op)));
  }
  auto& s = substitutions();
  std::lock_guard lock(s.mu);
  s.live.emplace_back(&original, &mutant);
}

ScopedHandlerSubstitution::~ScopedHandlerSubstitution() {
  auto& s = substitutions();
  std::lock_guard lock(s.mu);
  for (auto it = s.live.rbegin(); it != s.live.rend(); ++it) {
    if (it->first == original_) {
      s.live.erase(std::next(it).base());
      break;
    }
  }
}

const Handler& substituted(const Handler& h) noexcept {
  auto& s = substitutions();
  std::lock_guard lock(s.mu);
  for (auto it = s.live.rbegin(); it != s.live.rend(); ++it) {
    if (it->first == &h) return *it->second;
  }
  return h;
}

void run_update(const Handler& handler, std::span<Tensor* const> state, std::span<const TensorView> read,
                const ops::Attributes& attrs) {
  const ops::OpInfo& info = ops::op_info(handler.op);
  const std::string op(info.kind);
  if (handler.update == nullptr) throw_error(ErrorCode::unsupported, op, "this handler updates nothing in place");
  // The operands in the op's order: role u from `state`, the rest from `read`.
  const std::size_t n = state.size() + read.size();
  std::vector<ops::TensorType> types;
  types.reserve(n);
  std::size_t si = 0, ri = 0;
  for (std::size_t k = 0; k < n; ++k) {
    if (info.input_role(k) == ops::InputRole::state && si < state.size()) {
      if (state[si] == nullptr)
        throw_error(ErrorCode::invalid_argument, op, fmt::format("state operand {} is null", si));
      types.push_back({state[si]->dtype(), state[si]->shape()});
      ++si;
    } else if (ri < read.size()) {
      types.push_back({read[ri].dtype(), read[ri].shape()});
      ++ri;
    } else {
      throw_error(ErrorCode::invalid_argument, op,
                  fmt::format("{} state and {} read operands do not match the op's roles '{}'", state.size(),
                              read.size(), info.roles));
    }
  }
  (void)ops::infer_type(handler.op, types, attrs);
  hit(kGuardInputDevice);
  for (const Tensor* t : state) {
    if (t->device() != handler.device) {
      throw_error(ErrorCode::provider_mismatch, op,
                  fmt::format("a {} state operand reached the {} handler on {}", device_name(t->device()),
                              handler.provider, device_name(handler.device)));
    }
  }
  for (const auto& v : read) {
    if (v.device() != handler.device) {
      throw_error(ErrorCode::provider_mismatch, op,
                  fmt::format("a {} input reached the {} handler on {}", v.provider_name(), handler.provider,
                              device_name(handler.device)));
    }
  }
  handler.update(state, read, attrs);
}

void run_in_place(const Handler& handler, Tensor& x, std::span<const TensorView> read, const ops::Attributes& attrs) {
  const std::string op(ops::op_kind(handler.op));
  if (handler.in_place == nullptr) throw_error(ErrorCode::unsupported, op, "this handler computes nothing in place");
  std::vector<ops::TensorType> types{{x.dtype(), x.shape()}};
  for (const auto& v : read) types.push_back({v.dtype(), v.shape()});
  const ops::TensorType out = ops::infer_type(handler.op, types, attrs);
  if (out.dtype != x.dtype() || !(out.shape == x.shape())) {
    throw_error(ErrorCode::invalid_argument, op,
                fmt::format("the result is {}{}; in place it must be operand 0's {}{}", dtype_name(out.dtype),
                            out.shape.to_string(), dtype_name(x.dtype()), x.shape().to_string()));
  }
  hit(kGuardInputDevice);
  if (x.device() != handler.device) {
    throw_error(ErrorCode::provider_mismatch, op,
                fmt::format("a {} operand reached the {} handler on {}", device_name(x.device()), handler.provider,
                            device_name(handler.device)));
  }
  for (const auto& v : read) {
    if (v.device() != handler.device) {
      throw_error(ErrorCode::provider_mismatch, op,
                  fmt::format("a {} input reached the {} handler on {}", v.provider_name(), handler.provider,
                              device_name(handler.device)));
    }
  }
  Tensor* state[] = {&x};
  handler.in_place(std::span<Tensor* const>(state, 1), read, attrs);
}

std::vector<std::optional<Tensor>> run_vjp(const Handler& handler, std::span<const TensorView> inputs,
                                           const TensorView& output, const TensorView& grad_output,
                                           const ops::Attributes& attrs, const KernelContext& ctx) {
  const std::string op(ops::op_kind(handler.op));
  if (handler.vjp == nullptr) throw_error(ErrorCode::unsupported, op, "this op has no VJP");
  hit(kGuardVjpShapes);
  if (grad_output.dtype() != output.dtype() || !(grad_output.shape() == output.shape())) {
    throw_error(ErrorCode::invalid_argument, op,
                fmt::format("grad_output is {}{}; the output is {}{}", dtype_name(grad_output.dtype()),
                            grad_output.shape().to_string(), dtype_name(output.dtype()), output.shape().to_string()));
  }
  // The inputs must satisfy the op's shape rule as in a forward call, and the cotangent must have the
  // shape it gives, so no VJP reads an operand by a size the others do not have.
  const ops::TensorType expected = ops::infer_type(handler.op, types_of(inputs), attrs);
  if (grad_output.dtype() != expected.dtype || !(grad_output.shape() == expected.shape)) {
    throw_error(ErrorCode::invalid_argument, op,
                fmt::format("grad_output is {}{}; the shape rule gives {}{}", dtype_name(grad_output.dtype()),
                            grad_output.shape().to_string(), dtype_name(expected.dtype), expected.shape.to_string()));
  }
  auto grads = handler.vjp(inputs, output, grad_output, attrs, ctx);
  if (grads.size() != inputs.size()) {
    throw_error(
        ErrorCode::invalid_argument, op,
        fmt::format("{} VJP returned {} gradients for {} inputs", handler.provider, grads.size(), inputs.size()));
  }
  for (std::size_t i = 0; i < grads.size(); ++i) {
    if (grads[i] && (!(grads[i]->shape() == inputs[i].shape()) || grads[i]->dtype() != inputs[i].dtype())) {
      throw_error(ErrorCode::invalid_argument, op,
                  fmt::format("{} VJP's gradient {} is {}{}; the input is {}{}", handler.provider, i,
                              dtype_name(grads[i]->dtype()), grads[i]->shape().to_string(),
                              dtype_name(inputs[i].dtype()), inputs[i].shape().to_string()));
    }
  }
  return grads;
}

}  // namespace pact::kernels
