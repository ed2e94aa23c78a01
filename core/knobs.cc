// The knob accessors and the --help-env / docs/knobs.md renderings (see knobs.h). The only code
// that reads the process environment by name.
#include "core/knobs.h"

#include <cstdlib>

#include "core/error.h"

namespace ds {
namespace {

std::vector<std::string_view> choiceList(const Knob& k) {
  std::vector<std::string_view> out;
  std::string_view rest = k.choices;
  while (!rest.empty()) {
    size_t bar = rest.find('|');
    out.push_back(rest.substr(0, bar));
    rest = bar == std::string_view::npos ? std::string_view() : rest.substr(bar + 1);
  }
  return out;
}

// "a, b or c"
std::string choiceText(const Knob& k) {
  auto list = choiceList(k);
  std::string out;
  for (size_t i = 0; i < list.size(); ++i) {
    if (i > 0) out += i + 1 == list.size() ? " or " : ", ";
    out += list[i];
  }
  return out;
}

bool positiveOnly(const Knob& k) { return k.lo == 0 && k.hi == INT64_MAX; }

std::chrono::milliseconds parseSeconds(const Knob& k, const std::string& text) {
  const std::string name(k.name);
  double secs = parseDouble(text, name);
  if (positiveOnly(k)) {
    if (!(secs > 0))
      throw ConfigError(fmt::format("{}='{}': expected a positive number of seconds", name, text));
  } else if (!(secs >= static_cast<double>(k.lo) && secs <= static_cast<double>(k.hi))) {
    throw ConfigError(fmt::format("{}='{}': expected seconds in [{}, {}]", name, text, k.lo, k.hi));
  }
  return std::chrono::milliseconds(static_cast<int64_t>(secs * 1000.0));
}

std::string checkedChoice(const Knob& k, const std::string& text) {
  for (auto c : choiceList(k))
    if (text == c) return text;
  throw ConfigError(fmt::format("{}='{}': expected {}", k.name, text, choiceText(k)));
}

std::string readersText(unsigned readBy) {
  std::string out;
  auto add = [&](unsigned bit, const char* name) {
    if (readBy & bit) out += (out.empty() ? "" : ", ") + std::string(name);
  };
  add(kReadByDsrun, "dsrun");
  add(kReadByDsrt, "dsrt");
  add(kReadByBench, "bench");
  return out;
}

const char* originText(KnobOrigin o) {
  switch (o) {
    case KnobOrigin::kDs: return "";
    case KnobOrigin::kRankContract: return " (rank contract)";
    case KnobOrigin::kThirdParty: return " (set by another program)";
  }
  return "";
}

// `text` as lines of at most `width` characters (longer words stay whole), each indented.
std::string wrapped(std::string_view text, size_t indent, size_t width) {
  std::string out, line;
  auto flush = [&] {
    if (!line.empty()) out += std::string(indent, ' ') + line + "\n";
    line.clear();
  };
  while (!text.empty()) {
    size_t space = text.find(' ');
    std::string_view word = text.substr(0, space);
    text = space == std::string_view::npos ? std::string_view() : text.substr(space + 1);
    if (word.empty()) continue;
    if (!line.empty() && indent + line.size() + 1 + word.size() > width) flush();
    line += (line.empty() ? "" : " ") + std::string(word);
  }
  flush();
  return out;
}

// A Markdown table cell: '|' escaped, '<' as an entity (never the start of an HTML tag).
std::string cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += "\\|";
    else if (c == '<') out += "&lt;";
    else out += c;
  }
  return out;
}

}  // namespace

