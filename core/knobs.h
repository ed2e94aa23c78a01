// The knob registry: every environment variable dsrun, dsrt and the bench programs read is a
// Knob (name, type, default, doc, which programs read it), declared once in its component's
// *_knobs.h table and read only through the typed accessors below, which validate with the
// strict parsers of core/env.h (errors name the variable and what was expected). Not the place
// for the variables dsrun exports by family (NCCL*, DS_*, ...; launcher/env_exports.h).
// This file and knobs.cc are the only code that reads the process environment by name.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"

namespace ds {

enum class KnobType {
  kString,   // any text
  kPath,     // a file or folder path
  kInt,      // an integer in [lo, hi]
  kBool,     // 1/0, true/false, yes/no, on/off
  kSeconds,  // seconds, fractions allowed: > 0 when lo == 0 and hi == INT64_MAX, else in [lo, hi]
  kChoice,   // one of `choices` ("a|b|c"); empty counts as unset
  kFlag,     // on when set to anything but "" or "0"
};

// Whose variable it is: ours (DS_*), the rank contract dsrun sets for every rank
// (DESIGN.md §4.3), or another program's that we read (mpirun's, srun's, the shell's).
enum class KnobOrigin { kDs, kRankContract, kThirdParty };

// Programs that read a knob (bits of Knob::readBy).
enum KnobReader : unsigned { kReadByDsrun = 1u, kReadByDsrt = 2u, kReadByBench = 4u };

struct Knob {
  std::string_view name;
  KnobType type = KnobType::kString;
  std::string_view dflt;  // the value used when unset, as text; "" = none (doc says what then)
  std::string_view doc;
  unsigned readBy = 0;  // KnobReader bits
  KnobOrigin origin = KnobOrigin::kDs;
  int64_t lo = INT64_MIN;  // kInt / kSeconds bounds
  int64_t hi = INT64_MAX;
  std::string_view choices;  // kChoice: "a|b|c"
};

// One component's knobs (core, comm, zero, runtime, launcher, bench), as listed in its *_knobs.h.
struct KnobTable {
  std::string_view component;
  std::span<const Knob* const> knobs;
};

// Where values come from: this process's environment (default, read at each lookup) or a
// snapshot, which keeps derivations testable without setenv. Holds a pointer: the map must
// outlive the source.
class EnvSource {
 public:
  EnvSource() = default;
  EnvSource(const EnvMap& env) : map_(&env) {}  // NOLINT(google-explicit-constructor)
  std::optional<std::string> get(std::string_view name) const;

 private:
  const EnvMap* map_ = nullptr;
};

// The raw value, set (possibly empty) or not.
std::optional<std::string> knobString(const Knob& k, const EnvSource& src = {});
bool knobIsSet(const Knob& k, const EnvSource& src = {});
// kInt in [k.lo, k.hi], or in the narrower [lo, hi] a caller knows (RANK < WORLD_SIZE).
// Throws ConfigError "NAME='x': expected an integer in [lo, hi]".
std::optional<int64_t> knobInt(const Knob& k, const EnvSource& src = {});
std::optional<int64_t> knobIntIn(const Knob& k, int64_t lo, int64_t hi, const EnvSource& src = {});
int64_t knobIntOrDefault(const Knob& k, const EnvSource& src = {});
bool knobBoolOrDefault(const Knob& k, const EnvSource& src = {});
// kSeconds: "NAME='x': expected a number" / "expected a positive number of seconds" /
// "expected seconds in [lo, hi]".
std::optional<std::chrono::milliseconds> knobSeconds(const Knob& k, const EnvSource& src = {});
std::chrono::milliseconds knobSecondsOrDefault(const Knob& k, const EnvSource& src = {});
// kChoice: nullopt when unset or empty; "NAME='x': expected a, b or c" otherwise.
std::optional<std::string> knobChoice(const Knob& k, const EnvSource& src = {});
bool knobFlag(const Knob& k, const EnvSource& src = {});

// Checks a value against the knob's type (the accessors' errors); for defaults and tests.
void validateKnobValue(const Knob& k, const std::string& value);

// What --help-env prints: the knobs `reader` reads, one block each (name, type, default, doc).
std::string knobsHelpText(std::span<const KnobTable> tables, KnobReader reader);
// docs/knobs.md: every table's knobs, with the programs that read each.
std::string knobsMarkdown(std::span<const KnobTable> tables);
// "int in [0, 65535]", "one of: a, b, c", ... (the type column).
std::string knobTypeText(const Knob& k);

}  // namespace ds
