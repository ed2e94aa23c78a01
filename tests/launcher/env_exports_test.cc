// Exports to every rank (DESIGN.md §4.3): default prefixes, .dsenv in ~ then ., --export K[=V],
// in that order of precedence; the job token is never exported from the environment.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include "core/error.h"
#include "launcher/env_exports.h"
#include "tests/support/spawn_ranks.h"

using namespace ds::launcher;
using Catch::Matchers::Contains;

TEST_CASE("exports: default prefixes NCCL*, DS_*, OMP_*, UCX*, PYTHON*", "[unit]") {
  for (const char* k : {"NCCL_DEBUG", "NCCL", "DS_TIMEOUT", "OMP_NUM_THREADS", "UCX_TLS",
                        "PYTHONPATH", "PYTHONUNBUFFERED"})
    CHECK(isDefaultExport(k));
  for (const char* k : {"PATH", "HOME", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "DSX", "MY_NCCL",
                        "OMPI_COMM_WORLD_RANK", "DS_JOB_TOKEN", "DS_JOB_ID"})
    CHECK_FALSE(isDefaultExport(k));
}

TEST_CASE("exports: collectExports takes defaults, then .dsenv files, then --export", "[unit]") {
  ds::test::TempDir home, cwd;
  ds::test::writeFile(home.file(".dsenv"), "# home file\nNCCL_DEBUG=WARN\nA=home\nB=home\n");
  ds::test::writeFile(cwd.file(".dsenv"), "\nB=cwd\nexport C = \"quoted value\"\n");
  ds::EnvMap env = {{"HOME", home.path()}, {"PATH", "/usr/bin"},       {"NCCL_DEBUG", "INFO"},
                    {"PYTHONPATH", "/x"},  {"DS_JOB_TOKEN", "secret"}, {"FROM_ENV", "e v"}};
  auto files = dsenvFiles(env, cwd.path());
  REQUIRE(files == std::vector<std::string>{home.file(".dsenv"), cwd.file(".dsenv")});
  ds::EnvMap out = collectExports(env, {"FROM_ENV", "D=d=1", "A=flag", "EMPTY="}, files);
  CHECK(out.at("NCCL_DEBUG") == "WARN");  // .dsenv overrides the environment
  CHECK(out.at("PYTHONPATH") == "/x");
  CHECK(out.at("A") == "flag");  // --export overrides .dsenv
  CHECK(out.at("B") == "cwd");   // ./.dsenv overrides ~/.dsenv
  CHECK(out.at("C") == "quoted value");
  CHECK(out.at("D") == "d=1");  // split on the first '='
  CHECK(out.at("EMPTY").empty());
  CHECK(out.at("FROM_ENV") == "e v");  // K alone: dsrun's value
  CHECK(out.count("PATH") == 0);
  CHECK(out.count("HOME") == 0);
  CHECK(out.count("DS_JOB_TOKEN") == 0);
}

TEST_CASE("exports: the same .dsenv in ~ and . is read once; missing files are skipped", "[unit]") {
  ds::test::TempDir home;
  CHECK(dsenvFiles({{"HOME", home.path()}}, home.path()).empty());
  ds::test::writeFile(home.file(".dsenv"), "A=1\n");
  CHECK(dsenvFiles({{"HOME", home.path()}}, home.path()) ==
        std::vector<std::string>{home.file(".dsenv")});
  CHECK(dsenvFiles({}, home.path()) == std::vector<std::string>{home.file(".dsenv")});
  ::mkdir(home.file("d").c_str(), 0700);
  ::mkdir(home.file("d/.dsenv").c_str(), 0700);  // a directory is not a .dsenv file
  CHECK(dsenvFiles({}, home.file("d")).empty());
}

