// Compile probe (Note [Planner passkey]): code outside the planner cannot make an AcceptedGraphPlan or a
// BoundKernel. tests/plan/CMakeLists.txt compiles this file as it is, which must succeed (the includes and
// the legitimate uses are sound, so a failure below is the forgery's), and once with each
// PACT_PROBE_FORGE_* defined, which must fail to compile for the reason named beside it.

#include "pact/plan/planner.hpp"

namespace probe {

// What any caller may do with an admitted plan: read it, copy it (a copy stays admitted).
[[maybe_unused]] std::size_t legitimate(const pact::plan::AcceptedGraphPlan& plan) {
  const pact::plan::AcceptedGraphPlan copy = plan;
  return copy.bound().size() + copy.audit().kernels.size() + copy.graph().nodes.size();
}

#if defined(PACT_PROBE_FORGE_KEY)
// PlannerKey's constructor is private.
pact::contract::PlannerKey forge() { return pact::contract::PlannerKey{}; }
#elif defined(PACT_PROBE_FORGE_KEY_FROM_PLANNER)
// Planner::key() is private; only admit_kernel and plan_graph are its friends.
pact::contract::PlannerKey forge() { return pact::plan::Planner::key(); }
#elif defined(PACT_PROBE_FORGE_PLAN)
// An AcceptedGraphPlan needs a PlannerKey.
pact::plan::AcceptedGraphPlan forge(pact::ir::Graph g) {
  return pact::plan::AcceptedGraphPlan{{}, std::move(g), {}, {}};
}
#elif defined(PACT_PROBE_FORGE_BOUND_KERNEL)
// A BoundKernel needs a PlannerKey.
pact::contract::BoundKernel forge(const pact::contract::Capsule& c, const pact::kernels::Handler& h) {
  return pact::contract::BoundKernel{{}, c, h};
}
#elif defined(PACT_PROBE_FORGE_BOUND_KERNEL_AGGREGATE)
// The aggregate spelling of the old struct no longer exists.
pact::contract::BoundKernel forge(const pact::contract::Capsule& c, const pact::kernels::Handler& h) {
  return pact::contract::BoundKernel{&c, &h};
}
#endif

}  // namespace probe
