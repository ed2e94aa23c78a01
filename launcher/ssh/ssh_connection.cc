// SshConnection on libssh 0.10 (see ssh_connection.h). Every libssh call of dsrun is here.
#include "launcher/ssh/ssh_connection.h"

#include <libssh/callbacks.h>
#include <libssh/libssh.h>

#include <csignal>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "launcher/launcher_knobs.h"
#include "launcher/ssh/ssh_config.h"

namespace ds::launcher::ssh {

namespace {

constexpr int kDefaultConnectTimeoutSec = 10;

std::string takeString(char* s) {
  std::string out = s ? s : "";
  if (s) ssh_string_free_char(s);
  return out;
}

}  // namespace

int signalNumber(const std::string& name) {
  static const std::pair<const char*, int> kSignals[] = {
      {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"ILL", SIGILL},   {"ABRT", SIGABRT},
      {"FPE", SIGFPE},   {"KILL", SIGKILL}, {"SEGV", SIGSEGV}, {"PIPE", SIGPIPE}, {"ALRM", SIGALRM},
      {"TERM", SIGTERM}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"BUS", SIGBUS},   {"TRAP", SIGTRAP},
      {"XCPU", SIGXCPU}, {"XFSZ", SIGXFSZ}, {"SYS", SIGSYS}};
  for (const auto& [n, v] : kSignals)
    if (name == n) return v;
  return 0;
}

SshOptions sshOptionsFromEnv(int port) {
  SshOptions o;
  o.configFile = knobString(knobs::kSshConfig).value_or("");
  o.port = port;
  o.connectTimeoutSec = static_cast<int>(knobIntOrDefault(knobs::kSshConnectTimeout));
  return o;
}

struct SshConnection::Impl {
  ssh_session session = nullptr;
  ssh_channel channel = nullptr;
  ssh_channel_callbacks_struct callbacks{};
  int exitCode = -1;
  int exitSignal = 0;
  std::string addr;  // HostName after the config was applied
  unsigned port = 22;
  std::string user;

  ~Impl() {
    if (channel) {
      ssh_channel_close(channel);
      ssh_channel_free(channel);
    }
    if (session) {
      ssh_disconnect(session);
      ssh_free(session);
    }
  }

  std::string error() const { return ssh_get_error(session); }

  static void onExitStatus(ssh_session, ssh_channel, int status, void* self) {
    static_cast<Impl*>(self)->exitCode = status;
  }
  static void onExitSignal(ssh_session, ssh_channel, const char* sig, int, const char*, const char*,
                           void* self) {
    int n = signalNumber(sig ? sig : "");
    static_cast<Impl*>(self)->exitSignal = n > 0 ? n : SIGTERM;
  }
};

