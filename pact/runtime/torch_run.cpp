#include "pact/runtime/torch_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <unordered_map>

#include "pact/plan/fusion.hpp"
#include "pact/runtime/executor.hpp"
#include "pact/runtime/retention.hpp"

namespace pact::runtime {

OutputAgreement compare_outputs(std::string name, const TensorView& got, const TensorView& want) {
  if (!(got.shape() == want.shape())) {
    throw_error(ErrorCode::invalid_argument, "torch.run",
                fmt::format("output '{}': pact produced {} but the reference is {}", name, got.shape().to_string(),
                            want.shape().to_string()));
  }
  OutputAgreement r{std::move(name), got.shape()};
  const Tensor a = got.convert(DType::f64);
  const Tensor b = want.convert(DType::f64);
  auto pa = a.prepare_host<double>();
  auto pb = b.prepare_host<double>();
  const auto xs = std::get<PreparedContiguousRead<double>>(pa.value()).as_span();
  const auto ys = std::get<PreparedContiguousRead<double>>(pb.value()).as_span();
  // The one tolerance comparison (ops::compare); the parity check's tolerance is relative to its scale.
  const ops::Agreement agreement = ops::compare(xs, ys, ops::Tolerance{});
  r.max_abs_error = agreement.max_abs_error;
  for (double y : ys) {
    if (std::isfinite(y)) r.max_abs_reference = std::max(r.max_abs_reference, std::abs(y));
  }
  r.relative_error = agreement.relative_error();
  return r;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  const std::size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  const double hi = values[mid];
  if (values.size() % 2 == 1) return hi;
  return (*std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid)) + hi) / 2;
}

