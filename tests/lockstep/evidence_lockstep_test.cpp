// Evidence is real (issue 4, item 2): capsules may cite only test suites that exist, guards that are
// registered, and provenance that names an existing file and symbol. Fails when a capsule drifts.

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
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

TEST(EvidenceLockstep, EveryCitedTestSuiteExists) {
  const auto tests = listed_tests(PACT_TEST_BINARIES);
  ASSERT_FALSE(tests.empty()) << "could not list " << PACT_TEST_BINARIES;
  for (const auto& id : contract::declared_test_suites())
    EXPECT_TRUE(tests.count(id)) << "declared suite " << id << " does not exist";
  int cited = 0;
  for (const auto* c : all_capsules()) {
    for (const auto& d : c->descriptors) {
      if (d.evidence.kind != contract::EvidenceKind::testSuite) continue;
      ++cited;
      EXPECT_TRUE(tests.count(d.evidence.id)) << c->name << " cites missing test " << d.evidence.id;
    }
  }
  EXPECT_GT(cited, 0);
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

TEST(EvidenceLockstep, EveryCitedGuardIsRegistered) {
  for (const auto* c : all_capsules()) {
    for (const auto& d : c->descriptors) {
      if (d.evidence.kind != contract::EvidenceKind::runtimeGuard || d.evidence.id.rfind("cuda.", 0) == 0) continue;
      EXPECT_NE(kernels::find_guard(d.evidence.id), nullptr)
          << c->name << " cites unregistered guard " << d.evidence.id;
    }
  }
}

TEST(EvidenceLockstep, ProvenanceNamesExistingFilesAndSymbols) {
  const std::string symbols = run(std::string("nm -C ") + PACT_KERNELS_LIBRARY + " " + PACT_CONTRACT_LIBRARY);
  ASSERT_FALSE(symbols.empty()) << "nm produced nothing";
  for (const auto* c : all_capsules()) {
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(PACT_SOURCE_DIR) / c->provenance.file))
        << c->name << ": provenance file " << c->provenance.file << " does not exist";
    EXPECT_NE(symbols.find(c->provenance.symbol + "("), std::string::npos)
        << c->name << ": provenance symbol " << c->provenance.symbol << " is not in the libraries";
  }
}

// The lockstep check itself can fail: a capsule citing a missing suite or symbol is caught.
TEST(EvidenceLockstep, DriftIsDetected) {
  const auto tests = listed_tests(PACT_TEST_BINARIES);
  EXPECT_FALSE(tests.count("Providers.NoSuchTest"));
  const std::string symbols = run(std::string("nm -C ") + PACT_KERNELS_LIBRARY);
  EXPECT_EQ(symbols.find("pact::kernels::cpu::native::no_such_forward("), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(PACT_SOURCE_DIR) / "pact/kernels/cpu/no_such_file.cpp"));
}

}  // namespace
}  // namespace pact
