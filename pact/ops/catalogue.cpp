#include "pact/ops/catalogue.hpp"

#include <fmt/format.h>

#include "pact/ops/op_table.hpp"

namespace pact::ops {

namespace {
std::string_view role_name(OpRole r) {
  switch (r) {
    case OpRole::source:
      return "source";
    case OpRole::view:
      return "view";
    case OpRole::kernel:
      return "kernel";
    case OpRole::sink:
      return "sink";
    case OpRole::update:
      return "update";
    case OpRole::collective:
      return "collective";
  }
  return "?";
}
}  // namespace

std::string render_catalogue_markdown() {
  std::string s =
      "# Op catalogue\n\n"
      "Generated from the op table (`pact/ops/op_table.hpp`) by `pact ops --markdown`; a test fails when this\n"
      "file and the table differ. Tolerances compare an implementationDefined kernel with the fixedLeft\n"
      "reference: |candidate - reference| <= abs + rel * max(1, max|reference|). Operand roles: d data, w weight,\n"
      "b bias, s running statistic, i index or class target, m mask, u state written in place, c any dtype "
      "(converted,\n"
      "or only its geometry read). VJP \"no gradient\": none flows through the op (integer outputs, or outputs that "
      "do\n"
      "not depend on the input values); training admits it forward only. VJP saves: what the tape retains for the\n"
      "VJP (inN: input N, out: the output); passthrough: inputs whose gradient is the cotangent itself. bf16 and\n"
      "f16 results (the half provider) are held to the f32 tolerance widened to a multiple of the 16-bit unit\n"
      "roundoff (Note [16-bit tolerances] in pact/ops/op_table.cpp).\n\n"
      "| kind | arity | attributes (* required) | role | operand roles | VJP | VJP saves | passthrough | "
      "mode-dependent | forward tolerance (abs, rel) | bf16, f16 (abs = rel) |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& op : op_table()) {
    std::string attrs;
    for (const auto& a : op.attributes) {
      if (!attrs.empty()) attrs += ", ";
      attrs += fmt::format("`{}`{}: {}", a.name, a.required ? "*" : "", attr_type_name(a.type));
    }
    std::string arity = op.max_arity < 0               ? fmt::format("{}+", op.min_arity)
                        : op.min_arity == op.max_arity ? fmt::format("{}", op.min_arity)
                                                       : fmt::format("{}..{}", op.min_arity, op.max_arity);
    auto operands = [](std::uint32_t bits) {
      std::string o;
      for (std::size_t k = 0; k < 16; ++k) {
        if ((bits >> k & 1u) != 0) o += fmt::format("{}in{}", o.empty() ? "" : " ", k);
      }
      if ((bits & operand::out) != 0) o += o.empty() ? "out" : " out";
      return o.empty() ? std::string("—") : o;
    };
    auto t = op.tolerance();
    s += fmt::format("| `{}` | {} | {} | {} | {} | {} | {} | {} | {} | ({:g}, {:g}) | {:g}, {:g} |\n", op.kind, arity,
                     attrs.empty() ? "—" : attrs, role_name(op.role), op.roles.empty() ? "—" : op.roles,
                     op.has_vjp         ? "yes"
                     : op.gradient_free ? "no gradient"
                                        : "no",
                     op.has_vjp ? operands(op.saves) : "—", operands(op.passthrough), op.mode_dependent ? "yes" : "no",
                     t.abs, t.rel, op.tolerance(DType::bf16).rel, op.tolerance(DType::f16).rel);
  }
  return s;
}

}  // namespace pact::ops
