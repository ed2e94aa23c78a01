// A DeepSpeed user's Python program under dsrun (issue 16 item 3): the argv DeepSpeed's launch.py
// builds (`python -u script --local_rank=N ARGS`, --module, --no_python), the position of
// --local_rank for `python3 [opts] script`, and the .deepspeed_env files DeepSpeed's runner reads.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include "core/error.h"
#include "launcher/cli.h"
#include "launcher/dry_run.h"
#include "launcher/env_exports.h"
#include "launcher/job_builder.h"
#include "launcher/job_spec_codec.h"
#include "launcher/python_program.h"
#include "launcher/rank_plan.h"
#include "tests/support/spawn_ranks.h"

using namespace ds::launcher;
using Catch::Matchers::Contains;
using Argv = std::vector<std::string>;

namespace {

// The argv rank `local` of a one-host job gets for `program` after pythonProgramForm.
Argv argvFor(const Argv& program, bool module, bool noPython, int local = 1) {
  ProgramForm form = pythonProgramForm(program, module, noPython, "/usr/bin/python3");
  JobSpec s;
  s.hosts = {{"localhost", {0, 1}}};
  s.program = form.program;
  s.localRankAt = form.localRankAt;
  return rankArgv(s, local);
}

// dsrun's CLI and job builder with PATH holding an executable `python3` in a temp folder.
struct PyFixture {
  ds::test::TempDir dir;
  ds::EnvMap env;
  PyFixture() {
    ::mkdir(dir.file("bin").c_str(), 0700);
    ds::test::writeFile(dir.file("bin/python3"), "#!/bin/sh\n");
    ::chmod(dir.file("bin/python3").c_str(), 0700);
    env = {{"HOME", dir.file("home")}, {"PATH", dir.file("bin") + ":/usr/bin:/bin"}};
    ::mkdir(dir.file("home").c_str(), 0700);
    ::mkdir(dir.file("cwd").c_str(), 0700);
  }
  JobPlan plan(Argv args) {
    args.insert(args.begin(), "dsrun");
    CliOptions o;
    std::string printed;
    REQUIRE(parseCli(args, &o, &printed) == -1);
    o.hostfile = dir.file("no-hostfile");
    return buildJobPlan(o, BuildContext{env, dir.file("cwd"), "/opt/ds/bin/dsrun", 42, 0});
  }
};

}  // namespace

TEST_CASE("python program: a .py script runs as DeepSpeed's `python -u script --local_rank=N`",
          "[unit]") {
  CHECK(argvFor({"train.py", "--deepspeed_config", "ds.json"}, false, false) ==
        Argv{"/usr/bin/python3", "-u", "train.py", "--local_rank=1", "--deepspeed_config",
             "ds.json"});
  CHECK(argvFor({"pkg.train", "--lr", "3"}, true, false, 0) ==
        Argv{"/usr/bin/python3", "-u", "-m", "pkg.train", "--local_rank=0", "--lr", "3"});
  CHECK(argvFor({"./train.py", "a"}, false, true) == Argv{"./train.py", "--local_rank=1", "a"});
  CHECK(argvFor({"./tool", "a", "b"}, false, true) == Argv{"./tool", "--local_rank=1", "a", "b"});
  CHECK_THROWS_WITH(pythonProgramForm({"x"}, true, true, "python3"),
                    Contains("Don't use both the '--no_python' flag and the '--module' flag"));
}

TEST_CASE(
    "python program: after `python3 [options] script` --local_rank goes before the "
    "script's arguments",
    "[unit]") {
  CHECK(argvFor({"python3", "train.py", "--lr", "3"}, false, false) ==
        Argv{"python3", "train.py", "--local_rank=1", "--lr", "3"});
  CHECK(argvFor({"/usr/bin/python3.11", "-u", "-W", "ignore", "-X", "dev", "t.py", "x"}, false,
                false) == Argv{"/usr/bin/python3.11", "-u", "-W", "ignore", "-X", "dev", "t.py",
                               "--local_rank=1", "x"});
  CHECK(argvFor({"python", "-um", "pkg", "x"}, false, false) ==
        Argv{"python", "-um", "pkg", "--local_rank=1", "x"});
  CHECK(argvFor({"python3", "-m", "pkg", "x"}, false, false) ==
        Argv{"python3", "-m", "pkg", "--local_rank=1", "x"});
  CHECK(argvFor({"python3", "-c", "import sys", "x"}, false, false) ==
        Argv{"python3", "-c", "import sys", "--local_rank=1", "x"});
  CHECK(argvFor({"python3", "-Wignore", "--", "-odd.py", "x"}, false, false) ==
        Argv{"python3", "-Wignore", "--", "-odd.py", "--local_rank=1", "x"});
  CHECK(argvFor({"python3", "-"}, false, false) == Argv{"python3", "-", "--local_rank=1"});
  // Not Python: dsrun's rule, after every argument (dsrt reads it anywhere).
  CHECK(argvFor({"/opt/ds/dsrt", "train", "p.yaml"}, false, false) ==
        Argv{"/opt/ds/dsrt", "train", "p.yaml", "--local_rank=1"});
  CHECK(argvFor({"sh", "-c", "echo $0", "x"}, false, false) ==
        Argv{"sh", "-c", "echo $0", "x", "--local_rank=1"});
  CHECK(argvFor({"python-config", "--libs"}, false, false) ==
        Argv{"python-config", "--libs", "--local_rank=1"});
  CHECK(isPythonInterpreter("/venv/bin/python"));
  CHECK_FALSE(isPythonInterpreter("pythonista"));
}

