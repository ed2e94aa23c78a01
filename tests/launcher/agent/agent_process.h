// Test harness: runs agentMain (`dsrun --agent ...`) in a forked child process with its stdout
// and stderr in files, the token on a stdin pipe or in DS_JOB_TOKEN. Real processes throughout;
// the caller waits with ds::test::waitChild (bounded).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "core/env.h"
#include "launcher/agent/unique_fd.h"
#include "launcher/job_spec.h"
#include "launcher/job_spec_codec.h"
#include "launcher/runners.h"

namespace ds::test {

constexpr const char* kTestToken = "0123456789abcdef0123456789abcdef";

// One local host with `n` slots running `program`; ranks see `marker` in their environment.
inline launcher::JobSpec localSpec(int n, std::vector<std::string> program,
                                   const std::string& marker, const std::string& cwd) {
  launcher::JobSpec s;
  launcher::HostSlots h{"localhost", {}};
  for (int i = 0; i < n; ++i) h.slots.push_back(i);
  s.hosts.push_back(h);
  s.masterAddr = "127.0.0.1";
  s.masterPort = 29512;
  s.jobId = "dsrun-agenttest";
  s.program = std::move(program);
  s.exports["DS_TEST_MARKER"] = marker;
  s.cwd = cwd;
  return s;
}

struct AgentProcess {
  pid_t pid = -1;
  launcher::UniqueFd stdinWrite;  // --token_stdin only: closing it is the session going away
};

// Starts `dsrun --agent --job <spec> --node_rank node [--token_stdin]` as a child process.
inline AgentProcess startAgent(const launcher::JobSpec& spec, int node, bool tokenStdin,
                               const std::string& outPath, const std::string& errPath,
                               const EnvMap& extraEnv = {},
                               const std::string& firstLine = std::string("DS_JOB_TOKEN=") +
                                                              kTestToken + "\n") {
  std::vector<std::string> args = {"dsrun",       "--agent",
                                   "--job",       launcher::encodeJobSpec(spec),
                                   "--node_rank", std::to_string(node)};
  if (tokenStdin) args.push_back("--token_stdin");
  launcher::Pipe in = launcher::makePipe("agent stdin");
  AgentProcess p;
  p.pid = ::fork();
  if (p.pid == 0) {
    int out = ::open(outPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = ::open(errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(err, 2);
    in.write.reset();  // else the agent would hold its own stdin open
    if (tokenStdin) ::dup2(in.read.get(), 0);
    else ::setenv("DS_JOB_TOKEN", kTestToken, 1);
    for (const auto& [k, v] : extraEnv) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int rc = launcher::agentMain(static_cast<int>(args.size()), argv.data());
    ::_exit(rc);
  }
  if (tokenStdin) {
    launcher::writeAll(in.write.get(), firstLine.data(), firstLine.size());
    p.stdinWrite = std::move(in.write);
  }
  return p;
}

}  // namespace ds::test
