#include "pact/picture/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "pact/core/error.hpp"
#include "pact/core/file.hpp"

namespace pact::picture {

namespace {

// Text for HTML element content and attribute values.
std::string html(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// JSON placed inside a <script type="application/json"> element: "</" cannot end the element early.
std::string script_json(const Json& value) {
  std::string text = value.dump();
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '<') {
      out += "\\u003c";
    } else {
      out += text[i];
    }
  }
  return out;
}

// An SVG document inlined into HTML: its XML prolog and doctype dropped.
std::string inline_svg(std::string_view svg) {
  const auto start = svg.find("<svg");
  return start == std::string_view::npos ? std::string() : std::string(svg.substr(start));
}

// A polyline chart of `values` (x = index), titled; empty when there are no finite values.
std::string line_chart(const std::vector<double>& values, const std::string& title, const std::string& colour) {
  const double w = 640, h = 320, pad = 40;
  double lo = 1e300, hi = -1e300;
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  if (lo > hi) lo = hi = 0;
  if (!(hi > lo)) hi = lo + 1;
  std::string pts;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) continue;
    const double x =
        pad +
        (w - 2 * pad) * (values.size() > 1 ? static_cast<double>(i) / static_cast<double>(values.size() - 1) : 0.0);
    const double y = h - pad - (h - 2 * pad) * (values[i] - lo) / (hi - lo);
    pts += fmt::format("{:.1f},{:.1f} ", x, y);
  }
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"24\" font-family=\"sans-serif\" font-size=\"14\">{3}</text>\n"
      "<line x1=\"{2}\" y1=\"{4}\" x2=\"{5}\" y2=\"{4}\" stroke=\"black\"/><line x1=\"{2}\" y1=\"{2}\" x2=\"{2}\" "
      "y2=\"{4}\" stroke=\"black\"/>\n"
      "<text x=\"4\" y=\"{2}\" font-family=\"sans-serif\" font-size=\"11\">{6:.3f}</text><text x=\"4\" y=\"{4}\" "
      "font-family=\"sans-serif\" font-size=\"11\">{7:.3f}</text>\n"
      "<polyline fill=\"none\" stroke=\"{9}\" stroke-width=\"1.5\" points=\"{8}\"/>\n</svg>\n",
      w, h, pad, html(title), h - pad, w - pad, hi, lo, pts, colour);
}

const Json& field(const Json& doc, const char* name, const char* where) {
  if (!doc.is_object() || !doc.contains(name))
    throw_error(ErrorCode::parse_error, "pact report", fmt::format("{} has no '{}'", where, name));
  return doc.at(name);
}

// The page's script: builds the audit table from the embedded rows, sorts by a clicked header (again:
// the other way), filters by the search box (every cell's text, case-insensitive). No network, no eval.
constexpr std::string_view kScript = R"JS(
(function () {
  const rows = JSON.parse(document.getElementById('audit-data').textContent);
  const columns = ['node', 'op', 'purpose', 'capsule', 'provider', 'isa', 'evidence', 'verdict'];
  const body = document.querySelector('#audit tbody');
  const count = document.getElementById('audit-count');
  let order = rows.map((_, i) => i), sortColumn = null, ascending = true;
  function draw() {
    const needle = document.getElementById('audit-filter').value.trim().toLowerCase();
    body.textContent = '';
    let shown = 0;
    for (const i of order) {
      const r = rows[i];
      const tr = document.createElement('tr');
      const text = columns.map(c => String(r[c] ?? '')).join(' ').toLowerCase();
      if (needle && !text.includes(needle)) tr.hidden = true; else shown++;
      if (r.verdict === 'rejected') tr.className = 'rejected';
      for (const c of columns) {
        const td = document.createElement('td');
        td.textContent = String(r[c] ?? '');
        tr.appendChild(td);
      }
      body.appendChild(tr);
    }
    count.textContent = shown + ' of ' + rows.length + ' planned nodes';
  }
  document.querySelectorAll('#audit th').forEach((th, k) => {
    th.addEventListener('click', () => {
      const c = columns[k];
      ascending = sortColumn === c ? !ascending : true;
      sortColumn = c;
      order = rows.map((_, i) => i).sort((a, b) => {
        const x = String(rows[a][c] ?? ''), y = String(rows[b][c] ?? '');
        return (x < y ? -1 : x > y ? 1 : a - b) * (ascending ? 1 : -1);
      });
      document.querySelectorAll('#audit th').forEach(h => h.removeAttribute('aria-sort'));
      th.setAttribute('aria-sort', ascending ? 'ascending' : 'descending');
      draw();
    });
  });
  document.getElementById('audit-filter').addEventListener('input', draw);
  draw();
})();
)JS";

}  // namespace

