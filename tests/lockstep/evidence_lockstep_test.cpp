// Evidence is real (issue 4, item 2): capsules may cite only test suites that exist, guards that are
// registered, and provenance that names an existing file and symbol. Fails when a capsule drifts.

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <regex>
#include <set>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>

#include "pact/contract/check.hpp"
#include "pact/kernels/guards.hpp"
#include "pact/ledger/ledger.hpp"

namespace pact {
namespace {

std::string run(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) return {};
  std::string out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, pipe.get())) out.append(buf, n);
  return out;
}

// "Suite.Case" names listed by a GoogleTest binary.
std::set<std::string> listed_tests(const std::string& binary) {
  std::set<std::string> names;
  std::istringstream lines(run(binary + " --gtest_list_tests"));
  std::string line, suite;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    if (line[0] != ' ') {
      suite = line.substr(0, line.find('.'));
    } else {
      std::string name = line.substr(2);
      name = name.substr(0, name.find(' '));
      names.insert(suite + "." + name);
    }
  }
  return names;
}

std::vector<const contract::Capsule*> all_capsules() {
  std::vector<const contract::Capsule*> out;
  for (const auto* m : contract::maintained_modules()) {
    for (const auto& c : m->capsules) out.push_back(&c);
  }
  return out;
}

// What the lockstep check finds wrong with capsules: a cited test suite the test binaries do not list, a
// cited guard that is not registered, a provenance file that does not exist or a provenance symbol the
// libraries do not define. One function, so the drift test below runs exactly the check the others do.
struct Lockstep {
  std::set<std::string> tests;  // "Suite.Case" of the test binaries
  std::string symbols;          // nm -C of the kernels and contract libraries
  std::vector<std::string> problems(std::span<const contract::Capsule* const> capsules) const {
    std::vector<std::string> out;
    for (const auto* c : capsules) {
      for (const auto& d : c->descriptors) {
        if (d.evidence.kind == contract::EvidenceKind::testSuite && !tests.count(d.evidence.id))
          out.push_back(c->name + " cites missing test " + d.evidence.id);
        if (d.evidence.kind == contract::EvidenceKind::runtimeGuard && d.evidence.id.rfind("cuda.", 0) != 0 &&
            kernels::find_guard(d.evidence.id) == nullptr)
          out.push_back(c->name + " cites unregistered guard " + d.evidence.id);
      }
      if (!std::filesystem::exists(std::filesystem::path(PACT_SOURCE_DIR) / c->provenance.file))
        out.push_back(c->name + ": provenance file " + c->provenance.file + " does not exist");
      if (symbols.find(c->provenance.symbol + "(") == std::string::npos)
        out.push_back(c->name + ": provenance symbol " + c->provenance.symbol + " is not in the libraries");
    }
    return out;
  }
};

const Lockstep& lockstep() {
  static const Lockstep l{listed_tests(PACT_TEST_BINARIES),
                          run(std::string("nm -C ") + PACT_KERNELS_LIBRARY + " " + PACT_CONTRACT_LIBRARY)};
  return l;
}

TEST(EvidenceLockstep, EveryCapsulesEvidenceAndProvenanceExist) {
  ASSERT_FALSE(lockstep().tests.empty()) << "could not list " << PACT_TEST_BINARIES;
  ASSERT_FALSE(lockstep().symbols.empty()) << "nm produced nothing";
  for (const auto& id : contract::declared_test_suites())
    EXPECT_TRUE(lockstep().tests.count(id)) << "declared suite " << id << " does not exist";
  const auto capsules = all_capsules();
  int cited = 0;
  for (const auto* c : capsules)
    for (const auto& d : c->descriptors) cited += d.evidence.kind == contract::EvidenceKind::testSuite ? 1 : 0;
  EXPECT_GT(cited, 0);
  for (const auto& problem : lockstep().problems(capsules)) ADD_FAILURE() << problem;
}

// Issue 9, item 8: capsule -> ledger obligation -> test. Every suite a capsule cites (and every suite the
// built-in resolver declares) is run by an active ledger obligation whose ctest regex selects exactly that
// one test among the cases the test binaries list, and whose artifact defines it.
TEST(EvidenceLockstep, EveryCitedSuiteIsRunByAnActiveLedgerObligation) {
  ledger::CheckOptions options;
  options.root = PACT_SOURCE_DIR;
  const auto outcome = ledger::check(options);
  ASSERT_TRUE(outcome.ok()) << outcome.diagnostics.render();
  const auto tests = listed_tests(PACT_TEST_BINARIES);
  ASSERT_FALSE(tests.empty());
  std::set<std::string> cited(contract::declared_test_suites().begin(), contract::declared_test_suites().end());
  for (const auto* c : all_capsules()) {
    for (const auto& d : c->descriptors) {
      if (d.evidence.kind == contract::EvidenceKind::testSuite) cited.insert(d.evidence.id);
    }
  }
  ASSERT_FALSE(cited.empty());
  for (const auto& id : cited) {
    const ledger::Obligation* o = ledger::obligation_for_test(*outcome.manifest, id);
    ASSERT_NE(o, nullptr) << "no active ledger obligation runs " << id;
    const std::regex selects(ledger::ctest_case_regex(id));
    int matches = 0;
    for (const auto& t : tests) matches += std::regex_search(t, selects) ? 1 : 0;
    EXPECT_EQ(matches, 1) << o->id << " selects " << matches << " tests, not exactly " << id;
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(PACT_SOURCE_DIR) / o->artifact.path)) << o->artifact.path;
  }
}

// The lockstep check itself can fail: a real capsule, drifted one way at a time (a cited test that does
// not exist, a guard that is not registered, a provenance file or symbol that is gone), is caught, each
// for its own reason and for nothing else.
TEST(EvidenceLockstep, DriftIsDetected) {
  const contract::Capsule* original = nullptr;
  for (const auto* c : all_capsules())
    if (c->name == "native.matmul") original = c;
  ASSERT_NE(original, nullptr);
  const contract::Capsule* honest[] = {original};
  ASSERT_TRUE(lockstep().problems(honest).empty());
  auto drifted = [&](auto&& change, const std::string& expected) {
    contract::Capsule c = *original;
    change(c);
    const contract::Capsule* one[] = {&c};
    const auto problems = lockstep().problems(one);
    ASSERT_EQ(problems.size(), 1u) << expected;
    EXPECT_NE(problems[0].find(expected), std::string::npos) << problems[0];
  };
  auto evidence_of = [](contract::Capsule& c, contract::EvidenceKind kind) -> contract::Evidence& {
    for (auto& d : c.descriptors)
      if (d.evidence.kind == kind) return d.evidence;
    throw std::runtime_error("no evidence of that kind");
  };
  drifted([&](contract::Capsule& c) { evidence_of(c, contract::EvidenceKind::testSuite).id = "Providers.NoSuchTest"; },
          "cites missing test Providers.NoSuchTest");
  drifted(
      [&](contract::Capsule& c) { evidence_of(c, contract::EvidenceKind::runtimeGuard).id = "kernel.no_such_guard"; },
      "cites unregistered guard kernel.no_such_guard");
  drifted([](contract::Capsule& c) { c.provenance.file = "pact/kernels/cpu/no_such_file.cpp"; },
          "provenance file pact/kernels/cpu/no_such_file.cpp does not exist");
  drifted([](contract::Capsule& c) { c.provenance.symbol = "pact::kernels::cpu::native::no_such_forward"; },
          "provenance symbol pact::kernels::cpu::native::no_such_forward is not in the libraries");
}

}  // namespace
}  // namespace pact
