// The Catch2 v2 test spec that selects exactly one case by name (catch_main.cc), for
// cmake/DsDiscoverTests.cmake's per-case CTest tests and for tests that re-run their own binary.
#pragma once

#include <string>

namespace ds::test {

// `name` with a backslash before each character Catch2's spec parser treats specially (',' '['
// ']' '"' '~' '\') and before a leading '-' (else an option). A name starting or ending with '*'
// cannot be selected alone (Catch2 wildcard).
std::string exactTestSpec(const std::string& name);

}  // namespace ds::test
