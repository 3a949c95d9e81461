// The obligations ledger (issue 9, items 7 and 8; seed 001 "v2 manifest and promotion contract").
// Every case runs in a temporary Git repository with a fake `ctest` and a fake `build/release/bin/pact`
// that record their argv, so the runner's exact typed execution is observable. One-fault cases assert the
// exact code set, the registered field keys and a non-empty message; a coverage check proves every
// registered code has a case.

#include "pact/ledger/ledger.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <type_traits>

namespace pact::ledger {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
void put(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}
std::string replace_first(std::string s, const std::string& from, const std::string& to) {
  const auto at = s.find(from);
  if (at == std::string::npos)
    ADD_FAILURE() << "mutation anchor not found: " << from;
  else
    s.replace(at, from.size(), to);
  return s;
}
// ---- The manifest under test ---------------------------------------------------------------------

std::string toml_strings(const std::vector<std::string>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::string e;
    for (char c : v[i]) e += c == '\\' ? std::string("\\\\") : std::string(1, c);
    out += fmt::format("{}\"{}\"", i ? ", " : "", e);
  }
  return out + "]";
}

struct Row {
  std::string id, unit;
  bool active = false;
  std::string selector;  // ctest rows
  std::string path = "tests/a_test.cpp";
  bool pact_cli = false;  // r2: pact contracts validate --dir contracts
  std::string gates = R"(["g1"])";
  std::string text() const {
    const std::string state =
        active ? R"({ kind = "active" })"
               : fmt::format(
                     R"({{ kind = "deferred", activation_unit = "{}", promotion = {{ mode = "activate-in-place" }} }})",
                     unit);
    std::string artifact, command;
    if (pact_cli) {
      artifact = fmt::format(R"({{ id = "art-{}", kind = "contract-set", path = "contracts" }})", id);
      command = fmt::format(
          R"({{ id = "cmd-{0}", kind = "pact-cli", argv = ["build/release/bin/pact", "contracts", "validate", "--dir", "contracts"], cwd = ".", path_args = [0, 4], artifact_id = "art-{0}" }})",
          id);
    } else {
      artifact = fmt::format(R"({{ id = "art-{}", kind = "gtest-source", path = "{}", selector = "{}" }})", id, path,
                             selector);
      command = fmt::format(
          R"({{ id = "cmd-{}", kind = "ctest-case", argv = {}, cwd = ".", path_args = [], artifact_id = "art-{}" }})",
          id, toml_strings(ctest_case_argv(selector)), id);
    }
    return fmt::format(
        "[[obligations]]\nid = \"{}\"\nunit = \"{}\"\ngates = {}\nartifact = {}\ncommand = {}\nstate = {}\n\n", id,
        unit, gates, artifact, command, state);
  }
};

struct Spec {
  std::int64_t revision = 1;
  std::vector<std::string> units{"root", "mid", "leafa", "leafb", "leafc", "tail"};
  std::vector<std::string> gates{"g1", "g2"};
  std::vector<std::pair<std::string, std::string>> edges{
      {"root", "mid"}, {"mid", "leafa"}, {"mid", "leafb"}, {"mid", "leafc"}, {"leafc", "tail"}};
  std::vector<std::pair<std::string, std::vector<std::string>>> cohorts{{"pair", {"leafa", "leafb"}}};
  std::vector<Row> rows{
      {"r1", "root", true, "Alpha.One"},
      {"r2", "root", true, "", "", true},
      {"m1", "mid", true, "Alpha.Two"},
      {"la1", "leafa", false, "Alpha.Three"},
      {"lb1", "leafb", false, "Alpha.Four"},
      {"lc1", "leafc", false, "Future.One", "tests/future_test.cpp"},  // a future artifact: absent, fine while deferred
      {"t1", "tail", false, "Alpha.Five"},
  };
  std::vector<std::pair<std::string, std::string>> patches;  // applied to the text, first occurrence
  Row& row(std::string_view id) {
    for (auto& r : rows) {
      if (r.id == id) return r;
    }
    throw std::runtime_error("no row");
  }
  std::string text() const {
    std::string s = "schema = \"pact.obligations.v2\"\n\n[registry]\n" + fmt::format("revision = {}\n\n", revision);
    for (const auto& u : units) s += fmt::format("[[registry.units]]\nid = \"{}\"\n\n", u);
    for (const auto& g : gates) s += fmt::format("[[registry.gates]]\nid = \"{}\"\n\n", g);
    for (const auto& [a, b] : edges) s += fmt::format("[[registry.edges]]\nfrom = \"{}\"\nto = \"{}\"\n\n", a, b);
    for (const auto& [id, us] : cohorts)
      s += fmt::format("[[registry.cohorts]]\nid = \"{}\"\nunits = {}\n\n", id, toml_strings(us));
    for (const auto& r : rows) s += r.text();
    for (const auto& [from, to] : patches) s = replace_first(s, from, to);
    return s;
  }
};

// ---- A temporary repository with fake tools ------------------------------------------------------

