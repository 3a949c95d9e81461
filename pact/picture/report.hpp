#pragma once
/// The HTML run report (issue 24 item 3): one self-contained file beside report.json, readable with no
/// network access (a Content-Security-Policy forbids every fetch): the loss and held-out metric curves,
/// the plan audit as a table sortable by any column and filtered by a search box, the graph picture, the
/// configuration, the data and the timings. `pact train` writes it; `pact report RUN_DIR` rebuilds it.

#include <string>
#include <string_view>
#include <vector>

#include "pact/core/json.hpp"

namespace pact::picture {

/// The training loss per step as an SVG line chart, titled with the final metric.
std::string loss_curve_svg(const std::vector<double>& step_loss, const std::string& metric);

/// The report of a run from its report.json document ("pact.train-report.v1") and the SVG picture of its
/// plan ("" when there is none). parse_error naming the field when the document lacks what the report
/// shows (schema, config, epochs, plan_audit).
std::string render_run_report(const Json& report, std::string_view graph_svg);

/// `pact report RUN_DIR`: reads RUN_DIR/report.json and RUN_DIR/graph.svg (when present), writes
/// RUN_DIR/report.html atomically and returns its path. io_error for a missing or unreadable report.json.
std::string rebuild_run_report(const std::string& run_dir);

}  // namespace pact::picture