namespace {

// Note [Batch axes]
// A captured graph carries its batch size in its input shapes and in the target shapes of its reshapes.
// To run it at another batch the inputs change, and each reshape of a value that carries the batch keeps
// the extent that carries it free (-1). A value carries the batch at axis a when its extent
// there is o * batch * f and its index is (i * batch + b) * f + j (the layout is outer x batch x inner). A
// row-major reshape keeps that layout: its output carries the batch at an axis a' whose leading extents
// divide the outer count and whose trailing extents divide the inner block, with extent o' * batch * f' for
// the quotients, so -1 there recomputes exactly o' * new_batch * f'. Batch axes are found forward from the inputs (axis
// 0): transposes and permutes move the axis, elementwise ops align it from the right, ops that act along the batch axis
// (slice, concat, index, scan, softmax, top-k or reduction over it, a contraction over it) end it, and an op this does
// not know ends it too. A reshape of a value without a batch axis keeps its captured shape, and the shape rules then
// refuse the new size naming the node, rather than guess.

struct BatchAxis {
  int axis;
  std::int64_t outer = 1;  ///< the axis's index is (i_outer * batch + b) * factor + j
  std::int64_t factor = 1;
};

// The batch axis of a node's output, from its inputs' (captured types `in`, batch axes `at`).
std::optional<BatchAxis> output_batch_axis(const ir::Node& n, const std::vector<ops::TensorType>& in,
                                           const std::vector<std::optional<BatchAxis>>& at, const Dims& out) {
  using ops::OpTag;
  const int rank = out.size();
  std::optional<BatchAxis> first;  // the first batched operand's axis, right-aligned to the output
  std::size_t k = 0;
  for (; k < at.size(); ++k) {
    if (at[k]) {
      first = BatchAxis{at[k]->axis + rank - static_cast<int>(in[k].shape.size()), at[k]->outer, at[k]->factor};
      break;
    }
  }
  if (!first) return std::nullopt;
  const int a = at[k]->axis, r = in[k].shape.size();
  const std::string_view kind = ops::op_kind(n.op);
  auto dim_of = [&](const char* attr, std::int64_t fallback) {
    const std::int64_t d = n.attrs.get_int(kind, attr, fallback);
    return static_cast<int>(d < 0 ? d + r : d);
  };
  auto keep_unless_along = [&](int d) { return d == a ? std::nullopt : std::optional<BatchAxis>(*at[k]); };
  if (ops::elementwise_map(n.op)) return first;
  switch (n.op) {
    case OpTag::transpose: {
      const int d0 = dim_of("dim0", 0), d1 = dim_of("dim1", 0);
      return BatchAxis{a == d0 ? d1 : a == d1 ? d0 : a, at[k]->outer, at[k]->factor};
    }
    case OpTag::permute: {
      const auto dims = n.attrs.get_ints("permute", "dims");
      for (std::size_t i = 0; i < dims.size(); ++i)
        if ((dims[i] < 0 ? dims[i] + r : dims[i]) == a)
          return BatchAxis{static_cast<int>(i), at[k]->outer, at[k]->factor};
      return std::nullopt;
    }
    case OpTag::slice:
    case OpTag::concat:
    case OpTag::cumsum:
    case OpTag::index_select:
    case OpTag::gather:
    case OpTag::index_copy:
      return k == 0 ? keep_unless_along(dim_of("dim", 0)) : std::nullopt;
    case OpTag::softmax:
    case OpTag::log_softmax:
    case OpTag::topk:
    case OpTag::topk_indices:
      return keep_unless_along(dim_of("dim", -1));
    case OpTag::argmax: {
      if (!n.attrs.has("dim")) return std::nullopt;
      const int d = dim_of("dim", 0);
      if (d == a) return std::nullopt;
      return BatchAxis{d < a && !n.attrs.get_bool("argmax", "keepdim", false) ? a - 1 : a, at[k]->outer, at[k]->factor};
    }
    case OpTag::sum:
    case OpTag::mean:
    case OpTag::max: {
      const auto dims = n.attrs.get_ints(kind, "dims", std::vector<std::int64_t>{});
      if (dims.empty()) return std::nullopt;
      int below = 0;
      for (auto d : dims) {
        const int dd = static_cast<int>(d < 0 ? d + r : d);
        if (dd == a) return std::nullopt;
        below += dd < a ? 1 : 0;
      }
      return BatchAxis{n.attrs.get_bool(kind, "keepdim", false) ? a : a - below, at[k]->outer, at[k]->factor};
    }
    case OpTag::matmul: {  // a contraction over the batch axis ends it; rows, columns and batch dims keep it
      if (r < 2 || in[1 - k].shape.size() < 2) return std::nullopt;  // vector operands: not followed
      if (k == 0) return a <= r - 2 ? first : std::nullopt;
      return a != r - 2 ? first : std::nullopt;
    }
    case OpTag::linear:
      return k == 0 && a < r - 1 ? first : std::nullopt;
    case OpTag::layer_norm:
    case OpTag::rms_norm:
      return k == 0 && a < r - static_cast<int>(n.attrs.get_ints(kind, "normalized_shape").size()) ? first
                                                                                                   : std::nullopt;
    case OpTag::scaled_dot_product_attention:
      return k == 0 && a < r - 2 ? first : std::nullopt;
    case OpTag::triu:
    case OpTag::tril:
      return a < r - 2 ? first : std::nullopt;
    case OpTag::conv2d:
    case OpTag::conv2d_activation:
    case OpTag::conv2d_nhwc:
    case OpTag::max_pool2d:
    case OpTag::avg_pool2d:
    case OpTag::adaptive_avg_pool2d:
    case OpTag::batch_norm:
    case OpTag::interpolate:
      return k == 0 && a == 0 ? first : std::nullopt;
    case OpTag::embedding:  // the output is the indices' shape plus a trailing embedding dimension
      return k == 1 ? std::optional<BatchAxis>(*at[k]) : std::nullopt;
    case OpTag::cross_entropy:
    case OpTag::mse_loss:
      return n.attrs.get_string(kind, "reduction", std::string("mean")) == "none" && k == 0 && a == 0
                 ? std::optional<BatchAxis>(*at[k])
                 : std::nullopt;
    case OpTag::add:
    case OpTag::sub:
    case OpTag::mul:
    case OpTag::div:
    case OpTag::pow:
    case OpTag::where:
    case OpTag::eq:
    case OpTag::ne:
    case OpTag::lt:
    case OpTag::le:
    case OpTag::gt:
    case OpTag::ge: {  // elementwise with broadcasting: every batched operand must agree
      for (std::size_t j = k + 1; j < at.size(); ++j) {
        if (at[j] && (at[j]->axis + rank - static_cast<int>(in[j].shape.size()) != first->axis ||
                      at[j]->outer != first->outer || at[j]->factor != first->factor))
          return std::nullopt;
      }
      return first;
    }
    case OpTag::dropout:
    case OpTag::cast:
    case OpTag::full_like:
    case OpTag::output:
      return first;
    default:
      return std::nullopt;  // an op this does not know ends the batch axis (Note [Batch axes])
  }
}

// The value of a constant node (a captured constant or one the lowering made), or nullptr.
Tensor* constant_value(ir::TorchBundle& bundle, const std::string& id) {
  for (auto& [name, t] : bundle.weights.tensors)
    if (name == id) return &t;
  auto it = bundle.model.synthesized.find(id);
  return it == bundle.model.synthesized.end() ? nullptr : &it->second;
}

// True when every element of `t` has the same bits (a zeros, ones or full constant).
bool uniform(const Tensor& t) {
  std::vector<std::byte> bytes;
  ir::append_tensor_bytes(t.as_view(), bytes);
  const std::size_t size = dtype_size(t.dtype());
  for (std::size_t i = size; i < bytes.size(); i += size)
    if (std::memcmp(bytes.data() + i, bytes.data(), size) != 0) return false;
  return true;
}

// A constant stands for per-batch state (the zero initial state of an RNN, torch.zeros(batch, hidden) folded
// by the exporter) when it is uniform, leads with the captured batch, and only elementwise ops, or a
// linear's or matmul's rows, read it: then it is the same at any batch.
bool per_batch_constant(const ir::Node& n, const std::vector<ir::Node>& nodes, const Tensor* value, std::int64_t was) {
  using ops::OpTag;
  if (n.op != OpTag::constant || value == nullptr || n.type.shape.empty() || n.type.shape[0] != was) return false;
  for (const auto& reader : nodes) {
    for (std::size_t k = 0; k < reader.inputs.size(); ++k) {
      if (reader.inputs[k] != n.id) continue;
      const bool rows = (reader.op == OpTag::linear || reader.op == OpTag::matmul) && k == 0;
      const bool elementwise = reader.op == OpTag::add || reader.op == OpTag::sub || reader.op == OpTag::mul ||
                               reader.op == OpTag::div || (reader.op == OpTag::where && k > 0);
      if (!rows && !elementwise) return false;
    }
  }
  return uniform(*value);
}

// Sets the changed inputs' new batch, resizes per-batch constants, and frees the batch extent of every
// reshape of a batch-carrying value (Note [Batch axes]).
void rebatch(std::vector<ir::Node>& nodes, ir::TorchBundle& bundle, const std::vector<ir::TorchSource*>& changed,
             std::int64_t was, std::int64_t now) {
  std::map<std::string, ops::TensorType> captured;
  for (const auto& n : nodes) captured.emplace(n.id, n.type);
  std::map<std::string, BatchAxis> batched;
  for (const ir::TorchSource* src : changed) batched.emplace(src->name, BatchAxis{0, 1, 1});
  for (auto& n : nodes) {
    n.type_declared = false;
    const Dims& out = n.type.shape;
    if (Tensor* value = constant_value(bundle, n.id); per_batch_constant(n, nodes, value, was)) {
      Dims shape = out;
      shape[0] = now;
      std::vector<std::byte> one;
      ir::append_tensor_bytes(value->as_view(), one);
      one.resize(dtype_size(value->dtype()));
      std::vector<std::byte> bytes;
      for (std::int64_t i = 0; i < ops::numel(shape); ++i) bytes.insert(bytes.end(), one.begin(), one.end());
      *value = ir::tensor_from_bytes(value->dtype(), shape, bytes);
      n.attrs.set("shape", std::vector<std::int64_t>(shape.begin(), shape.end()));
      batched.emplace(n.id, BatchAxis{0, 1, 1});
      continue;
    }
    if (n.op == ops::OpTag::input) {
      if (batched.count(n.id) != 0) {
        std::vector<std::int64_t> shape(out.begin(), out.end());
        shape[0] = now;
        n.attrs.set("shape", shape);
      }
      continue;
    }
    std::vector<ops::TensorType> in;
    std::vector<std::optional<BatchAxis>> at;
    for (const auto& id : n.inputs) {
      in.push_back(captured.at(id));
      auto it = batched.find(id);
      at.push_back(it == batched.end() ? std::nullopt : std::optional<BatchAxis>(it->second));
    }
    if (n.op == ops::OpTag::reshape || n.op == ops::OpTag::flatten) {
      if (!at[0]) continue;
      // Everything before the batch index (outer) and after it (inner), in elements.
      const Dims& s = in[0].shape;
      std::int64_t outer = at[0]->outer, inner = at[0]->factor;
      for (int d = 0; d < at[0]->axis; ++d) outer *= s[d];
      for (int d = at[0]->axis + 1; d < s.size(); ++d) inner *= s[d];
      std::int64_t lead = 1;
      for (int d = 0; d < out.size() && lead != 0 && outer % lead == 0; lead *= out[d], ++d) {
        std::int64_t trailing = 1;
        for (int e = d + 1; e < out.size(); ++e) trailing *= out[e];
        if (trailing == 0 || inner % trailing != 0 || out[d] != (outer / lead) * was * (inner / trailing)) continue;
        if (n.op == ops::OpTag::reshape) {
          std::vector<std::int64_t> shape(out.begin(), out.end());
          if (std::find(shape.begin(), shape.end(), -1) != shape.end()) break;
          shape[static_cast<std::size_t>(d)] = -1;
          n.attrs.set("shape", shape);
        }
        batched.emplace(n.id, BatchAxis{d, outer / lead, inner / trailing});
        break;
      }
      continue;
    }
    if (auto b = output_batch_axis(n, in, at, out);
        b && b->axis >= 0 && b->axis < out.size() && out[b->axis] == b->outer * was * b->factor)
      batched.emplace(n.id, *b);
  }
}

}  // namespace

