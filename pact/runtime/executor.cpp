#include "pact/runtime/executor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <unordered_map>

#include "pact/runtime/session.hpp"

namespace pact::runtime {

namespace {

// A checkpoint region: its nodes in order, the values it reads from outside, its one output.
struct Region {
  std::vector<const ir::Node*> nodes;
  std::vector<std::string> inputs;
  std::string output;
  std::size_t first = 0, last = 0;
};

// The checkpoint regions of a run, checked (ExecutionOptions::checkpoint_regions), by first position.
struct Regions {
  std::map<std::size_t, Region> by_first;
  std::vector<int> region_of;  ///< per node: its region's index, or -1
};

Regions checkpoint_regions_of(const ir::Graph& g, const std::vector<std::vector<std::string>>& specs) {
  std::map<std::string, std::size_t> position;  // only regions need it
  if (!specs.empty()) {
    for (std::size_t i = 0; i < g.nodes.size(); ++i) position.emplace(g.nodes[i].id, i);
  }
  Regions out;
  out.region_of.assign(g.nodes.size(), -1);
  auto& region_of = out.region_of;
  for (std::size_t r = 0; r < specs.size(); ++r) {
    const auto& ids = specs[r];
    auto bad = [&](const std::string& why) {
      throw_error(ErrorCode::invalid_argument, "execute", fmt::format("checkpoint region {}: {}", r, why));
    };
    if (ids.empty()) bad("it is empty");
    std::vector<std::size_t> at;
    for (const auto& id : ids) {
      auto it = position.find(id);
      if (it == position.end()) bad(fmt::format("no node '{}'", id));
      const auto role = ops::op_info(g.nodes[it->second].op).role;
      if (role == ops::OpRole::source || role == ops::OpRole::sink)
        bad(fmt::format("'{}' is a source or an output, not an op", id));
      if (region_of[it->second] >= 0) bad(fmt::format("'{}' is already in region {}", id, region_of[it->second]));
      region_of[it->second] = static_cast<int>(r);
      at.push_back(it->second);
    }
    std::sort(at.begin(), at.end());
    for (std::size_t k = 1; k < at.size(); ++k) {
      if (at[k] != at[k - 1] + 1)
        bad(fmt::format("its nodes are not consecutive ('{}' is not among them)", g.nodes[at[k - 1] + 1].id));
    }
    Region region;
    region.first = at.front();
    region.last = at.back();
    const std::set<std::string> members(ids.begin(), ids.end());
    std::set<std::string> outputs;
    for (std::size_t k = region.first; k <= region.last; ++k) {
      region.nodes.push_back(&g.nodes[k]);
      for (const auto& in : g.nodes[k].inputs) {
        if (!members.count(in) && std::find(region.inputs.begin(), region.inputs.end(), in) == region.inputs.end())
          region.inputs.push_back(in);
      }
    }
    for (std::size_t k = region.last + 1; k < g.nodes.size(); ++k) {
      for (const auto& in : g.nodes[k].inputs) {
        if (members.count(in)) outputs.insert(in);
      }
    }
    for (const auto& o : g.outputs) {
      if (members.count(o)) outputs.insert(o);
    }
    if (outputs.size() != 1)
      bad(fmt::format("{} of its values are used after it; a region has exactly one output", outputs.size()));
    region.output = *outputs.begin();
    out.by_first.emplace(region.first, std::move(region));
  }
  return out;
}

}  // namespace

// Note [Donated operands]
// A kernel whose handler has an in-place form (Handler::in_place: index_copy) writes its result into
// operand 0 instead of a new allocation when that is safe: operand 0's value is used by no later node and
// is no graph output, nothing but this run holds it (into_value succeeds: no caller handle, tape record,
// view or sibling), and nothing is recorded (no session, or one with gradients off). The caller donates a
// value by moving its only handle into the bindings: a KV cache planned once at its full capacity is then
// updated in place by each decode step, and comes back as the node's output. Otherwise the node runs
// out of place, with the same values; a donated value the run cannot use is released as usual.

ExecutionResult execute(const plan::AcceptedGraphPlan& plan, std::map<std::string, EagerTensor> bindings,
                        const ExecutionOptions& options) {
  const ir::Graph& g = plan.graph();
  if (!options.checkpoint_regions.empty() && options.session == nullptr) {
    throw_error(ErrorCode::invalid_argument, "execute", "checkpoint regions need a session to record them");
  }
  // Every node that executes was admitted by the planner (Note [One admission]).
  PACT_DCHECK(plan.bound().size() == plan.audit().kernels.size(), "execute");  // the planner binds every kernel
  std::unordered_map<std::string, const contract::BoundKernel*> kernel_of;
  for (std::size_t k = 0; k < plan.audit().kernels.size(); ++k) {
    if (plan.audit().kernels[k].purpose == plan::KernelPurpose::node)
      kernel_of[plan.audit().kernels[k].node] = &plan.bound()[k];
  }

  const Regions regions = checkpoint_regions_of(g, options.checkpoint_regions);
  const std::vector<int>& region_of = regions.region_of;
  // Running statistics update in training mode only, from a batch_norm node's input as it runs: each
  // node's statistics kernel, looked up once per run.
  std::vector<const contract::BoundKernel*> stats_of(g.nodes.size(), nullptr);
  if (options.session != nullptr && options.session->training()) {
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      const ir::Node& n = g.nodes[i];
      if (n.op == ops::OpTag::batch_norm && n.inputs.size() == 5)
        stats_of[i] = plan.training_kernel(plan::KernelPurpose::running_stats, n.id);
    }
  }
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    if (region_of[i] >= 0 && stats_of[i] != nullptr) {
      throw_error(ErrorCode::invalid_argument, "execute",
                  fmt::format("checkpoint region {} holds batch_norm node '{}', whose running statistics a "
                              "recompute would update twice; leave it outside the region",
                              region_of[i], g.nodes[i].id));
    }
  }

  // Last use of each node (outputs live to the end); a region's interior is used by the region.
  std::unordered_map<std::string, std::size_t> last_use;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    for (const auto& in : g.nodes[i].inputs) last_use[in] = i;
  }
  for (const auto& o : g.outputs) last_use[o] = g.nodes.size();

  ExecutionResult result;
  std::unordered_map<std::string, EagerTensor> live;
  std::uint64_t live_bytes = 0;
  std::uint64_t seq = 0;
  auto hold = [&](const std::string& id, EagerTensor t) {
    live_bytes += t.view().nbytes();
    result.peak_bytes = std::max(result.peak_bytes, live_bytes);
    live.emplace(id, std::move(t));
  };
  auto run = [&](const ir::Node& n, std::span<const EagerTensor> in) {
    const contract::BoundKernel& k = *kernel_of.at(n.id);
    if (options.session != nullptr) return options.session->run_admitted(k, n.op, in, n.attrs, n.id);
    kernels::KernelContext ctx = options.context;
    ctx.seed = options.context.seed * 0x9e3779b97f4a7c15ULL + (++seq);
    return run_recorded(*k.handler(), n.op, in, n.attrs, ctx, nullptr);
  };
  auto release_inputs_of = [&](const ir::Node& n, std::size_t i) {
    for (const auto& id : n.inputs) {
      auto lu = last_use.find(id);
      if (lu == last_use.end() || lu->second > i) continue;
      if (auto it = live.find(id); it != live.end()) {
        live_bytes -= it->second.view().nbytes();
        live.erase(it);
      }
    }
  };
  using Clock = std::chrono::steady_clock;
  const bool timed = options.node_seconds != nullptr;
  // Note [Donated operands]: the node's output when it ran in place, else nullopt (nothing changed).
  const bool records = options.session != nullptr && options.session->grad_enabled();
  auto run_in_place = [&](const ir::Node& n, std::size_t i) -> std::optional<EagerTensor> {
    const kernels::Handler& h = *kernel_of.at(n.id)->handler();
    if (h.in_place == nullptr || records || n.inputs.empty()) return std::nullopt;
    const std::string& target = n.inputs[0];
    if (last_use.at(target) != i || std::count(n.inputs.begin(), n.inputs.end(), target) != 1) return std::nullopt;
    auto it = live.find(target);
    ValueRef ref = std::move(it->second.value);
    live.erase(it);
    const std::uint64_t bytes = ref->view().nbytes();
    auto owner = into_value(std::move(ref));
    if (!owner) {  // someone else holds it: put it back and run out of place
      live.emplace(target, EagerTensor{std::move(owner.error().second)});
      return std::nullopt;
    }
    live_bytes -= bytes;
    Tensor x = std::move(owner).value();
    std::vector<TensorView> read;
    for (std::size_t k = 1; k < n.inputs.size(); ++k) read.push_back(live.at(n.inputs[k]).view());
    const auto start = timed ? Clock::now() : Clock::time_point{};
    kernels::run_in_place(h, x, read, n.attrs);
    if (timed) (*options.node_seconds)[i] += std::chrono::duration<double>(Clock::now() - start).count();
    read.clear();
    return EagerTensor{retain(std::move(x))};
  };
  if (timed && options.node_seconds->size() < g.nodes.size()) options.node_seconds->resize(g.nodes.size(), 0.0);
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    if (auto reg = regions.by_first.find(i); reg != regions.by_first.end()) {
      const Region& region = reg->second;
      std::vector<EagerTensor> in;
      for (const auto& id : region.inputs) in.push_back(live.at(id));
      // The body owns copies of its nodes and kernels: the tape keeps it for backward, past this plan.
      std::vector<std::pair<ir::Node, contract::BoundKernel>> steps;
      for (const ir::Node* node : region.nodes) steps.emplace_back(*node, *kernel_of.at(node->id));
      Session::RegionBody body = [steps, names = region.inputs, output = region.output](
                                     Session& s, std::span<const EagerTensor> args) {
        std::map<std::string, EagerTensor> local;
        for (std::size_t k = 0; k < names.size(); ++k) local.emplace(names[k], args[k]);
        for (const auto& [node, kernel] : steps) {
          std::vector<EagerTensor> ins;
          for (const auto& id : node.inputs) ins.push_back(local.at(id));
          local.emplace(node.id, s.run_admitted(kernel, node.op, ins, node.attrs, node.id));
        }
        return local.at(output);
      };
      const auto start = timed ? Clock::now() : Clock::time_point{};
      hold(region.output, options.session->checkpoint(body, in));
      if (timed) (*options.node_seconds)[i] += std::chrono::duration<double>(Clock::now() - start).count();
      for (std::size_t k = region.first; k <= region.last; ++k) release_inputs_of(g.nodes[k], region.last);
      continue;
    }
    if (region_of[i] >= 0) continue;  // ran inside its region
    const auto role = ops::op_info(n.op).role;
    if (role == ops::OpRole::source) {
      auto it = bindings.find(n.id);
      if (it == bindings.end())
        throw_error(ErrorCode::invalid_argument, "execute", fmt::format("no value bound to '{}'", n.id));
      if (auto why = ir::Graph::binding_mismatch(n, it->second.dtype(), it->second.shape())) {
        throw_error(ErrorCode::invalid_argument, "execute", *why);
      }
      hold(n.id, std::move(it->second));
    } else if (auto donated = run_in_place(n, i)) {
      hold(n.id, std::move(*donated));
    } else {
      std::vector<EagerTensor> in;
      for (const auto& id : n.inputs) in.push_back(live.at(id));
      const auto start = timed ? Clock::now() : Clock::time_point{};
      hold(n.id, role == ops::OpRole::sink ? in[0] : run(n, in));
      if (const contract::BoundKernel* stats = stats_of[i]) {
        // New running statistics in fresh owners: the tape may retain the old ones for the VJP.
        Tensor mean = in[3].view().duplicate(), var = in[4].view().duplicate();
        Tensor* state[] = {&mean, &var};
        const TensorView x = in[0].view();
        kernels::run_update(*stats->handler(), state, std::span<const TensorView>(&x, 1),
                            ops::Attributes{{"momentum", n.attrs.get_float("batch_norm", "momentum", 0.1)}});
        result.running_stats.insert_or_assign(n.inputs[3], std::move(mean));
        result.running_stats.insert_or_assign(n.inputs[4], std::move(var));
      }
      if (timed) (*options.node_seconds)[i] += std::chrono::duration<double>(Clock::now() - start).count();
    }
    release_inputs_of(n, i);
  }
  for (const auto& o : g.outputs) result.outputs.emplace(o, live.at(o));
  return result;
}

}  // namespace pact::runtime