class Repo {
 public:
  Repo() {
    char tmpl[] = "/tmp/pact-ledger-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    root_ = dir_ / "repo";
    fs::create_directories(root_);
    log_ = dir_ / "argv.log";
    fail_ = "@never@";
    const fs::path bin = dir_ / "bin";
    const std::string fake =
        "#!/bin/sh\nprintf '%s %s\\n' \"$(basename \"$0\")\" \"$*\" >> \"$PACT_LEDGER_TEST_LOG\"\n"
        "case \"$*\" in *\"$PACT_LEDGER_TEST_FAIL\"*) exit 3;; esac\nexit 0\n";
    put(bin / "ctest", fake);
    put(root_ / "build/release/bin/pact", fake);
    fs::permissions(bin / "ctest", fs::perms::owner_all);
    fs::permissions(root_ / "build/release/bin/pact", fs::perms::owner_all);
    path_ = bin.string() + ":" + (std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin");
    git("init -q");
    put(root_ / "README", "temporary ledger repository\n");
    put(root_ / ".gitignore", "/build/\n");
    commit("initial");
    put(root_ / "tests/a_test.cpp",
        "TEST(Alpha, One) {}\nTEST(Alpha, Two) {}\nTEST_F(Alpha, Three) {}\nTEST(Alpha, Four) {}\nTEST( Alpha , Five ) "
        "{}\n");
    put(root_ / "contracts/binding.yaml", "policy: AllImplemented\n");
    put(root_ / "notes.txt", "tracked\n");
  }
  ~Repo() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  Repo(const Repo&) = delete;
  Repo& operator=(const Repo&) = delete;

  const fs::path& root() const { return root_; }
  const fs::path& dir() const { return dir_; }
  void git(const std::string& args) const {
    const std::string cmd =
        fmt::format("cd '{}' && git -c user.name=t -c user.email=t@t -c commit.gpgsign=false {} >/dev/null 2>&1",
                    root_.string(), args);
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  std::string git_out(const std::string& args) const {
    const std::string cmd = fmt::format("cd '{}' && git -c user.name=t -c user.email=t@t {}", root_.string(), args);
    std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
    std::string out;
    char buf[256];
    while (std::size_t n = std::fread(buf, 1, sizeof buf, pipe.get())) out.append(buf, n);
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }
  std::string commit(const std::string& message) {
    git("add -A");
    git(fmt::format("commit -q --allow-empty -m '{}'", message));
    return head();
  }
  std::string head() const { return git_out("rev-parse HEAD"); }
  void manifest(const std::string& text) { put(root_ / "ledger/obligations.toml", text); }
  void fail_on(std::string pattern) { fail_ = std::move(pattern); }
  std::vector<std::string> log() const {
    std::vector<std::string> lines;
    std::istringstream in(slurp(log_));
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return lines;
  }

  CheckOutcome check(CheckOptions o = {}) const {
    if (o.root == ".") o.root = root_;
    return with_env([&] { return ledger::check(o); });
  }
  RunOutcome run(RunOptions o = {}) const {
    if (o.root == ".") o.root = root_;
    if (o.receipt_out.empty()) o.receipt_out = root_ / "build/receipt.json";
    return with_env([&] { return ledger::run(o); });
  }

 private:
  template <class F>
  std::invoke_result_t<F> with_env(F f) const {
    const std::string old = std::getenv("PATH") ? std::getenv("PATH") : "";
    ::setenv("PATH", path_.c_str(), 1);
    ::setenv("PACT_LEDGER_TEST_LOG", log_.c_str(), 1);
    ::setenv("PACT_LEDGER_TEST_FAIL", fail_.c_str(), 1);
    auto r = f();
    ::setenv("PATH", old.c_str(), 1);
    return r;
  }
  fs::path dir_, root_, log_;
  std::string path_, fail_;
};

// The base repository: the spec committed on top of the initial commit.
std::unique_ptr<Repo> make_repo(const Spec& spec = {}) {
  auto repo = std::make_unique<Repo>();
  repo->manifest(spec.text());
  repo->commit("ledger");
  return repo;
}

std::string codes(const Diagnostics& d) {
  std::string s;
  for (const auto& x : d.items()) s += x.code + " " + x.fields.dump() + "; ";
  return s;
}

// A receipt from a real run of the base repository, as JSON for mutation.
Json base_receipt(Repo& repo) {
  const auto r = repo.run();
  EXPECT_TRUE(r.ok()) << codes(r.diagnostics);
  return parse_json(slurp(repo.root() / "build/receipt.json"), "receipt");
}
CheckOptions with_receipt(Repo& repo, const Json& receipt) {
  put(repo.root() / "build/mutated.json", receipt.dump(2));
  CheckOptions o;
  o.receipt = (repo.root() / "build/mutated.json").string();
  return o;
}

// ---- One-fault cases -----------------------------------------------------------------------------

struct Case {
  std::string name;
  std::string code;
  // Builds the situation and returns the diagnostics of the one tool call that must report the fault.
  std::function<Diagnostics()> run;
};

Diagnostics check_spec(const Spec& spec) { return make_repo(spec)->check().diagnostics; }
Diagnostics check_text(const std::string& text) {
  auto repo = make_repo();
  repo->manifest(text);
  return repo->check().diagnostics;
}
// A candidate committed on top of the base spec, checked against the base commit.
Diagnostics transition(const std::function<void(Spec&)>& edit) {
  auto repo = make_repo();
  const std::string base = repo->head();
  Spec candidate;
  edit(candidate);
  repo->manifest(candidate.text());
  repo->commit("candidate");
  CheckOptions o;
  o.base_commit = base;
  return repo->check(o).diagnostics;
}
Diagnostics receipt_case(const std::function<void(Json&)>& edit) {
  auto repo = make_repo();
  Json r = base_receipt(*repo);
  edit(r);
  return repo->check(with_receipt(*repo, r)).diagnostics;
}
Diagnostics spec_case(const std::function<void(Spec&)>& edit) {
  Spec s;
  edit(s);
  return check_spec(s);
}

std::vector<Case> one_fault_cases() {
  const std::string base_text = Spec{}.text();
  return {
      {"toml syntax", "E_TOML_PARSE", [] { return check_text("schema = \"pact.obligations.v2\"\n[registry\n"); }},
      {"old schema marker", "E_SCHEMA_VERSION", [] { return check_text("schema = \"pact.obligations.v1\"\n"); }},
      {"terminal flag", "E_SCHEMA_UNKNOWN_FIELD",
       [=] { return check_text(replace_first(base_text, "id = \"r1\"\n", "id = \"r1\"\nterminal = true\n")); }},
      {"row without unit", "E_SCHEMA_MISSING_FIELD",
       [=] { return check_text(replace_first(base_text, "unit = \"root\"\n", "")); }},
      {"shell-string argv", "E_SCHEMA_TYPE",
       [=] {
         return check_text(replace_first(
             base_text, R"(argv = ["build/release/bin/pact", "contracts", "validate", "--dir", "contracts"])",
             R"(argv = "build/release/bin/pact contracts validate --dir contracts")"));
       }},
      {"duplicate obligation", "E_DUPLICATE_ID", [] { return spec_case([](Spec& s) { s.row("m1").id = "r1"; }); }},
      {"status string", "E_STATE_KIND",
       [=] { return check_text(replace_first(base_text, R"(kind = "active")", R"(kind = "done")")); }},
      {"revision zero", "E_REGISTRY_REVISION", [] { return spec_case([](Spec& s) { s.revision = 0; }); }},
      {"edge to unknown unit", "E_EDGE_UNKNOWN_UNIT",
       [] { return spec_case([](Spec& s) { s.edges.emplace_back("root", "ghost"); }); }},
      {"cycle", "E_GRAPH_CYCLE", [] { return spec_case([](Spec& s) { s.edges.emplace_back("mid", "root"); }); }},
      {"cohort names unknown unit", "E_COHORT_UNKNOWN_UNIT",
       [] { return spec_case([](Spec& s) { s.cohorts[0].second.push_back("ghost"); }); }},
      {"unit in two cohorts", "E_COHORT_OVERLAP",
       [] { return spec_case([](Spec& s) {
              s.cohorts.push_back({"pair2", {"leafb", "leafc"}});
            }); }},
      {"cohort of one", "E_COHORT_SIZE",
       [] { return spec_case([](Spec& s) {
              s.cohorts.push_back({"solo", {"tail"}});
            }); }},
      {"unit owning nothing", "E_UNIT_EMPTY", [] { return spec_case([](Spec& s) { s.units.push_back("lonely"); }); }},
      {"row in unknown unit", "E_UNKNOWN_UNIT", [] { return spec_case([](Spec& s) { s.row("r2").unit = "ghost"; }); }},
      {"unknown gate", "E_UNKNOWN_GATE", [] { return spec_case([](Spec& s) { s.row("r1").gates = R"(["g9"])"; }); }},
      {"no gate", "E_NO_GATES", [] { return spec_case([](Spec& s) { s.row("r1").gates = "[]"; }); }},
      {"activation unit of another unit", "E_STATE_ACTIVATION_UNIT",
       [] {
         return spec_case([](Spec& s) {
           s.patches.push_back({R"(activation_unit = "leafc")", R"(activation_unit = "leafa")"});
         });
       }},
      {"promotion rule", "E_STATE_PROMOTION",
       [] {
         return spec_case([](Spec& s) {
           s.patches.push_back({R"(mode = "activate-in-place")", R"(mode = "rewrite")"});
         });
       }},
      {"active before its prerequisite", "E_PREREQUISITE_INACTIVE",
       [] { return spec_case([](Spec& s) { s.row("t1").active = true; }); }},
      {"half a cohort", "E_COHORT_PARTIAL", [] { return spec_case([](Spec& s) { s.row("la1").active = true; }); }},
      {"manifest outside", "E_MANIFEST_ESCAPE",
       [] {
         CheckOptions o;
         o.manifest = "../outside.toml";
         return make_repo()->check(o).diagnostics;
       }},
      {"manifest missing", "E_MANIFEST_MISSING",
       [] {
         CheckOptions o;
         o.manifest = "ledger/none.toml";
         return make_repo()->check(o).diagnostics;
       }},
      {"artifact path with ..", "E_PATH_ESCAPE",
       [] { return spec_case([](Spec& s) { s.row("r1").path = "tests/../../a_test.cpp"; }); }},
      {"artifact kind", "E_ARTIFACT_KIND",
       [] {
         return spec_case([](Spec& s) { s.patches.push_back({R"(kind = "gtest-source")", R"(kind = "binary")"}); });
       }},
      {"selector names no test", "E_ARTIFACT_SELECTOR",
       [] {
         return spec_case([](Spec& s) {
           s.row("r1").selector = "Alpha.Nope";  // argv follows the selector: only the artifact is wrong
         });
       }},
      {"active artifact missing", "E_ARTIFACT_MISSING",
       [] { return spec_case([](Spec& s) { s.row("r1").path = "tests/gone_test.cpp"; }); }},
      {"artifact id reused", "E_ARTIFACT_CONFLICT",
       [] {
         return spec_case([](Spec& s) {
           s.patches.push_back({R"(id = "art-m1")", R"(id = "art-r1")"});
           s.patches.push_back({R"(artifact_id = "art-m1")", R"(artifact_id = "art-r1")"});
         });
       }},
      {"command kind", "E_COMMAND_KIND",
       [] { return spec_case([](Spec& s) {
              s.patches.push_back({R"(kind = "ctest-case")", R"(kind = "shell")"});
            }); }},
      {"argv", "E_COMMAND_ARGV",
       [] {
         return spec_case([](Spec& s) { s.patches.push_back({R"("--preset", "release")", R"("--preset", "debug")"}); });
       }},
      {"cwd", "E_COMMAND_CWD",
       [] {
         return spec_case([](Spec& s) {
           s.patches.push_back({R"(cwd = ".", path_args = [])", R"(cwd = "tests", path_args = [])"});
         });
       }},
      {"path argument index", "E_COMMAND_PATH_ARGS",
       [] { return spec_case([](Spec& s) {
              s.patches.push_back({"path_args = [0, 4]", "path_args = [0, 4, 9]"});
            }); }},
      {"command inspects another path", "E_COMMAND_TARGET",
       [] {
         return spec_case([](Spec& s) { s.patches.push_back({R"("--dir", "contracts"])", R"("--dir", "tests"])"}); });
       }},
      {"command bound to another artifact", "E_COMMAND_ARTIFACT",
       [] {
         return spec_case([](Spec& s) {
           s.patches.push_back({R"(artifact_id = "art-r1")", R"(artifact_id = "art-m1")"});
         });
       }},
      {"command id reused", "E_COMMAND_CONFLICT",
       [] { return spec_case([](Spec& s) {
              s.patches.push_back({R"(id = "cmd-m1")", R"(id = "cmd-r1")"});
            }); }},
      {"not a repository", "E_NOT_A_REPOSITORY",
       [] {
         Repo scratch;
         CheckOptions o;
         o.root = scratch.dir() / "bin";
         return scratch.check(o).diagnostics;
       }},
      {"dirty tracked tree", "E_TREE_DIRTY",
       [] {
         auto repo = make_repo();
         const Json r = base_receipt(*repo);
         put(repo->root() / "notes.txt", "edited\n");
         return repo->check(with_receipt(*repo, r)).diagnostics;
       }},
      {"unknown base", "E_BASE_UNRESOLVED",
       [] {
         CheckOptions o;
         o.base_commit = "no-such-revision";
         return make_repo()->check(o).diagnostics;
       }},
      {"base not an ancestor", "E_BASE_NOT_ANCESTOR",
       [] {
         auto repo = make_repo();
         CheckOptions o;
         o.base_commit = repo->git_out("commit-tree 'HEAD^{tree}' -m orphan");
         return repo->check(o).diagnostics;
       }},
      {"base without manifest", "E_BASE_MANIFEST",
       [] {
         auto repo = make_repo();
         CheckOptions o;
         o.base_commit = "HEAD~1";
         return repo->check(o).diagnostics;
       }},
      {"revision jump", "E_REVISION_STEP", [] { return transition([](Spec& s) { s.revision = 3; }); }},
      {"graph edit", "E_REGISTRY_CHANGED", [] { return transition([](Spec& s) { s.gates.push_back("g3"); }); }},
      {"active row removed", "E_OBLIGATION_REMOVED",
       [] { return transition([](Spec& s) { s.rows.erase(s.rows.begin() + 1); }); }},
      {"revision adds a row", "E_REVISION_MEMBERSHIP",
       [] {
         return transition([](Spec& s) {
           s.revision = 2;
           s.rows.push_back({"lc2", "leafc", false, "Future.Two", "tests/future_test.cpp"});
         });
       }},
      {"revision promotes", "E_REVISION_WITH_PROMOTION",
       [] {
         return transition([](Spec& s) {
           s.revision = 2;
           s.row("la1").active = true;
           s.row("lb1").active = true;
         });
       }},
      {"demotion", "E_DEMOTION", [] { return transition([](Spec& s) { s.row("m1").active = false; }); }},
      {"promotion edits the row", "E_OBLIGATION_CHANGED",
       [] {
         return transition([](Spec& s) {
           s.row("la1").active = true;
           s.row("lb1").active = true;
           s.row("lb1").gates = R"(["g1", "g2"])";
         });
       }},
      {"receipt not JSON", "E_RECEIPT_PARSE",
       [] {
         auto repo = make_repo();
         put(repo->root() / "build/bad.json", "not json");
         CheckOptions o;
         o.receipt = (repo->root() / "build/bad.json").string();
         return repo->check(o).diagnostics;
       }},
      {"receipt declares terminality", "E_RECEIPT_SHAPE",
       [] { return receipt_case([](Json& r) { r["terminal"] = true; }); }},
      {"receipt for another commit", "E_RECEIPT_CANDIDATE",
       [] { return receipt_case([](Json& r) { r["candidate_commit"] = "0000"; }); }},
      {"receipt with a base", "E_RECEIPT_BASE", [] { return receipt_case([](Json& r) { r["base_commit"] = "abc"; }); }},
      {"receipt unsorted", "E_RECEIPT_ORDER",
       [] { return receipt_case([](Json& r) { std::swap(r["executions"][0], r["executions"][1]); }); }},
      {"receipt duplicate", "E_RECEIPT_DUPLICATE",
       [] {
         return receipt_case([](Json& r) { r["executions"].insert(r["executions"].begin(), r["executions"][0]); });
       }},
      {"receipt runs a deferred row", "E_RECEIPT_UNEXPECTED",
       [] {
         return receipt_case([](Json& r) {
           Json x = r["executions"][0];
           x["obligation_id"] = "la1";
           r["executions"].insert(r["executions"].begin(), x);  // "la1" sorts first
         });
       }},
      {"receipt argv", "E_RECEIPT_EXECUTION",
       [] { return receipt_case([](Json& r) { r["executions"][0]["argv"][1] = "--verbose"; }); }},
      {"receipt incomplete", "E_RECEIPT_INCOMPLETE",
       [] { return receipt_case([](Json& r) { r["executions"].erase(0); }); }},
      {"receipt unwritable", "E_RECEIPT_WRITE",
       [] {
         RunOptions o;
         o.receipt_out = "/dev/null/receipt.json";
         return make_repo()->run(o).diagnostics;
       }},
      {"command failed", "E_COMMAND_FAILED",
       [] {
         auto repo = make_repo();
         repo->fail_on("Alpha\\.Two");
         return repo->run().diagnostics;
       }},
  };
}

TEST(LedgerDiagnostics, EveryCodeHasAOneFaultCase) {
  std::map<std::string, std::vector<std::string_view>> registry;
  for (const auto& spec : diagnostic_registry()) {
    EXPECT_TRUE(std::is_sorted(spec.fields.begin(), spec.fields.end())) << spec.code;
    EXPECT_TRUE(registry.emplace(std::string(spec.code), spec.fields).second) << "duplicate code " << spec.code;
  }
  std::set<std::string> covered;
  for (const auto& c : one_fault_cases()) {
    SCOPED_TRACE(c.name);
    const Diagnostics d = c.run();
    ASSERT_EQ(d.size(), 1u) << c.name << ": " << codes(d);
    const Diagnostic& x = d.items().front();
    EXPECT_EQ(x.code, c.code) << codes(d);
    ASSERT_TRUE(registry.count(x.code)) << "unregistered code " << x.code;
    std::vector<std::string> got;
    for (const auto& [k, v] : x.fields.items()) got.push_back(k);
    std::vector<std::string> want(registry[x.code].begin(), registry[x.code].end());
    EXPECT_EQ(got, want) << x.code << " fields " << x.fields.dump();
    EXPECT_FALSE(x.message.empty());
    covered.insert(x.code);
  }
  for (const auto& [code, fields] : registry) EXPECT_TRUE(covered.count(code)) << "no one-fault case for " << code;
}

// ---- Specific rules ------------------------------------------------------------------------------

TEST(ObligationsLedger, BaseManifestPassesWithoutReceiptButNothingIsComplete) {
  auto repo = make_repo();
  const auto out = repo->check();
  ASSERT_TRUE(out.ok()) << codes(out.diagnostics);
  EXPECT_EQ(out.summary["obligations"]["total"], 7);
  EXPECT_EQ(out.summary["obligations"]["active"], 3);
  EXPECT_EQ(out.summary["units_complete"], 0);
  EXPECT_FALSE(out.summary["terminal"].get<bool>());
  EXPECT_EQ(out.summary["candidate_commit"], repo->head());
}

TEST(ObligationsLedger, RunnerRunsEveryActiveArgvOnceAndNoDeferredOne) {
  auto repo = make_repo();
  const auto r = repo->run();
  ASSERT_TRUE(r.ok()) << codes(r.diagnostics);
  EXPECT_EQ(r.commands_run, 3);
  const auto log = repo->log();
  ASSERT_EQ(log.size(), 3u);
  std::multiset<std::string> lines(log.begin(), log.end());
  EXPECT_EQ(lines.count("pact contracts validate --dir contracts"), 1u);
  EXPECT_EQ(lines.count("ctest --preset release --output-on-failure --no-tests=error -R ^Alpha\\.One$"), 1u);
  EXPECT_EQ(lines.count("ctest --preset release --output-on-failure --no-tests=error -R ^Alpha\\.Two$"), 1u);
  for (const auto& l : log) {
    for (const char* deferred : {"Three", "Four", "Five", "Future"})
      EXPECT_EQ(l.find(deferred), std::string::npos) << l;
  }
  // The receipt: exact top-level keys, sorted executions of the active rows, bound to HEAD.
  const Json receipt = parse_json(slurp(repo->root() / "build/receipt.json"), "receipt");
  std::vector<std::string> keys;
  for (const auto& [k, v] : receipt.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"base_commit", "candidate_commit", "executions", "schema"}));
  EXPECT_EQ(receipt["candidate_commit"], repo->head());
  EXPECT_TRUE(receipt["base_commit"].is_null());
  ASSERT_EQ(receipt["executions"].size(), 3u);
  EXPECT_EQ(receipt["executions"][0]["obligation_id"], "m1");
  EXPECT_EQ(receipt["executions"][1]["obligation_id"], "r1");
  EXPECT_EQ(receipt["executions"][2]["obligation_id"], "r2");
  EXPECT_EQ(receipt["executions"][2]["artifact_path"], "contracts");
  // The checker accepts it and derives completeness: root and mid are complete, the rest deferred.
  CheckOptions o;
  o.receipt = (repo->root() / "build/receipt.json").string();
  const auto c = repo->check(o);
  ASSERT_TRUE(c.ok()) << codes(c.diagnostics);
  EXPECT_EQ(c.summary["units_complete"], 2);
  EXPECT_EQ(c.summary["units"][0]["complete"], true);
  EXPECT_EQ(c.summary["units"][2]["complete"], false);
  EXPECT_FALSE(c.summary["terminal"].get<bool>());
}