void fit_inputs(ir::TorchBundle& bundle, ir::SafetensorsFile& inputs, std::string_view where) {
  constexpr const char* op = "torch.run";
  ir::TorchImport& model = bundle.model;
  std::vector<ir::TorchSource*> users;
  for (auto& src : model.sources)
    if (src.kind == ir::TorchSource::Kind::user_input && model.graph.find(src.name) != nullptr) users.push_back(&src);
  auto listed = [&] {
    std::string names;
    for (const auto& [name, t] : inputs.tensors) names += (names.empty() ? "" : ", ") + name;
    return names.empty() ? std::string("none") : names;
  };
  if (users.size() == 1 && inputs.tensors.size() == 1 && inputs.find(users[0]->name) == nullptr)
    inputs.tensors[0].first = users[0]->name;                  // one input, one tensor: the name does not matter
  std::optional<std::pair<std::int64_t, std::int64_t>> batch;  // captured -> new leading extent
  std::vector<ir::TorchSource*> changed;                       // the inputs whose leading extent changes
  for (ir::TorchSource* src : users) {
    const Tensor* t = inputs.find(src->name);
    if (t == nullptr)
      throw_error(
          ErrorCode::invalid_argument, op,
          fmt::format("{}: no tensor for the model's input '{}' (the file holds: {})", where, src->name, listed()));
    const ops::TensorType& want = src->type;
    if (t->dtype() != want.dtype)
      throw_error(
          ErrorCode::dtype_mismatch, op,
          fmt::format("{}: input '{}' is {}{}; the capture declares {}{}", where, src->name, dtype_name(t->dtype()),
                      t->shape().to_string(), dtype_name(want.dtype), want.shape.to_string()));
    if (t->shape() == want.shape) continue;
    bool leading_only = t->shape().size() == want.shape.size() && want.shape.size() > 0;
    for (int d = 1; leading_only && d < want.shape.size(); ++d) leading_only = t->shape()[d] == want.shape[d];
    const std::pair<std::int64_t, std::int64_t> change{want.shape[0], leading_only ? t->shape()[0] : 0};
    if (!leading_only || (batch && *batch != change))
      throw_error(ErrorCode::invalid_argument, op,
                  fmt::format("{}: input '{}' has shape {}; the capture declares {} (only the leading batch "
                              "dimension may differ, and by the same size for every input)",
                              where, src->name, t->shape().to_string(), want.shape.to_string()));
    batch = change;
    changed.push_back(src);
  }
  if (!batch) return;
  const auto [was, now] = *batch;
  std::vector<ir::Node> nodes = model.graph.nodes;
  rebatch(nodes, bundle, changed, was, now);
  try {
    model.graph = ir::validate(std::move(nodes), model.graph.outputs);
  } catch (const Error& e) {
    throw_error(ErrorCode::invalid_argument, op,
                fmt::format("{}: the model was captured with batch {} and does not re-validate with {}: {}", where, was,
                            now, e.what()));
  }
  for (ir::TorchSource* src : users) src->type = model.graph.find(src->name)->type;
}

