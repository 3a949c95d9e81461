#include "pact/runtime/executor.hpp"

#include <fmt/format.h>

#include <unordered_map>

namespace pact::runtime {

ExecutionResult execute(const plan::AcceptedGraphPlan& plan, const std::map<std::string, EagerTensor>& bindings,
                        Tape* tape, const kernels::KernelContext& ctx) {
  const ir::Graph& g = plan.graph();
  // Last use of each node (outputs live to the end).
  std::unordered_map<std::string, std::size_t> last_use;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    for (const auto& in : g.nodes[i].inputs) last_use[in] = i;
  }
  for (const auto& o : g.outputs) last_use[o] = g.nodes.size();
  std::unordered_map<std::string, const contract::BoundKernel*> kernel_of;
  for (std::size_t k = 0; k < plan.audit().kernels.size(); ++k)
    kernel_of[plan.audit().kernels[k].node] = &plan.bound()[k];

  ExecutionResult result;
  std::unordered_map<std::string, EagerTensor> live;
  std::uint64_t live_bytes = 0;
  std::uint64_t seq = 0;
  auto hold = [&](const std::string& id, EagerTensor t) {
    live_bytes += t.view().nbytes();
    result.peak_bytes = std::max(result.peak_bytes, live_bytes);
    live.emplace(id, std::move(t));
  };
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    const auto role = ops::op_info(n.op).role;
    if (role == ops::OpRole::source) {
      auto it = bindings.find(n.id);
      if (it == bindings.end())
        throw_error(ErrorCode::invalid_argument, "execute", fmt::format("no value bound to '{}'", n.id));
      if (auto why = ir::Graph::binding_mismatch(n, it->second.dtype(), it->second.shape())) {
        throw_error(ErrorCode::invalid_argument, "execute", *why);
      }
      hold(n.id, it->second);
    } else {
      std::vector<EagerTensor> in;
      for (const auto& id : n.inputs) in.push_back(live.at(id));
      if (role == ops::OpRole::sink) {
        hold(n.id, in[0]);
      } else {
        // Kernel and view nodes: the plan admitted a kernel for each (Note [One admission]).
        const kernels::Handler* handler = kernel_of.at(n.id)->handler();
        std::vector<TensorView> views;
        bool needs_grad = false;
        for (const auto& t : in) {
          views.push_back(t.view());
          needs_grad = needs_grad || (tape != nullptr && t.tracked() && tape->node(t.node).requires_grad);
        }
        kernels::KernelContext node_ctx = ctx;
        node_ctx.seed = ctx.seed * 0x9e3779b97f4a7c15ULL + (++seq);
        EagerTensor out{retain(kernels::run_forward(*handler, views, n.attrs, node_ctx)), -1};
        if (needs_grad) {
          Tape::Node tn;
          tn.op = n.op;
          tn.handler = handler;
          tn.attrs = n.attrs;
          tn.ctx = node_ctx;
          tn.type = n.type;
          tn.requires_grad = true;
          for (const auto& t : in) {
            tn.parents.push_back(t.node);
            tn.inputs.push_back(t.value);
          }
          if (vjp_reads_output(n.op)) tn.output = out.value;
          out.node = tape->record(std::move(tn));
        }
        hold(n.id, std::move(out));
      }
    }
    // Release every input whose last use was this node.
    for (const auto& id : n.inputs) {
      auto lu = last_use.find(id);
      if (lu != last_use.end() && lu->second == i) {
        auto it = live.find(id);
        if (it != live.end()) {
          live_bytes -= it->second.view().nbytes();
          live.erase(it);
        }
      }
    }
  }
  for (const auto& o : g.outputs) result.outputs.emplace(o, live.at(o));
  return result;
}

}  // namespace pact::runtime
