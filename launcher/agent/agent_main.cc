// `dsrun --agent --job <b64> --node_rank N [--token_stdin]`: the node agent as started on a host
// by the ssh or pdsh runner. The token arrives as the first stdin line (ssh) or in DS_JOB_TOKEN
// (pdsh SendEnv); with --token_stdin, stdin then stays open as the watchdog: EOF = the session
// is gone, so the ranks are torn down (SSH signal requests are ignored for root). Under pdsh
// (ssh -tt) stdin is the session's pty: its hangup (SIGHUP, then EOF/EIO) does the same.
// This host's own GPUs count: a job from a GPU-less head still gets CUDA_VISIBLE_DEVICES here.
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "core/core_knobs.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "launcher/agent/node_agent.h"
#include "launcher/job_spec_codec.h"
#include "launcher/local_host.h"
#include "launcher/runners.h"

namespace ds::launcher {
namespace {

struct AgentArgs {
  std::string job;
  int nodeRank = -1;
  bool tokenStdin = false;
};

AgentArgs parseAgentArgs(int argc, char** argv) {
  AgentArgs a;
  bool haveNode = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool inlineValue = false;
    if (auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      inlineValue = true;
    }
    auto takeValue = [&]() {
      if (inlineValue) return value;
      if (i + 1 >= argc) throw ConfigError(fmt::format("dsrun --agent: {} needs a value", arg));
      return std::string(argv[++i]);
    };
    if (arg == "--agent") continue;
    if (arg == "--job") a.job = takeValue();
    else if (arg == "--node_rank" || arg == "--node-rank") {
      a.nodeRank = static_cast<int>(parseInt(takeValue(), "dsrun --agent --node_rank", 0, 1 << 20));
      haveNode = true;
    } else if (arg == "--token_stdin" || arg == "--token-stdin") a.tokenStdin = true;
    else
      throw ConfigError(
          fmt::format("dsrun --agent: unknown argument '{}' (expected --job <b64> "
                      "--node_rank N [--token_stdin])",
                      argv[i]));
  }
  if (a.job.empty()) throw ConfigError("dsrun --agent: --job <b64> is required");
  if (!haveNode) throw ConfigError("dsrun --agent: --node_rank N is required");
  return a;
}

// Reads the line "DS_JOB_TOKEN=<token>" from fd 0 byte by byte (nothing past it is consumed).
std::string readTokenLine(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string line;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    struct pollfd p {
      0, POLLIN, 0
    };
    int n = left.count() > 0 ? ::poll(&p, 1, static_cast<int>(left.count())) : 0;
    if (n < 0 && errno == EINTR) continue;
    if (n == 0)
      throw TimeoutError(
          fmt::format("dsrun --agent --token_stdin: no DS_JOB_TOKEN line on stdin "
                      "within {} ms (DS_TIMEOUT)",
                      timeout.count()));
    char c;
    ssize_t r = ::read(0, &c, 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      throw ConfigError("dsrun --agent --token_stdin: stdin closed before the DS_JOB_TOKEN line");
    if (c == '\n') break;
    if (line.size() > 4096)
      throw ConfigError("dsrun --agent --token_stdin: first stdin line is too long for a token");
    line.push_back(c);
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  const std::string key = "DS_JOB_TOKEN=";
  if (line.rfind(key, 0) != 0 || line.size() == key.size())
    throw ConfigError(
        "dsrun --agent --token_stdin: expected the first stdin line to be "
        "DS_JOB_TOKEN=<token>");
  return line.substr(key.size());
}

int runAgent(int argc, char** argv) {
  AgentArgs a = parseAgentArgs(argc, argv);
  JobSpec spec = decodeJobSpec(a.job);
  AgentOptions opt = defaultAgentOptions();
  spec.gpuHost = agentGpuHost(spec.gpuHost, localGpuCount());
  if (a.tokenStdin) {
    spec.jobToken = readTokenLine(defaultTimeout());
    opt.watchFd = 0;
  } else if (auto t = knobString(knobs::kJobToken); t && !t->empty()) {
    spec.jobToken = *t;
    if (::isatty(0)) opt.watchFd = 0;  // pdsh's ssh -tt: the pty hangs up when ssh dies
  } else {
    throw ConfigError(
        "dsrun --agent: no job token: pass --token_stdin and write "
        "DS_JOB_TOKEN=<token> on stdin, or set DS_JOB_TOKEN (pdsh: the remote sshd "
        "needs 'AcceptEnv DS_JOB_TOKEN')");
  }
  if (a.nodeRank >= 0 && a.nodeRank < static_cast<int>(spec.hosts.size()))
    log::setLogIdentity(spec.hosts[a.nodeRank].host, -1);
  return runNodeAgent(spec, a.nodeRank, opt);
}

}  // namespace

int agentMain(int argc, char** argv) {
  try {
    return runAgent(argc, argv);
  } catch (const Error& e) {
    std::fprintf(stderr, "dsrun --agent: %s: %s\n", e.kind(), e.what());
    return exitCodeFor(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dsrun --agent: %s\n", e.what());
    return 1;
  }
}

}  // namespace ds::launcher