ImportedModel::ImportedModel(ir::TorchBundle&& bundle, const contract::BackendProfile& profile,
                             const contract::EvidenceResolver& resolver, bool fuse, plan::Layout layout) {
  ir::require_weights(bundle.model, "the capture", "torch.run");
  capture_method_ = bundle.model.capture_method;
  outputs_ = bundle.model.outputs;
  for (const auto& s : bundle.model.sources) {
    if (s.kind == ir::TorchSource::Kind::user_input) inputs_.push_back(s);
  }
  // Every source value but the user inputs, by node id: what the fusions read and the bindings take.
  plan::SourceValues values;
  for (auto& [name, t] : bundle.weights.tensors) values.emplace(name, std::move(t));
  for (auto& [id, t] : bundle.model.synthesized) values.emplace(id, std::move(t));
  ir::Graph graph = std::move(bundle.model.graph);
  std::vector<plan::Rewrite> rewrites;
  if (fuse) {
    rewrites = plan::fold_batch_norms(graph, values);
    for (auto& r : plan::fuse_conv_residuals(graph)) rewrites.push_back(std::move(r));
    for (auto& r : plan::fuse_conv_activations(graph)) rewrites.push_back(std::move(r));
    // The channels-last convolutions are CPU kernels: a device plan keeps NCHW unless told otherwise.
    if (profile.policy.device == DeviceKind::cuda && layout == plan::Layout::automatic) layout = plan::Layout::nchw;
    for (auto& r : plan::choose_channels_last(graph, values, layout)) rewrites.push_back(std::move(r));
  }
  module_of_ = std::move(bundle.model.module_of);
  for (const auto& r : rewrites) {  // a node moved channels-last comes from its NCHW node's module
    if (r.kind != "conv2d_nhwc" && r.kind != "channels_last") continue;
    if (auto it = module_of_.find(r.nodes.front()); it != module_of_.end()) module_of_[r.into] = it->second;
  }
  module_type_ = std::move(bundle.model.module_type);
  auto planned = plan::plan_graph(graph, profile, resolver, contract::VjpMode::forward_only);
  graph_ = std::move(graph);
  if (!planned) {
    audit_ = planned.error().audit;
    audit_.rewrites = std::move(rewrites);
    return;
  }
  audit_ = planned->audit();
  audit_.rewrites = std::move(rewrites);
  device_ = profile.policy.device;
  for (const auto& node : planned->graph().nodes) {
    if (node.op == ops::OpTag::input || ops::op_info(node.op).role != ops::OpRole::source) continue;
    auto it = values.find(node.id);
    if (it == values.end())
      throw_error(ErrorCode::invalid_argument, "torch.run", fmt::format("weight '{}' is missing", node.id));
    weights_.emplace(node.id, EagerTensor{retain(placed_on(std::move(it->second), device_)), -1});
  }
  plan_.emplace(std::move(*planned));
}