TEST(ObligationsLedger, AllActiveWithReceiptIsTerminal) {
  Spec s;
  s.rows.pop_back();                 // t1
  s.rows.erase(s.rows.begin() + 5);  // lc1
  s.units = {"root", "mid", "leafa", "leafb"};
  s.edges = {{"root", "mid"}, {"mid", "leafa"}, {"mid", "leafb"}};
  for (auto& r : s.rows) r.active = true;
  auto repo = make_repo(s);
  ASSERT_TRUE(repo->run().ok());
  CheckOptions o;
  o.receipt = (repo->root() / "build/receipt.json").string();
  const auto c = repo->check(o);
  ASSERT_TRUE(c.ok()) << codes(c.diagnostics);
  EXPECT_TRUE(c.summary["terminal"].get<bool>());
}

TEST(ObligationsLedger, ASharedCommandRunsOnce) {
  Spec s;
  Row twin = s.row("r1");
  twin.id = "r1b";
  s.rows.push_back(twin);
  s.patches.push_back({R"(id = "art-r1b")", R"(id = "art-r1")"});
  s.patches.push_back({R"(id = "cmd-r1b")", R"(id = "cmd-r1")"});
  s.patches.push_back({R"(artifact_id = "art-r1b")", R"(artifact_id = "art-r1")"});
  auto repo = make_repo(s);
  const auto r = repo->run();
  ASSERT_TRUE(r.ok()) << codes(r.diagnostics);
  EXPECT_EQ(r.commands_run, 3);
  EXPECT_EQ(repo->log().size(), 3u);
  EXPECT_EQ(r.receipt->executions.size(), 4u);
}

