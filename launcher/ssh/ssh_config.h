// What ssh_config files say about one host, read by libssh's own parser (part of the libssh
// boundary, with ssh_connection.cc). Not a parser: libssh applies the files to a throwaway
// session and the resolved values are read back. Invariant: as in ssh, the first value found
// for an option wins, across the files in the order given.
#pragma once

#include <string>
#include <vector>

namespace ds::launcher::ssh {

struct SshHostConfig {
  std::string hostName;      // HostName (%h expanded), else the host itself
  std::string user;          // User; empty when no file sets one
  unsigned port = 22;        // Port; 22 when no file sets one
  std::string identityFile;  // IdentityFile libssh tries first, as written; empty when none
};

// Applies `files` in order (a missing or unreadable file is skipped) for `host` and returns what
// they resolve it to. Throws ConfigError naming the file for a line libssh refuses, or for a
// host name libssh does not accept.
SshHostConfig sshHostConfig(const std::string& host, const std::vector<std::string>& files);

}  // namespace ds::launcher::ssh