const plan::AcceptedGraphPlan& ImportedModel::plan() const {
  if (!plan_) throw_error(ErrorCode::unsupported, "torch.run", "the plan was rejected (its audit says why)");
  return *plan_;
}

std::pair<ExecutionResult, std::map<std::string, EagerTensor>> ImportedModel::run(
    const std::map<std::string, ValueRef>& inputs, const ExecutionOptions& options) const {
  const plan::AcceptedGraphPlan& planned = plan();
  std::map<std::string, EagerTensor> bindings = weights_;  // shared records: no value is copied
  for (const auto& src : inputs_) {
    auto it = inputs.find(src.name);
    if (it == inputs.end() || it->second == nullptr)
      throw_error(ErrorCode::invalid_argument, "torch.run", fmt::format("input '{}' is missing", src.name));
    const TensorView v = it->second->view();
    if (v.dtype() != src.type.dtype || !(v.shape() == src.type.shape)) {
      throw_error(ErrorCode::invalid_argument, "torch.run",
                  fmt::format("input '{}' is {}{} but the capture declares {}{}", src.name, dtype_name(v.dtype()),
                              v.shape().to_string(), dtype_name(src.type.dtype), src.type.shape.to_string()));
    }
    if (planned.graph().find(src.name) == nullptr) continue;
    // An input elsewhere is copied there; one already there is bound as given.
    bindings.insert_or_assign(
        src.name, EagerTensor{v.device() == device_ ? it->second : retain(v.transfer_to(provider_for(device_))), -1});
  }
  for (const auto& given : inputs) {
    if (std::none_of(inputs_.begin(), inputs_.end(), [&](const ir::TorchSource& s) { return s.name == given.first; }))
      throw_error(ErrorCode::invalid_argument, "torch.run",
                  fmt::format("'{}' is not an input of the capture", printable(given.first)));
  }
  ExecutionResult run = execute(planned, std::move(bindings), options);
  std::map<std::string, EagerTensor> outputs;
  for (const auto& out : outputs_) outputs.emplace(out.name, run.outputs.at(out.node));
  return {std::move(run), std::move(outputs)};
}