std::string loss_curve_svg(const std::vector<double>& step_loss, const std::string& metric) {
  return line_chart(step_loss, "pact train: training loss per step (final " + metric + ")", "#1f77b4");
}

// Note [Run report]
// The page is one file: styles, the script and its data inline, the charts and the graph as inline SVG.
// Its Content-Security-Policy allows nothing to be fetched (default-src 'none'), so a report opened
// from a mail attachment or an air-gapped machine reads the same. The audit rows are data (a JSON block
// the script reads with JSON.parse), never markup, so a node or capsule name cannot inject HTML.
namespace {
std::string render(const Json& report, std::string_view graph_svg);
}  // namespace

std::string render_run_report(const Json& report, std::string_view graph_svg) {
  try {
    return render(report, graph_svg);
  } catch (const Json::exception& e) {  // a field of the wrong type in a hand-edited or hostile report.json
    throw_error(ErrorCode::parse_error, "pact report", fmt::format("report.json: {}", e.what()));
  }
}

namespace {
std::string render(const Json& report, std::string_view graph_svg) {
  const char* where = "report.json";
  if (field(report, "schema", where) != "pact.train-report.v1")
    throw_error(ErrorCode::parse_error, "pact report", "report.json is not a pact.train-report.v1 document");
  const Json& config = field(report, "config", where);
  const Json& epochs = field(report, "epochs", where);
  const Json& audit = field(report, "plan_audit", where);
  if (!config.is_object() || !epochs.is_array() || !audit.is_object())
    throw_error(ErrorCode::parse_error, "pact report", "report.json: config, epochs or plan_audit has the wrong type");

  // The audit rows: every planned kernel, with the evidence kinds and the verdict of its obligations.
  std::map<std::string, std::set<std::string>> kinds;
  std::map<std::string, bool> rejected;
  if (audit.contains("obligations") && audit.at("obligations").is_array()) {
    for (const auto& o : audit.at("obligations")) {
      const std::string node = o.value("node", "");
      if (o.contains("evidence") && o.at("evidence").is_object())
        kinds[node].insert(o.at("evidence").value("kind", ""));
      if (!o.value("accepted", true)) rejected[node] = true;
    }
  }
  Json rows = Json::array();
  if (audit.contains("kernels") && audit.at("kernels").is_array()) {
    for (const auto& k : audit.at("kernels")) {
      const std::string node = k.value("node", "");
      std::string evidence;
      for (const auto& kind : kinds[node]) evidence += (evidence.empty() ? "" : ", ") + kind;
      const bool has_capsule = k.contains("capsule") && k.at("capsule").is_string();
      rows.push_back(Json{{"node", node},
                          {"op", k.value("op", "")},
                          {"purpose", k.value("purpose", "")},
                          {"capsule", has_capsule ? k.at("capsule").get<std::string>() : std::string("(none)")},
                          {"provider", k.value("provider", "")},
                          {"isa", k.value("isa", "")},
                          {"evidence", evidence},
                          {"verdict", rejected[node] || !has_capsule ? "rejected" : "accepted"}});
    }
  }

  std::vector<double> step_loss, metric;
  if (report.contains("step_loss") && report.at("step_loss").is_array()) {
    for (const auto& v : report.at("step_loss")) step_loss.push_back(v.is_number() ? v.get<double>() : NAN);
  }
  const bool regression = report.value("final_rmse", 0.0) > 0;
  std::string epoch_rows;
  for (const auto& e : epochs) {
    if (!e.is_object()) continue;
    metric.push_back(regression ? e.value("rmse", 0.0) : 100 * e.value("accuracy", 0.0));
    epoch_rows += fmt::format("<tr><td>{}</td><td>{:.4f}</td><td>{}</td><td>{:.3f}</td></tr>\n", e.value("epoch", 0),
                              e.value("loss", 0.0),
                              regression ? fmt::format("{:.4g}", e.value("rmse", 0.0))
                                         : fmt::format("{:.2f}%", 100 * e.value("accuracy", 0.0)),
                              e.value("seconds", 0.0));
  }
  // The final metric: a language model's evaluation loss, a regression's RMSE, or a classifier's accuracy.
  const bool language = report.contains("evaluation_loss");
  const std::string final_metric =
      language     ? fmt::format("evaluation loss {:.3f} nats/char", report.value("evaluation_loss", 0.0))
      : regression ? fmt::format("held-out RMSE {:.4g}", report.value("final_rmse", 0.0))
                   : fmt::format("held-out accuracy {:.2f}%", 100 * report.value("final_accuracy", 0.0));
  std::string config_rows;
  for (const auto& [key, value] : config.items())
    config_rows += fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", html(key),
                               html(value.is_string() ? value.get<std::string>() : value.dump()));
  if (report.contains("data") && report.at("data").is_object()) {
    for (const auto& [key, value] : report.at("data").items())
      config_rows += fmt::format("<tr><th>data {}</th><td>{}</td></tr>\n", html(key),
                                 html(value.is_string() ? value.get<std::string>() : value.dump()));
  }
  const std::string model = config.value("model", "model");
  const std::string profile = audit.value("profile", config.value("profile", ""));

