#include "pact/verify/ledger.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <map>
#include <set>

#include "pact/core/file.hpp"
#include "pact/core/toml_table.hpp"

namespace pact::ledger {

namespace fs = std::filesystem;

// ---- Diagnostics ------------------------------------------------------------------------------------

const std::vector<DiagnosticSpec>& diagnostic_registry() {
  static const std::vector<DiagnosticSpec> registry{
      // schema shape
      {"E_TOML_PARSE", {"column", "line", "source"}},
      {"E_SCHEMA_VERSION", {"actual", "expected"}},
      {"E_SCHEMA_UNKNOWN_FIELD", {"field", "table"}},
      {"E_SCHEMA_MISSING_FIELD", {"field", "table"}},
      {"E_SCHEMA_TYPE", {"expected", "field", "table"}},
      {"E_DUPLICATE_ID", {"id", "kind"}},
      {"E_STATE_KIND", {"kind", "obligation_id"}},
      // registry graph and cohorts
      {"E_REGISTRY_REVISION", {"revision"}},
      {"E_EDGE_UNKNOWN_UNIT", {"from", "to", "unit"}},
      {"E_GRAPH_CYCLE", {"units"}},
      {"E_COHORT_UNKNOWN_UNIT", {"cohort_id", "unit"}},
      {"E_COHORT_OVERLAP", {"cohort_id", "unit"}},
      {"E_COHORT_SIZE", {"cohort_id"}},
      {"E_UNIT_EMPTY", {"unit"}},
      // rows and tagged state
      {"E_UNKNOWN_UNIT", {"obligation_id", "unit"}},
      {"E_UNKNOWN_GATE", {"gate", "obligation_id"}},
      {"E_NO_GATES", {"obligation_id"}},
      {"E_STATE_ACTIVATION_UNIT", {"actual", "expected", "obligation_id"}},
      {"E_STATE_PROMOTION", {"mode", "obligation_id"}},
      {"E_PREREQUISITE_INACTIVE", {"prerequisite_obligation_id", "prerequisite_unit", "unit"}},
      {"E_COHORT_PARTIAL", {"cohort_id", "obligation_id"}},
      // artifacts and paths
      {"E_MANIFEST_ESCAPE", {"path"}},
      {"E_MANIFEST_MISSING", {"path"}},
      {"E_PATH_ESCAPE", {"field", "obligation_id", "path"}},
      {"E_ARTIFACT_KIND", {"artifact_id", "kind"}},
      {"E_ARTIFACT_SELECTOR", {"artifact_id", "selector"}},
      {"E_ARTIFACT_MISSING", {"artifact_id", "obligation_id", "path"}},
      {"E_ARTIFACT_CONFLICT", {"artifact_id"}},
      // commands
      {"E_COMMAND_KIND", {"command_id", "kind"}},
      {"E_COMMAND_ARGV", {"actual", "command_id", "expected", "index"}},
      {"E_COMMAND_CWD", {"actual", "command_id", "expected"}},
      {"E_COMMAND_PATH_ARGS", {"command_id", "index"}},
      {"E_COMMAND_TARGET", {"artifact_path", "command_id"}},
      {"E_COMMAND_ARTIFACT", {"actual", "command_id", "expected"}},
      {"E_COMMAND_CONFLICT", {"command_id"}},
      // repository and provenance
      {"E_NOT_A_REPOSITORY", {"root"}},
      {"E_TREE_DIRTY", {"path"}},
      // promotion and revision
      {"E_BASE_UNRESOLVED", {"revision"}},
      {"E_BASE_NOT_ANCESTOR", {"base_commit", "candidate_commit"}},
      {"E_BASE_MANIFEST", {"base_commit", "path"}},
      {"E_REVISION_STEP", {"base", "candidate"}},
      {"E_REGISTRY_CHANGED", {"field"}},
      {"E_OBLIGATION_REMOVED", {"obligation_id"}},
      {"E_REVISION_MEMBERSHIP", {"obligation_id"}},
      {"E_REVISION_WITH_PROMOTION", {"obligation_id"}},
      {"E_DEMOTION", {"obligation_id"}},
      {"E_OBLIGATION_CHANGED", {"field", "obligation_id"}},
      // receipts and execution
      {"E_RECEIPT_PARSE", {"source"}},
      {"E_RECEIPT_SHAPE", {"field"}},
      {"E_RECEIPT_CANDIDATE", {"actual", "expected"}},
      {"E_RECEIPT_BASE", {"actual", "expected"}},
      {"E_RECEIPT_ORDER", {"obligation_id"}},
      {"E_RECEIPT_DUPLICATE", {"obligation_id"}},
      {"E_RECEIPT_UNEXPECTED", {"obligation_id", "state"}},
      {"E_RECEIPT_EXECUTION", {"actual", "expected", "field", "obligation_id"}},
      {"E_RECEIPT_INCOMPLETE", {"obligation_id"}},
      {"E_RECEIPT_WRITE", {"path"}},
      {"E_COMMAND_FAILED", {"exit_code", "obligation_id"}},
  };
  return registry;
}

void Diagnostics::add(std::string code, Json fields, std::string message) {
  items_.push_back({std::move(code), std::move(fields), std::move(message)});
}

bool Diagnostics::has(std::string_view code) const {
  return std::any_of(items_.begin(), items_.end(), [&](const Diagnostic& d) { return d.code == code; });
}

Json Diagnostics::to_json() const {
  Json list = Json::array();
  for (const auto& d : items_) list.push_back({{"code", d.code}, {"fields", d.fields}, {"message", d.message}});
  return {{"schema", std::string(kDiagnosticsSchema)}, {"diagnostics", list}};
}

std::string Diagnostics::render() const {
  std::string out;
  for (const auto& d : items_) {
    out += d.code;
    for (const auto& [k, v] : d.fields.items())
      out += fmt::format(" {}={}", k, v.is_string() ? v.get<std::string>() : v.dump());
    out += ": " + d.message + "\n";
  }
  return out;
}

const Obligation* Manifest::find(std::string_view id) const {
  for (const auto& o : obligations) {
    if (o.id == id) return &o;
  }
  return nullptr;
}

// ---- Parsing ----------------------------------------------------------------------------------------

namespace {

// Schema faults of the shared TOML reader become diagnostics; parsing goes on to report them all.
class LedgerFaults final : public TomlFaults {
 public:
  explicit LedgerFaults(Diagnostics& out) : out_(out) {}
  void unknown_field(const std::string& table, std::string_view field) override {
    out_.add("E_SCHEMA_UNKNOWN_FIELD", {{"table", table}, {"field", std::string(field)}},
             fmt::format("{}: unknown field '{}'", table, field));
  }
  void missing_field(const std::string& table, std::string_view field) override {
    out_.add("E_SCHEMA_MISSING_FIELD", {{"table", table}, {"field", std::string(field)}},
             fmt::format("{}: missing field '{}'", table, field));
  }
  void wrong_type(const std::string& table, std::string_view field, std::string_view expected) override {
    out_.add("E_SCHEMA_TYPE", {{"table", table}, {"field", std::string(field)}, {"expected", std::string(expected)}},
             fmt::format("{}.{}: expected {}", table, field, expected));
  }
  void too_many(const std::string& table, std::string_view field, std::size_t count, std::size_t max) override {
    wrong_type(table, field, fmt::format("at most {} entries, not {}", max, count));
  }