TEST(ObligationsLedger, FailedCommandIsRecordedAndNeverComplete) {
  auto repo = make_repo();
  repo->fail_on("Alpha\\.One");
  const auto r = repo->run();
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_EQ(r.diagnostics.items()[0].fields["exit_code"], 3);
  CheckOptions o;
  o.receipt = (repo->root() / "build/receipt.json").string();
  const auto c = repo->check(o);
  ASSERT_EQ(c.diagnostics.size(), 1u) << codes(c.diagnostics);
  EXPECT_EQ(c.diagnostics.items()[0].code, "E_COMMAND_FAILED");
  EXPECT_EQ(c.summary["units_complete"], 0);
}

TEST(ObligationsLedger, RunnerRefusesADirtyTreeAndExecutesNothing) {
  auto repo = make_repo();
  put(repo->root() / "notes.txt", "edited\n");
  const auto r = repo->run();
  EXPECT_TRUE(r.diagnostics.has("E_TREE_DIRTY"));
  EXPECT_EQ(r.commands_run, 0);
  EXPECT_TRUE(repo->log().empty());
  EXPECT_FALSE(fs::exists(repo->root() / "build/receipt.json"));
  // Untracked and ignored files are allowed.
  put(repo->root() / "notes.txt", "tracked\n");
  put(repo->root() / "scratch.txt", "untracked\n");
  EXPECT_TRUE(repo->run().ok());
}

