// ~/.ssh is resolved one way for the MASTER_ADDR alias lookup (ssh_alias.cc) and the ssh runner's
// connection (ssh_connection.cc): the password database's home, as OpenSSH does, not $HOME. With
// $HOME pointing at a folder whose .ssh/config maps an alias, neither follows it; with the same
// file given as DS_SSH_CONFIG / SshOptions::configFile (ssh -F), both do, to the same address.
#include <pwd.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "launcher/ssh/ssh_config.h"
#include "launcher/ssh/ssh_connection.h"
#include "launcher/ssh_alias.h"
#include "tests/support/spawn_ranks.h"

using namespace ds::launcher;

namespace {

// Sets HOME for its lifetime (libssh and the knobs read the process environment).
class ScopedHome {
 public:
  explicit ScopedHome(const std::string& home) {
    if (const char* old = std::getenv("HOME")) old_ = old;
    ::setenv("HOME", home.c_str(), 1);
  }
  ~ScopedHome() {
    if (old_) ::setenv("HOME", old_->c_str(), 1);
    else ::unsetenv("HOME");
  }
  ScopedHome(const ScopedHome&) = delete;
  ScopedHome& operator=(const ScopedHome&) = delete;

 private:
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("ssh home: alias lookup and connection agree on ~/.ssh, and both ignore $HOME",
          "[unit]") {
  ds::test::TempDir home;
  std::filesystem::create_directories(home.file(".ssh"));
  const std::string config = home.file(".ssh/config");
  ds::test::writeFile(config, "Host dsrun-home-alias\n  HostName 127.0.0.77\n  Port 2299\n");
  ScopedHome scoped(home.path());
  struct passwd* pw = ::getpwuid(::getuid());
  REQUIRE(pw != nullptr);
  CHECK(ssh::sshUserDir(home.path()) == std::string(pw->pw_dir) + "/.ssh");
  const std::string alias = "dsrun-home-alias";
  if (std::filesystem::exists(ssh::sshUserDir("") + "/config")) {
    INFO("the real ~/.ssh/config must not name the test alias");
    REQUIRE_FALSE(ssh::sshHostConfig(alias, {ssh::sshUserDir("") + "/config"}).hostName ==
                  "127.0.0.77");
  }
  // Without an explicit config: $HOME's .ssh/config is read by neither.
  CHECK(sshHostName(alias, {{"HOME", home.path()}}) == std::nullopt);
  ssh::SshConnection plain(alias, ssh::SshOptions{});
  CHECK(plain.describe() == alias + ":22");
  // The same file as DS_SSH_CONFIG (ssh -F): both resolve the alias to the same address.
  CHECK(sshHostName(alias, {{"DS_SSH_CONFIG", config}}) ==
        std::optional<std::string>("127.0.0.77"));
  ssh::SshOptions explicitConfig;
  explicitConfig.configFile = config;
  ssh::SshConnection viaFile(alias, explicitConfig);
  CHECK(viaFile.describe() == alias + " (127.0.0.77:2299)");
}

TEST_CASE("ssh home: $HOME is the fallback only for a user without a password entry", "[unit]") {
  // This user has an entry, so the fallback is not taken; a trailing slash is not doubled.
  struct passwd* pw = ::getpwuid(::getuid());
  REQUIRE(pw != nullptr);
  std::string home = pw->pw_dir;
  CHECK(ssh::sshUserDir("/elsewhere") == (home == "/" ? "" : home) + "/.ssh");
  CHECK(ssh::sshUserDir("").find("//") == std::string::npos);
}
