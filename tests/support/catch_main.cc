// The one Catch2 main shared by every test binary. Beyond Catch2's own options it adds:
//   --ds-list-cases  one line per selected case, "<name>\t<test spec>\t<tags>", for
//                    cmake/DsDiscoverTests.cmake (each case becomes its own CTest test; the test
//                    spec selects exactly that case however its name is spelled).
// and it reports DS_SKIP (skip.h): skipped cases are listed after Catch2's summary and the run
// exits with kSkipExitCode when it skipped something and failed nothing.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "skip.h"
#include "test_spec.h"

namespace ds::test {

namespace {

std::vector<std::pair<std::string, std::string>>& skipped() {
  static std::vector<std::pair<std::string, std::string>> cases;
  return cases;
}

}  // namespace

void skipCurrentCase(const std::string& reason) {
  skipped().emplace_back(Catch::getResultCapture().getCurrentTestName(), reason);
}

// ',' separates, '[' ']' delimit tags, '"' quotes, '~' excludes, '\' escapes; a leading '-'
// would make the command line parser take the spec for an option.
std::string exactTestSpec(const std::string& name) {
  std::string spec;
  for (char c : name) {
    if (c == '\\' || c == ',' || c == '[' || c == ']' || c == '"' || c == '~' ||
        (c == '-' && spec.empty()))
      spec += '\\';
    spec += c;
  }
  return spec;
}

namespace {

bool hasLineBreakOrTab(const std::string& s) {
  return s.find_first_of("\t\r\n") != std::string::npos;
}

// Whether exactTestSpec(tc.name) selects tc and nothing else among all cases.
bool selectsAlone(const Catch::TestCase& tc, const Catch::Config& config) {
  const auto& all = Catch::getAllTestCasesSorted(config);
  auto spec = Catch::TestSpecParser(Catch::ITagAliasRegistry::get())
                  .parse(exactTestSpec(tc.name))
                  .testSpec();
  auto matched = Catch::filterTests(all, spec, config);
  return matched.size() == 1 && matched.front().name == tc.name;
}

// --ds-list-cases: the cases the command line selects (every non-hidden one by default). Fails
// naming the case when one cannot be listed on one line or selected alone by its spec.
int listCases(const Catch::Config& config) {
  auto cases = Catch::filterTests(Catch::getAllTestCasesSorted(config), config.testSpec(), config);
  for (const auto& tc : cases) {
    if (tc.name.empty() || hasLineBreakOrTab(tc.name) || !selectsAlone(tc, config)) {
      std::fprintf(stderr,
                   "%s:%zu: test case '%s' cannot be registered with CTest: its name holds a tab "
                   "or line break, or its test spec '%s' does not select it alone (a name "
                   "starting or ending with '*' is a Catch2 wildcard)\n",
                   tc.lineInfo.file, tc.lineInfo.line, tc.name.c_str(),
                   exactTestSpec(tc.name).c_str());
      return 2;
    }
    std::string tags;
    for (const auto& tag : tc.lcaseTags) tags += (tags.empty() ? "" : " ") + tag;
    std::printf("%s\t%s\t%s\n", tc.name.c_str(), exactTestSpec(tc.name).c_str(), tags.c_str());
  }
  return 0;
}

}  // namespace

}  // namespace ds::test

int main(int argc, char** argv) {
  Catch::Session session;
  bool listCases = false;
  session.cli(session.cli() |
              Catch::clara::Opt(listCases)["--ds-list-cases"](
                  "list the selected cases as <name>\\t<test spec>\\t<tags> (CTest discovery)"));
  if (int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  if (listCases) return ds::test::listCases(session.config());
  int rc = session.run();
  const auto& skipped = ds::test::skipped();
  if (!skipped.empty())
    std::printf("%zu of these test cases were SKIPPED (DS_SKIP), not passed:\n", skipped.size());
  for (const auto& [name, reason] : skipped)
    std::printf("SKIPPED: %s: %s\n", name.c_str(), reason.c_str());
  std::fflush(stdout);
  if (rc != 0) return rc == ds::test::kSkipExitCode ? rc + 1 : rc;
  return skipped.empty() ? 0 : ds::test::kSkipExitCode;
}