 private:
  Diagnostics& out_;
};

void duplicate(Diagnostics& out, std::string_view kind, const std::string& id) {
  out.add("E_DUPLICATE_ID", {{"kind", std::string(kind)}, {"id", id}}, fmt::format("duplicate {} '{}'", kind, id));
}

template <class T, class Id>
void check_unique(Diagnostics& out, std::string_view kind, const std::vector<T>& items, Id id) {
  std::set<std::string> seen;
  for (const auto& x : items) {
    if (!seen.insert(id(x)).second) duplicate(out, kind, id(x));
  }
}

std::vector<Node> read_nodes(const TomlTable& r, std::string_view key) {
  std::vector<Node> nodes;
  for (const auto& n : r.tables(key, true)) {
    n.keys({"id"}, {"description"});
    nodes.push_back({n.str("id").value_or(""), n.str("description").value_or("")});
  }
  return nodes;
}

}  // namespace

std::optional<Manifest> parse_manifest(std::string_view text, std::string_view source, Diagnostics& out) {
  toml::table doc;
  try {
    doc = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    out.add("E_TOML_PARSE",
            {{"source", std::string(source)},
             {"line", static_cast<std::int64_t>(e.source().begin.line)},
             {"column", static_cast<std::int64_t>(e.source().begin.column)}},
            fmt::format("{}:{}:{}: {}", source, e.source().begin.line, e.source().begin.column, e.description()));
    return std::nullopt;
  }
  const std::size_t before = out.size();
  LedgerFaults faults(out);
  const TomlTable top(doc, "manifest", faults);
  if (const auto* s = doc.get("schema"); s != nullptr) {
    const auto* str = s->as_string();
    const std::string actual =
        str != nullptr ? str->get() : std::string(s->is_value() ? "(not a string)" : "(a table)");
    if (actual != kManifestSchema) {
      out.add("E_SCHEMA_VERSION", {{"expected", std::string(kManifestSchema)}, {"actual", actual}},
              fmt::format("manifest schema is '{}', this checker reads only {}", actual, kManifestSchema));
      return std::nullopt;  // another schema: nothing else is interpreted
    }
  }
  top.keys({"schema", "registry", "obligations"});
  Manifest m;
  if (const auto r = top.table("registry")) {
    r->keys({"units", "gates"}, {"revision", "edges", "cohorts"});
    m.registry.revision = r->integer("revision").value_or(m.registry.revision);
    m.registry.units = read_nodes(*r, "units");
    m.registry.gates = read_nodes(*r, "gates");
    for (const auto& e : r->tables("edges", false)) {
      e.keys({"from", "to"});
      m.registry.edges.push_back({e.str("from").value_or(""), e.str("to").value_or("")});
    }
    for (const auto& c : r->tables("cohorts", false)) {
      c.keys({"id", "units"}, {"description"});
      Cohort cohort{c.str("id").value_or(""), c.strings("units", true).value_or(std::vector<std::string>{})};
      check_unique(out, "cohort unit", cohort.units, [](const std::string& u) { return u; });
      m.registry.cohorts.push_back(std::move(cohort));
    }
  }
  for (const auto& r : top.tables("obligations", true)) {
    r.keys({"id", "unit", "gates", "artifact", "command", "state"}, {"description"});
    Obligation o;
    o.id = r.str("id").value_or("");
    o.unit = r.str("unit").value_or("");
    o.description = r.str("description").value_or("");
    o.gates = r.strings("gates", false).value_or(std::vector<std::string>{});
    check_unique(out, fmt::format("gate of {}", o.id), o.gates, [](const std::string& g) { return g; });
    if (const auto a = r.table("artifact")) {
      a->keys({"id", "kind", "path"}, {"selector"});
      o.artifact = {a->str("id").value_or(""), a->str("kind").value_or(""), a->str("path").value_or(""),
                    a->str("selector")};
    }
    if (const auto c = r.table("command")) {
      c->keys({"id", "kind", "argv", "cwd", "path_args", "artifact_id"});
      o.command.id = c->str("id").value_or("");
      o.command.kind = c->str("kind").value_or("");
      o.command.argv = c->strings("argv", true).value_or(std::vector<std::string>{});
      o.command.cwd = c->str("cwd").value_or("");
      o.command.path_args = c->integers("path_args").value_or(std::vector<std::int64_t>{});
      o.command.artifact_id = c->str("artifact_id").value_or("");
    }
    if (const auto st = r.table("state")) {
      const std::string kind = st->str("kind").value_or("");
      if (!st->has("kind")) faults.missing_field(st->path(), "kind");
      if (kind == "active") {
        st->keys({"kind"});
        o.state.kind = StateKind::active;
      } else if (kind == "deferred") {
        st->keys({"kind", "activation_unit", "promotion"});
        o.state.kind = StateKind::deferred;
        o.state.activation_unit = st->str("activation_unit").value_or("");
        if (const auto p = st->table("promotion")) {
          p->keys({"mode"});
          o.state.promotion_mode = p->str("mode").value_or("");
        }
      } else if (!kind.empty()) {
        out.add("E_STATE_KIND", {{"obligation_id", o.id}, {"kind", kind}},
                fmt::format("obligation '{}': state kind '{}' is neither active nor deferred", o.id, kind));
      }
    }
    m.obligations.push_back(std::move(o));
  }
  check_unique(out, "unit", m.registry.units, [](const Node& n) { return n.id; });
  check_unique(out, "gate", m.registry.gates, [](const Node& n) { return n.id; });
  check_unique(out, "edge", m.registry.edges, [](const Edge& e) { return e.from + " -> " + e.to; });
  check_unique(out, "cohort", m.registry.cohorts, [](const Cohort& c) { return c.id; });
  check_unique(out, "obligation", m.obligations, [](const Obligation& o) { return o.id; });
  if (out.size() != before) return std::nullopt;
  return m;
}

// ---- Structure --------------------------------------------------------------------------------------

namespace {

struct ArtifactKind {
  std::string_view name;
  bool directory;       ///< the path names a directory (else a regular file)
  bool needs_selector;  ///< the selector is required (else forbidden)
};
constexpr ArtifactKind kArtifactKinds[] = {
    {"gtest-source", false, true},      // a GoogleTest source; selector "Suite.Case" names one TEST in it
    {"contract-set", true, false},      // a contracts folder (with binding.yaml)
    {"ledger-manifest", false, false},  // an obligations manifest
    {"model", false, false},            // a pact.ir.v1 model
};
const ArtifactKind* artifact_kind(std::string_view name) {
  for (const auto& k : kArtifactKinds) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

constexpr std::string_view kPactBinary = "build/release/bin/pact";
// The pact subcommands a pact-cli command may run ({first, second}; "" = no second word).
constexpr std::pair<std::string_view, std::string_view> kPactCliCommands[] = {
    {"contracts", "validate"}, {"contracts", "audit"}, {"contracts", "falsify"}, {"ledger", "check"}, {"plan", ""}};

bool is_identifier(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}
// "Suite.Case" with both parts C++ identifiers.
bool is_test_id(std::string_view s) {
  const auto dot = s.find('.');
  return dot != std::string_view::npos && is_identifier(s.substr(0, dot)) && is_identifier(s.substr(dot + 1));
}

std::string join(const std::vector<std::string_view>& v, std::string_view sep) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : std::string(sep)) + std::string(x);
  return out;
}

Json opt_json(const std::vector<std::string>& v, std::size_t i) { return i < v.size() ? Json(v[i]) : Json(nullptr); }

void argv_mismatch(Diagnostics& out, const Command& c, std::size_t index, Json expected, Json actual) {
  out.add(
      "E_COMMAND_ARGV",
      {{"command_id", c.id}, {"index", static_cast<std::int64_t>(index)}, {"expected", expected}, {"actual", actual}},
      fmt::format("command '{}': argv[{}] is {}, expected {}", c.id, index, actual.dump(), expected.dump()));
}

void check_ctest_case(const Obligation& o, Diagnostics& out) {
  const Command& c = o.command;
  if (o.artifact.kind != "gtest-source") {
    if (artifact_kind(o.artifact.kind) == nullptr) return;  // reported with the artifact
    out.add("E_ARTIFACT_KIND", {{"artifact_id", o.artifact.id}, {"kind", o.artifact.kind}},
            fmt::format("command '{}' runs a GoogleTest case: its artifact must be a gtest-source, not {}", c.id,
                        o.artifact.kind));
    return;
  }
  if (c.cwd != ".") {
    out.add("E_COMMAND_CWD", {{"command_id", c.id}, {"expected", "."}, {"actual", c.cwd}},
            fmt::format("command '{}': ctest runs from the repository root", c.id));
  }
  if (!c.path_args.empty()) {
    out.add("E_COMMAND_PATH_ARGS", {{"command_id", c.id}, {"index", c.path_args.front()}},
            fmt::format("command '{}': a ctest-case command has no path arguments", c.id));
  }
  if (!o.artifact.selector) return;  // reported with the artifact
  const auto expected = ctest_case_argv(*o.artifact.selector);
  for (std::size_t i = 0; i < std::max(expected.size(), c.argv.size()); ++i) {
    if (i >= expected.size() || i >= c.argv.size() || expected[i] != c.argv[i]) {
      argv_mismatch(out, c, i, opt_json(expected, i), opt_json(c.argv, i));
      return;
    }
  }
}

void check_pact_cli(const Obligation& o, Diagnostics& out) {
  const Command& c = o.command;
  if (c.argv.front() != kPactBinary) {
    argv_mismatch(out, c, 0, std::string(kPactBinary), c.argv.front());
    return;
  }
  std::vector<std::string_view> firsts;
  for (const auto& [a, b] : kPactCliCommands) {
    if (std::find(firsts.begin(), firsts.end(), a) == firsts.end()) firsts.push_back(a);
  }
  if (c.argv.size() < 2 || std::find(firsts.begin(), firsts.end(), c.argv[1]) == firsts.end()) {
    argv_mismatch(out, c, 1, join(firsts, "|"), opt_json(c.argv, 1));
    return;
  }
  std::vector<std::string_view> seconds;
  for (const auto& [a, b] : kPactCliCommands) {
    if (a == c.argv[1] && !b.empty()) seconds.push_back(b);
  }
  if (!seconds.empty() &&
      (c.argv.size() < 3 || std::find(seconds.begin(), seconds.end(), c.argv[2]) == seconds.end())) {
    argv_mismatch(out, c, 2, join(seconds, "|"), opt_json(c.argv, 2));
    return;
  }
  if (c.cwd != ".") {
    out.add("E_COMMAND_CWD", {{"command_id", c.id}, {"expected", "."}, {"actual", c.cwd}},
            fmt::format("command '{}': pact runs from the repository root", c.id));
  }
  std::set<std::int64_t> seen;
  for (auto i : c.path_args) {
    if (i < 0 || static_cast<std::size_t>(i) >= c.argv.size() || !seen.insert(i).second) {
      out.add("E_COMMAND_PATH_ARGS", {{"command_id", c.id}, {"index", i}},
              fmt::format("command '{}': path argument index {} is out of range or repeated", c.id, i));
      return;
    }
  }
  if (!seen.count(0)) {
    out.add("E_COMMAND_PATH_ARGS", {{"command_id", c.id}, {"index", 0}},
            fmt::format("command '{}': argv[0] (the pact binary) must be declared a path argument", c.id));
    return;
  }
  const bool targets = std::any_of(c.path_args.begin(), c.path_args.end(), [&](std::int64_t i) {
    return i != 0 && fs::path(c.argv[static_cast<std::size_t>(i)]).lexically_normal() ==
                         fs::path(o.artifact.path).lexically_normal();
  });
  if (!targets) {
    out.add("E_COMMAND_TARGET", {{"command_id", c.id}, {"artifact_path", o.artifact.path}},
            fmt::format("command '{}': no path argument names its artifact {}", c.id, o.artifact.path));
  }
}

std::vector<const Obligation*> rows_of(const Manifest& m, std::string_view unit) {
  std::vector<const Obligation*> rows;
  for (const auto& o : m.obligations) {
    if (o.unit == unit) rows.push_back(&o);
  }
  return rows;
}

}  // namespace