// A repository Pact does not own runs nothing of its own: a core.fsmonitor command or a clean filter in
// its configuration (which `git status` would run as whoever runs Pact) makes the repository refused
// before any such git command, and one owned by another user is refused as Git refuses it.
TEST(ObligationsLedger, AHostileRepositoryRunsNothing) {
  for (const std::string& config : {std::string("core.fsmonitor"), std::string("filter.x.clean")}) {
    SCOPED_TRACE(config);
    auto repo = make_repo();
    const fs::path marker = repo->dir() / "pwned";
    if (config.rfind("filter.", 0) == 0) {
      put(repo->root() / ".gitattributes", "* filter=x\n");
      repo->commit("attributes");
    }
    repo->git(fmt::format("config {} 'touch {}'", config, marker.string()));
    put(repo->root() / "notes.txt", "edited, so status must look at it\n");
    const auto c = repo->check();
    EXPECT_TRUE(c.diagnostics.has("E_NOT_A_REPOSITORY")) << codes(c.diagnostics);
    EXPECT_NE(c.diagnostics.render().find(config), std::string::npos) << c.diagnostics.render();
    const auto r = repo->run();
    EXPECT_TRUE(r.diagnostics.has("E_NOT_A_REPOSITORY"));
    EXPECT_EQ(r.commands_run, 0);
    EXPECT_FALSE(fs::exists(marker)) << "the repository's command ran";
    // The same repository, cleaned of the command, is checked as usual.
    repo->git(fmt::format("config --unset {}", config));
    EXPECT_FALSE(repo->check().diagnostics.has("E_NOT_A_REPOSITORY"));
  }
  if (::geteuid() != 0) {
    std::printf("[ skipped  ] another user's repository: this test needs root to chown one\n");
    return;
  }
  auto repo = make_repo();
  ASSERT_EQ(std::system(fmt::format("chown -R nobody '{}'", repo->root().string()).c_str()), 0);
  const auto c = repo->check();
  EXPECT_TRUE(c.diagnostics.has("E_NOT_A_REPOSITORY")) << "Git refuses a repository owned by another user";
}