TEST_CASE("exports: .dsenv syntax and errors name file and line", "[unit]") {
  ds::EnvMap m = parseDsenv(
      "# comment\n\n   \nA=1\n  B = two words \nexport C=3\nD='single'\nE=\"x\nF=#not a comment\n"
      "G=$(whoami);`id`\n",
      "f");
  CHECK(m.at("A") == "1");
  CHECK(m.at("B") == "two words");
  CHECK(m.at("C") == "3");
  CHECK(m.at("D") == "single");
  CHECK(m.at("E") == "\"x");
  CHECK(m.at("F") == "#not a comment");
  CHECK(m.at("G") == "$(whoami);`id`");  // data, never evaluated
  CHECK_THROWS_WITH(parseDsenv("A=1\nJUSTAKEY\n", "/h/.dsenv"),
                    Contains("/h/.dsenv:2: expected KEY=VALUE, got 'JUSTAKEY'"));
  CHECK_THROWS_WITH(parseDsenv("1A=x\n", "f"), Contains("f:1: '1A' is not a valid variable name"));
  CHECK_THROWS_WITH(parseDsenv("A B=x\n", "f"), Contains("'A B' is not a valid variable name"));
  CHECK_THROWS_WITH(parseDsenv("=x\n", "f"), Contains("f:1:"));
  CHECK_THROWS_WITH(parseDsenv("\nDS_JOB_TOKEN=x\n", "f"),
                    Contains("f:2: DS_JOB_TOKEN is set by dsrun for each job"));
}

TEST_CASE("exports: --export errors name the flag", "[unit]") {
  CHECK_THROWS_WITH(collectExports({}, {"UNSET_VAR"}, {}),
                    Contains("--export UNSET_VAR: UNSET_VAR is not set in dsrun's environment"));
  CHECK_THROWS_WITH(collectExports({}, {"A;B=1"}, {}),
                    Contains("--export A;B=1: 'A;B' is not a valid variable name"));
  CHECK_THROWS_WITH(collectExports({}, {"=1"}, {}), Contains("'' is not a valid variable name"));
  CHECK_THROWS_WITH(collectExports({}, {"DS_JOB_ID=x"}, {}), Contains("DS_JOB_ID is set by dsrun"));
  // Values are data: metacharacters are kept verbatim for the runner to quote.
  auto out = collectExports({}, {"V=a'b $(c) `d`; e\nf"}, {});
  CHECK(out.at("V") == "a'b $(c) `d`; e\nf");
}

TEST_CASE("exports: a .dsenv that cannot be read is an error naming it", "[unit]") {
  CHECK_THROWS_WITH(collectExports({}, {}, {"/nonexistent/.dsenv"}),
                    Contains("/nonexistent/.dsenv: cannot open"));
}

TEST_CASE("exports: DS_ENV_FILE names the env file (DeepSpeed's variable)", "[unit]") {
  ds::test::TempDir home, cwd;
  ds::test::writeFile(home.file("team.env"), "A=home\n");
  ds::test::writeFile(cwd.file("team.env"), "A=cwd\n");
  ds::test::writeFile(cwd.file(".dsenv"), "B=ignored\n");
  ds::EnvMap env = {{"HOME", home.path()}, {"DS_ENV_FILE", "team.env"}};
  auto files = dsenvFiles(env, cwd.path());
  CHECK(files == std::vector<std::string>{home.file("team.env"), cwd.file("team.env")});
  ds::EnvMap out = collectExports(env, {}, files);
  CHECK(out.at("A") == "cwd");
  CHECK(out.count("B") == 0);
  CHECK(out.at("DS_ENV_FILE") == "team.env");  // a DS_ variable, exported like the others
  env["DS_ENV_FILE"] = home.file("team.env");
  CHECK(dsenvFiles(env, cwd.path()) == std::vector<std::string>{home.file("team.env")});
  env["DS_ENV_FILE"] = "nope.env";
  CHECK_THROWS_WITH(dsenvFiles(env, cwd.path()),
                    Contains("DS_ENV_FILE=nope.env: no such file in ~ or the current directory"));
}
