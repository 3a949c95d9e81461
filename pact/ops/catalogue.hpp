#pragma once
/// The op catalogue rendered from the table (docs/ops.md is this text; a test keeps them equal).

#include <string>

namespace pact::ops {

/// Markdown: one row per op with kind, arity, attributes, role, VJP, mode dependence and tolerance.
std::string render_catalogue_markdown();

}  // namespace pact::ops
