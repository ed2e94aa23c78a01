// Rank assignment (DESIGN.md §4.3): host by host in node order, LOCAL_RANK dense on each node
// (not DeepSpeed's RANK % n), the full per-rank environment and argv.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "core/rank_env.h"
#include "launcher/local_host.h"
#include "launcher/rank_plan.h"

using namespace ds::launcher;
using Catch::Matchers::Contains;

namespace {
JobSpec heterogeneous() {
  JobSpec s;
  s.hosts = {{"node0", {0, 1}}, {"node1", {0, 1, 2, 3}}, {"node2", {1, 3}}};
  s.masterAddr = "10.0.0.1";
  s.masterPort = 29511;
  s.jobId = "dsrun-abc";
  s.jobToken = "00112233445566778899aabbccddeeff";
  s.commBackend = "gloo";
  s.program = {"/bin/dsrt", "train", "plan.yaml"};
  s.exports = {{"NCCL_DEBUG", "INFO"}};
  return s;
}
}  // namespace

TEST_CASE("rank plan: global ranks run host by host, local ranks are dense", "[unit]") {
  JobSpec s = heterogeneous();
  CHECK(s.worldSize() == 8);
  struct Want {
    int node, local, rank;
  };
  // node1 ranks 2..5 get LOCAL_RANK 0..3 (DeepSpeed's RANK % 4 would give 2,3,0,1).
  for (Want w : {Want{0, 0, 0}, Want{0, 1, 1}, Want{1, 0, 2}, Want{1, 1, 3}, Want{1, 3, 5},
                 Want{2, 0, 6}, Want{2, 1, 7}}) {
    ds::RankEnv r = rankEnvFor(s, w.node, w.local);
    CHECK(r.rank == w.rank);
    CHECK(r.localRank == w.local);
    CHECK(r.localSize == static_cast<int>(s.hosts[w.node].slots.size()));
    CHECK(r.crossRank == w.node);
    CHECK(r.crossSize == 3);
    CHECK(r.worldSize == 8);
    CHECK(r.masterAddr == "10.0.0.1");
    CHECK(r.masterPort == 29511);
  }
  CHECK_THROWS_WITH(rankEnvFor(s, 3, 0), Contains("node rank 3 is out of range: the job has 3"));
  CHECK_THROWS_WITH(rankEnvFor(s, 2, 2),
                    Contains("local rank 2 is out of range: host 'node2' (node 2) runs 2 ranks"));
}

TEST_CASE("rank plan: per-rank environment matches DESIGN §4.3", "[unit]") {
  JobSpec s = heterogeneous();
  s.gpuHost = true;
  ds::EnvMap e = rankEnvironment(s, 2, 1, /*base=*/{}, /*cores=*/8);
  CHECK(e.at("RANK") == "7");
  CHECK(e.at("LOCAL_RANK") == "1");
  CHECK(e.at("WORLD_SIZE") == "8");
  CHECK(e.at("LOCAL_SIZE") == "2");
  CHECK(e.at("LOCAL_WORLD_SIZE") == "2");
  CHECK(e.at("CROSS_RANK") == "2");
  CHECK(e.at("CROSS_SIZE") == "3");
  CHECK(e.at("MASTER_ADDR") == "10.0.0.1");
  CHECK(e.at("MASTER_PORT") == "29511");
  CHECK(e.at("DS_JOB_ID") == "dsrun-abc");
  CHECK(e.at("DS_JOB_TOKEN") == s.jobToken);
  CHECK(e.at("DS_COMM_BACKEND_FLAG") == "gloo");  // --comm_backend outranks the plan
  CHECK(e.count("DS_COMM_BACKEND") == 0);
  CHECK(e.at("CUDA_VISIBLE_DEVICES") == "1,3");  // the node's physical slot ids
  CHECK(e.at("OMP_NUM_THREADS") == "4");         // 8 cores / 2 local ranks
  CHECK(e.at("NCCL_DEBUG") == "INFO");
  // What a rank derives back from it is the same contract.
  ds::RankEnv back = ds::deriveRankEnv(e);
  CHECK(back.rank == 7);
  CHECK(back.localRank == 1);
  CHECK(back.crossRank == 2);
  CHECK(back.worldSize == 8);

  s.gpuHost = false;
  e = rankEnvironment(s, 1, 0, {}, 2);
  CHECK(e.count("CUDA_VISIBLE_DEVICES") == 0);
  CHECK(e.at("OMP_NUM_THREADS") == "1");  // never 0
  CHECK(rankEnvironment(s, 1, 0, {{"OMP_NUM_THREADS", "3"}}, 64).count("OMP_NUM_THREADS") == 0);
  s.exports["OMP_NUM_THREADS"] = "5";
  CHECK(rankEnvironment(s, 1, 0, {}, 64).at("OMP_NUM_THREADS") == "5");
  s.jobToken.clear();
  CHECK(rankEnvironment(s, 0, 0, {}, 1).count("DS_JOB_TOKEN") == 0);
}

TEST_CASE("rank plan: --local_rank=N is appended unless --no_local_rank", "[unit]") {
  JobSpec s = heterogeneous();
  CHECK(rankArgv(s, 3) ==
        std::vector<std::string>{"/bin/dsrt", "train", "plan.yaml", "--local_rank=3"});
  s.noLocalRank = true;
  CHECK(rankArgv(s, 3) == s.program);
}

TEST_CASE(
    "rank plan: a node agent on a GPU host sets CUDA_VISIBLE_DEVICES even when the head "
    "had no GPU",
    "[unit]") {
  JobSpec s = heterogeneous();
  s.gpuHost = false;  // the head's view: a CPU-only login node
  CHECK_FALSE(agentGpuHost(s.gpuHost, 0));
  s.gpuHost = agentGpuHost(s.gpuHost, 4);  // what agentMain does with localGpuCount() on node 2
  CHECK(s.gpuHost);
  CHECK(rankEnvironment(s, 2, 1, {}, 8).at("CUDA_VISIBLE_DEVICES") == "1,3");
  CHECK(agentGpuHost(true, 0));  // a head with GPUs keeps the variable on every host (as before)
}
