// DS_SKIP(reason): ends the running Catch2 test case as SKIPPED (Catch2 v2 has no skip). The
// reason is streamed like INFO's (DS_SKIP("no sshd: " << why)). It returns from the enclosing
// function, so use it in the TEST_CASE body itself, outside SECTIONs, before anything that must
// be cleaned up. The custom main (catch_main.cc) then prints "SKIPPED: <case>: <reason>" and
// exits with kSkipExitCode when nothing failed; CTest maps that code to "Skipped"
// (SKIP_RETURN_CODE, set on every test by cmake/DsHelpers.cmake).
#pragma once

#include <sstream>
#include <string>

namespace ds::test {

// The exit status of a test binary whose run skipped a case and failed none. A run with failures
// never exits with it (catch_main.cc).
inline constexpr int kSkipExitCode = 77;

// Records that the current test case is skipped, with why. Prefer DS_SKIP.
void skipCurrentCase(const std::string& reason);

}  // namespace ds::test

#define DS_SKIP(reason)                                 \
  do {                                                  \
    std::ostringstream ds_skip_reason_;                 \
    ds_skip_reason_ << reason;                          \
    ::ds::test::skipCurrentCase(ds_skip_reason_.str()); \
    return;                                             \
  } while (0)