TorchRunResult run_imported(ir::TorchBundle&& bundle, ir::SafetensorsFile&& inputs,
                            const contract::BackendProfile& profile, const contract::EvidenceResolver& resolver,
                            const RunTimingOptions& timing) {
  if (timing.repeat < 0)
    throw_error(ErrorCode::invalid_argument, "torch.run", fmt::format("repeat {} must not be negative", timing.repeat));
  const ImportedModel model(std::move(bundle), profile, resolver, timing.fuse, timing.layout);
  TorchRunResult result;
  result.audit = model.audit();
  result.graph = model.graph();
  result.module_of = model.module_of();
  result.module_type = model.module_type();
  if (!model.accepted()) return result;
  result.accepted = true;
  std::map<std::string, ValueRef> values;
  for (auto& file_tensor : inputs.tensors) {  // a file's other tensors are not the model's business
    const std::string& name = file_tensor.first;
    const auto& declared = model.inputs();
    if (std::any_of(declared.begin(), declared.end(), [&](const ir::TorchSource& s) { return s.name == name; }))
      values.emplace(name, retain(std::move(file_tensor.second)));
  }

  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  auto [run, outputs] = model.run(values);
  result.cold_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  result.peak_bytes = run.peak_bytes;
  const ir::Graph& g = model.plan().graph();                 // the fused graph
  std::vector<std::vector<double>> node_ms(g.nodes.size());  // per node, one entry per warm run
  for (int r = 0; r < timing.repeat; ++r) {
    std::vector<double> seconds;
    ExecutionOptions options;
    if (timing.time_nodes) options.node_seconds = &seconds;
    start = Clock::now();
    model.run(values, options);
    result.warm_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    for (std::size_t i = 0; i < seconds.size(); ++i) node_ms[i].push_back(seconds[i] * 1e3);
  }
  if (timing.time_nodes) {
    std::unordered_map<std::string, std::size_t> position;
    for (std::size_t i = 0; i < g.nodes.size(); ++i) position.emplace(g.nodes[i].id, i);
    for (const auto& k : result.audit.kernels) {
      NodeTiming t{k.node, k.op, k.inputs, k.capsule ? k.capsule->name : "", "", 0};
      if (k.capsule) t.isa = plan::capsule_isa(*k.capsule);
      if (auto it = position.find(k.node); it != position.end()) t.warm_median_ms = median(node_ms[it->second]);
      result.nodes.push_back(std::move(t));
    }
  }
  for (auto& [name, value] : outputs) result.outputs.emplace(name, value.view().to_host());
  return result;
}

}  // namespace pact::runtime
