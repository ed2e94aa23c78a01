// ScopedKnob: sets an environment knob (core/knobs.h) for its lifetime and restores the previous
// value (or unsets it) on destruction. For tests that pick a code path by knob; knobs read when
// an object is built must be set before it is built. Not thread-safe (setenv).
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace ds::test {

class ScopedKnob {
 public:
  ScopedKnob(const char* name, const char* value) : name_(name) {
    if (const char* prev = std::getenv(name)) prev_ = prev;
    ::setenv(name, value, 1);
  }
  ~ScopedKnob() {
    if (prev_) ::setenv(name_, prev_->c_str(), 1);
    else ::unsetenv(name_);
  }
  ScopedKnob(const ScopedKnob&) = delete;
  ScopedKnob& operator=(const ScopedKnob&) = delete;

 private:
  const char* name_;
  std::optional<std::string> prev_;
};

}  // namespace ds::test