std::optional<std::string> EnvSource::get(std::string_view name) const {
  if (map_ != nullptr) {
    auto it = map_->find(std::string(name));
    if (it == map_->end()) return std::nullopt;
    return it->second;
  }
  const char* v = std::getenv(std::string(name).c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

std::optional<std::string> knobString(const Knob& k, const EnvSource& src) {
  return src.get(k.name);
}

bool knobIsSet(const Knob& k, const EnvSource& src) { return src.get(k.name).has_value(); }

std::optional<int64_t> knobIntIn(const Knob& k, int64_t lo, int64_t hi, const EnvSource& src) {
  auto s = src.get(k.name);
  if (!s) return std::nullopt;
  return parseInt(*s, std::string(k.name), lo, hi);
}

std::optional<int64_t> knobInt(const Knob& k, const EnvSource& src) {
  return knobIntIn(k, k.lo, k.hi, src);
}

int64_t knobIntOrDefault(const Knob& k, const EnvSource& src) {
  if (auto v = knobInt(k, src)) return *v;
  return parseInt(std::string(k.dflt), std::string(k.name) + " (default)", k.lo, k.hi);
}

bool knobBoolOrDefault(const Knob& k, const EnvSource& src) {
  auto s = src.get(k.name);
  return parseBool(s ? *s : std::string(k.dflt), std::string(k.name));
}

std::optional<std::chrono::milliseconds> knobSeconds(const Knob& k, const EnvSource& src) {
  auto s = src.get(k.name);
  if (!s) return std::nullopt;
  return parseSeconds(k, *s);
}

std::chrono::milliseconds knobSecondsOrDefault(const Knob& k, const EnvSource& src) {
  if (auto v = knobSeconds(k, src)) return *v;
  return parseSeconds(k, std::string(k.dflt));
}

std::optional<std::string> knobChoice(const Knob& k, const EnvSource& src) {
  auto s = src.get(k.name);
  if (!s || s->empty()) return std::nullopt;
  return checkedChoice(k, *s);
}

bool knobFlag(const Knob& k, const EnvSource& src) {
  auto s = src.get(k.name);
  return s && !s->empty() && *s != "0";
}

void validateKnobValue(const Knob& k, const std::string& value) {
  const std::string name(k.name);
  switch (k.type) {
    case KnobType::kString:
    case KnobType::kPath:
    case KnobType::kFlag: return;
    case KnobType::kInt: parseInt(value, name, k.lo, k.hi); return;
    case KnobType::kBool: parseBool(value, name); return;
    case KnobType::kSeconds: parseSeconds(k, value); return;
    case KnobType::kChoice: checkedChoice(k, value); return;
  }
}

std::string knobTypeText(const Knob& k) {
  switch (k.type) {
    case KnobType::kString: return "string";
    case KnobType::kPath: return "path";
    case KnobType::kFlag: return "flag";
    case KnobType::kBool: return "bool";
    case KnobType::kChoice: return "one of " + choiceText(k);
    case KnobType::kInt:
      if (k.lo == INT64_MIN && k.hi == INT64_MAX) return "int";
      return fmt::format("int in [{}, {}]", k.lo, k.hi);
    case KnobType::kSeconds:
      if (positiveOnly(k)) return "seconds > 0";
      return fmt::format("seconds in [{}, {}]", k.lo, k.hi);
  }
  return "?";
}

std::string knobsHelpText(std::span<const KnobTable> tables, KnobReader reader) {
  std::string out;
  for (const auto& t : tables) {
    for (const Knob* k : t.knobs) {
      if (!(k->readBy & reader)) continue;
      out += fmt::format("{}  ({}, default: {}){}\n", k->name, knobTypeText(*k),
                         k->dflt.empty() ? "none" : k->dflt, originText(k->origin));
      out += wrapped(k->doc, 4, 100);
    }
  }
  return out;
}

std::string knobsMarkdown(std::span<const KnobTable> tables) {
  std::string out;
  for (const auto& t : tables) {
    out += fmt::format(
        "\n## {}\n\n| Variable | Type | Default | Read by | Meaning |\n"
        "|---|---|---|---|---|\n",
        t.component);
    for (const Knob* k : t.knobs) {
      out += fmt::format("| `{}` | {} | {} | {} | {}{} |\n", k->name, cell(knobTypeText(*k)),
                         k->dflt.empty() ? "-" : fmt::format("`{}`", k->dflt),
                         readersText(k->readBy), cell(k->doc),
                         k->origin == KnobOrigin::kThirdParty     ? " *(set by another program)*"
                         : k->origin == KnobOrigin::kRankContract ? " *(rank contract)*"
                                                                  : "");
    }
  }
  return out;
}

}  // namespace ds