SshConnection::SshConnection(std::string host, const SshOptions& options)
    : host_(std::move(host)), describe_(host_), impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.session = ssh_new();
  if (!s.session) throw InternalError("ssh_new failed (out of memory)");
  long timeout = kDefaultConnectTimeoutSec;
  ssh_options_set(s.session, SSH_OPTIONS_TIMEOUT, &timeout);
  if (ssh_options_set(s.session, SSH_OPTIONS_HOST, host_.c_str()) != SSH_OK)
    throw ConfigError(fmt::format("ssh: bad host '{}': {}", host_, s.error()));
  // ~/.ssh (its config, known_hosts, default keys) is the one the alias lookup uses
  // (sshUserDir: the password database's home, as OpenSSH), not left to libssh's own guess.
  const std::string sshDir = sshUserDir(knobString(knobs::kHome).value_or(""));
  if (!sshDir.empty() && ssh_options_set(s.session, SSH_OPTIONS_SSH_DIR, sshDir.c_str()) != SSH_OK)
    throw ConfigError(fmt::format("ssh: cannot use {} as ~/.ssh: {}", sshDir, s.error()));
  // The config decides HostName, Port, User, IdentityFile, UserKnownHostsFile; an explicit file
  // (DS_SSH_CONFIG) replaces ~/.ssh/config and the system file, as `ssh -F` does.
  const char* config = options.configFile.empty() ? nullptr : options.configFile.c_str();
  if (ssh_options_parse_config(s.session, config) != SSH_OK)
    throw ConfigError(fmt::format("ssh: cannot read ssh config '{}' for host '{}': {}",
                                  config ? config : (sshDir + "/config").c_str(), host_,
                                  s.error()));
  // libssh's own log goes to stderr (e.g. a warning on OpenSSH's hostkeys global request): set
  // after the config, whose LogLevel would turn it on, and silent unless DS_SSH_LOG_LEVEL (0-4)
  // asks for it; our errors carry ssh_get_error's text.
  int verbosity = static_cast<int>(knobIntOrDefault(knobs::kSshLogLevel));  // 0: SSH_LOG_NOLOG
  ssh_options_set(s.session, SSH_OPTIONS_LOG_VERBOSITY, &verbosity);
  if (options.port > 0) {
    unsigned p = static_cast<unsigned>(options.port);
    ssh_options_set(s.session, SSH_OPTIONS_PORT, &p);
  }
  if (options.connectTimeoutSec > 0) {
    long t = options.connectTimeoutSec;
    ssh_options_set(s.session, SSH_OPTIONS_TIMEOUT, &t);
  }
  char* addr = nullptr;
  ssh_options_get(s.session, SSH_OPTIONS_HOST, &addr);
  s.addr = takeString(addr);
  ssh_options_get_port(s.session, &s.port);
  char* user = nullptr;
  ssh_options_get(s.session, SSH_OPTIONS_USER, &user);
  s.user = takeString(user);
  describe_ = s.addr == host_ ? fmt::format("{}:{}", host_, s.port)
                              : fmt::format("{} ({}:{})", host_, s.addr, s.port);
}

SshConnection::~SshConnection() = default;

void SshConnection::connect() {
  Impl& s = *impl_;
  if (ssh_connect(s.session) != SSH_OK)
    throw CommError(
        fmt::format("ssh: cannot connect to host {}: {} (is sshd running there and the port right? "
                    "dsrun --ssh_port or Port in ~/.ssh/config set it)",
                    describe_, s.error()));

  std::string knownHosts = "~/.ssh/known_hosts";
  char* kh = nullptr;
  if (ssh_options_get(s.session, SSH_OPTIONS_KNOWNHOSTS, &kh) == SSH_OK)
    knownHosts = takeString(kh);
  std::string fingerprint = "?";
  ssh_key key = nullptr;
  if (ssh_get_server_publickey(s.session, &key) == SSH_OK) {
    unsigned char* hash = nullptr;
    size_t len = 0;
    if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &len) == 0) {
      fingerprint = takeString(ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, len));
      ssh_clean_pubkey_hash(&hash);
    }
    ssh_key_free(key);
  }
  std::string keyName = s.port == 22 ? s.addr : fmt::format("[{}]:{}", s.addr, s.port);
  std::string scan = s.port == 22 ? fmt::format("ssh-keyscan {}", s.addr)
                                  : fmt::format("ssh-keyscan -p {} {}", s.port, s.addr);
  switch (ssh_session_is_known_server(s.session)) {
    case SSH_KNOWN_HOSTS_OK: break;
    case SSH_KNOWN_HOSTS_CHANGED:
    case SSH_KNOWN_HOSTS_OTHER:
      throw ConfigError(fmt::format(
          "ssh: the host key of {} does not match the one in {} (server offers {}). If the host "
          "was legitimately reinstalled, remove the old entry with `ssh-keygen -R '{}' -f {}` "
          "and add the new key (`{} >> {}` after checking the fingerprint); otherwise this may "
          "be an attack: do not connect",
          describe_, knownHosts, fingerprint, keyName, knownHosts, scan, knownHosts));
    case SSH_KNOWN_HOSTS_NOT_FOUND:
    case SSH_KNOWN_HOSTS_UNKNOWN:
      throw ConfigError(fmt::format(
          "ssh: unknown host key for {} (not in {}; server offers {}). Check the fingerprint "
          "and add it: `{} >> {}`, or connect once with `ssh {}` and accept the key",
          describe_, knownHosts, fingerprint, scan, knownHosts, host_));
    case SSH_KNOWN_HOSTS_ERROR:
    default:
      throw CommError(fmt::format("ssh: cannot check the host key of {} against {}: {}", describe_,
                                  knownHosts, s.error()));
  }

  int rc = ssh_userauth_publickey_auto(s.session, nullptr, nullptr);
  if (rc != SSH_AUTH_SUCCESS)
    throw CommError(fmt::format(
        "ssh: public-key authentication as '{}' to {} failed ({}): no key from ssh-agent or "
        "the identity files was accepted; add your public key to ~{}/.ssh/authorized_keys there "
        "(ssh-copy-id) or name the key with IdentityFile in the ssh config",
        s.user, describe_, rc == SSH_AUTH_ERROR ? s.error() : "denied", s.user));
}