TEST(ObligationsLedger, ReceiptForAnOlderCommitIsRefused) {
  auto repo = make_repo();
  ASSERT_TRUE(repo->run().ok());
  put(repo->root() / "notes.txt", "next\n");
  repo->commit("next");
  CheckOptions o;
  o.receipt = (repo->root() / "build/receipt.json").string();
  const auto c = repo->check(o);
  ASSERT_EQ(c.diagnostics.size(), 1u) << codes(c.diagnostics);
  EXPECT_EQ(c.diagnostics.items()[0].code, "E_RECEIPT_CANDIDATE");
  EXPECT_EQ(c.diagnostics.items()[0].fields["expected"], repo->head());
}

TEST(ObligationsLedger, CohortPromotionPasses) {
  const auto d = transition([](Spec& s) {
    s.row("la1").active = true;
    s.row("lb1").active = true;
  });
  EXPECT_TRUE(d.empty()) << codes(d);
}

TEST(ObligationsLedger, RevisionMayRewriteOnlyDeferredRows) {
  EXPECT_TRUE(transition([](Spec& s) {
                s.revision = 2;
                s.row("lc1").path = "tests/later_test.cpp";
                s.row("lc1").gates = R"(["g1", "g2"])";
              }).empty());
  const auto d = transition([](Spec& s) {
    s.revision = 2;
    s.row("r1").gates = R"(["g1", "g2"])";
  });
  ASSERT_EQ(d.size(), 1u) << codes(d);
  EXPECT_EQ(d.items()[0].code, "E_OBLIGATION_CHANGED");
  EXPECT_EQ(d.items()[0].fields["field"], "gates");
}

