// Tests of the rank-environment derivation from each launcher's variables.
#include "core/rank_env.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "tests/support/spawn_ranks.h"

using ds::EnvMap;

TEST_CASE("no launcher variables means a single rank", "[unit]") {
  auto r = ds::deriveRankEnv({});
  CHECK(r.rank == 0);
  CHECK(r.worldSize == 1);
  CHECK(r.source == ds::RankSource::kSingle);
  CHECK(r.masterAddr == "127.0.0.1");
  CHECK(r.masterPort == ds::kDefaultMasterPort);
  CHECK_FALSE(r.tokenIsSecret);
}

TEST_CASE("dsrun variables", "[unit]") {
  EnvMap e{{"RANK", "5"},
           {"WORLD_SIZE", "8"},
           {"LOCAL_RANK", "1"},
           {"LOCAL_WORLD_SIZE", "4"},
           {"CROSS_RANK", "1"},
           {"CROSS_SIZE", "2"},
           {"MASTER_ADDR", "10.0.0.1"},
           {"MASTER_PORT", "1234"},
           {"DS_JOB_ID", "j1"},
           {"DS_JOB_TOKEN", "s3cret"},
           {"DS_COMM_BACKEND", "gloo"},
           {"DS_COMM_BACKEND_FLAG", "mpi"}};
  auto r = ds::deriveRankEnv(e);
  CHECK(r.rank == 5);
  CHECK(r.worldSize == 8);
  CHECK(r.localRank == 1);
  CHECK(r.localSize == 4);
  CHECK(r.crossRank == 1);
  CHECK(r.crossSize == 2);
  CHECK(r.masterAddr == "10.0.0.1");
  CHECK(r.masterPort == 1234);
  CHECK(r.jobToken == "s3cret");
  CHECK(r.tokenIsSecret);
  CHECK(r.commBackend == "gloo");
  CHECK(r.commBackendFlag == "mpi");
  auto back = ds::deriveRankEnv(ds::rankEnvVars(r));
  CHECK(back.rank == 5);
  CHECK(back.localSize == 4);
  CHECK(back.jobToken == "s3cret");
  CHECK(back.commBackend == "gloo");
  CHECK(back.commBackendFlag == "mpi");
}

TEST_CASE("Open MPI variables", "[unit]") {
  EnvMap e{{"OMPI_COMM_WORLD_RANK", "3"},       {"OMPI_COMM_WORLD_SIZE", "4"},
           {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
           {"OMPI_MCA_orte_num_nodes", "2"},    {"MASTER_ADDR", "127.0.0.2"}};
  auto r = ds::deriveRankEnv(e);
  CHECK(r.source == ds::RankSource::kOpenMpi);
  CHECK(r.rank == 3);
  CHECK(r.localRank == 1);
  CHECK(r.crossRank == 1);
  CHECK(r.crossSize == 2);
}

TEST_CASE("multi-node mpirun without MASTER_ADDR is an error naming it", "[unit]") {
  EnvMap e{{"OMPI_COMM_WORLD_RANK", "0"},
           {"OMPI_COMM_WORLD_SIZE", "4"},
           {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}};
  REQUIRE_THROWS_WITH(ds::deriveRankEnv(e), Catch::Contains("MASTER_ADDR"));
}

TEST_CASE("hydra PMI and slurm variables", "[unit]") {
  auto h = ds::deriveRankEnv(
      {{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}, {"MPI_LOCALRANKID", "2"}, {"MPI_LOCALNRANKS", "3"}});
  CHECK(h.source == ds::RankSource::kHydra);
  CHECK(h.rank == 2);
  CHECK(h.localRank == 2);
  auto s = ds::deriveRankEnv({{"SLURM_PROCID", "3"},
                              {"SLURM_NTASKS", "4"},
                              {"SLURM_LOCALID", "1"},
                              {"SLURM_NODEID", "1"},
                              {"SLURM_NNODES", "2"},
                              {"SLURM_JOB_NODELIST", "node[07-08]"},
                              {"SLURM_JOB_ID", "99"}});
  CHECK(s.source == ds::RankSource::kSlurm);
  CHECK(s.rank == 3);
  CHECK(s.crossRank == 1);
  CHECK(s.localSize == 2);
  CHECK(s.masterAddr == "node07");
}

TEST_CASE("bad values name the variable", "[unit]") {
  REQUIRE_THROWS_WITH(ds::deriveRankEnv({{"RANK", "x"}, {"WORLD_SIZE", "2"}}),
                      Catch::Contains("RANK='x'"));
  REQUIRE_THROWS_WITH(ds::deriveRankEnv({{"RANK", "2"}, {"WORLD_SIZE", "2"}}),
                      Catch::Contains("[0, 1]"));
  REQUIRE_THROWS_WITH(
      ds::deriveRankEnv({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_PORT", "70000"}}),
      Catch::Contains("MASTER_PORT"));
  REQUIRE_THROWS_AS(ds::deriveRankEnv({{"RANK", "0"}}), ds::ConfigError);
}

// Runs in a fresh process only (hidden tag): derives a token-less 2-rank environment three times.
TEST_CASE("rank env body: token fallback warns once", "[.weak_token]") {
  CHECK_FALSE(ds::deriveRankEnv({}).tokenIsSecret);  // a single rank: no warning
  EnvMap e{{"OMPI_COMM_WORLD_RANK", "0"},
           {"OMPI_COMM_WORLD_SIZE", "2"},
           {"OMPI_MCA_ess_base_jobid", "77"},
           {"MASTER_ADDR", "127.0.0.1"}};
  for (int i = 0; i < 3; ++i) CHECK_FALSE(ds::deriveRankEnv(e).tokenIsSecret);
  e["DS_JOB_TOKEN"] = "s3cret";
  CHECK(ds::deriveRankEnv(e).tokenIsSecret);
}

TEST_CASE("no DS_JOB_TOKEN in a multi-rank job: one warning naming the risk and the fix",
          "[unit]") {
  ds::RankEnv r = ds::deriveRankEnv({{"OMPI_COMM_WORLD_RANK", "1"},
                                     {"OMPI_COMM_WORLD_SIZE", "2"},
                                     {"OMPI_MCA_ess_base_jobid", "77"},
                                     {"MASTER_ADDR", "127.0.0.1"}});
  CHECK(r.jobToken == "job:77");
  std::string w = ds::weakTokenWarning(r);
  CHECK_THAT(w, Catch::Contains("DS_JOB_TOKEN is not set") && Catch::Contains("guessable") &&
                    Catch::Contains("127.0.0.1:29500") && Catch::Contains("export DS_JOB_TOKEN"));
  // A fresh process: the warning is logged exactly once however often the env is derived, and
  // not at all for a single rank or with a token.
  std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::string out;
  int rc = ds::test::runCommand("DS_LOG_LEVEL=info " + self + " '[.weak_token]' 2>&1", &out,
                                std::chrono::seconds(60));
  INFO(out);
  CHECK(rc == 0);
  size_t first = out.find("DS_JOB_TOKEN is not set");
  REQUIRE(first != std::string::npos);
  CHECK(out.find("DS_JOB_TOKEN is not set", first + 1) == std::string::npos);
  CHECK_THAT(out, Catch::Contains("Open MPI"));
}
