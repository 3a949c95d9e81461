// pact_mutation_gate (issue 20 item 5): runs every contract's obligations against the generated mutants of
// the reference and native kernels' source. This executable is linked with the mutant schemata of
// pact/kernels/cpu/reference.cpp and native.cpp (tools/mutate.py rewrote them and the kernel sources they
// include, every mutant selected at run time through pact/verify/mutation.hpp) in place of the library's.
//
//   pact_mutation_gate --contracts contracts --mutants build/release/mutants/mutants.json --out REPORT.json
//
// A contract's mutants are the sites its obligations reach when no mutant is active, recorded by the schemata
// for each evaluation (an obligation on one capsule) at each ISA level the CPU runs (best first; PACT_ISA's
// lower levels, so that every SIMD variant's mutants are reached), each contract in its own process. Each
// mutant then runs in a child process through the evaluations that reach its site, at their levels, until
// one fails (the run before the site is first reached is the unmutated one, so no other evaluation can kill
// it; should the site go unreached there, every evaluation runs at every level): killed when an obligation
// fails, the kernel crashes (a write outside a host block aborts: the gate runs with guard bands, Note [Guard
// bands] in pact/core/provider.cpp) or it runs past its timeout (10 times what its evaluations took unmutated,
// and a second more, at most --timeout, 20 s); survived otherwise. Equivalent mutants
// (contracts/equivalent_mutants.json: file, line, column, original, mutated and the reason; a row may hold for
// the contracts it names only) leave the denominator and are listed, and are not run; with --run-equivalent
// they are, and one an obligation kills counts as killed and is reported under listed_but_killed, for its row
// to be re-examined. The report (schema
// pact.mutation-report.v1) is what `pact contracts gate --mutation-report` reads. `--only CONTRACT` runs those
// contracts alone (while examining survivors).

#include <fmt/format.h>
#include <malloc.h>
#include <omp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "pact/contract/capsule.hpp"
#include "pact/core/cpu.hpp"
#include "pact/core/file.hpp"
#include "pact/core/json.hpp"
#include "pact/core/provider.hpp"
#include "pact/verify/falsify.hpp"
#include "pact/verify/mutation.hpp"
#include "pact/verify/oracle.hpp"

namespace {

using pact::Json;

struct Mutant {
  int id = 0;
  std::string file, kind, original, mutated;
  std::int64_t line = 0, column = 0;
  Json to_json() const {
    return Json{{"id", id},     {"file", file},         {"line", line},      {"column", column},
                {"kind", kind}, {"original", original}, {"mutated", mutated}};
  }
};

struct Options {
  std::string contracts = "contracts", mutants, out, equivalent;
  std::set<std::string> only;  // --only ID (repeatable): these contracts alone
  int trials = 6, timeout_s = 20, jobs = 2;
  bool verbose = false;         // --verbose: each evaluation's time at each level
  bool run_equivalent = false;  // --run-equivalent: run the listed equivalent mutants too (re-examining rows)
};

// One evaluation of a contract: an obligation on one capsule (falsify's walk, run one at a time here, so that
// a mutant runs only the evaluations that reach its site).
using Unit = pact::verify::Evaluation;

enum class Verdict { holds, fails, not_applicable };

// With `why`, a failure's first failing case is written there.
Verdict evaluate(const Unit& u, const std::string& oracle, int trials, std::string* why = nullptr) {
  const auto out = pact::verify::evaluate_capsule(*u.obligation, u.op, u.capsule, 0, trials, oracle);
  if (!out.not_applicable.empty()) return Verdict::not_applicable;
  if (out.failed > 0 && why != nullptr) *why = out.first_failure;
  return out.failed > 0 ? Verdict::fails : Verdict::holds;
}

// Runs f in a child process (with an alarm after `timeout_s`): its exit status, or 128 + the signal.
template <class F>
pid_t spawn(F&& f, int timeout_s) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    // A mutant's crash report (glibc's heap checks, a failed assertion) is an outcome, not output.
    if (std::FILE* null = std::freopen("/dev/null", "w", stderr); null == nullptr) ::_exit(4);
    ::alarm(static_cast<unsigned>(timeout_s));
    int code = 3;
    try {
      code = f() ? 0 : 1;
    } catch (...) {
      code = 2;  // an exception escaped the obligations: the mutant broke something
    }
    ::_exit(code);
  }
  return pid;
}