TEST(ObligationsLedger, RunnerRecordsTheCanonicalBase) {
  auto repo = make_repo();
  const std::string base = repo->head();
  Spec s;
  s.row("la1").active = true;
  s.row("lb1").active = true;
  repo->manifest(s.text());
  repo->commit("promote");
  RunOptions ro;
  ro.base_commit = "HEAD~1";  // an alias: the receipt stores the object id
  const auto r = repo->run(ro);
  ASSERT_TRUE(r.ok()) << codes(r.diagnostics);
  EXPECT_EQ(r.receipt->base_commit, base);
  EXPECT_EQ(repo->log().size(), 5u);
  CheckOptions o;
  o.base_commit = base;
  o.receipt = (repo->root() / "build/receipt.json").string();
  const auto c = repo->check(o);
  EXPECT_TRUE(c.ok()) << codes(c.diagnostics);
}

TEST(ObligationsLedger, SymlinkOutOfTheRepositoryIsAnEscapeReportedBeforeCommandIdentity) {
  auto repo = make_repo();
  put(repo->dir() / "outside/pact", "#!/bin/sh\nexit 0\n");
  fs::create_symlink(repo->dir() / "outside", repo->root() / "tools-link");
  Spec s;
  // argv[0] both escapes (through the symlink) and differs from the allow-listed binary: only the escape is
  // reported, because path failures come before command identity comparison.
  s.patches.push_back({R"(argv = ["build/release/bin/pact")", R"(argv = ["tools-link/pact")"});
  repo->manifest(s.text());
  const auto d = repo->check().diagnostics;
  ASSERT_EQ(d.size(), 1u) << codes(d);
  EXPECT_EQ(d.items()[0].code, "E_PATH_ESCAPE");
  EXPECT_EQ(d.items()[0].fields["field"], "command.argv[0]");
  EXPECT_EQ(d.items()[0].fields["obligation_id"], "r2");
  // The runner executes nothing against it.
  repo->commit("escape");
  EXPECT_FALSE(repo->run().ok());
  EXPECT_TRUE(repo->log().empty());
}

TEST(ObligationsLedger, MalformedManifestsNeverCrash) {
  const std::string base = Spec{}.text();
  for (std::size_t cut = 0; cut < base.size(); cut += 37) {
    Diagnostics d;
    auto m = parse_manifest(base.substr(0, cut), "cut.toml", d);
    if (!m) {
      EXPECT_FALSE(d.empty()) << "cut at " << cut;
    }
  }
  Diagnostics d;
  EXPECT_FALSE(parse_manifest(std::string(100000, '['), "deep.toml", d));
  EXPECT_FALSE(d.empty());
}

TEST(ObligationsLedger, ContractSchemaProbeIsExact) {
  const Json c = cli_contract(Role::checker);
  EXPECT_EQ(c["schema"], "pact.ledger-cli-contract.v1");
  EXPECT_EQ(c["tool"], "pact-ledger-check");
  EXPECT_EQ(c["role"], "checker");
  EXPECT_EQ(c["manifest_schema"], "pact.obligations.v2");
  EXPECT_EQ(c["options"], Json::array({"--root", "--manifest", "--base-commit", "--receipt", "--summary-json",
                                       "--diagnostics-json"}));
  const Json r = cli_contract(Role::runner);
  EXPECT_EQ(r["role"], "runner");
  EXPECT_EQ(r["options"],
            Json::array({"--root", "--manifest", "--base-commit", "--receipt-out", "--diagnostics-json"}));
}

// ---- Evidence through receipts (pact plan --require-receipts) --------------------------------------

contract::Capsule capsule_citing(const std::string& suite) {
  contract::Capsule c = contract::reference_module().capsules.front();
  c.descriptors[2].evidence = {contract::EvidenceKind::testSuite, suite};
  return c;
}

