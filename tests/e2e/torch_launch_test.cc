// A DeepSpeed user's own torch.distributed program under dsrun (issue 16 item 3): the real
// dsrun runs tests/data/torch_ddp.py (gloo, env://, an allreduce and one DDP step of a small
// model, checked in the program against the step computed without communication) locally and over
// the ssh test cluster, and every rank's loss and parameters equal those of the same program under
// torchrun. Needs Debian's python3-torch (scripts/install_deps.sh) for /usr/bin/python3.
#include <sys/stat.h>

#include <map>

#include "tests/e2e/launch_e2e.h"

using namespace ds::test;
using namespace ds::test::e2e;

namespace {

constexpr const char* kPython = "/usr/bin/python3";  // Debian's, where python3-torch lives

std::string script() { return std::string(DS_TEST_DATA_DIR) + "/torch_ddp.py"; }

std::string torchMissing() {
  std::string out;
  if (runCommand(std::string(kPython) + " -c 'import torch.distributed as d; assert "
                                        "d.is_gloo_available()'",
                 &out, std::chrono::seconds(120)) == 0)
    return "";
  return std::string(kPython) + " cannot import torch with gloo (install python3-torch: " +
         "scripts/install_deps.sh): " + out.substr(0, 300);
}

#define DS_NEED_TORCH()                                        \
  do {                                                         \
    if (auto why = torchMissing(); !why.empty()) DS_SKIP(why); \
  } while (0)

using RankOut = std::map<std::string, std::string>;  // key -> JSON text

// OUT/rank<r>.txt for r in 0..world-1 (key<TAB>json lines); a missing file is an empty map.
std::vector<RankOut> readOutputs(const std::string& dir, int world) {
  std::vector<RankOut> outs(world);
  for (int r = 0; r < world; ++r) {
    std::string path = dir + "/rank" + std::to_string(r) + ".txt";
    if (::access(path.c_str(), R_OK) != 0) continue;
    std::istringstream in(readFile(path));
    for (std::string line; std::getline(in, line);)
      if (auto tab = line.find('\t'); tab != std::string::npos)
        outs[r][line.substr(0, tab)] = line.substr(tab + 1);
  }
  return outs;
}

// torchrun --nproc_per_node N on this machine: the reference outputs. Debian's torch 1.13 under
// Python 3.11 fails in torchrun's default `--redirects 0` (its Std.from_str iterates an IntFlag,
// whose 0 member Python 3.11 no longer yields), so the run redirects stdout to its log dir and
// tees it.
std::vector<RankOut> torchrunReference(const TempDir& tmp, int world) {
  std::string out;
  std::string cmd = "cd " + tmp.path() + " && " + kPython +
                    " -m torch.distributed.run --nproc_per_node " + std::to_string(world) +
                    " --master_port " + std::to_string(freePort()) + " --redirects 1 --tee 1" +
                    " --log_dir " + tmp.file("torchrun_logs") + " " + script() + " --out " +
                    tmp.file("torchrun");
  int rc = runCommand(cmd, &out, std::chrono::seconds(300));
  INFO(cmd << "\n" << out);
  REQUIRE(rc == 0);
  return readOutputs(tmp.file("torchrun"), world);
}

// Every rank of `got` has what DeepSpeed's launcher gives (--local_rank=N first, the rank
// variables, the .deepspeed_env export) and torchrun's loss and parameters.
void checkAgainst(const std::vector<RankOut>& got, const std::vector<RankOut>& ref, int perHost) {
  const int world = static_cast<int>(ref.size());
  for (int r = 0; r < world; ++r) {
    INFO("rank " << r);
    REQUIRE(got[r].count("params") == 1);
    const std::string local = std::to_string(r % perHost);
    CHECK(got[r].at("argv").rfind("[\"--local_rank=" + local + "\", \"--out\"", 0) == 0);
    CHECK(got[r].at("RANK") == "\"" + std::to_string(r) + "\"");
    CHECK(got[r].at("LOCAL_RANK") == "\"" + local + "\"");
    CHECK(got[r].at("WORLD_SIZE") == "\"" + std::to_string(world) + "\"");
    CHECK(got[r].at("LOCAL_SIZE") == "\"" + std::to_string(perHost) + "\"");
    CHECK(got[r].at("CROSS_RANK") == "\"" + std::to_string(r / perHost) + "\"");
    CHECK(got[r].at("CROSS_SIZE") == "\"" + std::to_string(world / perHost) + "\"");
    CHECK(got[r].at("USERPROG_MARK") == "\"from .deepspeed_env, with spaces\"");
    CHECK(got[r].at("allreduce") == ref[r].at("allreduce"));
    CHECK(got[r].at("loss") == ref[r].at("loss"));
    CHECK(got[r].at("params") == ref[r].at("params"));  // bitwise: the same floats printed
  }
}

// The job folder: ~/.deepspeed_env (HOME points here) and a ./.deepspeed_env that overrides it.
void writeDeepspeedEnv(const TempDir& tmp) {
  ::mkdir(tmp.file("home").c_str(), 0700);
  writeFile(tmp.file("home/.deepspeed_env"), "USERPROG_MARK=from home\nUSERPROG_HOME=1\n");
  writeFile(tmp.file(".deepspeed_env"), "USERPROG_MARK=from .deepspeed_env, with spaces\n");
}

}  // namespace