int status_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

int run(const Options& o) {
  const auto contracts = pact::spec::load_contracts(o.contracts);
  for (const std::string& id : o.only) {
    if (std::none_of(contracts.begin(), contracts.end(), [&](const auto& c) { return c.id == id; })) {
      std::fprintf(stderr, "pact_mutation_gate: --only %s: no such contract in %s\n", id.c_str(), o.contracts.c_str());
      return 1;
    }
  }
  const std::string binding_path = o.contracts + "/binding.yaml";
  pact::spec::BindingFile bindings = pact::spec::parse_bindings(pact::spec::read_text_file(binding_path), binding_path);
  const std::string oracle = pact::verify::oracle_dir_of(o.contracts);
  pact::verify::set_stop_at_first_failure(true);
  (void)pact::verify::oracle_cases(oracle);  // read once, before any fork

  const Json doc = pact::parse_json(pact::read_file(o.mutants, "mutation gate"), o.mutants);
  // Only the capsules of the providers whose translation unit the schemata rewrote carry the mutants
  // (pact/kernels/cpu/reference.cpp: the reference provider's, native.cpp: the native provider's, the
  // attention module's included), by the provider the capsule registry names, not by the capsule's name.
  std::set<std::string> providers;
  for (const Json& tu : doc.at("translation_units")) {
    const auto path = tu.get<std::string>();
    providers.insert(path.substr(path.rfind('/') + 1, path.rfind('.') - path.rfind('/') - 1));
  }
  std::erase_if(bindings.bindings, [&](const auto& b) {
    const pact::contract::Capsule* capsule = pact::contract::find_maintained_capsule(b.capsule);
    return capsule == nullptr || !providers.count(capsule->provider);
  });
  std::map<int, Mutant> mutants;
  int max_id = 0, dropped = 0;
  for (const Json& m : doc.at("mutants")) {
    if (m.contains("dropped")) {
      ++dropped;
      continue;
    }
    Mutant x{m.at("id").get<int>(),
             m.at("file").get<std::string>(),
             m.at("kind").get<std::string>(),
             m.at("original").get<std::string>(),
             m.at("mutated").get<std::string>(),
             m.at("line").get<std::int64_t>(),
             m.at("column").get<std::int64_t>()};
    max_id = std::max(max_id, x.id);
    mutants.emplace(x.id, std::move(x));
  }
  // How many mutants share each file, line, column and change (a row cannot tell them apart).
  auto key_of = [](const Mutant& m) {
    return fmt::format("{}:{}:{}:{}:{}", m.file, m.line, m.column, m.original, m.mutated);
  };
  std::map<std::string, int> twins;
  for (const auto& [id, m] : mutants) ++twins[key_of(m)];
  // Equivalent mutants: matched by file, line, column, original and mutated text; or every mutant on a source
  // line (or those at the listed `columns`, or named "original -> mutated" in `only`), the line matched by its
  // text, whitespace trimmed (a line that changes stops matching; one that moves still does).
  std::vector<Json> equivalent_rows, equivalent_lines;
  if (!o.equivalent.empty()) {
    const Json listed = pact::parse_json(pact::read_file(o.equivalent, "mutation gate"), o.equivalent);
    for (const Json& e : listed.at("equivalent")) equivalent_rows.push_back(e);
    if (listed.contains("equivalent_lines"))
      for (const Json& e : listed.at("equivalent_lines")) equivalent_lines.push_back(e);
  }
  std::map<std::string, std::vector<std::string>> sources;
  auto source_line = [&](const std::string& file, std::int64_t line) -> std::string {
    auto it = sources.find(file);
    if (it == sources.end()) {
      std::vector<std::string> lines;
      std::string text = pact::read_file(file, "mutation gate"), cur;
      for (char ch : text) {
        if (ch == '\n') {
          lines.push_back(std::move(cur));
          cur.clear();
        } else {
          cur += ch;
        }
      }
      lines.push_back(std::move(cur));
      it = sources.emplace(file, std::move(lines)).first;
    }
    if (line < 1 || line > static_cast<std::int64_t>(it->second.size())) return {};
    const std::string& l = it->second[static_cast<std::size_t>(line - 1)];
    const auto b = l.find_first_not_of(" \t"), e = l.find_last_not_of(" \t\r");
    return b == std::string::npos ? std::string() : l.substr(b, e - b + 1);
  };
  // A row with `contracts` holds for those contracts only: the mutant is equivalent under what they bind
  // (rms_norm's mean is 0, so `x - mean -> x + mean` changes nothing there, and layer_norm must kill it).
  auto for_contract = [](const Json& e, const std::string& contract) {
    if (!e.contains("contracts")) return true;
    const Json& ids = e.at("contracts");
    return std::any_of(ids.begin(), ids.end(), [&](const Json& x) { return x == contract; });
  };
  auto equivalence = [&](const Mutant& m, const std::string& contract) -> std::string {
    for (const Json& e : equivalent_rows) {
      if (e.at("file") == m.file && e.at("line") == m.line && e.at("column") == m.column &&
          e.at("original") == m.original && e.at("mutated") == m.mutated && for_contract(e, contract))
        return e.at("reason").get<std::string>();
    }
    for (const Json& e : equivalent_lines) {
      if (e.at("file") != m.file || e.at("text") != source_line(m.file, m.line) || !for_contract(e, contract)) continue;
      if (e.contains("columns")) {
        const Json& cols = e.at("columns");
        if (std::none_of(cols.begin(), cols.end(), [&](const Json& x) { return x == m.column; })) continue;
      }
      if (e.contains("only")) {
        const std::string change = m.original + " -> " + m.mutated;
        const Json& only = e.at("only");
        if (std::none_of(only.begin(), only.end(), [&](const Json& x) { return x == change; })) continue;
      }
      return e.at("reason").get<std::string>();
    }
    return {};
  };

  // The ISA levels this CPU runs, best first: a SIMD variant's mutants are reached at its own level only
  // (PACT_ISA's lower levels, set here through set_active_isa), the portable code's at every level.
  std::vector<pact::Isa> levels;
  for (auto it = pact::kIsaLevels.rbegin(); it != pact::kIsaLevels.rend(); ++it) {
    if (pact::cpu_runs(*it)) levels.push_back(*it);
  }
  Json level_names = Json::array();
  for (pact::Isa l : levels) level_names.push_back(std::string(pact::isa_name(l)));

  Json report = Json::object();
  report["schema"] = "pact.mutation-report.v1";
  report["mutants_generated"] = mutants.size() + static_cast<std::size_t>(dropped);
  report["mutants_dropped"] = dropped;
  report["isa_levels"] = level_names;
  report["equivalent_run"] = o.run_equivalent;  // whether the listed equivalent mutants ran (listed_but_killed)
  Json rows = Json::array();
  std::set<int> reached_by_any;
  const std::size_t stride = static_cast<std::size_t>(max_id) + 1;
  // The reference's results on the op sweep's samples, computed once here and inherited by every child
  // (verify::keep_sample_baselines) instead of once per evaluation in each: the sites that computing them
  // reaches, at any level, are recorded, and a child whose mutant is one of them drops them and computes its
  // own. One OpenMP thread meanwhile, so that no team exists in this process when it forks (libgomp's
  // threads do not survive a fork, and a child's first parallel region would wait for them).
  std::vector<std::uint8_t> reference_sites(stride, 0);
  {
    const auto start = std::chrono::steady_clock::now();
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    pact::mutation::reached = reference_sites.data();
    for (auto it = levels.rbegin(); it != levels.rend(); ++it) {  // the best level's results are kept
      pact::set_active_isa(*it);
      pact::verify::drop_sample_baselines();
      pact::verify::keep_sample_baselines(0);
    }
    pact::mutation::reached = nullptr;
    omp_set_num_threads(threads);
    if (o.verbose)
      std::printf("the reference's sample results: %.1f s at %zu levels, %zd sites reached\n",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), levels.size(),
                  std::count(reference_sites.begin(), reference_sites.end(), std::uint8_t{1}));
  }
  for (const auto& contract : contracts) {
    const bool bound = std::any_of(bindings.bindings.begin(), bindings.bindings.end(),
                                   [&](const auto& b) { return b.contract == contract.id; });
    if (!bound || (!o.only.empty() && !o.only.count(contract.id))) continue;
    const std::vector<Unit> units = pact::verify::evaluations_of(contract, bindings);
    // Phase 1, unmutated, at every level: which sites each evaluation reaches (one reach record per level
    // and evaluation, shared with the child), and that the obligations hold.
    const std::size_t records = levels.size() * units.size();
    auto slot = [&](std::size_t l, std::size_t u) { return l * units.size() + u; };  // (level, evaluation)
    auto* reach = static_cast<std::uint8_t*>(
        ::mmap(nullptr, records * stride, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    if (reach == MAP_FAILED) {
      std::fprintf(stderr, "pact_mutation_gate: cannot map the reach records\n");
      return 1;
    }
    // Each evaluation's time, so that a mutant's plan tries the cheapest first.
    auto* seconds = static_cast<double*>(
        ::mmap(nullptr, records * sizeof(double), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    if (seconds == MAP_FAILED) {
      std::fprintf(stderr, "pact_mutation_gate: cannot map the evaluation times\n");
      return 1;
    }
    int status = 0;
    ::waitpid(spawn(
                  [&] {
                    // Each evaluation's reach includes the reference's run, as when nothing is kept.
                    pact::verify::drop_sample_baselines(false);
                    int evaluated = 0;
                    for (std::size_t l = 0; l < levels.size(); ++l) {
                      pact::set_active_isa(levels[l]);
                      for (std::size_t u = 0; u < units.size(); ++u) {
                        pact::mutation::reached = reach + slot(l, u) * stride;
                        const auto start = std::chrono::steady_clock::now();
                        std::string why;
                        const Verdict v = evaluate(units[u], oracle, o.trials, &why);
                        seconds[slot(l, u)] =
                            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
                        if (v == Verdict::fails) {  // the child's stderr is closed: the parent's stdout says it
                          std::printf("pact_mutation_gate: %s on %s at %s, with no mutant active: %s\n",
                                      units[u].obligation->id.c_str(), units[u].capsule.c_str(),
                                      std::string(pact::isa_name(levels[l])).c_str(), why.c_str());
                          std::fflush(stdout);
                          return false;
                        }
                        evaluated += v == Verdict::holds ? 1 : 0;
                      }
                    }
                    return evaluated > 0;
                  },
                  o.timeout_s * 6 * static_cast<int>(levels.size())),
              &status, 0);
    if (status_code(status) != 0) {
      std::fprintf(stderr, "pact_mutation_gate: %s fails with no mutant active (status %d)\n", contract.id.c_str(),
                   status_code(status));
      return 1;
    }
    // A mutant's plan: the (level, evaluation) pairs that reach its site, the quickest first. The run before
    // the site is first reached is the unmutated one, so an evaluation that does not reach it cannot kill it.
    // An evaluation that reaches the same sites at a lower level as at a higher one (a kernel with no variant
    // between them) runs at the higher level only.
    auto record = [&](std::size_t l, std::size_t u) { return reach + slot(l, u) * stride; };
    std::vector<bool> repeats(records, false);
    for (std::size_t l = 1; l < levels.size(); ++l)
      for (std::size_t u = 0; u < units.size(); ++u)
        for (std::size_t h = 0; h < l && !repeats[slot(l, u)]; ++h)
          repeats[slot(l, u)] = std::equal(record(l, u), record(l, u) + stride, record(h, u));
    std::map<int, std::vector<std::pair<std::size_t, std::size_t>>> plans;
    for (const auto& [id, m] : mutants) {
      for (std::size_t l = 0; l < levels.size(); ++l)
        for (std::size_t u = 0; u < units.size(); ++u)
          if (record(l, u)[id] != 0 && !repeats[slot(l, u)]) plans[id].emplace_back(l, u);
    }
    if (o.verbose) {
      for (std::size_t l = 0; l < levels.size(); ++l)
        for (std::size_t u = 0; u < units.size(); ++u)
          std::printf("  %s at %s: %.3f s%s\n", units[u].obligation->id.c_str(),
                      std::string(pact::isa_name(levels[l])).c_str(), seconds[slot(l, u)],
                      repeats[slot(l, u)] ? " (as at a higher level)" : "");
    }
    for (auto& [id, plan] : plans) {
      std::stable_sort(plan.begin(), plan.end(), [&](const auto& x, const auto& y) {
        return seconds[slot(x.first, x.second)] < seconds[slot(y.first, y.second)];
      });
    }
    // A mutant runs past its timeout when it takes 10 times what its plan took unmutated, and a second more
    // (at most --timeout seconds): a hang, not a slow kernel. (Unmutated, each evaluation ran the reference
    // too; a child mostly takes the reference's kept results, so its margin is wider still.)
    std::map<int, int> timeout_of;
    for (const auto& [id, plan] : plans) {
      double unmutated = 0;
      for (const auto& [l, u] : plan) unmutated += seconds[slot(l, u)];
      timeout_of[id] = std::clamp(static_cast<int>(std::ceil(10 * unmutated)) + 1, 2, o.timeout_s);
    }
    ::munmap(reach, records * stride);
    ::munmap(seconds, records * sizeof(double));
    std::vector<int> own;
    own.reserve(plans.size());
    for (const auto& [id, plan] : plans) own.push_back(id);
    reached_by_any.insert(own.begin(), own.end());
    // Phase 2: every reached mutant in its own process, `jobs` at a time, through its plan until an
    // evaluation fails. Should the site go unreached there (state an earlier evaluation left in phase 1),
    // every evaluation runs at every level.
    using Clock = std::chrono::steady_clock;
    std::map<pid_t, std::pair<int, Clock::time_point>> running;  // the mutant and when its child started
    std::map<int, int> outcome;
    std::map<int, double> took;  // each child's wall time, for --verbose
    auto reap = [&] {
      int st = 0;
      const pid_t done = ::wait(&st);
      if (done > 0) {
        const auto& [id, start] = running.at(done);
        outcome[id] = status_code(st);
        took[id] = std::chrono::duration<double>(Clock::now() - start).count();
        running.erase(done);
      }
    };
    for (int id : own) {
      // A mutant listed as equivalent for this contract leaves the denominator whatever its child's outcome
      // would be, so it is not run unless asked (--run-equivalent: a listed mutant an obligation kills then
      // counts as killed and is reported under listed_but_killed, for its row to be re-examined). Unless a
      // twin shares its file, line, column and change (`a - b - c`: both minus signs start at a's column),
      // which a row cannot tell apart: the twins run, and one that an obligation kills counts as killed.
      if (!o.run_equivalent && twins.at(key_of(mutants.at(id))) == 1 &&
          !equivalence(mutants.at(id), contract.id).empty()) {
        outcome[id] = 0;
        took[id] = 0;
        continue;
      }
      while (static_cast<int>(running.size()) >= o.jobs) reap();
      const pid_t pid = spawn(
          [&, id] {
            std::vector<std::uint8_t> seen(stride, 0);
            pact::mutation::reached = seen.data();
            pact::mutation::active = id;
            if (reference_sites[static_cast<std::size_t>(id)] != 0) pact::verify::drop_sample_baselines(false);
            for (const auto& [l, u] : plans.at(id)) {
              pact::set_active_isa(levels[l]);
              if (evaluate(units[u], oracle, o.trials) == Verdict::fails) return false;
            }
            if (seen[static_cast<std::size_t>(id)] != 0) return true;
            ::alarm(static_cast<unsigned>(o.timeout_s));  // the whole contract: the plan's timeout is too short
            for (pact::Isa level : levels) {
              pact::set_active_isa(level);
              for (const Unit& unit : units)
                if (evaluate(unit, oracle, o.trials) == Verdict::fails) return false;
            }
            return true;
          },
          timeout_of.at(id));
      running[pid] = {id, Clock::now()};
    }
    while (!running.empty()) reap();
    // A listed mutant that an obligation killed: its row claims more than holds (or a slow machine timed it
    // out), and it counts as killed; listed so that the row is re-examined.
    Json survivors = Json::array(), equivalents = Json::array(), listed_but_killed = Json::array();
    int killed = 0, timeouts = 0, crashes = 0;
    std::map<std::string, std::pair<int, double>> spent;  // children and their seconds, by outcome (--verbose)
    for (int id : own) {
      const int code = outcome.at(id);
      const Mutant& m = mutants.at(id);
      auto& [children, secs] = spent[code == 0 ? (equivalence(m, contract.id).empty() ? "survived" : "equivalent")
                                     : code == 128 + SIGALRM ? "timed out"
                                     : code > 128            ? "crashed"
                                                             : "failed an obligation"];
      ++children;
      secs += took.at(id);
      if (code == 0) {
        const std::string why = equivalence(m, contract.id);
        Json e = m.to_json();
        std::set<std::string> at;
        for (const auto& [l, u] : plans.at(id)) at.insert(std::string(pact::isa_name(levels[l])));
        e["levels"] = at;
        if (why.empty()) {
          survivors.push_back(std::move(e));
        } else {
          e["reason"] = why;
          equivalents.push_back(std::move(e));
        }
        continue;
      }
      ++killed;
      if (!equivalence(m, contract.id).empty()) listed_but_killed.push_back(m.to_json());
      timeouts += code == 128 + SIGALRM ? 1 : 0;
      crashes += code > 128 && code != 128 + SIGALRM ? 1 : 0;
    }
    const auto counted = static_cast<int>(own.size() - equivalents.size());
    std::printf("%-26s %4d/%-4d mutants killed (%d by a timeout, %d by a crash), %zu equivalent, %zu survivors%s\n",
                contract.id.c_str(), killed, counted, timeouts, crashes, equivalents.size(), survivors.size(),
                listed_but_killed.empty()
                    ? ""
                    : fmt::format("; {} listed as equivalent but killed", listed_but_killed.size()).c_str());
    if (o.verbose) {
      for (const auto& [what, n] : spent)
        std::printf("  %-22s %5d children, %8.1f s (%.3f s each)\n", what.c_str(), n.first, n.second,
                    n.second / n.first);
    }
    std::fflush(stdout);
    rows.push_back(Json{{"contract", contract.id},
                        {"generated", own.size()},
                        {"killed", killed},
                        {"timeouts", timeouts},
                        {"crashes", crashes},
                        {"equivalent", equivalents},
                        {"listed_but_killed", listed_but_killed},
                        {"survivors", survivors}});
  }
  report["contracts"] = rows;
  report["mutants_reached"] = reached_by_any.size();
  Json unreached = Json::array();
  for (const auto& [id, m] : mutants) {
    if (!reached_by_any.count(id)) unreached.push_back(m.to_json());
  }
  report["unreached"] = unreached;
  std::printf(
      "%zu mutants kept of %zu generated (%d dropped: constant expressions); %zu reached by some contract, "
      "%zu by none\n",
      mutants.size(), mutants.size() + static_cast<std::size_t>(dropped), dropped, reached_by_any.size(),
      unreached.size());
  if (!o.out.empty()) pact::write_file_atomic(o.out, report.dump(1) + "\n", "pact_mutation_gate");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Note [The gate's children]: --jobs children run side by side, each with its OpenMP team. Threads that
  // spin at a barrier (libgomp's default) take the cores the other children need, so the gate runs with
  // passive waiting; libgomp reads its environment when it loads, hence the one re-execution (unless the
  // caller chose a policy). And a child's vectors of a few hundred kilobytes would each come from mmap and
  // fault in their pages anew, so the heap keeps what it is given instead. Together they took the gate's
  // linear contract from 70 s to 30 s on 2 cores; neither changes what a mutant computes. Every page a child
  // touches first is a page fault, each costly in a VM (the gate spent a third of its time in the kernel),
  // so glibc's malloc asks for transparent huge pages for the heap (the glibc.malloc.hugetlb tunable, also
  // read at load: madvise, which the kernel honours where THP is `madvise` or `always`): one fault per 2 MiB
  // of fresh heap, not per 4 KiB (the linear and layernorm contracts' children: 1.13 to 0.74 million faults,
  // 25 to 19 s in the kernel).
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  const bool huge =
      tunables != nullptr && std::string_view(tunables).find("glibc.malloc.hugetlb") != std::string_view::npos;
  const bool policy_chosen = std::getenv("OMP_WAIT_POLICY") != nullptr;
  if (!policy_chosen || !huge) {
    if (!policy_chosen) ::setenv("OMP_WAIT_POLICY", "passive", 1);
    if (!huge) {
      const std::string t = tunables == nullptr || *tunables == '\0'
                                ? std::string("glibc.malloc.hugetlb=1")
                                : std::string(tunables) + ":glibc.malloc.hugetlb=1";
      ::setenv("GLIBC_TUNABLES", t.c_str(), 1);
    }
    ::execv("/proc/self/exe", argv);  // returns only on failure: run as we are
  }
  ::mallopt(M_MMAP_THRESHOLD, 256 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // Guard bands around every host block (Note [Guard bands], pact/core/provider.cpp): a mutant that reads
  // past its input reads NaN, one that writes past its output aborts when the block is released.
  ::setenv("PACT_HOST_GUARD", "1", 1);
  if (!pact::host_guard_bands()) {
    std::fprintf(stderr, "pact_mutation_gate: host guard bands are off (a host block was allocated first)\n");
    return 1;
  }
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "pact_mutation_gate: %s needs a value\n", a.c_str());
        std::exit(1);
      }
      return argv[++i];
    };
    // A whole number of 1 to 9999 (jobs, seconds); anything else is refused.
    auto count = [&](const std::string& text) {
      int n = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
      if (ec != std::errc() || end != text.data() + text.size() || n < 1 || n > 9999) {
        std::fprintf(stderr, "pact_mutation_gate: %s wants a whole number from 1 to 9999, not '%s'\n", a.c_str(),
                     text.c_str());
        std::exit(1);
      }
      return n;
    };
    if (a == "--contracts") {
      o.contracts = value();
    } else if (a == "--mutants") {
      o.mutants = value();
    } else if (a == "--out") {
      o.out = value();
    } else if (a == "--equivalent") {
      o.equivalent = value();
    } else if (a == "--only") {
      o.only.insert(value());
    } else if (a == "--timeout") {
      o.timeout_s = std::max(2, count(value()));
    } else if (a == "--verbose") {
      o.verbose = true;
    } else if (a == "--run-equivalent") {
      o.run_equivalent = true;
    } else if (a == "--jobs") {
      o.jobs = std::max(1, count(value()));
    } else {
      std::fprintf(
          stderr,
          "usage: pact_mutation_gate --mutants FILE [--contracts DIR] [--out REPORT] [--equivalent FILE] [--jobs N] "
          "[--only CONTRACT]... [--timeout SECONDS] [--run-equivalent] [--verbose]\n");
      return 1;
    }
  }
  if (o.mutants.empty()) {
    std::fprintf(stderr, "pact_mutation_gate: --mutants is required\n");
    return 1;
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pact_mutation_gate: %s\n", e.what());
    return 1;
  }
}