std::string ctest_case_regex(std::string_view test_id) {
  std::string re = "^";
  for (char c : test_id) {
    if (std::string_view(".^$|()[]{}*+?\\").find(c) != std::string_view::npos) re += '\\';
    re += c;
  }
  return re + "$";
}

std::vector<std::string> ctest_case_argv(std::string_view test_id) {
  return {"ctest", "--preset", "release", "--output-on-failure", "--no-tests=error", "-R", ctest_case_regex(test_id)};
}

void check_structure(const Manifest& m, Diagnostics& out, const std::vector<std::string>& escaped) {
  const Registry& reg = m.registry;
  std::set<std::string> units, gates;
  for (const auto& u : reg.units) units.insert(u.id);
  for (const auto& g : reg.gates) gates.insert(g.id);
  if (reg.revision < 1) {
    out.add("E_REGISTRY_REVISION", {{"revision", reg.revision}}, "registry.revision is a positive integer");
  }
  // Graph: known endpoints, no cycle.
  std::map<std::string, std::vector<std::string>> succ;
  std::map<std::string, int> indegree;
  for (const auto& u : units) indegree[u] = 0;
  for (const auto& e : reg.edges) {
    bool ok = true;
    for (const auto& end : {e.from, e.to}) {
      if (!units.count(end)) {
        out.add("E_EDGE_UNKNOWN_UNIT", {{"from", e.from}, {"to", e.to}, {"unit", end}},
                fmt::format("edge {} -> {} names unknown unit '{}'", e.from, e.to, end));
        ok = false;
      }
    }
    if (!ok) continue;
    succ[e.from].push_back(e.to);
    ++indegree[e.to];
  }
  std::vector<std::string> ready;
  for (const auto& [u, d] : indegree) {
    if (d == 0) ready.push_back(u);
  }
  std::size_t visited = 0;
  while (!ready.empty()) {
    const std::string u = ready.back();
    ready.pop_back();
    ++visited;
    for (const auto& v : succ[u]) {
      if (--indegree[v] == 0) ready.push_back(v);
    }
  }
  if (visited != indegree.size()) {
    Json cyclic = Json::array();
    for (const auto& [u, d] : indegree) {
      if (d > 0) cyclic.push_back(u);
    }
    out.add("E_GRAPH_CYCLE", {{"units", cyclic}},
            fmt::format("the registry graph has a cycle through {}", cyclic.dump()));
  }
  // Cohorts: known units, at least two, no unit in two cohorts.
  std::map<std::string, std::string> cohort_of;
  for (const auto& c : reg.cohorts) {
    if (c.units.size() < 2) {
      out.add("E_COHORT_SIZE", {{"cohort_id", c.id}}, fmt::format("cohort '{}' needs at least two units", c.id));
    }
    for (const auto& u : c.units) {
      if (!units.count(u)) {
        out.add("E_COHORT_UNKNOWN_UNIT", {{"cohort_id", c.id}, {"unit", u}},
                fmt::format("cohort '{}' names unknown unit '{}'", c.id, u));
      } else if (!cohort_of.emplace(u, c.id).second) {
        out.add("E_COHORT_OVERLAP", {{"cohort_id", c.id}, {"unit", u}},
                fmt::format("unit '{}' is in cohort '{}' and cohort '{}'", u, cohort_of[u], c.id));
      }
    }
  }
  // Rows.
  std::map<std::string, const Artifact*> artifacts;
  std::map<std::string, const Obligation*> commands;
  for (const auto& o : m.obligations) {
    if (!units.count(o.unit)) {
      out.add("E_UNKNOWN_UNIT", {{"obligation_id", o.id}, {"unit", o.unit}},
              fmt::format("obligation '{}' names unknown unit '{}'", o.id, o.unit));
    }
    if (o.gates.empty())
      out.add("E_NO_GATES", {{"obligation_id", o.id}}, fmt::format("obligation '{}' names no gate", o.id));
    for (const auto& g : o.gates) {
      if (!gates.count(g)) {
        out.add("E_UNKNOWN_GATE", {{"obligation_id", o.id}, {"gate", g}},
                fmt::format("obligation '{}' names unknown gate '{}'", o.id, g));
      }
    }
    if (o.state.kind == StateKind::deferred) {
      if (o.state.activation_unit != o.unit) {
        out.add("E_STATE_ACTIVATION_UNIT",
                {{"obligation_id", o.id}, {"expected", o.unit}, {"actual", o.state.activation_unit}},
                fmt::format("obligation '{}': a deferred row activates with its own unit '{}'", o.id, o.unit));
      }
      if (o.state.promotion_mode != "activate-in-place") {
        out.add(
            "E_STATE_PROMOTION", {{"obligation_id", o.id}, {"mode", o.state.promotion_mode}},
            fmt::format("obligation '{}': promotion mode '{}' is not activate-in-place", o.id, o.state.promotion_mode));
      }
    }
    // The artifact: an allow-listed kind, the selector its kind asks for, one value per id.
    const ArtifactKind* ak = artifact_kind(o.artifact.kind);
    if (ak == nullptr) {
      out.add("E_ARTIFACT_KIND", {{"artifact_id", o.artifact.id}, {"kind", o.artifact.kind}},
              fmt::format("artifact '{}': kind '{}' is not allow-listed", o.artifact.id, o.artifact.kind));
    } else if (ak->needs_selector != o.artifact.selector.has_value() ||
               (o.artifact.selector && o.artifact.kind == "gtest-source" && !is_test_id(*o.artifact.selector))) {
      const std::string sel = o.artifact.selector.value_or("");
      out.add("E_ARTIFACT_SELECTOR", {{"artifact_id", o.artifact.id}, {"selector", sel}},
              ak->needs_selector
                  ? fmt::format("artifact '{}': a {} needs a selector \"Suite.Case\"", o.artifact.id, ak->name)
                  : fmt::format("artifact '{}': a {} takes no selector", o.artifact.id, ak->name));
    }
    if (auto [it, fresh] = artifacts.emplace(o.artifact.id, &o.artifact); !fresh && !(*it->second == o.artifact)) {
      out.add("E_ARTIFACT_CONFLICT", {{"artifact_id", o.artifact.id}},
              fmt::format("artifact id '{}' is used with two different values", o.artifact.id));
    }
    // The command: checked only when its paths stayed inside the repository.
    if (std::find(escaped.begin(), escaped.end(), o.id) != escaped.end()) continue;
    const Command& c = o.command;
    if (auto [it, fresh] = commands.emplace(c.id, &o);
        !fresh && !(it->second->command == c && it->second->artifact == o.artifact)) {
      out.add("E_COMMAND_CONFLICT", {{"command_id", c.id}},
              fmt::format("command id '{}' is shared by rows whose command or artifact differ", c.id));
      continue;
    }
    if (c.artifact_id != o.artifact.id) {
      out.add("E_COMMAND_ARTIFACT", {{"command_id", c.id}, {"expected", o.artifact.id}, {"actual", c.artifact_id}},
              fmt::format("command '{}' may inspect artifact '{}', not '{}'", c.id, o.artifact.id, c.artifact_id));
      continue;
    }
    if (c.kind == "ctest-case") {
      check_ctest_case(o, out);
    } else if (c.kind == "pact-cli") {
      check_pact_cli(o, out);
    } else {
      out.add("E_COMMAND_KIND", {{"command_id", c.id}, {"kind", c.kind}},
              fmt::format("command '{}': kind '{}' is not allow-listed (ctest-case, pact-cli)", c.id, c.kind));
    }
  }
  // Every unit owns an obligation.
  for (const auto& u : reg.units) {
    if (rows_of(m, u.id).empty())
      out.add("E_UNIT_EMPTY", {{"unit", u.id}}, fmt::format("unit '{}' owns no obligation", u.id));
  }
  // Direct prerequisites: an active row in a target needs every row of each direct source active.
  for (const auto& e : reg.edges) {
    const auto targets = rows_of(m, e.to);
    if (std::none_of(targets.begin(), targets.end(), [](const Obligation* o) { return o->active(); })) continue;
    for (const auto* p : rows_of(m, e.from)) {
      if (!p->active()) {
        out.add("E_PREREQUISITE_INACTIVE",
                {{"unit", e.to}, {"prerequisite_unit", e.from}, {"prerequisite_obligation_id", p->id}},
                fmt::format("unit '{}' has active obligations but its prerequisite '{}' still defers '{}'", e.to,
                            e.from, p->id));
      }
    }
  }
  // Cohort atomicity.
  for (const auto& c : reg.cohorts) {
    std::vector<const Obligation*> members;
    for (const auto& u : c.units) {
      for (const auto* o : rows_of(m, u)) members.push_back(o);
    }
    if (std::none_of(members.begin(), members.end(), [](const Obligation* o) { return o->active(); })) continue;
    for (const auto* o : members) {
      if (!o->active()) {
        out.add("E_COHORT_PARTIAL", {{"cohort_id", c.id}, {"obligation_id", o->id}},
                fmt::format("cohort '{}' is partly active: '{}' is still deferred", c.id, o->id));
      }
    }
  }
}