TEST(LedgerEvidence, ReceiptResolverDemandsAPassingRunOfTheCitedSuite) {
  // A manifest whose active row runs the suite a capsule cites, and a receipt of that run.
  const std::string suite = contract::declared_test_suites().front();
  CheckOutcome outcome;
  Manifest m;
  m.registry.units = {{"kernels", ""}};
  m.registry.gates = {{"evidence", ""}};
  Obligation o;
  o.id = "kernels-suite";
  o.unit = "kernels";
  o.gates = {"evidence"};
  o.artifact = {"a", "gtest-source", "tests/kernels/reference_test.cpp", suite};
  o.command = {"c", "ctest-case", ctest_case_argv(suite), ".", {}, "a"};
  o.state.kind = StateKind::active;
  m.obligations.push_back(o);
  outcome.manifest = m;
  outcome.receipt = Receipt{"abc", std::nullopt, {{o.id, o.command.argv, ".", o.artifact.path, 0}}};
  const contract::Capsule cited = capsule_citing(suite);
  const auto through_receipt = ReceiptEvidenceResolver(outcome).resolve(cited, cited.descriptors[2]);
  EXPECT_TRUE(through_receipt.resolved);
  EXPECT_TRUE(through_receipt.verified);  // a passing run at HEAD, not the suite's name
  // The built-in resolver accepts the same suite by its name only, and says so.
  const auto by_name = contract::DefaultEvidenceResolver().resolve(cited, cited.descriptors[2]);
  EXPECT_TRUE(by_name.resolved);
  EXPECT_FALSE(by_name.verified);

  // The suite is not run by any active row: refused, naming it.
  const contract::Capsule other = capsule_citing(contract::declared_test_suites().back());
  const auto s = ReceiptEvidenceResolver(outcome).resolve(other, other.descriptors[2]);
  EXPECT_FALSE(s.resolved);
  EXPECT_NE(s.reason.find(contract::declared_test_suites().back()), std::string::npos) << s.reason;

  // A deferred row proves nothing.
  outcome.manifest->obligations[0].state.kind = StateKind::deferred;
  EXPECT_FALSE(ReceiptEvidenceResolver(outcome).resolve(cited, cited.descriptors[2]).resolved);
  outcome.manifest->obligations[0].state.kind = StateKind::active;

  // A failing ledger check refuses every testSuite, whatever the receipt says.
  outcome.diagnostics.add("E_RECEIPT_CANDIDATE", {{"expected", "x"}, {"actual", "y"}}, "another commit");
  const auto refused = ReceiptEvidenceResolver(outcome).resolve(cited, cited.descriptors[2]);
  EXPECT_FALSE(refused.resolved);
  EXPECT_NE(refused.reason.find("E_RECEIPT_CANDIDATE"), std::string::npos) << refused.reason;

  // No receipt at all.
  CheckOutcome bare;
  bare.manifest = m;
  EXPECT_FALSE(ReceiptEvidenceResolver(bare).resolve(cited, cited.descriptors[2]).resolved);

  // Evidence the built-in resolver refuses stays refused.
  const contract::Capsule bogus = capsule_citing("Nope.Missing");
  EXPECT_FALSE(ReceiptEvidenceResolver(outcome).resolve(bogus, bogus.descriptors[2]).resolved);
}

// The production manifest: it passes every structural rule, and its active rows include one per cited suite.
TEST(LedgerProduction, ManifestPassesTheChecker) {
  CheckOptions o;
  o.root = PACT_SOURCE_DIR;
  const auto out = ledger::check(o);
  ASSERT_TRUE(out.ok()) << codes(out.diagnostics);
  ASSERT_TRUE(out.manifest);
  EXPECT_EQ(out.summary["obligations"]["total"].get<std::size_t>(), out.manifest->obligations.size());
  EXPECT_GT(out.summary["obligations"]["active"].get<int>(), 0);
  EXPECT_EQ(out.summary["obligations"]["active"].get<std::size_t>() +
                out.summary["obligations"]["deferred"].get<std::size_t>(),
            out.manifest->obligations.size());
  // The sealed-artifact row was deferred until its test file existed, then promoted in place.
  const auto seal = std::find_if(out.manifest->obligations.begin(), out.manifest->obligations.end(),
                                 [](const auto& o) { return o.id == "seal-manifest-bounds"; });
  ASSERT_NE(seal, out.manifest->obligations.end());
  EXPECT_TRUE(seal->active());
  EXPECT_TRUE(fs::exists(fs::path(PACT_SOURCE_DIR) / "tests/seal/manifest_test.cpp"));
  // One deferred row, the GPU path: never run on a CPU-only machine, so the ledger is not terminal there.
  std::vector<std::string> deferred;
  for (const auto& row : out.manifest->obligations)
    if (!row.active()) deferred.push_back(row.id);
  EXPECT_EQ(deferred, std::vector<std::string>{"seal-gpu-vector-add-runs"});
  EXPECT_EQ(out.summary["obligations"]["deferred"].get<int>(), 1);
}

// The guide's code table is the registry: every code with its exact field keys.
TEST(LedgerProduction, GuideListsEveryCodeWithItsFields) {
  std::ifstream in(fs::path(PACT_SOURCE_DIR) / "docs/guides/obligations-ledger.md");
  std::stringstream s;
  s << in.rdbuf();
  const std::string guide = s.str();
  for (const auto& spec : diagnostic_registry()) {
    std::string fields;
    for (const auto& f : spec.fields) fields += (fields.empty() ? "" : ", ") + std::string(f);
    EXPECT_NE(guide.find(fmt::format("| `{}` | {} |", spec.code, fields)), std::string::npos) << spec.code;
  }
}

}  // namespace
}  // namespace pact::ledger
