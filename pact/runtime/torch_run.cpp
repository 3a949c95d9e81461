#include "pact/runtime/torch_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

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

TorchRunResult run_imported(ir::TorchBundle&& bundle, ir::SafetensorsFile&& inputs,
                            const contract::BackendProfile& profile, const contract::EvidenceResolver& resolver) {
  TorchRunResult result;
  auto planned = plan::plan_graph(bundle.model.graph, profile, resolver, contract::VjpMode::forward_only);
  if (!planned) {
    result.audit = planned.error().audit;
    return result;
  }
  result.audit = planned->audit();
  result.accepted = true;

  std::map<std::string, EagerTensor> bindings;
  auto take = [](std::vector<std::pair<std::string, Tensor>>& from, const std::string& name) -> std::optional<Tensor> {
    for (auto& [n, t] : from) {
      if (n == name) return std::move(t);
    }
    return std::nullopt;
  };
  for (const auto& src : bundle.model.sources) {
    if (bundle.model.graph.find(src.name) == nullptr) continue;
    if (src.kind == ir::TorchSource::Kind::user_input) {
      auto t = take(inputs.tensors, src.name);
      if (!t) throw_error(ErrorCode::invalid_argument, "torch.run", fmt::format("input '{}' is missing", src.name));
      if (t->dtype() != src.type.dtype || !(t->shape() == src.type.shape)) {
        throw_error(ErrorCode::invalid_argument, "torch.run",
                    fmt::format("input '{}' is {}{} but the capture declares {}{}", src.name, dtype_name(t->dtype()),
                                t->shape().to_string(), dtype_name(src.type.dtype), src.type.shape.to_string()));
      }
      bindings.emplace(src.name, EagerTensor{retain(std::move(*t)), -1});
    } else {
      auto t = take(bundle.weights.tensors, src.name);
      if (!t) throw_error(ErrorCode::invalid_argument, "torch.run", fmt::format("weight '{}' is missing", src.name));
      bindings.emplace(src.name, EagerTensor{retain(std::move(*t)), -1});
    }
  }
  for (auto& [id, t] : bundle.model.synthesized) bindings.emplace(id, EagerTensor{retain(std::move(t)), -1});

  auto run = execute(*planned, bindings);
  result.peak_bytes = run.peak_bytes;
  for (const auto& out : bundle.model.outputs) {
    result.outputs.emplace(out.name, run.outputs.at(out.node).view().duplicate());
  }
  return result;
}

}  // namespace pact::runtime