  std::string page;
  page += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  page +=
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
      "script-src 'unsafe-inline'; img-src data:\">\n";
  page += fmt::format("<title>pact train: {} under {}</title>\n", html(model), html(profile));
  page += R"CSS(<style>
body { font-family: sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; }
#audit th { cursor: pointer; background: #f2f2f2; }
#audit th[aria-sort=ascending]::after { content: " \25b2"; } #audit th[aria-sort=descending]::after { content: " \25bc"; }
tr.rejected td { background: #fde0e0; }
.charts { display: flex; flex-wrap: wrap; gap: 1em; }
.graph { overflow: auto; max-height: 48em; border: 1px solid #ddd; }
.summary { font-size: 1.05em; }
</style>
)CSS";
  page += "</head>\n<body>\n";
  page += fmt::format("<h1>pact train: {} under {}</h1>\n", html(model), html(profile));
  page += fmt::format("<p class=\"summary\" id=\"summary\">{}; {} updates in {:.2f} s; plan verdict: {}</p>\n",
                      html(final_metric), report.value("updates", 0), report.value("seconds_total", 0.0),
                      html(audit.value("verdict", "")));
  page += "<h2>Curves</h2>\n<div class=\"charts\">\n";
  if (!step_loss.empty()) page += loss_curve_svg(step_loss, final_metric);
  if (!metric.empty())
    page += line_chart(metric, regression ? "held-out RMSE per epoch" : "held-out accuracy per epoch (%)", "#2ca02c");
  page += "</div>\n";
  page +=
      "<h2>Plan audit</h2>\n<p><label>Filter: <input id=\"audit-filter\" type=\"search\" "
      "placeholder=\"node, op, capsule, provider, evidence...\"></label> <span id=\"audit-count\"></span></p>\n";
  page +=
      "<table id=\"audit\"><thead><tr><th>node</th><th>op</th><th>purpose</th><th>capsule</th><th>provider</th>"
      "<th>isa</th><th>evidence</th><th>verdict</th></tr></thead><tbody></tbody></table>\n";
  page += "<script type=\"application/json\" id=\"audit-data\">" + script_json(rows) + "</script>\n";
  if (!graph_svg.empty()) page += "<h2>Graph</h2>\n<div class=\"graph\">" + inline_svg(graph_svg) + "</div>\n";
  if (!epoch_rows.empty())
    page += "<h2>Epochs</h2>\n<table id=\"epochs\"><thead><tr><th>epoch</th><th>loss</th><th>" +
            std::string(regression ? "held-out RMSE" : "held-out accuracy") +
            "</th><th>seconds</th></tr></thead><tbody>\n" + epoch_rows + "</tbody></table>\n";
  page += "<h2>Configuration and timings</h2>\n<table id=\"config\">\n" + config_rows;
  page += fmt::format("<tr><th>seconds total</th><td>{:.3f}</td></tr>\n<tr><th>updates</th><td>{}</td></tr>\n",
                      report.value("seconds_total", 0.0), report.value("updates", 0));
  page += fmt::format("<tr><th>backward retained bytes (peak)</th><td>{}</td></tr>\n</table>\n",
                      report.value("backward_retained_bytes_peak", 0));
  page += "<script>" + std::string(kScript) + "</script>\n</body>\n</html>\n";
  return page;
}
}  // namespace

std::string rebuild_run_report(const std::string& run_dir) {
  const std::filesystem::path dir(run_dir);
  const std::string report_path = (dir / "report.json").string();
  const Json report = parse_json(read_file(report_path, "pact report"), report_path);
  std::string graph;
  const std::filesystem::path graph_path = dir / "graph.svg";
  std::error_code ec;
  if (std::filesystem::is_regular_file(graph_path, ec)) graph = read_file(graph_path.string(), "pact report");
  const std::string out = (dir / "report.html").string();
  write_file_atomic(out, render_run_report(report, graph), "pact report");
  return out;
}

}  // namespace pact::picture