TEST_CASE("torch program: dsrun runs a DeepSpeed user's script.py locally as torchrun does",
          "[e2e]") {
  DS_NEED_TORCH();
  TempDir tmp;
  writeDeepspeedEnv(tmp);
  auto ref = torchrunReference(tmp, 2);
  std::string out;
  // `dsrun script.py ARGS`, as `deepspeed script.py ARGS`: python3 -u script --local_rank=N ARGS,
  // with python3 from dsrun's PATH.
  std::string cmd = "cd " + tmp.path() + " && HOME=" + tmp.file("home") + " PATH=/usr/bin:$PATH " +
                    dsrunPath() + " --num_gpus 2 --master_port " + std::to_string(freePort()) +
                    " " + script() + " --out " + tmp.file("dsrun");
  int rc = runCommand(cmd, &out, std::chrono::seconds(300));
  INFO(cmd << "\n" << out);
  REQUIRE(rc == 0);
  checkAgainst(readOutputs(tmp.file("dsrun"), 2), ref, 2);
}

TEST_CASE("torch program: dsrun over ssh hosts (2 x 2 ranks) gives torchrun's result", "[e2e]") {
  DS_NEED_CLUSTER();
  DS_NEED_TORCH();
  TestCluster cluster;
  TempDir tmp;
  writeDeepspeedEnv(tmp);
  auto ref = torchrunReference(tmp, 4);
  writeFile(tmp.file("hostfile"),
            cluster.alias(0) + " slots=2\n" + cluster.alias(1) + " slots=2\n");
  std::string out;
  // `dsrun python3 script.py ARGS`: --local_rank=N goes right after the script.
  std::string cmd = "cd " + tmp.path() + " && " + cluster.envPrefix() + "HOME=" + tmp.file("home") +
                    " " + dsrunPath() + " --hostfile " + tmp.file("hostfile") + " --master_addr " +
                    cluster.addr(0) + " --master_port " + std::to_string(freePort()) + " " +
                    kPython + " " + script() + " --out " + tmp.file("dsrun");
  int rc = runCommand(cmd, &out, std::chrono::seconds(300));
  INFO(cmd << "\n" << out);
  REQUIRE(rc == 0);
  auto got = readOutputs(tmp.file("dsrun"), 4);
  checkAgainst(got, ref, 2);
  for (int r = 0; r < 4; ++r) {  // each rank ran in an ssh session to its own host
    INFO("rank " << r << " SSH_CONNECTION " << got[r]["SSH_CONNECTION"]);
    CHECK(got[r]["SSH_CONNECTION"].find(" " + cluster.addr(r / 2) + " ") != std::string::npos);
  }
}
