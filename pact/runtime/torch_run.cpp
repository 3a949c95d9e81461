#include "pact/runtime/torch_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
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

TorchRunResult run_imported(ir::TorchBundle&& bundle, ir::SafetensorsFile&& inputs,
                            const contract::BackendProfile& profile, const contract::EvidenceResolver& resolver,
                            const RunTimingOptions& timing) {
  if (timing.repeat < 0)
    throw_error(ErrorCode::invalid_argument, "torch.run", fmt::format("repeat {} must not be negative", timing.repeat));
  TorchRunResult result;
  // Every source value but the user inputs, by node id: what the fusions read and the bindings take.
  plan::SourceValues values;
  for (auto& [name, t] : bundle.weights.tensors) values.emplace(name, std::move(t));
  for (auto& [id, t] : bundle.model.synthesized) values.emplace(id, std::move(t));
  ir::Graph graph = std::move(bundle.model.graph);
  std::vector<plan::Rewrite> rewrites;
  if (timing.fuse) {
    rewrites = plan::fold_batch_norms(graph, values);
    for (auto& r : plan::fuse_conv_activations(graph)) rewrites.push_back(std::move(r));
  }
  auto planned = plan::plan_graph(graph, profile, resolver, contract::VjpMode::forward_only);
  if (!planned) {
    result.audit = planned.error().audit;
    result.audit.rewrites = std::move(rewrites);
    return result;
  }
  result.audit = planned->audit();
  result.audit.rewrites = std::move(rewrites);
  result.accepted = true;

  std::map<std::string, EagerTensor> bindings;
  auto take = [](std::vector<std::pair<std::string, Tensor>>& from, const std::string& name) -> std::optional<Tensor> {
    for (auto& [n, t] : from) {
      if (n == name) return std::move(t);
    }
    return std::nullopt;
  };
  for (const auto& node : graph.nodes) {
    if (node.op == ops::OpTag::input) {
      const ir::TorchSource* src = bundle.model.find_source(node.id);
      auto t = take(inputs.tensors, node.id);
      if (!t) throw_error(ErrorCode::invalid_argument, "torch.run", fmt::format("input '{}' is missing", node.id));
      const ops::TensorType want = src != nullptr ? src->type : node.type;
      if (t->dtype() != want.dtype || !(t->shape() == want.shape)) {
        throw_error(ErrorCode::invalid_argument, "torch.run",
                    fmt::format("input '{}' is {}{} but the capture declares {}{}", node.id, dtype_name(t->dtype()),
                                t->shape().to_string(), dtype_name(want.dtype), want.shape.to_string()));
      }
      bindings.emplace(node.id, EagerTensor{retain(std::move(*t)), -1});
    } else if (ops::op_info(node.op).role == ops::OpRole::source) {
      auto it = values.find(node.id);
      if (it == values.end())
        throw_error(ErrorCode::invalid_argument, "torch.run", fmt::format("weight '{}' is missing", node.id));
      bindings.emplace(node.id, EagerTensor{retain(std::move(it->second)), -1});
    }
  }

  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  auto run = execute(*planned, bindings);
  result.cold_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  result.peak_bytes = run.peak_bytes;
  const ir::Graph& g = planned->graph();                     // the fused graph
  std::vector<std::vector<double>> node_ms(g.nodes.size());  // per node, one entry per warm run
  for (int r = 0; r < timing.repeat; ++r) {
    std::vector<double> seconds;
    ExecutionOptions options;
    if (timing.time_nodes) options.node_seconds = &seconds;
    start = Clock::now();
    execute(*planned, bindings, options);
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
  for (const auto& out : bundle.model.outputs) {
    result.outputs.emplace(out.name, run.outputs.at(out.node).view().duplicate());
  }
  return result;
}

}  // namespace pact::runtime
