// The HostName an ssh_config alias stands for, so that dsrun can derive MASTER_ADDR for a
// hostfile written with aliases. The files are read by libssh's own parser
// (launcher/ssh/ssh_config.h), the same one the ssh runner uses, so both agree on what an alias
// means. Invariant: like ssh, the first matching HostName wins.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/env.h"

namespace ds::launcher {

// The config files ssh would read: $DS_SSH_CONFIG alone when set (like ssh -F), else
// ~/.ssh/config then /etc/ssh/ssh_config, with ~ the password database's home of this user
// (ssh::sshUserDir; $HOME only for a user without an entry), as the ssh runner's connection and
// OpenSSH resolve it.
std::vector<std::string> sshConfigFiles(const EnvMap& env);

// HostName for `alias` over those files (missing or unreadable files are skipped); nullopt when
// none names another host. A config line libssh refuses is logged as a warning naming the file,
// and the alias is then left unresolved (nullopt).
std::optional<std::string> sshHostName(const std::string& alias, const EnvMap& env);

}  // namespace ds::launcher
