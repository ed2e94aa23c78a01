// DS_FAULT_KILL's text (runtime/engine/fault_injection.h): every field, the defaults, and each
// bad input named with what was expected. The kill itself is exercised for real by the [fault]
// and restart end-to-end tests (tests/e2e/fault_test.cc, restart_e2e_test.cc).
#include <catch2/catch.hpp>

#include "core/error.h"
#include "runtime/engine/fault_injection.h"

using Catch::Matchers::Contains;
using ds::runtime::FaultKill;
using ds::runtime::FaultPoint;
using ds::runtime::parseFaultKill;

TEST_CASE("DS_FAULT_KILL: rank and step, with at and attempt defaulting", "[unit]") {
  FaultKill f = parseFaultKill("rank=1,step=7");
  CHECK(f.rank == 1);
  CHECK(f.step == 7);
  CHECK(f.at == FaultPoint::kStep);
  CHECK(f.attempt == 0);
  f = parseFaultKill("step=12,rank=0,at=save,attempt=any");
  CHECK(f.rank == 0);
  CHECK(f.step == 12);
  CHECK(f.at == FaultPoint::kSave);
  CHECK(f.attempt == -1);
  CHECK(parseFaultKill("rank=3,step=1,attempt=2,at=step").attempt == 2);
}

TEST_CASE("DS_FAULT_KILL: bad text names the variable and the expected form", "[unit]") {
  CHECK_THROWS_AS(parseFaultKill("rank=1"), ds::ConfigError);
  CHECK_THROWS_WITH(parseFaultKill("rank=1"),
                    Contains("DS_FAULT_KILL='rank=1': rank and step are required") &&
                        Contains("expected 'rank=R,step=S"));
  CHECK_THROWS_WITH(parseFaultKill("rank=1,step=2,at=later"),
                    Contains("at=later is not step or save"));
  CHECK_THROWS_WITH(parseFaultKill("rank=1,step=2,when=now"), Contains("unknown key 'when'"));
  CHECK_THROWS_WITH(parseFaultKill("rank=1,step"), Contains("'step' is not key=value"));
  CHECK_THROWS_WITH(parseFaultKill("rank=1,step=0"), Contains("DS_FAULT_KILL step"));
  CHECK_THROWS_WITH(parseFaultKill("rank=x,step=3"), Contains("DS_FAULT_KILL rank"));
  CHECK_THROWS_AS(parseFaultKill(""), ds::ConfigError);
}
