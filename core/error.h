// The error hierarchy of dsrun: every failure is an exception derived from ds::Error.
// Callers catch by the kinds they treat differently; the two mains map kinds to exit codes.
// Not for control flow: an absent-but-normal value is std::optional, never an exception.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace ds {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
  // Short name of the kind, used in the one-line report of the mains ("ConfigError: ...").
  virtual const char* kind() const noexcept { return "Error"; }
};

// Bad user input: a flag, hostfile, plan, config key, data or checkpoint file. Exit status 2.
class ConfigError : public Error {
 public:
  using Error::Error;
  const char* kind() const noexcept override { return "ConfigError"; }
};

// A blocking call ran past its deadline. The message names what, who and how long.
class TimeoutError : public Error {
 public:
  using Error::Error;
  const char* kind() const noexcept override { return "TimeoutError"; }
};

// A peer, transport or backend failure. peer() is the rank at fault, or -1 when unknown.
class CommError : public Error {
 public:
  explicit CommError(const std::string& what, int peer = -1) : Error(what), peer_(peer) {}
  const char* kind() const noexcept override { return "CommError"; }
  int peer() const noexcept { return peer_; }

 private:
  int peer_;
};

// A feature that this build or this backend does not have.
class NotSupported : public Error {
 public:
  using Error::Error;
  const char* kind() const noexcept override { return "NotSupported"; }
};

// A broken invariant: a bug in dsrun, never the user's fault.
class InternalError : public Error {
 public:
  using Error::Error;
  const char* kind() const noexcept override { return "InternalError"; }
};

// A failed system call; the message carries strerror(errno) and what was attempted.
class SystemError : public Error {
 public:
  SystemError(const std::string& what, int err);
  const char* kind() const noexcept override { return "SystemError"; }
  int code() const noexcept { return err_; }

 private:
  int err_;
};

// Exit status for an exception escaping a main: 2 for ConfigError, 1 otherwise.
int exitCodeFor(const std::exception& e) noexcept;

namespace detail {
[[noreturn]] void throwCheckFailure(const char* file, int line, const char* cond,
                                    const std::string& detail);
}  // namespace detail

}  // namespace ds

// DS_CHECK(cond, "fmt {}", args...): throws InternalError naming file:line and the condition.
#define DS_CHECK(cond, ...)                                                                      \
  do {                                                                                           \
    if (!(cond)) [[unlikely]]                                                                    \
      ::ds::detail::throwCheckFailure(__FILE__, __LINE__, #cond, ::fmt::format("" __VA_ARGS__)); \
  } while (0)

#define DS_CHECK_OP(a, op, b)                                                   \
  do {                                                                          \
    const auto& ds_a_ = (a);                                                    \
    const auto& ds_b_ = (b);                                                    \
    if (!(ds_a_ op ds_b_)) [[unlikely]]                                         \
      ::ds::detail::throwCheckFailure(__FILE__, __LINE__, #a " " #op " " #b,    \
                                      ::fmt::format("{} vs {}", ds_a_, ds_b_)); \
  } while (0)
#define DS_CHECK_EQ(a, b) DS_CHECK_OP(a, ==, b)
#define DS_CHECK_NE(a, b) DS_CHECK_OP(a, !=, b)
#define DS_CHECK_LT(a, b) DS_CHECK_OP(a, <, b)
#define DS_CHECK_LE(a, b) DS_CHECK_OP(a, <=, b)
#define DS_CHECK_GE(a, b) DS_CHECK_OP(a, >=, b)

// DS_SYS_CHECK(expr, "what {}", args): evaluates a syscall returning -1 on error, retrying on
// EINTR; throws SystemError with the formatted context. Yields the call's result.
#define DS_SYS_CHECK(expr, ...)                                      \
  ([&]() {                                                           \
    for (;;) {                                                       \
      auto ds_r_ = (expr);                                           \
      if (ds_r_ != -1) return ds_r_;                                 \
      if (errno == EINTR) continue;                                  \
      throw ::ds::SystemError(::fmt::format("" __VA_ARGS__), errno); \
    }                                                                \
  }())
