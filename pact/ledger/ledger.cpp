#include "pact/ledger/ledger.hpp"

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
#include <sstream>

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

#include "pact/ledger/ledger_structure.inc"

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

#include "pact/ledger/ledger_tools.inc"

}  // namespace pact::ledger
