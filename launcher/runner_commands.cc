// Runner command builders (see runner_commands.h).
#include "launcher/runner_commands.h"

#include "core/error.h"
#include "launcher/job_spec_codec.h"
#include "launcher/launcher_knobs.h"
#include "launcher/shell_quote.h"

namespace ds::launcher {

namespace {

std::string joinHosts(const JobSpec& spec) {
  std::string out;
  for (const auto& h : spec.hosts) out += (out.empty() ? "" : ",") + h.host;
  return out;
}

void append(std::vector<std::string>* argv, const std::vector<std::string>& more) {
  argv->insert(argv->end(), more.begin(), more.end());
}

// Slots per host, which every MPI-style runner needs equal ("MPICH requires ...").
int equalSlots(const JobSpec& spec, const char* name) {
  int per = static_cast<int>(spec.hosts.at(0).slots.size());
  for (const auto& h : spec.hosts)
    if (static_cast<int>(h.slots.size()) != per)
      throw ConfigError(fmt::format(
          "{} requires same number of devices per node (host '{}' has {}, host '{}' has {})", name,
          spec.hosts[0].host, per, h.host, h.slots.size()));
  return per;
}

// mpirun/srun start ranks by count: a slot list other than 0..n-1 cannot be honoured.
void requireDenseSlots(const JobSpec& spec, const char* name) {
  for (const auto& h : spec.hosts)
    for (size_t i = 0; i < h.slots.size(); ++i)
      if (h.slots[i] != static_cast<int>(i))
        throw ConfigError(fmt::format(
            "the {} launcher starts ranks by count and cannot use only slot {} on host '{}'; "
            "select whole hosts (--include host, --num_gpus N) or use --launcher ssh",
            name, h.slots[i], h.host));
}

bool mentionsMca(const std::vector<std::string>& args, const std::string& param) {
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if ((args[i] == "--mca" || args[i] == "-mca") && args[i + 1] == param) return true;
  return false;
}

bool mentionsBtl(const std::vector<std::string>& args) { return mentionsMca(args, "btl"); }

}  // namespace

std::string pdshEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    out += c;
    if (c == '%') out += '%';
  }
  return out;
}

AgentCommand agentCommand(const JobSpec& spec, const std::string& dsrunPath, bool tokenStdin) {
  std::vector<std::string> envWords;
  for (const auto& [k, v] : spec.exports) envWords.push_back(k + "=" + v);
  AgentCommand c;
  c.prefix = "cd " + shellQuote(spec.cwd.empty() ? "." : spec.cwd) + " && exec env ";
  if (!envWords.empty()) c.prefix += shellJoin(envWords) + " ";
  c.prefix +=
      shellQuote(dsrunPath) + " --agent --job " + shellQuote(encodeJobSpec(spec)) + " --node_rank ";
  if (tokenStdin) c.suffix = " --token_stdin";
  return c;
}

std::vector<std::string> sshCommands(const JobSpec& spec, const std::string& dsrunPath) {
  AgentCommand c = agentCommand(spec, dsrunPath, /*tokenStdin=*/true);
  std::vector<std::string> out;
  for (size_t i = 0; i < spec.hosts.size(); ++i) out.push_back(c.forNode(std::to_string(i)));
  return out;
}

Invocation pdshInvocation(const JobSpec& spec, const std::string& dsrunPath, const EnvMap& env) {
  AgentCommand c = agentCommand(spec, dsrunPath, /*tokenStdin=*/false);
  Invocation inv;
  inv.argv = {"pdsh", "-S", "-f", "1024", "-R", "ssh", "-w", joinHosts(spec)};
  append(&inv.argv, shellSplit(spec.launcherArgs, "--launcher_args"));
  inv.argv.push_back(pdshEscape(c.prefix) + "%n" + pdshEscape(c.suffix));
  auto old = knobString(knobs::kPdshSshArgsAppend, env);
  std::string sshArgs = old && !old->empty() ? *old + " " : "";
  sshArgs += "-tt -o SendEnv=DS_JOB_TOKEN";
  if (spec.sshPort > 0) sshArgs += " -p " + std::to_string(spec.sshPort);
  inv.env["PDSH_SSH_ARGS_APPEND"] = sshArgs;
  inv.env["PDSH_RCMD_TYPE"] = "ssh";
  inv.env["DS_JOB_TOKEN"] = spec.jobToken;
  return inv;
}

JobSpec wrapRanks(const JobSpec& spec, const std::string& dsrunPath) {
  JobSpec out = spec;
  out.program = {dsrunPath, "--rank_exec", "--"};
  append(&out.program, spec.program);
  return out;
}