void SshConnection::exec(const std::string& command) {
  Impl& s = *impl_;
  s.channel = ssh_channel_new(s.session);
  if (!s.channel)
    throw CommError(fmt::format("ssh: cannot create a channel to {}: {}", describe_, s.error()));
  s.callbacks.userdata = &s;
  s.callbacks.channel_exit_status_function = &Impl::onExitStatus;
  s.callbacks.channel_exit_signal_function = &Impl::onExitSignal;
  ssh_callbacks_init(&s.callbacks);
  ssh_set_channel_callbacks(s.channel, &s.callbacks);
  if (ssh_channel_open_session(s.channel) != SSH_OK)
    throw CommError(
        fmt::format("ssh: cannot open a session channel on {}: {}", describe_, s.error()));
  if (ssh_channel_request_exec(s.channel, command.c_str()) != SSH_OK)
    throw CommError(fmt::format("ssh: {} refused to run the command: {}", describe_, s.error()));
}

void SshConnection::writeStdin(const std::string& data) {
  Impl& s = *impl_;
  size_t done = 0;
  while (done < data.size()) {
    int n =
        ssh_channel_write(s.channel, data.data() + done, static_cast<uint32_t>(data.size() - done));
    if (n == SSH_ERROR)
      throw CommError(
          fmt::format("ssh: writing to the remote stdin on {} failed: {}", describe_, s.error()));
    done += static_cast<size_t>(n);
  }
}

void SshConnection::sendEof() {
  Impl& s = *impl_;
  if (s.channel && ssh_channel_is_open(s.channel) && !ssh_channel_is_closed(s.channel))
    ssh_channel_send_eof(s.channel);
}

bool SshConnection::read(int timeoutMs, Chunk* chunk) {
  Impl& s = *impl_;
  char buf[16384];
  int n = ssh_channel_read_timeout(s.channel, buf, sizeof buf, 0, timeoutMs);
  if (n == SSH_ERROR)
    throw CommError(fmt::format("ssh: lost the connection to {}: {}", describe_, s.error()));
  if (n > 0) chunk->out.append(buf, static_cast<size_t>(n));
  for (;;) {
    int e = ssh_channel_read_nonblocking(s.channel, buf, sizeof buf, 1);
    if (e == SSH_ERROR)
      throw CommError(fmt::format("ssh: lost the connection to {}: {}", describe_, s.error()));
    if (e <= 0) break;
    chunk->err.append(buf, static_cast<size_t>(e));
  }
  if (n > 0 || !chunk->err.empty()) return true;
  return !(ssh_channel_is_eof(s.channel) || ssh_channel_is_closed(s.channel));
}

int SshConnection::exitStatus() {
  Impl& s = *impl_;
  if (s.exitCode < 0 && s.exitSignal == 0 && s.channel) {
    int code = ssh_channel_get_exit_status(s.channel);  // waits for the close, bounded
    if (code >= 0) s.exitCode = code;
  }
  if (s.exitSignal > 0) return 128 + s.exitSignal;
  return s.exitCode;
}

}  // namespace ds::launcher::ssh
