#include "pact/runtime/executor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "pact/runtime/session.hpp"

namespace pact::runtime {

namespace {

// A checkpoint region: its nodes in order, the values it reads from outside, its one output.
struct Region {
  std::vector<std::string> inputs;
  std::vector<std::uint32_t> input_positions;
  std::string output;
  std::uint32_t output_position = 0;
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
      for (const auto& in : g.nodes[k].inputs) {
        if (!members.count(in) && std::find(region.inputs.begin(), region.inputs.end(), in) == region.inputs.end()) {
          region.inputs.push_back(in);
          region.input_positions.push_back(static_cast<std::uint32_t>(position.at(in)));
        }
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
    region.output_position = static_cast<std::uint32_t>(position.at(region.output));
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
  const plan::Schedule& schedule = plan.schedule();
  constexpr std::uint32_t kNone = plan::Schedule::kNone;
  if (!options.checkpoint_regions.empty() && options.session == nullptr) {
    throw_error(ErrorCode::invalid_argument, "execute", "checkpoint regions need a session to record them");
  }
  // Every node that executes was admitted by the planner (Note [One admission]).
  PACT_DCHECK(plan.bound().size() == plan.audit().kernels.size(), "execute");  // the planner binds every kernel
  auto kernel_at = [&](std::size_t i) -> const contract::BoundKernel& {
    const std::uint32_t k = schedule.kernel[i];
    if (k == kNone) {
      throw_error(ErrorCode::internal, "execute", fmt::format("node '{}' has no bound kernel", g.nodes[i].id));
    }
    return plan.bound()[k];
  };

  const Regions regions = checkpoint_regions_of(g, options.checkpoint_regions);
  const std::vector<int>& region_of = regions.region_of;
  // Running statistics update in training mode only, from a batch_norm node's input as it runs: each
  // node's statistics kernel, looked up once per run.
  std::vector<const contract::BoundKernel*> stats_of;
  if (options.session != nullptr && options.session->training()) {
    stats_of.assign(g.nodes.size(), nullptr);
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      const ir::Node& n = g.nodes[i];
      if (n.op == ops::OpTag::batch_norm && n.inputs.size() == 5)
        stats_of[i] = plan.training_kernel(plan::KernelPurpose::running_stats, n.id);
      if (region_of[i] >= 0 && stats_of[i] != nullptr) {
        throw_error(ErrorCode::invalid_argument, "execute",
                    fmt::format("checkpoint region {} holds batch_norm node '{}', whose running statistics a "
                                "recompute would update twice; leave it outside the region",
                                region_of[i], n.id));
      }
    }
  }

  // The live values by position; a value dies after its last use (Schedule::dies_after), outputs live on.
  ExecutionResult result;
  std::vector<EagerTensor> live(g.nodes.size());
  std::uint64_t live_bytes = 0;
  std::uint64_t seq = 0;
  auto hold = [&](std::size_t v, EagerTensor t) {
    live_bytes += t.view().nbytes();
    result.peak_bytes = std::max(result.peak_bytes, live_bytes);
    live[v] = std::move(t);
  };
  auto release_after = [&](std::size_t i) {
    for (const std::uint32_t v : schedule.dies_after[i]) {
      if (!live[v].value) continue;
      live_bytes -= live[v].view().nbytes();
      live[v] = EagerTensor{};
    }
  };
  auto run = [&](std::size_t i, std::span<const EagerTensor> in) {
    const ir::Node& n = g.nodes[i];
    const contract::BoundKernel& k = kernel_at(i);
    if (options.session != nullptr) return options.session->run_admitted(k, n.op, in, n.attrs, n.id);
    kernels::KernelContext ctx = options.context;
    ctx.seed = options.context.seed * 0x9e3779b97f4a7c15ULL + (++seq);
    return run_recorded(*k.handler(), n.op, in, n.attrs, ctx, nullptr);
  };
  using Clock = std::chrono::steady_clock;
  const bool timed = options.node_seconds != nullptr;
  // Note [Donated operands]: the node's output when it ran in place, else nullopt (nothing changed).
  const bool records = options.session != nullptr && options.session->grad_enabled();
  auto run_in_place = [&](std::size_t i) -> std::optional<EagerTensor> {
    const std::vector<std::uint32_t>& inputs = schedule.inputs[i];
    if (records || inputs.empty() || schedule.kernel[i] == kNone) return std::nullopt;
    const kernels::Handler& h = *kernel_at(i).handler();
    if (h.in_place == nullptr) return std::nullopt;
    const std::uint32_t target = inputs[0];
    if (schedule.last_use[target] != i || std::count(inputs.begin(), inputs.end(), target) != 1) return std::nullopt;
    ValueRef ref = std::move(live[target].value);
    live[target] = EagerTensor{};
    const std::uint64_t bytes = ref->view().nbytes();
    auto owner = into_value(std::move(ref));
    if (!owner) {  // someone else holds it: put it back and run out of place
      live[target] = EagerTensor{std::move(owner.error().second)};
      return std::nullopt;
    }
    live_bytes -= bytes;
    Tensor x = std::move(owner).value();
    std::vector<TensorView> read;
    for (std::size_t k = 1; k < inputs.size(); ++k) read.push_back(live[inputs[k]].view());
    const auto start = timed ? Clock::now() : Clock::time_point{};
    kernels::run_in_place(h, x, read, g.nodes[i].attrs);
    if (timed) (*options.node_seconds)[i] += std::chrono::duration<double>(Clock::now() - start).count();
    read.clear();
    return EagerTensor{retain(std::move(x))};
  };
  if (timed && options.node_seconds->size() < g.nodes.size()) options.node_seconds->resize(g.nodes.size(), 0.0);
  std::vector<EagerTensor> in;  // one node's operands, reused
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    if (auto reg = regions.by_first.find(i); reg != regions.by_first.end()) {
      const Region& region = reg->second;
      in.clear();
      for (const std::uint32_t v : region.input_positions) in.push_back(live[v]);
      // The body owns copies of its nodes and kernels: the tape keeps it for backward, past this plan.
      std::vector<std::pair<ir::Node, contract::BoundKernel>> steps;
      for (std::size_t k = region.first; k <= region.last; ++k) steps.emplace_back(g.nodes[k], kernel_at(k));
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
      hold(region.output_position, options.session->checkpoint(body, in));
      if (timed) (*options.node_seconds)[i] += std::chrono::duration<double>(Clock::now() - start).count();
      in.clear();
      for (std::size_t k = region.first; k <= region.last; ++k) release_after(k);
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
      hold(i, std::move(it->second));
    } else if (auto donated = run_in_place(i)) {
      hold(i, std::move(*donated));
    } else {
      in.clear();
      for (const std::uint32_t v : schedule.inputs[i]) in.push_back(live[v]);
      const auto start = timed ? Clock::now() : Clock::time_point{};
      hold(i, role == ops::OpRole::sink ? in[0] : run(i, in));
      if (const contract::BoundKernel* stats = stats_of.empty() ? nullptr : stats_of[i]) {
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
      in.clear();
    }
    release_after(i);
  }
  for (std::size_t k = 0; k < g.outputs.size(); ++k) result.outputs.emplace(g.outputs[k], live[schedule.outputs[k]]);
  return result;
}

}  // namespace pact::runtime
