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

// The folder ssh means by ~/.ssh (its config, known_hosts, default identities): <home>/.ssh with
// the home of this user in the password database, whatever $HOME says, as OpenSSH (pdsh's and
// mpirun's ssh) and libssh's own `~` expansion in config values do; `homeFallback` (the caller's
// $HOME) only when the user has no entry there (libssh does the same). The alias lookup
// (ssh_alias.cc) and the connection (ssh_connection.cc) both take it from here, so they agree.
// Empty when neither gives a home.
std::string sshUserDir(const std::string& homeFallback);

}  // namespace ds::launcher::ssh
