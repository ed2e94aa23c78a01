// SshConnection: one libssh session to one host running one remote command (the libssh boundary,
// with ssh_config.cc: no other file calls libssh). Owns the session and its exec channel; not
// thread-safe, use each object from one thread at a time. Invariant: a command runs only on a
// host whose key matched known_hosts and after key authentication succeeded.
#pragma once

#include <memory>
#include <string>

namespace ds::launcher::ssh {

struct SshOptions {
  std::string configFile;     // ssh_config to honour; empty = ~/.ssh/config + /etc/ssh/ssh_config
  int port = 0;               // > 0 overrides the config's Port (dsrun --ssh_port)
  int connectTimeoutSec = 0;  // > 0 overrides the config's ConnectTimeout (default 10 s)
};

// Resolves SshOptions from the environment: DS_SSH_CONFIG, DS_SSH_CONNECT_TIMEOUT (seconds).
// Also read: DS_SSH_LOG_LEVEL (libssh's own log, 0-4, default 0), DS_SSH_TEARDOWN_GRACE (seconds
// a host may take to end after EOF, default 15).
SshOptions sshOptionsFromEnv(int port);

class SshConnection {
 public:
  // `host` as written in the hostfile: an address, a name or an ssh_config alias.
  SshConnection(std::string host, const SshOptions& options);
  ~SshConnection();
  SshConnection(const SshConnection&) = delete;
  SshConnection& operator=(const SshConnection&) = delete;

  // TCP connect, host key check against known_hosts, public-key auth (ssh-agent, then identity
  // files). Throws CommError (unreachable, refused, auth) or ConfigError (unknown or changed
  // host key), each naming the host and how to fix it.
  void connect();

  // Opens a session channel and execs `command` (no pty: stdout and stderr stay apart).
  void exec(const std::string& command);
  // Writes all of `data` to the remote stdin (blocking).
  void writeStdin(const std::string& data);
  // Closes the remote stdin (EOF): the remote agent takes that as "job over" and tears down.
  void sendEof();

  // Reads what is there within timeoutMs (stdout) and without waiting (stderr); returns false
  // once the remote side closed both (EOF) and nothing is left. Throws CommError on a lost link.
  struct Chunk {
    std::string out;
    std::string err;
  };
  bool read(int timeoutMs, Chunk* chunk);

  // The remote command's status once read() returned false: its exit code, 128+signal when it
  // was killed, or -1 when the server reported neither.
  int exitStatus();

  // "host" or "alias (addr:port)" for messages.
  const std::string& describe() const { return describe_; }

 private:
  struct Impl;
  std::string host_;
  std::string describe_;
  std::unique_ptr<Impl> impl_;
};

// Signal name as sent by sshd ("TERM", "KILL") -> number, 0 when unknown.
int signalNumber(const std::string& name);

}  // namespace ds::launcher::ssh
