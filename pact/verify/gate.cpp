#include "pact/verify/gate.hpp"

#include <fmt/format.h>

#include <map>
#include <set>

namespace pact::verify {

std::vector<Json> parse_gcov_json(std::string_view text, std::string_view where) {
  std::vector<Json> docs;
  std::size_t line_no = 0, start = 0;
  while (start <= text.size()) {
    const auto end = text.find('\n', start);
    const std::string_view line =
        text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    ++line_no;
    if (line.find_first_not_of(" \t\r") != std::string_view::npos) {
      Json doc = parse_json(line, fmt::format("{}:{}", where, line_no));
      if (!doc.is_object() || !doc.contains("files") || !doc["files"].is_array()) {
        throw_error(ErrorCode::parse_error, "gate",
                    fmt::format("{}:{}: not a gcov JSON document (no 'files' list)", where, line_no));
      }
      docs.push_back(std::move(doc));
    }
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  if (docs.empty()) throw_error(ErrorCode::parse_error, "gate", fmt::format("{}: no gcov JSON documents", where));
  return docs;
}

namespace {

// True when the demangled symbol is the function `name` itself or code nested in it (a lambda, an
// OpenMP region): "::name" followed by its parameter list or template arguments. "conv2d" names
// conv2d(...) and conv2d<float>(...), never conv2d_vjp(...).
bool names_function(const std::string& demangled, const std::string& name) {
  const std::string key = "::" + name;
  for (auto at = demangled.find(key); at != std::string::npos; at = demangled.find(key, at + 1)) {
    const auto next = at + key.size();
    if (next < demangled.size() && (demangled[next] == '(' || demangled[next] == '<')) return true;
  }
  return false;
}

}  // namespace

LineCoverage kernel_coverage(const std::vector<Json>& gcov, const std::vector<std::string>& names) {
  LineCoverage out;
  std::map<std::pair<std::string, std::int64_t>, bool> lines;  // (file, line) -> executed
  std::set<std::string> measured;
  for (const auto& doc : gcov) {
    for (const auto& f : doc["files"]) {
      if (!f.is_object() || !f.contains("functions") || !f.contains("lines")) continue;
      const std::string file = f.value("file", "");
      std::set<std::string> mangled;
      for (const auto& fn : f["functions"]) {
        const std::string demangled = fn.value("demangled_name", "");
        if (demangled.find("pact::kernels::cpu::") == std::string::npos) continue;
        const bool hit = std::any_of(names.begin(), names.end(),
                                     [&](const std::string& name) { return names_function(demangled, name); });
        if (!hit) continue;
        mangled.insert(fn.value("name", ""));
        measured.insert(demangled.substr(0, demangled.find('(')));
      }
      for (const auto& l : f["lines"]) {
        if (!mangled.count(l.value("function_name", ""))) continue;
        auto& executed = lines[{file, l.value("line_number", std::int64_t{0})}];
        executed = executed || l.value("count", std::int64_t{0}) > 0;
      }
    }
  }
  out.lines = lines.size();
  for (const auto& [key, executed] : lines) out.executed += executed ? 1 : 0;
  out.functions.assign(measured.begin(), measured.end());
  return out;
}

std::map<std::string, SourceMutants> parse_mutation_report(const Json& report, std::string_view where) {
  std::map<std::string, SourceMutants> out;
  try {
    if (report.at("schema") != "pact.mutation-report.v1")
      throw_error(ErrorCode::parse_error, "gate", fmt::format("{}: not a pact.mutation-report.v1", where));
    for (const Json& c : report.at("contracts")) {
      SourceMutants m;
      m.generated = c.at("generated").get<std::size_t>();
      m.killed = c.at("killed").get<std::size_t>();
      m.equivalent = c.at("equivalent").size();
      for (const Json& s : c.at("survivors")) {
        m.survivors.push_back(fmt::format("{}:{}:{} {} -> {}", s.at("file").get<std::string>(),
                                          s.at("line").get<std::int64_t>(), s.at("column").get<std::int64_t>(),
                                          s.at("original").get<std::string>(), s.at("mutated").get<std::string>()));
      }
      if (m.killed + m.equivalent + m.survivors.size() != m.generated)
        throw_error(ErrorCode::parse_error, "gate",
                    fmt::format("{}: {}: killed, equivalent and survivors do not add up to {} generated", where,
                                c.at("contract").get<std::string>(), m.generated));
      out[c.at("contract").get<std::string>()] = std::move(m);
    }
  } catch (const Json::exception& e) {
    throw_error(ErrorCode::parse_error, "gate", fmt::format("{}: {}", where, e.what()));
  }
  return out;
}

std::vector<GateResult> evaluate_gates(const std::vector<Contract>& contracts, const FalsifyReport& report,
                                       const std::map<std::string, SourceMutants>* source,
                                       const std::vector<Json>* gcov) {
  std::vector<GateResult> out;
  for (const auto& c : contracts) {
    GateResult g;
    g.contract = c.id;
    g.gate = c.gate.id;
    bool considered = false;
    for (const auto& o : report.obligations) {
      if (o.contract != c.id) continue;
      considered = true;
      if (!o.outcome.not_applicable.empty()) continue;  // listed by falsify; counts neither way
      // Only the obligations the gate lists count toward it.
      if (std::find(c.gate.checks.begin(), c.gate.checks.end(), o.obligation) == c.gate.checks.end()) continue;
      ++g.evaluated;
      if (o.outcome.failed == 0)
        ++g.passed;
      else
        g.reasons.push_back(fmt::format("{} failed on {}: {}", o.obligation, o.capsule, o.outcome.first_failure));
    }
    if (!considered) continue;  // not part of this report (falsify ran for another contract)
    for (const auto& m : report.mutants) {
      if (m.contract != c.id) continue;
      ++g.mutants;
      if (m.caught) ++g.caught;
    }
    // A mutant the gate must catch is caught by every falsification test that names it (a generic mutant
    // is named once per equation).
    for (const auto& name : c.gate.must_catch) {
      bool ran = false;
      for (const auto& m : report.mutants) {
        if (m.contract != c.id || m.mutant != name) continue;
        ran = true;
        if (!m.caught) g.reasons.push_back(fmt::format("mutant {} was not caught ({})", name, m.test));
      }
      if (!ran) g.reasons.push_back(fmt::format("mutant {} was not caught (no falsification test ran it)", name));
    }
    bool incomplete = g.mutants == 0;
    if (g.mutants == 0) g.reasons.push_back("no falsification test ran");
    bool low_score = false;
    if (source != nullptr) {
      if (auto it = source->find(c.id); it != source->end()) g.source = it->second;
    }
    if (!g.source) {
      incomplete = true;
      g.reasons.push_back(source == nullptr ? "source mutants unmeasured (no --mutation-report)"
                                            : "the mutation report has no row for this contract");
    } else if (g.source->counted() < kMinSourceMutants) {
      low_score = true;
      g.reasons.push_back(
          fmt::format("{} source mutants reached, fewer than {}", g.source->counted(), kMinSourceMutants));
    }
    if ((g.source || g.mutants > 0) && g.mutation_score() < kMutationThreshold) {
      low_score = true;
      g.reasons.push_back(fmt::format("mutation score {:.0f}% < {:.0f}%", g.mutation_score(), kMutationThreshold));
    }
    if (gcov != nullptr) {
      std::vector<std::string> fragments;
      for (const auto& e : c.equations)
        fragments.insert(fragments.end(), e.kernel_functions.begin(), e.kernel_functions.end());
      if (fragments.empty()) {
        incomplete = true;
        g.reasons.push_back("no equation names kernel_functions to measure");
      } else {
        g.coverage = kernel_coverage(*gcov, fragments);
        if (g.coverage->lines == 0) {
          incomplete = true;
          g.reasons.push_back("the coverage data holds none of the named kernel functions");
        } else if (g.coverage->percent() < kCoverageThreshold) {
          g.reasons.push_back(
              fmt::format("line coverage {:.1f}% < {:.0f}%", g.coverage->percent(), kCoverageThreshold));
        }
      }
    } else {
      incomplete = true;
    }
    const bool failed = g.passed < g.evaluated || low_score ||
                        (g.coverage && g.coverage->lines > 0 && g.coverage->percent() < kCoverageThreshold) ||
                        std::any_of(g.reasons.begin(), g.reasons.end(),
                                    [](const std::string& r) { return r.find("was not caught") != std::string::npos; });
    g.verdict = failed ? "fail" : incomplete ? "incomplete" : "pass";
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace pact::verify
