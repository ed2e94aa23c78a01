// Host memory (runtime/device/host_memory.h): the memory cgroup that leaves the least, v1 or v2,
// walking from the process's cgroup up to the hierarchy's root, over cgroup folders made here;
// and, where this process may make a real v1 or v2 memory cgroup (root), a `dsrt train` inside
// one with a limit below its plan's need is refused before the first step, naming the cgroup.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>

#include "ds/config.h"
#include "runtime/device/host_memory.h"
#include "tests/support/skip.h"
#include "tests/support/spawn_ranks.h"

using ds::runtime::cgroupMemory;
using ds::runtime::hostMemory;
using ds::test::TempDir;

namespace {

void put(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

void mkdirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i)
    if (i == path.size() || path[i] == '/') ::mkdir(path.substr(0, i).c_str(), 0700);
}

}  // namespace

TEST_CASE("host memory: the v1 memory cgroup leaving the least, up to the root", "[unit]") {
  TempDir mount;
  const std::string job = mount.path() + "/slurm/job_7", step = job + "/step_0";
  mkdirs(step);
  // The root and the step have no limit (v1 writes ~2^63); the job 1 GiB with 700 MiB in use,
  // 100 MiB of it inactive page cache: 1024 - 600 = 424 MiB left.
  put(mount.path() + "/memory.limit_in_bytes", "9223372036854771712\n");
  put(mount.path() + "/memory.usage_in_bytes", "5000000000\n");
  put(job + "/memory.limit_in_bytes", std::to_string(1024ull << 20) + "\n");
  put(job + "/memory.usage_in_bytes", std::to_string(700ull << 20) + "\n");
  put(job + "/memory.stat", "cache 1\ntotal_inactive_file " + std::to_string(100ull << 20) + "\n");
  put(step + "/memory.limit_in_bytes", "9223372036854771712\n");
  put(step + "/memory.usage_in_bytes", "1\n");
  const auto got =
      cgroupMemory("4:memory:/slurm/job_7/step_0\n0::/\n", mount.path(), mount.path() + "/none");
  CHECK(got.availableBytes == (424ull << 20));
  CHECK_THAT(got.source, Catch::Contains("/slurm/job_7") && Catch::Contains("limit 1024 MiB") &&
                             !Catch::Contains("step_0"));
  // No memory line: no cgroup figure.
  CHECK(cgroupMemory("3:cpu:/x\n", mount.path(), mount.path()).availableBytes == 0);
}

TEST_CASE("host memory: v2's memory.max, 'max' meaning none, usage over the limit leaves 0",
          "[unit]") {
  TempDir mount;
  const std::string pod = mount.path() + "/kubepods/pod1", ctr = pod + "/ctr";
  mkdirs(ctr);
  put(pod + "/memory.max", "max\n");
  put(pod + "/memory.current", "1\n");
  put(ctr + "/memory.max", std::to_string(512ull << 20) + "\n");
  put(ctr + "/memory.current", std::to_string(128ull << 20) + "\n");
  put(ctr + "/memory.stat", "anon 1\ninactive_file " + std::to_string(28ull << 20) + "\n");
  auto got = cgroupMemory("0::/kubepods/pod1/ctr\n", "/nonexistent", mount.path());
  CHECK(got.availableBytes == (412ull << 20));
  CHECK_THAT(got.source, Catch::Contains("/kubepods/pod1/ctr"));
  put(ctr + "/memory.current", std::to_string(600ull << 20) + "\n");
  put(ctr + "/memory.stat", "inactive_file 0\n");
  got = cgroupMemory("0::/kubepods/pod1/ctr\n", "/nonexistent", mount.path());
  CHECK(got.availableBytes == 1);  // nothing left (1 byte: known, not "unknown")
}

TEST_CASE("host memory: this process's figure is known and at most MemAvailable", "[unit]") {
  const auto got = hostMemory();
  CHECK(got.availableBytes > 0);
  CHECK(!got.source.empty());
}

TEST_CASE("host memory: dsrt train in a memory cgroup below its need is refused up front",
          "[e2e]") {
  // A real cgroup: v1's memory hierarchy, or v2 with the memory controller enabled for children.
  std::string parent, limitFile;
  if (::access("/sys/fs/cgroup/memory/cgroup.procs", W_OK) == 0) {
    parent = "/sys/fs/cgroup/memory";
    limitFile = "memory.limit_in_bytes";
  } else {
    std::ifstream controllers("/sys/fs/cgroup/cgroup.subtree_control");
    std::string text((std::istreambuf_iterator<char>(controllers)), {});
    if (text.find("memory") != std::string::npos &&
        ::access("/sys/fs/cgroup/cgroup.procs", W_OK) == 0) {
      parent = "/sys/fs/cgroup";
      limitFile = "memory.max";
    }
  }
  if (parent.empty()) DS_SKIP("no writable memory cgroup here (needs root and v1 memory or v2)");
  const std::string group = parent + "/ds-host-memory-test-" + std::to_string(::getpid());
  if (::mkdir(group.c_str(), 0700) != 0) DS_SKIP("cannot make a cgroup under " << parent);
  struct Remove {
    std::string path;
    ~Remove() { ::rmdir(path.c_str()); }  // empty once the run's processes have exited
  } remove{group};
  put(group + "/" + limitFile, std::to_string(256ull << 20) + "\n");
  TempDir dir;
  // GPT-2 124M shapes at stage 0, fp32: ~1.9 GB of states, far over 256 MiB.
  std::string out;
  const std::string cmd = "sh -c 'echo $$ > " + group + "/cgroup.procs && exec " +
                          std::string(DS_BINARY_DIR) +
                          "/dsrt train --set model.gpt.n_layer=12 --set model.gpt.n_embd=768 "
                          "--set model.gpt.n_head=12 --set model.gpt.vocab_size=50257 --set "
                          "train.steps=1 --set train.device=cpu --set train.checkpoint.dir=" +
                          dir.path() + "'";
  const int rc = ds::test::runCommand(cmd, &out, std::chrono::seconds(120));
  INFO(out);
  CHECK(rc == 2);
  CHECK(out.find("checked before allocating them") != std::string::npos);
  CHECK(out.find("by the memory cgroup /ds-host-memory-test-") != std::string::npos);
  CHECK(out.find("limit 256 MiB") != std::string::npos);
  CHECK(out.find("| loss") == std::string::npos);
}
