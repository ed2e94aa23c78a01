// ssh_config HostName lookup for MASTER_ADDR (see ssh_alias.h).
#include "launcher/ssh_alias.h"

#include "core/error.h"
#include "core/log.h"
#include "launcher/ssh/ssh_config.h"

#include "launcher/launcher_knobs.h"

namespace ds::launcher {

std::vector<std::string> sshConfigFiles(const EnvMap& env) {
  if (auto f = knobString(knobs::kSshConfig, env); f && !f->empty()) return {*f};
  std::vector<std::string> out;
  if (std::string dir = ssh::sshUserDir(knobString(knobs::kHome, env).value_or("")); !dir.empty())
    out.push_back(dir + "/config");
  out.push_back("/etc/ssh/ssh_config");
  return out;
}

std::optional<std::string> sshHostName(const std::string& alias, const EnvMap& env) {
  std::string name;
  try {
    name = ssh::sshHostConfig(alias, sshConfigFiles(env)).hostName;
  } catch (const ConfigError& e) {
    // OpenSSH (pdsh's and mpirun's ssh) may accept what libssh refuses; the old reader skipped
    // what it did not know too. So: say so, and take the name as written.
    DS_LOG_WARN("launcher", "{}; taking '{}' as a host name", e.what(), alias);
    return std::nullopt;
  }
  if (name.empty() || name == alias) return std::nullopt;
  return name;
}

}  // namespace ds::launcher