TEST_CASE("python program: dsrun's flags, the dry run and the node agent's job agree", "[unit]") {
  PyFixture f;
  JobPlan p = f.plan({"--num_gpus", "2", "train.py", "--epochs", "1"});
  CHECK(p.spec.program == Argv{f.dir.file("bin/python3"), "-u", "train.py", "--epochs", "1"});
  std::string text = dryRunText(p, "/opt/ds/bin/dsrun", f.env);
  CHECK_THAT(text, Contains("train.py --local_rank=1 --epochs 1"));
  JobSpec back = decodeJobSpec(encodeJobSpec(p.spec));  // what a remote agent runs
  CHECK(rankArgv(back, 1) == rankArgv(p.spec, 1));
  p = f.plan({"--module", "--no_local_rank", "pkg.main", "a"});
  CHECK(rankArgv(p.spec, 0) == Argv{f.dir.file("bin/python3"), "-u", "-m", "pkg.main", "a"});
  p = f.plan({"--no-python", "./run.py", "a"});
  CHECK(rankArgv(p.spec, 0) == Argv{"./run.py", "--local_rank=0", "a"});
  p = f.plan({"train", "p.yaml"});  // a dsrt command is no Python program
  CHECK(rankArgv(p.spec, 0) == Argv{"/opt/ds/bin/dsrt", "train", "p.yaml", "--local_rank=0"});
  CliOptions o;
  std::string printed;
  parseCli({"dsrun", "--module", "--no_python", "x"}, &o, &printed);
  o.hostfile = f.dir.file("no-hostfile");
  CHECK_THROWS_WITH(buildJobPlan(o, BuildContext{f.env, f.dir.file("cwd"), "/d/dsrun", 1, 0}),
                    Contains("--no_python"));
}

TEST_CASE("python program: a job spec whose local_rank_at is outside the program is refused",
          "[unit]") {
  JobSpec s;
  s.hosts = {{"localhost", {0}}};
  s.program = {"a", "b"};
  s.localRankAt = 3;
  CHECK_THROWS_WITH(decodeJobSpec(encodeJobSpec(s)), Contains("local_rank_at 3 is outside"));
}

TEST_CASE("exports: .deepspeed_env and .dsenv in ~ then ., later files winning", "[unit]") {
  ds::test::TempDir home, cwd;
  ds::test::writeFile(home.file(".deepspeed_env"), "NCCL_IB_DISABLE=1\nA=home-ds\nB=home-ds\n");
  ds::test::writeFile(home.file(".dsenv"), "B=home-dsenv\n");
  ds::test::writeFile(cwd.file(".deepspeed_env"), "C=cwd-ds\nD=cwd-ds\n");
  ds::test::writeFile(cwd.file(".dsenv"), "D=cwd-dsenv\n");
  ds::EnvMap env = {{"HOME", home.path()}, {"MLFLOW_TRACKING_URI", "http://m"}, {"MV2_X", "1"}};
  auto files = dsenvFiles(env, cwd.path());
  REQUIRE(files == Argv{home.file(".deepspeed_env"), home.file(".dsenv"),
                        cwd.file(".deepspeed_env"), cwd.file(".dsenv")});
  ds::EnvMap out = collectExports(env, {}, files);
  CHECK(out.at("NCCL_IB_DISABLE") == "1");
  CHECK(out.at("A") == "home-ds");
  CHECK(out.at("B") == "home-dsenv");
  CHECK(out.at("C") == "cwd-ds");
  CHECK(out.at("D") == "cwd-dsenv");
  CHECK(out.at("MLFLOW_TRACKING_URI") == "http://m");  // DeepSpeed's EXPORT_ENVS
  CHECK(out.at("MV2_X") == "1");
  // DS_ENV_FILE replaces both names, as DeepSpeed's DS_ENV_FILE replaces .deepspeed_env.
  ds::test::writeFile(cwd.file("my_env"), "E=1\n");
  env["DS_ENV_FILE"] = "my_env";
  CHECK(dsenvFiles(env, cwd.path()) == Argv{cwd.file("my_env")});
}

TEST_CASE("exports: a bad .deepspeed_env line is an error naming file and line", "[unit]") {
  ds::test::TempDir home;
  ds::test::writeFile(home.file(".deepspeed_env"), "A=1\nnot a pair\n");
  auto files = dsenvFiles({{"HOME", home.path()}}, home.path());
  CHECK_THROWS_WITH(collectExports({}, {}, files),
                    Contains(home.file(".deepspeed_env") + ":2: expected KEY=VALUE"));
}