// ---- Paths ------------------------------------------------------------------------------------------

namespace {

// True when the file defines TEST(Suite, Case) or TEST_F(Suite, Case) (whitespace free-form).
bool file_contains_test(const fs::path& file, std::string_view test_id) {
  const std::string text = read_file(file.string(), "ledger");
  const auto dot = test_id.find('.');
  const std::string_view suite = test_id.substr(0, dot), name = test_id.substr(dot + 1);
  auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (std::size_t at = text.find("TEST"); at != std::string::npos; at = text.find("TEST", at + 1)) {
    if (at > 0 && word_char(text[at - 1])) continue;
    std::size_t i = at + 4;
    if (text.compare(i, 2, "_F") == 0) i += 2;
    auto skip = [&] {
      while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    };
    auto take = [&](std::string_view token) {
      skip();
      if (text.compare(i, token.size(), token) != 0) return false;
      i += token.size();
      return true;
    };
    if (!take("(") || !take(suite)) continue;
    if (i < text.size() && word_char(text[i])) continue;
    if (!take(",") || !take(name)) continue;
    if (i < text.size() && word_char(text[i])) continue;
    if (take(")")) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> check_paths(const Manifest& m, const fs::path& root, Diagnostics& out) {
  std::error_code root_ec;
  const fs::path canon = fs::canonical(root, root_ec);
  std::vector<std::string> escaped;
  for (const auto& o : m.obligations) {
    std::vector<std::pair<std::string, std::string>> paths{{"artifact.path", o.artifact.path},
                                                           {"command.cwd", o.command.cwd}};
    for (auto i : o.command.path_args) {
      if (i >= 0 && static_cast<std::size_t>(i) < o.command.argv.size()) {
        paths.emplace_back(fmt::format("command.argv[{}]", i), o.command.argv[static_cast<std::size_t>(i)]);
      }
    }
    bool escape = false;
    for (const auto& [field, path] : paths) {
      if (root_ec || !path_within(canon, path)) {
        out.add("E_PATH_ESCAPE", {{"obligation_id", o.id}, {"field", field}, {"path", path}},
                fmt::format("obligation '{}': {} '{}' leaves the repository", o.id, field, path));
        escape = true;
      }
    }
    if (escape) {
      escaped.push_back(o.id);
      continue;
    }
    if (!o.active()) continue;  // a deferred artifact is a future path: it need not exist yet
    const ArtifactKind* ak = artifact_kind(o.artifact.kind);
    if (ak == nullptr) continue;
    const fs::path p = canon / o.artifact.path;
    std::error_code ec;
    const bool present = ak->directory ? fs::is_directory(p, ec) && (o.artifact.kind != "contract-set" ||
                                                                     fs::is_regular_file(p / "binding.yaml", ec))
                                       : fs::is_regular_file(p, ec);
    if (!present) {
      out.add("E_ARTIFACT_MISSING",
              {{"obligation_id", o.id}, {"artifact_id", o.artifact.id}, {"path", o.artifact.path}},
              fmt::format("active obligation '{}': artifact {} is missing; an active row needs its real artifact", o.id,
                          o.artifact.path));
    } else if (o.artifact.kind == "gtest-source" && o.artifact.selector && is_test_id(*o.artifact.selector) &&
               !file_contains_test(p, *o.artifact.selector)) {
      out.add(
          "E_ARTIFACT_SELECTOR", {{"artifact_id", o.artifact.id}, {"selector", *o.artifact.selector}},
          fmt::format("artifact '{}': {} defines no TEST({})", o.artifact.id, o.artifact.path, *o.artifact.selector));
    }
  }
  return escaped;
}

// ---- Transitions ------------------------------------------------------------------------------------

namespace {

template <class T, class Key>
std::vector<T> sorted(std::vector<T> v, Key key) {
  std::sort(v.begin(), v.end(), [&](const T& a, const T& b) { return key(a) < key(b); });
  return v;
}

// The first field (in manifest order) in which two rows differ, ignoring the state; "" when none.
std::string first_difference(const Obligation& a, const Obligation& b) {
  if (a.unit != b.unit) return "unit";
  if (a.description != b.description) return "description";
  if (a.gates != b.gates) return "gates";
  if (!(a.artifact == b.artifact)) return "artifact";
  if (!(a.command == b.command)) return "command";
  return "";
}

}  // namespace

void check_transition(const Manifest& base, const Manifest& cand, Diagnostics& out) {
  const std::int64_t b = base.registry.revision, c = cand.registry.revision;
  if (c != b && c != b + 1) {
    out.add("E_REVISION_STEP", {{"base", b}, {"candidate", c}},
            fmt::format("registry.revision goes from {} to {}; it may only stay or advance by one", b, c));
    return;
  }
  const bool revision = c == b + 1;
  bool promoted_in_revision = false;
  // The registry value is immutable (rows order-insensitive).
  auto node_key = [](const Node& n) { return n.id; };
  auto edge_key = [](const Edge& e) { return std::make_pair(e.from, e.to); };
  auto cohort_key = [](const Cohort& x) { return x.id; };
  const std::pair<std::string, bool> fields[] = {
      {"units", sorted(base.registry.units, node_key) != sorted(cand.registry.units, node_key)},
      {"gates", sorted(base.registry.gates, node_key) != sorted(cand.registry.gates, node_key)},
      {"edges", sorted(base.registry.edges, edge_key) != sorted(cand.registry.edges, edge_key)},
      {"cohorts", sorted(base.registry.cohorts, cohort_key) != sorted(cand.registry.cohorts, cohort_key)},
  };
  for (const auto& [field, changed] : fields) {
    if (changed) {
      out.add(
          "E_REGISTRY_CHANGED", {{"field", field}},
          fmt::format("registry.{} differs from the base: graph edits are neither promotions nor revisions", field));
    }
  }
  for (const auto& old : base.obligations) {
    const Obligation* now = cand.find(old.id);
    if (now == nullptr) {
      if (revision) {
        out.add("E_REVISION_MEMBERSHIP", {{"obligation_id", old.id}},
                fmt::format("a revision keeps every obligation: '{}' was removed", old.id));
      } else if (old.active()) {
        out.add("E_OBLIGATION_REMOVED", {{"obligation_id", old.id}},
                fmt::format("active obligation '{}' was removed; active evidence cannot be withdrawn", old.id));
      }
      continue;
    }
    if (old.active() && !now->active()) {
      out.add("E_DEMOTION", {{"obligation_id", old.id}},
              fmt::format("obligation '{}' went from active back to deferred", old.id));
      continue;
    }
    if (revision && !old.active() && now->active()) {
      if (promoted_in_revision) continue;  // one finding per candidate: the candidate mixes the two transitions
      promoted_in_revision = true;
      out.add(
          "E_REVISION_WITH_PROMOTION", {{"obligation_id", old.id}},
          fmt::format("'{}' is promoted in a revision candidate: revise and promote in separate candidates", old.id));
      continue;
    }
    std::string diff = first_difference(old, *now);
    if (diff.empty() && !old.active() && !now->active() && !(old.state == now->state)) diff = "state";
    if (diff.empty()) continue;
    // A revision may rewrite a still-deferred row's gates, artifact or command (and its description).
    const bool revisable = revision && !old.active() && diff != "unit" && diff != "state" && old.unit == now->unit &&
                           old.state == now->state;
    if (!revisable) {
      out.add("E_OBLIGATION_CHANGED", {{"obligation_id", old.id}, {"field", diff}},
              fmt::format("obligation '{}' changed its {}: {}", old.id, diff,
                          old.active() ? "an active row's evidence is immutable"
                                       : "a promotion changes only the state (a changed value is a new obligation)"));
    }
  }
  if (revision) {
    for (const auto& now : cand.obligations) {
      if (base.find(now.id) == nullptr) {
        out.add("E_REVISION_MEMBERSHIP", {{"obligation_id", now.id}},
                fmt::format("a revision keeps the obligation set: '{}' is new", now.id));
      }
    }
  }
}

// ---- Receipts ---------------------------------------------------------------------------------------

Json Receipt::to_json() const {
  Json list = Json::array();
  for (const auto& e : executions) {
    list.push_back({{"obligation_id", e.obligation_id},
                    {"argv", e.argv},
                    {"cwd", e.cwd},
                    {"artifact_path", e.artifact_path},
                    {"exit_code", e.exit_code}});
  }
  return {{"schema", std::string(kReceiptSchema)},
          {"candidate_commit", candidate_commit},
          {"base_commit", base_commit ? Json(*base_commit) : Json(nullptr)},
          {"executions", list}};
}

namespace {

void shape(Diagnostics& out, const std::string& field, std::string_view why) {
  out.add("E_RECEIPT_SHAPE", {{"field", field}}, fmt::format("receipt field '{}': {}", field, why));
}

bool exact_keys(const Json& obj, std::initializer_list<std::string_view> keys, const std::string& where,
                Diagnostics& out) {
  bool ok = true;
  for (const auto& [k, v] : obj.items()) {
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) {
      shape(out, where.empty() ? k : where + "." + k, "unknown field");
      ok = false;
    }
  }
  for (auto k : keys) {
    if (!obj.contains(std::string(k))) {
      shape(out, where.empty() ? std::string(k) : where + "." + std::string(k), "missing");
      ok = false;
    }
  }
  return ok;
}

}  // namespace

std::optional<Receipt> parse_receipt(std::string_view text, std::string_view source, Diagnostics& out) {
  Json j;
  try {
    j = parse_json(text, source);
  } catch (const Error& e) {
    out.add("E_RECEIPT_PARSE", {{"source", std::string(source)}}, e.what());
    return std::nullopt;
  }
  if (!j.is_object()) {
    shape(out, "", "a receipt is a JSON object");
    return std::nullopt;
  }
  const std::size_t before = out.size();
  if (!exact_keys(j, {"schema", "candidate_commit", "base_commit", "executions"}, "", out)) return std::nullopt;
  Receipt r;
  if (!j["schema"].is_string() || j["schema"].get<std::string>() != kReceiptSchema)
    shape(out, "schema", fmt::format("must be {}", kReceiptSchema));
  if (!j["candidate_commit"].is_string() || j["candidate_commit"].get<std::string>().empty()) {
    shape(out, "candidate_commit", "must be a non-empty string");
  } else {
    r.candidate_commit = j["candidate_commit"].get<std::string>();
  }
  if (j["base_commit"].is_string()) {
    r.base_commit = j["base_commit"].get<std::string>();
  } else if (!j["base_commit"].is_null()) {
    shape(out, "base_commit", "must be a string or null");
  }
  if (!j["executions"].is_array()) {
    shape(out, "executions", "must be an array");
    return std::nullopt;
  }
  std::size_t i = 0;
  for (const auto& e : j["executions"]) {
    const std::string where = fmt::format("executions[{}]", i++);
    if (!e.is_object()) {
      shape(out, where, "must be an object");
      continue;
    }
    if (!exact_keys(e, {"obligation_id", "argv", "cwd", "artifact_path", "exit_code"}, where, out)) continue;
    Execution x;
    for (const char* key : {"obligation_id", "cwd", "artifact_path"}) {
      if (!e[key].is_string()) shape(out, where + "." + key, "must be a string");
    }
    bool argv_ok = e["argv"].is_array() && !e["argv"].empty();
    if (argv_ok) {
      for (const auto& a : e["argv"]) argv_ok = argv_ok && a.is_string();
    }
    if (!argv_ok) shape(out, where + ".argv", "must be a non-empty array of strings");
    if (!e["exit_code"].is_number_integer()) shape(out, where + ".exit_code", "must be an integer");
    if (out.size() != before) continue;
    x.obligation_id = e["obligation_id"].get<std::string>();
    x.argv = e["argv"].get<std::vector<std::string>>();
    x.cwd = e["cwd"].get<std::string>();
    x.artifact_path = e["artifact_path"].get<std::string>();
    x.exit_code = e["exit_code"].get<std::int64_t>();
    r.executions.push_back(std::move(x));
  }
  if (out.size() != before) return std::nullopt;
  return r;
}

void check_receipt(const Manifest& m, const Receipt& r, std::string_view candidate,
                   const std::optional<std::string>& base, Diagnostics& out) {
  if (r.candidate_commit != candidate) {
    out.add("E_RECEIPT_CANDIDATE", {{"expected", std::string(candidate)}, {"actual", r.candidate_commit}},
            fmt::format("the receipt is for commit {}, HEAD is {}", r.candidate_commit, candidate));
  }
  if (r.base_commit != base) {
    out.add("E_RECEIPT_BASE",
            {{"expected", base ? Json(*base) : Json(nullptr)},
             {"actual", r.base_commit ? Json(*r.base_commit) : Json(nullptr)}},
            "the receipt was made against another base commit");
  }
  std::set<std::string> seen;
  for (std::size_t i = 0; i < r.executions.size(); ++i) {
    const Execution& x = r.executions[i];
    if (!seen.insert(x.obligation_id).second) {
      out.add("E_RECEIPT_DUPLICATE", {{"obligation_id", x.obligation_id}},
              fmt::format("'{}' is executed twice", x.obligation_id));
      continue;
    }
    if (i > 0 && x.obligation_id < r.executions[i - 1].obligation_id) {
      out.add("E_RECEIPT_ORDER", {{"obligation_id", x.obligation_id}}, "executions are sorted by obligation id");
    }
    const Obligation* o = m.find(x.obligation_id);
    if (o == nullptr || !o->active()) {
      const std::string state = o == nullptr ? "unknown" : "deferred";
      out.add("E_RECEIPT_UNEXPECTED", {{"obligation_id", x.obligation_id}, {"state", state}},
              fmt::format("the receipt executes {} obligation '{}'", state, x.obligation_id));
      continue;
    }
    auto bind = [&](std::string_view field, const Json& expected, const Json& actual) {
      if (expected == actual) return true;
      out.add("E_RECEIPT_EXECUTION",
              {{"obligation_id", o->id}, {"field", std::string(field)}, {"expected", expected}, {"actual", actual}},
              fmt::format("execution of '{}': {} differs from the manifest", o->id, field));
      return false;
    };
    if (!bind("argv", o->command.argv, x.argv) || !bind("cwd", o->command.cwd, x.cwd) ||
        !bind("artifact_path", o->artifact.path, x.artifact_path)) {
      continue;
    }
    if (x.exit_code != 0) {
      out.add("E_COMMAND_FAILED", {{"obligation_id", o->id}, {"exit_code", x.exit_code}},
              fmt::format("the command of '{}' exited with {}", o->id, x.exit_code));
    }
  }
  for (const auto& o : m.obligations) {
    if (o.active() && !seen.count(o.id)) {
      out.add("E_RECEIPT_INCOMPLETE", {{"obligation_id", o.id}},
              fmt::format("the receipt has no execution of active obligation '{}'", o.id));
    }
  }
}

Json summarize(const Manifest& m, const Receipt* receipt, std::string_view candidate,
               const std::optional<std::string>& base) {
  std::set<std::string> passed;
  if (receipt != nullptr) {
    for (const auto& x : receipt->executions) {
      if (x.exit_code == 0) passed.insert(x.obligation_id);
    }
  }
  Json units = Json::array();
  std::size_t complete = 0, active = 0;
  for (const auto& u : m.registry.units) {
    const auto rows = rows_of(m, u.id);
    const auto n_active = static_cast<std::size_t>(
        std::count_if(rows.begin(), rows.end(), [](const Obligation* o) { return o->active(); }));
    const bool done =
        !rows.empty() && n_active == rows.size() &&
        std::all_of(rows.begin(), rows.end(), [&](const Obligation* o) { return passed.count(o->id) > 0; });
    complete += done ? 1 : 0;
    units.push_back({{"id", u.id}, {"obligations", rows.size()}, {"active", n_active}, {"complete", done}});
  }
  for (const auto& o : m.obligations) active += o.active() ? 1 : 0;
  return {{"schema", std::string(kSummarySchema)},
          {"candidate_commit", std::string(candidate)},
          {"base_commit", base ? Json(*base) : Json(nullptr)},
          {"revision", m.registry.revision},
          {"obligations",
           {{"total", m.obligations.size()},
            {"active", active},
            {"deferred", m.obligations.size() - active},
            {"passed", passed.size()}}},
          {"units", units},
          {"units_complete", complete},
          {"terminal", complete == m.registry.units.size()}};
}

// ---- Processes and Git ------------------------------------------------------------------------------

namespace {

struct ProcessResult {
  int exit_code = 127;
  std::string out;  ///< stdout, when captured
};

// Runs argv (no shell) in `cwd`. stdin is /dev/null; stdout is captured or sent to our stderr (so a
// child never writes into the tool's JSON on stdout); stderr is inherited. A signal death is 128 + n.
ProcessResult spawn(const std::vector<std::string>& argv, const fs::path& cwd, bool capture) {
  int pipefd[2] = {-1, -1};
  if (capture && ::pipe2(pipefd, O_CLOEXEC) != 0) return {};
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    if (capture) {
      ::close(pipefd[0]);
      ::close(pipefd[1]);
    }
    return {};
  }
  if (pid == 0) {
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::dup2(capture ? pipefd[1] : 2, 1);
    if (::chdir(cwd.c_str()) != 0) ::_exit(127);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ProcessResult r;
  if (capture) {
    ::close(pipefd[1]);
    char buf[4096];
    for (;;) {
      const ssize_t n = ::read(pipefd[0], buf, sizeof buf);
      if (n > 0) {
        r.out.append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        break;
      }
    }
    ::close(pipefd[0]);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return r;
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return r;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// Git at the repository the caller named with --root. That directory is trusted explicitly
// (safe.directory), so a checkout owned by another user (a CI clone) is still readable.
class Git {
 public:
  explicit Git(fs::path root) : root_(std::move(root)) {}
  std::optional<std::string> out(std::vector<std::string> args) const {
    auto r = spawn(command(std::move(args)), root_, true);
    if (r.exit_code != 0) return std::nullopt;
    return r.out;
  }
  int status(std::vector<std::string> args) const { return spawn(command(std::move(args)), root_, true).exit_code; }

 private:
  std::vector<std::string> command(std::vector<std::string> args) const {
    args.insert(args.begin(), {"git", "-c", "safe.directory=" + root_.string()});
    return args;
  }
  fs::path root_;
};

// The candidate: the repository at `root` (which must be its top level) and its HEAD commit.
struct Candidate {
  fs::path root;  ///< canonical
  std::string head;
};

std::optional<Candidate> open_candidate(const fs::path& root, Diagnostics& out) {
  std::error_code ec;
  const fs::path canon = fs::canonical(root, ec);
  auto fail = [&](std::string_view why) {
    out.add("E_NOT_A_REPOSITORY", {{"root", root.string()}}, fmt::format("{}: {}", root.string(), why));
    return std::nullopt;
  };
  if (ec) return fail("no such directory");
  const Git git(canon);
  const auto top = git.out({"rev-parse", "--show-toplevel"});
  if (!top) return fail("not a Git repository");
  if (fs::canonical(trim(*top), ec) != canon) return fail("not the top level of its Git repository");
  const auto head = git.out({"rev-parse", "--verify", "--quiet", "HEAD^{commit}"});
  if (!head) return fail("the repository has no commit");
  return Candidate{canon, trim(*head)};
}

// One cleanliness check of the tracked tree against HEAD; untracked and ignored files are allowed.
void check_clean(const Candidate& c, Diagnostics& out) {
  const auto status = Git(c.root).out({"status", "--porcelain=v1", "-z", "--untracked-files=no"});
  if (!status) {
    out.add("E_NOT_A_REPOSITORY", {{"root", c.root.string()}}, "git status failed");
    return;
  }
  std::size_t pos = 0;
  const std::string& s = *status;
  while (pos < s.size()) {
    const std::size_t end = s.find('\0', pos);
    const std::string entry = s.substr(pos, end - pos);
    pos = end == std::string::npos ? s.size() : end + 1;
    if (entry.size() < 4) continue;
    out.add("E_TREE_DIRTY", {{"path", entry.substr(3)}},
            fmt::format("tracked file {} differs from HEAD; commit or restore it first", entry.substr(3)));
    if (entry[0] == 'R' || entry[0] == 'C')
      pos = s.find('\0', pos) == std::string::npos ? s.size() : s.find('\0', pos) + 1;
  }
}

// Reads and parses the candidate manifest and checks paths and structure.
std::optional<Manifest> load_candidate(const Candidate& c, const std::string& manifest, Diagnostics& out) {
  if (!path_within(c.root, manifest)) {
    out.add("E_MANIFEST_ESCAPE", {{"path", manifest}},
            fmt::format("manifest {} is not inside the repository", manifest));
    return std::nullopt;
  }
  std::string text;
  try {
    text = read_file((c.root / manifest).string(), "ledger");
  } catch (const Error& e) {
    out.add("E_MANIFEST_MISSING", {{"path", manifest}},
            fmt::format("cannot read manifest {}: {}", manifest, e.detail()));
    return std::nullopt;
  }
  auto m = parse_manifest(text, manifest, out);
  if (!m) return std::nullopt;
  const auto escaped = check_paths(*m, c.root, out);
  check_structure(*m, out, escaped);
  return m;
}

// Canonicalizes the base, requires it to be an ancestor of HEAD, and checks the transition.
std::optional<std::string> check_base(const Candidate& c, const std::string& revision, const std::string& manifest,
                                      const Manifest& candidate, Diagnostics& out) {
  const Git git(c.root);
  const auto base = git.out({"rev-parse", "--verify", "--quiet", revision + "^{commit}"});
  if (!base) {
    out.add("E_BASE_UNRESOLVED", {{"revision", revision}}, fmt::format("'{}' does not name a commit", revision));
    return std::nullopt;
  }
  const std::string id = trim(*base);
  if (git.status({"merge-base", "--is-ancestor", id, c.head}) != 0) {
    out.add("E_BASE_NOT_ANCESTOR", {{"base_commit", id}, {"candidate_commit", c.head}},
            fmt::format("base {} is not an ancestor of HEAD {}", id, c.head));
    return id;
  }
  const auto text = git.out({"show", id + ":" + fs::path(manifest).lexically_normal().generic_string()});
  Diagnostics base_diags;
  std::optional<Manifest> old;
  if (text) old = parse_manifest(*text, manifest, base_diags);
  if (!old) {
    out.add("E_BASE_MANIFEST", {{"base_commit", id}, {"path", manifest}},
            fmt::format("the base commit has no readable v2 manifest at {}", manifest));
    return id;
  }
  check_transition(*old, candidate, out);
  return id;
}

}  // namespace

// ---- The tools --------------------------------------------------------------------------------------

Json cli_contract(Role role) {
  const bool checker = role == Role::checker;
  Json options =
      checker
          ? Json::array({"--root", "--manifest", "--base-commit", "--receipt", "--summary-json", "--diagnostics-json"})
          : Json::array({"--root", "--manifest", "--base-commit", "--receipt-out", "--diagnostics-json"});
  return {{"schema", std::string(kCliContractSchema)},
          {"tool", checker ? "pact-ledger-check" : "pact-ledger-run"},
          {"role", checker ? "checker" : "runner"},
          {"manifest_schema", std::string(kManifestSchema)},
          {"probe", "--contract-schema"},
          {"options", options}};
}

CheckOutcome check(const CheckOptions& options) {
  CheckOutcome result;
  Diagnostics& out = result.diagnostics;
  const auto cand = open_candidate(options.root, out);
  if (!cand) return result;
  result.manifest = load_candidate(*cand, options.manifest, out);
  if (!result.manifest) return result;
  std::optional<std::string> base;
  if (options.base_commit) base = check_base(*cand, *options.base_commit, options.manifest, *result.manifest, out);
  if (options.receipt) {
    check_clean(*cand, out);
    Diagnostics receipt_diags;
    std::optional<Receipt> receipt;
    try {
      receipt = parse_receipt(read_file(*options.receipt, "ledger"), *options.receipt, receipt_diags);
    } catch (const Error& e) {
      receipt_diags.add("E_RECEIPT_PARSE", {{"source", *options.receipt}},
                        fmt::format("cannot read receipt {}: {}", *options.receipt, e.detail()));
    }
    if (receipt) check_receipt(*result.manifest, *receipt, cand->head, base, receipt_diags);
    for (const auto& d : receipt_diags.items()) out.add(d.code, d.fields, d.message);
    if (receipt && receipt_diags.empty()) result.receipt = std::move(receipt);
  }
  const bool proven = out.empty() && result.receipt.has_value();
  result.summary = summarize(*result.manifest, proven ? &*result.receipt : nullptr, cand->head, base);
  result.summary["manifest"] = options.manifest;
  return result;
}

RunOutcome run(const RunOptions& options) {
  RunOutcome result;
  Diagnostics& out = result.diagnostics;
  const auto cand = open_candidate(options.root, out);
  if (!cand) return result;
  const auto m = load_candidate(*cand, options.manifest, out);
  if (!m) return result;
  std::optional<std::string> base;
  if (options.base_commit) base = check_base(*cand, *options.base_commit, options.manifest, *m, out);
  check_clean(*cand, out);
  if (!out.empty()) return result;  // nothing runs against a manifest or tree the checker refuses

  std::vector<const Obligation*> active;
  for (const auto& o : m->obligations) {
    if (o.active()) active.push_back(&o);
  }
  std::sort(active.begin(), active.end(), [](const Obligation* a, const Obligation* b) { return a->id < b->id; });
  Receipt receipt{cand->head, base, {}};
  std::map<std::string, int> ran;  // command id -> exit status (a shared command runs once)
  for (const auto* o : active) {
    auto it = ran.find(o->command.id);
    if (it == ran.end()) {
      std::fprintf(stderr, "pact ledger: running %s (%s)\n", o->id.c_str(), o->command.id.c_str());
      it = ran.emplace(o->command.id, spawn(o->command.argv, cand->root / o->command.cwd, false).exit_code).first;
      ++result.commands_run;
    }
    receipt.executions.push_back({o->id, o->command.argv, o->command.cwd, o->artifact.path, it->second});
    if (it->second != 0) {
      out.add("E_COMMAND_FAILED", {{"obligation_id", o->id}, {"exit_code", it->second}},
              fmt::format("the command of '{}' exited with {}", o->id, it->second));
    }
  }
  try {
    if (!options.receipt_out.parent_path().empty()) fs::create_directories(options.receipt_out.parent_path());
    write_file_atomic(options.receipt_out.string(), receipt.to_json().dump(2) + "\n", "ledger run");
  } catch (const std::exception& e) {
    out.add("E_RECEIPT_WRITE", {{"path", options.receipt_out.string()}}, e.what());
    return result;
  }
  result.receipt = std::move(receipt);
  return result;
}

// ---- Evidence ---------------------------------------------------------------------------------------

const Obligation* obligation_for_test(const Manifest& m, std::string_view test_id) {
  for (const auto& o : m.obligations) {
    if (o.active() && o.command.kind == "ctest-case" && o.artifact.selector == test_id &&
        o.command.argv == ctest_case_argv(test_id)) {
      return &o;
    }
  }
  return nullptr;
}

ReceiptEvidenceResolver::ReceiptEvidenceResolver(const CheckOutcome& outcome)
    : manifest_(outcome.manifest), receipt_(outcome.receipt) {
  if (!outcome.ok()) {
    const auto& d = outcome.diagnostics.items().front();
    refusal_ = fmt::format("the ledger check failed ({} finding{}, first {}: {})", outcome.diagnostics.size(),
                           outcome.diagnostics.size() == 1 ? "" : "s", d.code, d.message);
  } else if (!receipt_) {
    refusal_ = "no ledger receipt was given";
  }
}

contract::EvidenceStatus ReceiptEvidenceResolver::resolve(const contract::Capsule& capsule,
                                                          const contract::ContractDescriptor& d) const {
  auto status = base_.resolve(capsule, d);
  if (!status.resolved || d.evidence.kind != contract::EvidenceKind::testSuite) return status;
  if (!refusal_.empty()) return {false, refusal_};
  const Obligation* o = obligation_for_test(*manifest_, d.evidence.id);
  if (o == nullptr) return {false, fmt::format("no active ledger obligation runs test suite '{}'", d.evidence.id)};
  for (const auto& x : receipt_->executions) {
    if (x.obligation_id == o->id) {
      if (x.exit_code == 0) return {true, ""};
      return {false, fmt::format("ledger obligation '{}' failed at HEAD (exit {})", o->id, x.exit_code)};
    }
  }
  return {false, fmt::format("the receipt has no execution of ledger obligation '{}'", o->id)};
}

}  // namespace pact::ledger
