// ssh_config lookup through libssh's parser: HostName for MASTER_ADDR (Host patterns, negation,
// %h, first match wins), User/Port/IdentityFile, which files are read, and bad lines.
#include <pwd.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "core/error.h"
#include "launcher/ssh/ssh_config.h"
#include "launcher/ssh_alias.h"
#include "tests/support/spawn_ranks.h"

using namespace ds::launcher;

namespace {

// HostName for `alias` with `config` as the only ssh_config (DS_SSH_CONFIG).
std::optional<std::string> hostNameIn(const std::string& config, const std::string& alias) {
  ds::test::TempDir dir;
  ds::test::writeFile(dir.file("cfg"), config);
  return sshHostName(alias, {{"DS_SSH_CONFIG", dir.file("cfg")}});
}

// This user's home in the password database (what OpenSSH means by ~).
std::string passwdHome() {
  struct passwd* pw = ::getpwuid(::getuid());
  REQUIRE(pw != nullptr);
  return pw->pw_dir;
}

}  // namespace

TEST_CASE("ssh alias: HostName of the first matching Host block", "[unit]") {
  // libssh applies a negated pattern only when it comes before the pattern that matches
  // (`Host !gpu-bad gpu-*`); OpenSSH takes it anywhere on the line.
  const std::string cfg =
      "# comment\n"
      "Host node1 node9\n"
      "    HostName 127.0.0.2   # trailing comment\n"
      "Host node2\n"
      "\tHostName=127.0.0.3\n"
      "Host !gpu-bad gpu-*\n"
      "  Port 2222\n"
      "  HostName %h.cluster.example\n"
      "Match user nobody-here\n"
      "  HostName 10.0.0.99\n"
      "Host *\n"
      "  User root\n"
      "  HostName 10.0.0.1\n";
  CHECK(hostNameIn(cfg, "node1") == std::optional<std::string>("127.0.0.2"));
  CHECK(hostNameIn(cfg, "node9") == std::optional<std::string>("127.0.0.2"));
  CHECK(hostNameIn(cfg, "NODE2") == std::optional<std::string>("127.0.0.3"));
  CHECK(hostNameIn(cfg, "gpu-7") == std::optional<std::string>("gpu-7.cluster.example"));
  CHECK(hostNameIn(cfg, "gpu-bad") == std::optional<std::string>("10.0.0.1"));
  CHECK(hostNameIn(cfg, "other") == std::optional<std::string>("10.0.0.1"));
  CHECK_FALSE(hostNameIn("Host a\n  Port 22\n", "a").has_value());
  CHECK_FALSE(hostNameIn("", "a").has_value());
}

TEST_CASE("ssh alias: User, Port and IdentityFile of the alias, first value wins", "[unit]") {
  ds::test::TempDir dir;
  ds::test::writeFile(dir.file("a"),
                      "Host n1\n  HostName 127.0.0.5\n  Port 2200\n  User alice\n"
                      "  IdentityFile ~/.ssh/id_n1\n");
  ds::test::writeFile(dir.file("b"), "Host *\n  HostName 10.1.1.1\n  Port 2299\n  User bob\n");
  auto both = ssh::sshHostConfig("n1", {dir.file("a"), dir.file("b")});
  CHECK(both.hostName == "127.0.0.5");
  CHECK(both.port == 2200);
  CHECK(both.user == "alice");
  CHECK(both.identityFile == "~/.ssh/id_n1");
  auto other = ssh::sshHostConfig("n2", {dir.file("a"), dir.file("b")});
  CHECK(other.hostName == "10.1.1.1");
  CHECK(other.port == 2299);
  CHECK(other.user == "bob");
  CHECK(other.identityFile.empty());
  auto none = ssh::sshHostConfig("n3", {dir.file("missing")});
  CHECK(none.hostName == "n3");
  CHECK(none.port == 22);
  CHECK(none.user.empty());
  CHECK(none.identityFile.empty());
}

TEST_CASE("ssh alias: DS_SSH_CONFIG replaces ~/.ssh/config; missing files are skipped", "[unit]") {
  ds::test::TempDir dir;
  CHECK(sshConfigFiles({{"DS_SSH_CONFIG", "/x/cfg"}, {"HOME", "/h"}}) ==
        std::vector<std::string>{"/x/cfg"});
  // ~ is the password database's home (as OpenSSH and the ssh runner's connection), not $HOME.
  const std::string sshDir = ssh::sshUserDir("/h");
  CHECK(sshDir == passwdHome() + "/.ssh");
  CHECK(sshConfigFiles({{"HOME", "/h"}}) ==
        std::vector<std::string>{sshDir + "/config", "/etc/ssh/ssh_config"});
  ds::test::writeFile(dir.file("cfg"), "Host n1\n  HostName 127.0.0.5\n");
  CHECK(sshHostName("n1", {{"DS_SSH_CONFIG", dir.file("cfg")}}) ==
        std::optional<std::string>("127.0.0.5"));
  CHECK_FALSE(sshHostName("n1", {{"DS_SSH_CONFIG", dir.file("missing")}}).has_value());
  CHECK(sshHostName("n1", {{"HOME", dir.file("no-such-home")}}) == std::nullopt);
}

TEST_CASE("ssh alias: a line libssh refuses names the file; the alias stays unresolved", "[unit]") {
  ds::test::TempDir dir;
  ds::test::writeFile(dir.file("cfg"), "Match nonsense-keyword x\n  HostName 10.0.0.1\n");
  CHECK_THROWS_AS(ssh::sshHostConfig("n1", {dir.file("cfg")}), ds::ConfigError);
  CHECK_THROWS_WITH(ssh::sshHostConfig("n1", {dir.file("cfg")}),
                    Catch::Contains(dir.file("cfg")) && Catch::Contains("n1"));
  // For MASTER_ADDR a warning, then the name as written (pdsh's OpenSSH may accept the line).
  CHECK_FALSE(sshHostName("n1", {{"DS_SSH_CONFIG", dir.file("cfg")}}).has_value());
}
