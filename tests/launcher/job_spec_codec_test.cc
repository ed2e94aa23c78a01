// JobSpec codec: round trip of every field, the token never encoded, and the errors for bad input.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "launcher/base64.h"
#include "launcher/job_spec_codec.h"

using namespace ds::launcher;

namespace {
JobSpec sample() {
  JobSpec s;
  s.hosts = {{"worker-0", {0, 1, 2}}, {"user@10.0.0.2", {1, 3}}};
  s.runner = RunnerKind::kPdsh;
  s.masterAddr = "10.0.0.1";
  s.masterPort = 29511;
  s.jobId = "job-abc";
  s.jobToken = "0123456789abcdef0123456789abcdef";
  s.program = {"/usr/bin/python3", "x.py", "--lr", "3e-4", "a b'c\"d$(rm -rf /)"};
  s.exports = {{"NCCL_DEBUG", "INFO"}, {"WEIRD", "a'b c\n$d"}};
  s.commBackend = "gloo";
  s.noLocalRank = true;
  s.eachRankLogDir = "/tmp/logs";
  s.bindCoresToRank = true;
  s.bindCoreList = "0,2-5";
  s.savePidFile = "/tmp/1.dsrun";
  s.sshPort = 2222;
  s.launcherArgs = "--mca x y";
  s.gpuHost = true;
  s.cwd = "/work dir";
  s.hostfile = "/job/hostfile";
  return s;
}
}  // namespace

TEST_CASE("base64url round-trips every byte and matches RFC 4648 vectors", "[unit]") {
  CHECK(base64UrlEncode("") == "");
  CHECK(base64UrlEncode("f") == "Zg==");
  CHECK(base64UrlEncode("fo") == "Zm8=");
  CHECK(base64UrlEncode("foo") == "Zm9v");
  CHECK(base64UrlEncode("foobar") == "Zm9vYmFy");
  // DeepSpeed's world_info test vector (launcher.md §7.1).
  CHECK(base64UrlEncode(R"({"localhost": [0, 1]})") == "eyJsb2NhbGhvc3QiOiBbMCwgMV19");
  std::string all;
  for (int i = 0; i < 256; ++i) all += char(i);
  for (size_t n = 0; n < all.size(); n += 37) {
    std::string part = all.substr(n);
    std::string enc = base64UrlEncode(part);
    CHECK(enc.find_first_not_of(
              "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=") ==
          std::string::npos);
    CHECK(base64UrlDecode(enc, "t") == part);
  }
}

TEST_CASE("base64url rejects bad text with a clear error", "[unit]") {
  CHECK_THROWS_WITH(base64UrlDecode("abc", "--job"),
                    "--job: not valid base64 (length 3 is not a multiple of 4)");
  CHECK_THROWS_WITH(base64UrlDecode("ab+d", "--job"),
                    "--job: not valid base64 (bad character at offset 2)");
  CHECK_THROWS_WITH(base64UrlDecode("a=bc", "--job"),
                    "--job: not valid base64 (bad character at offset 1)");
  CHECK_THROWS_AS(base64UrlDecode("ab=c", "--job"), ds::ConfigError);
}

TEST_CASE("JobSpec codec round-trips every field except the token", "[unit]") {
  JobSpec s = sample();
  std::string b64 = encodeJobSpec(s);
  CHECK(b64.find(s.jobToken) == std::string::npos);
  CHECK(jobSpecToJson(s).find(s.jobToken) == std::string::npos);
  JobSpec d = decodeJobSpec(b64);
  CHECK(d.jobToken.empty());
  REQUIRE(d.hosts.size() == 2);
  CHECK(d.hosts[0].host == "worker-0");
  CHECK(d.hosts[0].slots == std::vector<int>{0, 1, 2});
  CHECK(d.hosts[1].host == "user@10.0.0.2");
  CHECK(d.hosts[1].slots == std::vector<int>{1, 3});
  CHECK(d.runner == RunnerKind::kPdsh);
  CHECK(d.masterAddr == s.masterAddr);
  CHECK(d.masterPort == s.masterPort);
  CHECK(d.jobId == s.jobId);
  CHECK(d.program == s.program);
  CHECK(d.exports == s.exports);
  CHECK(d.commBackend == s.commBackend);
  CHECK(d.noLocalRank == s.noLocalRank);
  CHECK(d.eachRankLogDir == s.eachRankLogDir);
  CHECK(d.bindCoresToRank == s.bindCoresToRank);
  CHECK(d.bindCoreList == s.bindCoreList);
  CHECK(d.savePidFile == s.savePidFile);
  CHECK(d.sshPort == s.sshPort);
  CHECK(d.launcherArgs == s.launcherArgs);
  CHECK(d.gpuHost == s.gpuHost);
  CHECK(d.cwd == s.cwd);
  CHECK(d.hostfile == s.hostfile);
  CHECK(d.worldSize() == 5);
  CHECK(d.firstRank(1) == 3);
  // Default-constructed specs survive too.
  JobSpec e = decodeJobSpec(encodeJobSpec(JobSpec{}));
  CHECK(e.hosts.empty());
  CHECK(e.runner == RunnerKind::kLocal);
}

TEST_CASE("JobSpec codec rejects malformed, unknown and mistyped input", "[unit]") {
  CHECK_THROWS_WITH(decodeJobSpec(base64UrlEncode("[1,2]")), "--job: expected a JSON object");
  CHECK_THROWS_WITH(decodeJobSpec(base64UrlEncode("{bad")),
                    Catch::StartsWith("--job: not valid JSON ("));
  std::string json = jobSpecToJson(sample());
  std::string unknown = json;
  unknown.insert(1, "\"extra\":1,");
  CHECK_THROWS_WITH(decodeJobSpec(base64UrlEncode(unknown)), "--job: unknown key 'extra'");
  std::string oldVersion = json;
  oldVersion.replace(oldVersion.find("\"version\":1"), 11, "\"version\":7");
  CHECK_THROWS_WITH(decodeJobSpec(base64UrlEncode(oldVersion)),
                    Catch::StartsWith("--job: job format version 7 (this dsrun reads version 1"));
  std::string badRunner = json;
  badRunner.replace(badRunner.find("\"pdsh\""), 6, "\"rsh\"");
  CHECK_THROWS_WITH(decodeJobSpec(base64UrlEncode(badRunner)),
                    "--job: unknown launcher 'rsh' (expected one of local, ssh, pdsh, openmpi, "
                    "mpich, slurm)");
  std::string badType = json;
  badType.replace(badType.find("\"master_port\":29511"), 19, "\"master_port\":\"x\"");
  CHECK_THROWS_WITH(decodeJobSpec(base64UrlEncode(badType)),
                    Catch::StartsWith("--job: key 'master_port' has the wrong type"));
  std::string missing = json;
  missing.replace(missing.find("\"cwd\":"), 6, "\"hostfile_\":");
  CHECK_THROWS_AS(decodeJobSpec(base64UrlEncode(missing)), ds::ConfigError);
}