EnvMap jobEnv(const JobSpec& spec) {
  EnvMap e;
  e["MASTER_ADDR"] = spec.masterAddr;
  e["MASTER_PORT"] = std::to_string(spec.masterPort);
  e["DS_JOB_ID"] = spec.jobId;
  // dsrun --comm_backend: a command-line choice, so it outranks the plan (DS_COMM_BACKEND would
  // not).
  if (!spec.commBackend.empty()) e["DS_COMM_BACKEND_FLAG"] = spec.commBackend;
  return e;
}

Invocation openMpiInvocation(const JobSpec& spec, const std::string& hostfilePath, bool asRoot) {
  requireDenseSlots(spec, "openmpi");
  std::vector<std::string> extra = shellSplit(spec.launcherArgs, "--launcher_args");
  Invocation inv;
  inv.hostfilePath = hostfilePath;
  for (const auto& h : spec.hosts)
    inv.hostfileText += fmt::format("{} slots={}\n", h.host, h.slots.size());
  inv.argv = {"mpirun", "-n", std::to_string(spec.worldSize()), "--hostfile", hostfilePath};
  if (asRoot) inv.argv.push_back("--allow-run-as-root");
  if (!mentionsBtl(extra)) append(&inv.argv, {"--mca", "btl", "^openib"});
  if (spec.sshPort > 0 && !mentionsMca(extra, "plm_rsh_args"))
    append(&inv.argv, {"--mca", "plm_rsh_args", "-p " + std::to_string(spec.sshPort)});
  EnvMap env = jobEnv(spec);
  for (const auto& [k, v] : spec.exports) env[k] = v;
  env["DS_JOB_TOKEN"] = spec.jobToken;
  for (const auto& [k, v] : env) append(&inv.argv, {"-x", k});
  append(&inv.argv, extra);
  append(&inv.argv, spec.program);
  inv.env = std::move(env);
  return inv;
}

Invocation mpichInvocation(const JobSpec& spec, const std::string& mpiexec) {
  requireDenseSlots(spec, "mpich");
  int per = equalSlots(spec, "MPICH");
  Invocation inv;
  inv.argv = {
      mpiexec,  "-n",           std::to_string(spec.worldSize()), "-ppn", std::to_string(per),
      "-hosts", joinHosts(spec)};
  EnvMap env = jobEnv(spec);
  for (const auto& [k, v] : spec.exports) env[k] = v;
  for (const auto& [k, v] : env) append(&inv.argv, {"-genv", k, v});
  append(&inv.argv, {"-genvlist", "DS_JOB_TOKEN"});
  append(&inv.argv, shellSplit(spec.launcherArgs, "--launcher_args"));
  append(&inv.argv, spec.program);
  inv.env["DS_JOB_TOKEN"] = spec.jobToken;
  return inv;
}

Invocation slurmInvocation(const JobSpec& spec, bool withNodelist) {
  requireDenseSlots(spec, "slurm");
  int per = equalSlots(spec, "Slurm");
  Invocation inv;
  inv.argv = {"srun",
              "-n",
              std::to_string(spec.worldSize()),
              "--nodes",
              std::to_string(spec.hosts.size()),
              "--ntasks-per-node",
              std::to_string(per)};
  if (withNodelist) inv.argv.push_back("--nodelist=" + joinHosts(spec));
  inv.argv.push_back("--export=ALL");
  inv.argv.push_back("--kill-on-bad-exit=1");  // one task failing stops the others
  append(&inv.argv, shellSplit(spec.launcherArgs, "--launcher_args"));
  inv.argv.push_back("--job-name=" + spec.jobId);  // after --launcher_args: the cancel needs it
  append(&inv.argv, spec.program);
  // The job srun allocated is named after the job; inside an allocation (salloc, sbatch) only the
  // step is, and squeue lists it as "<job>.<step> <name>".
  inv.cancelArgv = {"/bin/sh", "-c",
                    "scancel --name=\"$1\"; squeue -h -s -o '%i %j' | while read -r step name; "
                    "do [ \"$name\" = \"$1\" ] && scancel \"$step\"; done",
                    "dsrun-slurm-cancel", spec.jobId};
  inv.env = jobEnv(spec);
  for (const auto& [k, v] : spec.exports) inv.env[k] = v;
  inv.env["DS_JOB_TOKEN"] = spec.jobToken;
  return inv;
}

std::string describeInvocation(const Invocation& inv) {
  std::string out;
  for (const auto& [k, v] : inv.env)
    out += k + "=" + (k == "DS_JOB_TOKEN" ? std::string("<hidden>") : shellQuote(v)) + " ";
  return out + shellJoin(inv.argv);
}

}  // namespace ds::launcher
