// The knob registry (core/knobs.h and every component's *_knobs.h): each knob declared once,
// documented, with a default its own type accepts and readers its program links; the typed
// accessors' values and their errors (which name the variable and what was expected); the
// --help-env text of each program.
#include <catch2/catch.hpp>

#include <cctype>
#include <functional>
#include <set>
#include <string>

#include "core/error.h"
#include "runtime/cmd/dsrt_knobs.h"
#include "tests/knobs/all_knob_tables.h"

using ds::EnvMap;
using ds::Knob;
using ds::KnobOrigin;
using ds::KnobType;
namespace knobs = ds::knobs;

namespace {

template <class F>
void forEachKnob(F&& f) {
  for (const auto& t : ds::test::kAllKnobTables)
    for (const Knob* k : t.knobs) f(t.component, *k);
}

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const ds::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("knob registry: every name is declared once, upper case", "[unit]") {
  std::set<std::string> seen;
  forEachKnob([&](std::string_view component, const Knob& k) {
    INFO(component << ": " << k.name);
    CHECK(seen.insert(std::string(k.name)).second);
    REQUIRE_FALSE(k.name.empty());
    for (char c : k.name)
      CHECK((std::isupper(static_cast<unsigned char>(c)) || c == '_' ||
             std::isdigit(static_cast<unsigned char>(c)) || k.origin == KnobOrigin::kThirdParty));
  });
  CHECK(seen.size() > 60);
  CHECK(seen.count("DS_LOG_LEVEL"));
  CHECK(seen.count("DS_STORE_BIND_ADDR"));
  CHECK(seen.count("DS_CPU_ADAM_ISA"));
  CHECK(seen.count("DS_BF16_LINEAR"));
  CHECK(seen.count("DS_SSH_CONFIG"));
  CHECK(seen.count("MASTER_PORT"));
  CHECK(seen.count("SLURM_PROCID"));
}

TEST_CASE("knob registry: every knob has doc text, readers and a valid default", "[unit]") {
  forEachKnob([&](std::string_view component, const Knob& k) {
    INFO(component << ": " << k.name);
    CHECK(k.doc.size() > 10);
    CHECK(k.doc.back() == '.');
    CHECK(k.readBy != 0u);
    CHECK(k.lo <= k.hi);
    CHECK((k.type == KnobType::kChoice) == !k.choices.empty());
    // Ours are DS_*; others' never are.
    if (k.origin == KnobOrigin::kDs) CHECK(k.name.substr(0, 3) == "DS_");
    if (k.origin == KnobOrigin::kThirdParty) CHECK(k.name.substr(0, 3) != "DS_");
    if (!k.dflt.empty()) CHECK_NOTHROW(ds::validateKnobValue(k, std::string(k.dflt)));
  });
}

TEST_CASE("knob registry: readers match what each program links", "[unit]") {
  // dsrun links core and the launcher only (DESIGN.md §3); dsrt never links the launcher.
  for (const Knob* k : knobs::kLauncherKnobs.knobs) {
    INFO(k->name);
    CHECK(k->readBy == ds::kReadByDsrun);
  }
  for (const auto& t : {knobs::kCommKnobs, knobs::kZeroKnobs, knobs::kRuntimeKnobs}) {
    for (const Knob* k : t.knobs) {
      INFO(k->name);
      CHECK((k->readBy & ds::kReadByDsrun) == 0u);
    }
  }
  for (const Knob* k : knobs::kBenchKnobs.knobs) CHECK(k->readBy == ds::kReadByBench);
}

TEST_CASE("knob accessors: unset gives the default, set values parse", "[unit]") {
  const EnvMap none;
  CHECK(ds::knobIntOrDefault(knobs::kGlooPieceBytes, none) == 384 << 10);
  CHECK(ds::knobSecondsOrDefault(knobs::kTimeout, none) == std::chrono::seconds(300));
  CHECK(ds::knobSecondsOrDefault(knobs::kKillGrace, none) == std::chrono::seconds(5));
  CHECK_FALSE(ds::knobBoolOrDefault(knobs::kZeroNoUring, none));
  CHECK_FALSE(ds::knobChoice(knobs::kCpuAdamIsa, none));
  CHECK_FALSE(ds::knobFlag(knobs::kDebug, none));
  CHECK_FALSE(ds::knobIsSet(knobs::kMasterAddr, none));

  const EnvMap env{{"DS_GLOO_PIECE_BYTES", "0"}, {"DS_TIMEOUT", "1.5"},
                   {"DS_KILL_GRACE", "0"},       {"DS_ZERO_NO_URING", "yes"},
                   {"DS_CPU_ADAM_ISA", "avx2"},  {"DS_DEBUG", "0"},
                   {"DS_BF16_LINEAR", ""},       {"MASTER_ADDR", ""}};
  CHECK(ds::knobIntOrDefault(knobs::kGlooPieceBytes, env) == 0);
  CHECK(ds::knobSecondsOrDefault(knobs::kTimeout, env) == std::chrono::milliseconds(1500));
  CHECK(ds::knobSecondsOrDefault(knobs::kKillGrace, env) == std::chrono::milliseconds(0));
  CHECK(ds::knobBoolOrDefault(knobs::kZeroNoUring, env));
  CHECK(ds::knobChoice(knobs::kCpuAdamIsa, env) == "avx2");
  CHECK_FALSE(ds::knobFlag(knobs::kDebug, env));         // "0" is off
  CHECK_FALSE(ds::knobChoice(knobs::kBf16Linear, env));  // empty counts as unset
  CHECK(ds::knobString(knobs::kMasterAddr, env) == "");  // set but empty: the caller decides
  CHECK(ds::knobIsSet(knobs::kMasterAddr, env));
  CHECK(ds::knobIntIn(knobs::kRank, 0, 3, EnvMap{{"RANK", "3"}}) == 3);
}

TEST_CASE("knob accessors: a bad value is an error naming the variable and what it expects",
          "[unit]") {
  auto env = [](const char* k, const char* v) { return EnvMap{{k, v}}; };
  const EnvMap piece = env("DS_GLOO_PIECE_BYTES", "lots");
  CHECK(errorOf([&] { ds::knobIntOrDefault(knobs::kGlooPieceBytes, piece); }) ==
        "DS_GLOO_PIECE_BYTES='lots': expected an integer in [0, 1073741824]");
  CHECK(errorOf([&] { ds::knobInt(knobs::kMasterPort, env("MASTER_PORT", "70000")); }) ==
        "MASTER_PORT='70000': expected an integer in [1, 65535]");
  CHECK(errorOf([&] { ds::knobIntIn(knobs::kRank, 0, 1, env("RANK", "2")); }) ==
        "RANK='2': expected an integer in [0, 1]");
  CHECK(errorOf([&] { ds::knobSeconds(knobs::kTimeout, env("DS_TIMEOUT", "soon")); }) ==
        "DS_TIMEOUT='soon': expected a number");
  CHECK(errorOf([&] { ds::knobSeconds(knobs::kTimeout, env("DS_TIMEOUT", "0")); }) ==
        "DS_TIMEOUT='0': expected a positive number of seconds");
  CHECK(errorOf([&] { ds::knobSeconds(knobs::kKillGrace, env("DS_KILL_GRACE", "4000")); }) ==
        "DS_KILL_GRACE='4000': expected seconds in [0, 3600]");
  CHECK(errorOf([&] { ds::knobChoice(knobs::kCpuAdamIsa, env("DS_CPU_ADAM_ISA", "sse")); }) ==
        "DS_CPU_ADAM_ISA='sse': expected scalar, avx2 or avx512");
  CHECK(errorOf([&] { ds::knobChoice(knobs::kBf16Linear, env("DS_BF16_LINEAR", "fast")); }) ==
        "DS_BF16_LINEAR='fast': expected auto, native or widen");
  const EnvMap uring = env("DS_ZERO_NO_URING", "maybe");
  CHECK(errorOf([&] { ds::knobBoolOrDefault(knobs::kZeroNoUring, uring); }) ==
        "DS_ZERO_NO_URING='maybe': expected a boolean (1/0, true/false, yes/no, on/off)");
  CHECK(errorOf([&] { ds::validateKnobValue(knobs::kLogLevel, "loud"); }) ==
        "DS_LOG_LEVEL='loud': expected error, warn, info or debug");
}

TEST_CASE("knob help text: one program's knobs, each with type, default and doc", "[unit]") {
  const std::string dsrt = ds::knobsHelpText(ds::runtime::kDsrtKnobTables, ds::kReadByDsrt);
  INFO(dsrt);
  CHECK(dsrt.find("DS_GLOO_PIECE_BYTES  (int in [0, 1073741824], default: 393216)\n"
                  "    gloo: ") != std::string::npos);
  CHECK(dsrt.find("SLURM_PROCID  (int in [0, 1048575], default: none) (set by another "
                  "program)") != std::string::npos);
  CHECK(dsrt.find("DS_KILL_GRACE") == std::string::npos);  // dsrun's
  size_t start = 0;
  while (start < dsrt.size()) {  // wrapped at 100 columns
    size_t end = dsrt.find('\n', start);
    CHECK(end - start <= 100);
    start = end + 1;
  }
  const std::string md = ds::knobsMarkdown(ds::test::kAllKnobTables);
  CHECK(md.find("| `DS_STORE_BIND_ADDR` | string | - | dsrt |") != std::string::npos);
  CHECK(md.find("| `DS_LOG_LEVEL` | one of error, warn, info or debug | `info` | dsrun, dsrt, "
                "bench |") != std::string::npos);
}
