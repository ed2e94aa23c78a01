// ssh_config lookup through libssh (see ssh_config.h).
#include "launcher/ssh/ssh_config.h"

#include <libssh/libssh.h>
#include <pwd.h>
#include <unistd.h>

#include <memory>

#include <fmt/format.h>

#include "core/error.h"

namespace ds::launcher::ssh {
namespace {

struct SessionFree {
  void operator()(ssh_session s) const { ssh_free(s); }
};
using Session = std::unique_ptr<ssh_session_struct, SessionFree>;

// The string option `type` of the session, empty when unset.
std::string option(const Session& s, ssh_options_e type) {
  char* value = nullptr;
  if (ssh_options_get(s.get(), type, &value) != SSH_OK || value == nullptr) return "";
  std::string out = value;
  ssh_string_free_char(value);
  return out;
}

// libssh's log level is process-wide and a config's LogLevel line sets it; put it back after.
class KeepLogLevel {
 public:
  KeepLogLevel() : level_(ssh_get_log_level()) {}
  ~KeepLogLevel() { ssh_set_log_level(level_); }
  KeepLogLevel(const KeepLogLevel&) = delete;
  KeepLogLevel& operator=(const KeepLogLevel&) = delete;

 private:
  int level_;
};

}  // namespace

SshHostConfig sshHostConfig(const std::string& host, const std::vector<std::string>& files) {
  Session s(ssh_new());
  if (!s) throw InternalError("ssh_new failed (out of memory)");
  if (host.empty() || ssh_options_set(s.get(), SSH_OPTIONS_HOST, host.c_str()) != SSH_OK)
    throw ConfigError(fmt::format("ssh config: host name '{}' is not valid for ssh", host));
  // A fresh session lists libssh's default identities; the config's IdentityFile goes first.
  const std::string defaultIdentity = option(s, SSH_OPTIONS_IDENTITY);
  {
    KeepLogLevel keep;
    for (const auto& file : files) {
      if (ssh_options_parse_config(s.get(), file.c_str()) != SSH_OK)
        throw ConfigError(fmt::format("ssh config {}: {} (while looking up host '{}')", file,
                                      ssh_get_error(s.get()), host));
    }
  }
  SshHostConfig out;
  out.hostName = option(s, SSH_OPTIONS_HOST);
  out.user = option(s, SSH_OPTIONS_USER);
  ssh_options_get_port(s.get(), &out.port);
  const std::string identity = option(s, SSH_OPTIONS_IDENTITY);
  if (identity != defaultIdentity) out.identityFile = identity;
  return out;
}

std::string sshUserDir(const std::string& homeFallback) {
  struct passwd pwd;
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  std::string home;
  if (::getpwuid_r(::getuid(), &pwd, buf.data(), buf.size(), &found) == 0 && found != nullptr &&
      found->pw_dir != nullptr)
    home = found->pw_dir;
  if (home.empty()) home = homeFallback;
  if (home.empty()) return "";
  while (home.size() > 1 && home.back() == '/') home.pop_back();
  return (home == "/" ? "" : home) + "/.ssh";
}

}  // namespace ds::launcher::ssh
