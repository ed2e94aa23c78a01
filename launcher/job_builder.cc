// Flags -> JobSpec (see job_builder.h). Order follows DeepSpeed's runner (reference/launcher.md
// §4): hostfile, visible devices, filters, runner, master address, then per-job values.
#include "launcher/job_builder.h"

#include <sys/stat.h>

#include <algorithm>
#include <functional>

#include "core/error.h"
#include "launcher/env_exports.h"
#include "launcher/hostfile.h"
#include "launcher/job_spec_codec.h"
#include "launcher/job_token.h"
#include "launcher/launcher_knobs.h"
#include "launcher/local_host.h"
#include "launcher/python_program.h"
#include "launcher/resources.h"
#include "launcher/shell_quote.h"
#include "launcher/ssh_alias.h"

namespace ds::launcher {

namespace {

constexpr const char* kDsrtCommands[] = {"train", "hello", "comm-bench", "prepare-data",
                                         "export-checkpoint"};

// DeepSpeed's visible-devices rule (reference/launcher.md §4 step 4), local runs only.
void applyVisibleDevices(const CliOptions& o, const EnvMap& env, ResourceFilter* f, int* poolSlots,
                         std::vector<std::string>* notices) {
  const std::string v = knobString(knobs::kCudaVisibleDevices, env).value_or("");
  if (v.empty()) return;
  if (!o.include.empty() || !o.exclude.empty() || o.numNodes > 1 || o.numGpus > 0) {
    notices->push_back(fmt::format(
        "Detected VISIBLE_DEVICES={} but ignoring it because one or several of "
        "--include/--exclude/--num_gpus/--num_nodes cl args were used. If you want to use "
        "CUDA_VISIBLE_DEVICES don't pass any of these arguments to dsrun.",
        v));
    return;
  }
  int maxId = -1;
  std::string id;
  for (size_t i = 0; i <= v.size(); ++i) {
    if (i == v.size() || v[i] == ',') {
      if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos || id.size() > 6) {
        notices->push_back(fmt::format(
            "CUDA_VISIBLE_DEVICES={} holds non-numeric ids; ignoring it for slot selection", v));
        return;
      }
      maxId = std::max(maxId, std::stoi(id));
      id.clear();
    } else {
      id += v[i];
    }
  }
  f->include = "localhost:" + v;
  *poolSlots = std::max(*poolSlots, maxId + 1);
  notices->push_back(
      fmt::format("Detected VISIBLE_DEVICES={}: setting --include=localhost:{}", v, v));
}

RunnerKind chooseRunner(const CliOptions& o, const std::vector<HostSlots>& hosts,
                        bool haveHostfile) {
  std::string name = o.launcher;
  if (name.empty() && o.commBackend == "mpi") name = "openmpi";
  if (!name.empty() && name != "ssh" && name != "pdsh" && name != "openmpi" && name != "mpich" &&
      name != "slurm")
    throw ConfigError(fmt::format(
        "--launcher: unknown launcher '{}' (expected one of ssh, pdsh, openmpi, mpich, slurm)",
        o.launcher));
  if (o.commBackend == "mpi" && (name == "ssh" || name == "pdsh"))
    throw ConfigError(fmt::format(
        "--comm_backend mpi needs ranks started by mpirun or srun, not by the {} launcher: use "
        "--launcher openmpi (the default with mpi), mpich or slurm",
        name));
  if (o.noSsh) {
    if (o.commBackend == "mpi" && o.launcher.empty())
      throw ConfigError(
          "--comm_backend mpi needs ranks started by mpirun or srun, but --no_ssh "
          "starts them itself: use --comm_backend gloo or nccl with --no_ssh");
    if (name == "openmpi" || name == "mpich" || name == "slurm")
      throw ConfigError(
          fmt::format("--no_ssh runs this node's ranks itself; it cannot be "
                      "combined with --launcher {}",
                      name));
    return RunnerKind::kLocal;
  }
  // mpirun/srun were asked for by name: use them even for one host (gpt-neox#849).
  if (name == "openmpi" || name == "mpich" || name == "slurm")
    return runnerFromName(name, "--launcher");
  bool multi = o.forceMulti || hosts.size() > 1 ||
               (haveHostfile && hosts.size() == 1 && !isLocalHost(hosts[0].host));
  if (!multi) return RunnerKind::kLocal;
  return name.empty() ? RunnerKind::kSsh : runnerFromName(name, "--launcher");
}

bool isLoopbackName(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// --master_addr, else node 0's address as the other hosts reach it: its ssh_config HostName when
// it is an alias, else its hostfile name (never guessed with `ssh host hostname -I`).
std::string deriveMasterAddr(const CliOptions& o, const JobSpec& spec, const EnvMap& env) {
  if (!o.masterAddr.empty()) return o.masterAddr;
  std::string first = spec.hosts.at(0).host;
  first = first.substr(first.find('@') == std::string::npos ? 0 : first.find('@') + 1);
  std::string addr = sshHostName(first, env).value_or(first);
  if (isLocalHost(addr) && (spec.runner == RunnerKind::kLocal || spec.hosts.size() == 1))
    return "127.0.0.1";
  if (isLoopbackName(addr)) {
    for (const auto& h : spec.hosts) {
      std::string name =
          h.host.substr(h.host.find('@') == std::string::npos ? 0 : h.host.find('@') + 1);
      if (!isLoopbackName(sshHostName(name, env).value_or(name)))
        throw ConfigError(fmt::format(
            "cannot derive MASTER_ADDR: node 0 is '{}', a loopback name that host '{}' cannot "
            "reach; pass --master_addr with this machine's address",
            first, h.host));
    }
  }
  if (!isResolvable(addr))
    throw ConfigError(fmt::format(
        "cannot derive MASTER_ADDR: the first host '{}' does not resolve here and no ssh config "
        "gives it a HostName; pass --master_addr with node 0's address",
        first));
  return addr;
}

// --no_ssh: every node runs dsrun itself, so the job id must agree without talking.
std::string sharedJobId(const JobSpec& spec, const EnvMap& env) {
  if (auto id = knobString(knobs::kJobId, env); id && !id->empty()) return *id;
  std::string key = spec.masterAddr + ":" + std::to_string(spec.masterPort);
  for (const auto& h : spec.hosts) key += "|" + h.host;
  for (const auto& a : spec.program) key += "|" + a;
  return fmt::format("dsrun-{:012x}", std::hash<std::string>{}(key)&0xffffffffffffULL);
}

}  // namespace

bool isDsrtCommand(const std::string& name) {
  for (const char* c : kDsrtCommands)
    if (name == c) return true;
  return false;
}

std::vector<std::string> resolveProgram(const std::vector<std::string>& program,
                                        const std::string& dsrunDir) {
  std::vector<std::string> out = program;
  if (!out.empty() && isDsrtCommand(out[0])) out.insert(out.begin(), dsrunDir + "/dsrt");
  return out;
}

std::vector<int> parseCoreList(const std::string& text) {
  std::vector<int> cores;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string part =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t dash = part.find('-');
    std::string a = part.substr(0, dash), b = dash == std::string::npos ? a : part.substr(dash + 1);
    auto num = [&](const std::string& s) {
      if (s.empty() || s.size() > 6 || s.find_first_not_of("0123456789") != std::string::npos)
        throw ConfigError(fmt::format(
            "--bind_core_list: Bad range '{}' in '{}' (expected N or A-B, comma-separated, "
            "ascending, no spaces)",
            part, text));
      return std::stoi(s);
    };
    int lo = num(a), hi = num(b);
    if (hi < lo || (!cores.empty() && lo <= cores.back()))
      throw ConfigError(
          fmt::format("--bind_core_list: Bad range '{}' in '{}' (ranges must "
                      "ascend and not overlap)",
                      part, text));
    for (int c = lo; c <= hi; ++c) cores.push_back(c);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return cores;
}

namespace {

// Checks that need no file: values in range, flags that need another flag.
void checkFlags(const CliOptions& o) {
  if (o.program.empty())
    throw ConfigError(
        "no program given: usage is dsrun [OPTIONS] PROGRAM [ARGS...] (e.g. "
        "dsrun --num_gpus 2 train; see --help)");
  if (!o.commBackend.empty() && o.commBackend != "gloo" && o.commBackend != "mpi" &&
      o.commBackend != "nccl")
    throw ConfigError(fmt::format(
        "--comm_backend: unknown backend '{}' (expected one of gloo, mpi, nccl)", o.commBackend));
  if (o.masterPort < 1 || o.masterPort > 65535)
    throw ConfigError(fmt::format("--master_port must be in [1, 65535], got {}", o.masterPort));
  if (o.sshPort < 0 || o.sshPort > 65535)
    throw ConfigError(fmt::format("--ssh_port must be in [1, 65535], got {}", o.sshPort));
  if (o.nodeRank != -1 && !o.noSsh)
    throw ConfigError("--node_rank is only meaningful with --no_ssh");
  shellSplit(o.launcherArgs, "--launcher_args");  // reject bad quoting now, not at launch
}

// Hostfile (or the local host), resource selection, runner and --no_ssh node.
void selectHosts(const CliOptions& o, const BuildContext& ctx, JobPlan* plan) {
  JobSpec& spec = plan->spec;
  std::optional<Hostfile> hostfile = loadHostfile(o.hostfile, o.hostfileExplicit);
  plan->hostfileGiven = hostfile.has_value();
  ResourceFilter filter{o.include, o.exclude, o.numNodes, o.numGpus};
  Hostfile pool;
  if (hostfile) {
    pool = *hostfile;
    spec.hostfile = hostfile->path;
  } else {
    int slots = ctx.gpuCount > 0 ? ctx.gpuCount : std::max(1, o.numGpus);
    applyVisibleDevices(o, ctx.env, &filter, &slots, &plan->notices);
    if (o.numNodes > 1)
      throw ConfigError("Num nodes is >1 but no extra nodes available via hostfile");
    pool.hosts.push_back({"localhost", slots, 0, 0});
  }
  spec.hosts = selectResources(pool, filter);
  spec.runner = chooseRunner(o, spec.hosts, hostfile.has_value());
  if (!o.noSsh) return;
  int n = static_cast<int>(spec.hosts.size());
  if (o.nodeRank < 0 || o.nodeRank >= n)
    throw ConfigError(fmt::format(
        "Launching training without ssh, but --node_rank is not set correctly. (--node_rank "
        "{}: expected 0..{} for the {} selected host{})",
        o.nodeRank, n - 1, n, n == 1 ? "" : "s"));
  plan->noSsh = true;
  plan->nodeRank = o.nodeRank;
}

// DS_JOB_ID and DS_JOB_TOKEN: fresh random ones, or under --no_ssh values every node agrees on.
void assignIdentity(const BuildContext& ctx, JobPlan* plan) {
  JobSpec& spec = plan->spec;
  if (!plan->noSsh) {
    spec.jobId = newJobId();
    spec.jobToken = newJobToken();
    return;
  }
  spec.jobId = sharedJobId(spec, ctx.env);
  if (auto tok = knobString(knobs::kJobToken, ctx.env); tok && !tok->empty()) {
    spec.jobToken = *tok;
    return;
  }
  spec.jobToken = "job:" + spec.jobId;  // what a rank without a token derives (core/rank_env.h)
  plan->notices.push_back(
      "--no_ssh without DS_JOB_TOKEN in the environment: the store uses a token derived from "
      "the job id (not a secret); set the same DS_JOB_TOKEN on every node to authenticate");
}

// dsrt commands run the dsrt next to dsrun; Python programs take DeepSpeed's forms
// (python_program.h) with python3 from dsrun's PATH as DeepSpeed's sys.executable.
void resolveUserProgram(const CliOptions& o, const BuildContext& ctx, JobSpec* spec) {
  if (!o.program.empty() && isDsrtCommand(o.program[0]) && !o.module) {
    spec->program = resolveProgram(o.program, ctx.dsrunPath.substr(0, ctx.dsrunPath.rfind('/')));
    return;
  }
  std::string python = findOnPath("python3", ctx.env);
  ProgramForm form =
      pythonProgramForm(o.program, o.module, o.noPython, python.empty() ? "python3" : python);
  spec->program = std::move(form.program);
  spec->localRankAt = form.localRankAt;
}

// Per-rank options the node agent applies: logs, core binding, pid file.
void rankOptions(const CliOptions& o, const BuildContext& ctx, JobSpec* spec) {
  spec->noLocalRank = o.noLocalRank;
  if (!o.eachRankLog.empty() && o.eachRankLog != "None") {
    std::string dir = o.eachRankLog[0] == '/' ? o.eachRankLog : ctx.cwd + "/" + o.eachRankLog;
    struct stat st {};
    if (::stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
      throw ConfigError(
          fmt::format("--enable_each_rank_log {} should not be a file, it should "
                      "be a directory.",
                      o.eachRankLog));
    spec->eachRankLogDir = dir;
  }
  spec->bindCoresToRank = o.bindCoresToRank || !o.bindCoreList.empty();
  if (!o.bindCoreList.empty()) parseCoreList(o.bindCoreList);
  spec->bindCoreList = o.bindCoreList;
  if (spec->bindCoresToRank && knobIsSet(knobs::kKmpAffinity, ctx.env))
    throw ConfigError(
        "KMP_AFFINITY is set and conflicts with --bind_cores_to_rank: unset "
        "KMP_AFFINITY or drop --bind_cores_to_rank");
  if (o.savePid) spec->savePidFile = fmt::format("/tmp/{}.dsrun", ctx.pid);
}

}  // namespace

JobPlan buildJobPlan(const CliOptions& o, const BuildContext& ctx) {
  checkFlags(o);
  JobPlan plan;
  JobSpec& spec = plan.spec;
  selectHosts(o, ctx, &plan);
  spec.launcherArgs = o.launcherArgs;
  spec.masterPort = o.masterPort;
  spec.masterAddr = deriveMasterAddr(o, spec, ctx.env);
  resolveUserProgram(o, ctx, &spec);
  assignIdentity(ctx, &plan);
  spec.commBackend = o.commBackend;
  spec.exports = collectExports(ctx.env, o.exports, dsenvFiles(ctx.env, ctx.cwd));
  if (spec.runner != RunnerKind::kLocal) {
    // As DeepSpeed's multi-node path: remote ranks import from the launch directory too.
    auto py = spec.exports.find("PYTHONPATH");
    std::string old = py == spec.exports.end() ? "" : py->second;
    spec.exports["PYTHONPATH"] = old.empty() ? ctx.cwd : ctx.cwd + ":" + old;
  }
  rankOptions(o, ctx, &spec);
  spec.sshPort = o.sshPort;
  spec.gpuHost = ctx.gpuCount > 0;  // the head's view; an agent on another host may differ
  spec.cwd = ctx.cwd;
  return plan;
}

}  // namespace ds::launcher
