// Shell quoting and word splitting (see shell_quote.h).
#include "launcher/shell_quote.h"

#include "core/error.h"

namespace ds::launcher {

namespace {
bool isSafe(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("_@%+=:,./-").find(c) != std::string_view::npos;
}
}  // namespace

std::string shellQuote(std::string_view s) {
  bool safe = !s.empty();
  for (char c : s) safe = safe && isSafe(c);
  if (safe) return std::string(s);
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  out += '\'';
  return out;
}

std::string shellJoin(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += ' ';
    out += shellQuote(w);
  }
  return out;
}

std::vector<std::string> shellSplit(std::string_view text, const std::string& what) {
  std::vector<std::string> words;
  std::string cur;
  bool inWord = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (inWord) words.push_back(std::move(cur));
      cur.clear();
      inWord = false;
      continue;
    }
    inWord = true;
    if (c == '\\') {
      if (i + 1 < text.size()) cur += text[++i];
    } else if (c == '\'') {
      size_t end = text.find('\'', i + 1);
      if (end == std::string_view::npos)
        throw ConfigError(fmt::format("{}: unterminated quote in '{}'", what, text));
      cur += text.substr(i + 1, end - i - 1);
      i = end;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < text.size() && text[j] != '"'; ++j) {
        if (text[j] == '\\' && j + 1 < text.size() &&
            std::string_view("\"\\$`").find(text[j + 1]) != std::string_view::npos)
          ++j;
        cur += text[j];
      }
      if (j >= text.size())
        throw ConfigError(fmt::format("{}: unterminated quote in '{}'", what, text));
      i = j;
    } else {
      cur += c;
    }
  }
  if (inWord) words.push_back(std::move(cur));
  return words;
}

}  // namespace ds::launcher
