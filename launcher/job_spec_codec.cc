// JobSpec <-> JSON <-> base64 (see job_spec_codec.h). Unknown keys are rejected so that a dsrun
// of another version on a remote host fails loudly instead of running a different job.
#include "launcher/job_spec_codec.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "launcher/base64.h"

namespace ds::launcher {

namespace {
using nlohmann::json;

constexpr int kFormatVersion = 1;

struct RunnerName {
  RunnerKind kind;
  const char* name;
};
constexpr RunnerName kRunnerNames[] = {
    {RunnerKind::kLocal, "local"},     {RunnerKind::kSsh, "ssh"},     {RunnerKind::kPdsh, "pdsh"},
    {RunnerKind::kOpenMpi, "openmpi"}, {RunnerKind::kMpich, "mpich"}, {RunnerKind::kSlurm, "slurm"},
};

template <typename T>
T field(const json& j, const char* key, const std::string& what) {
  auto it = j.find(key);
  if (it == j.end()) throw ConfigError(fmt::format("{}: missing key '{}'", what, key));
  try {
    return it->get<T>();
  } catch (const json::exception& e) {
    throw ConfigError(fmt::format("{}: key '{}' has the wrong type ({})", what, key, e.what()));
  }
}
}  // namespace

const char* runnerName(RunnerKind k) {
  for (const auto& r : kRunnerNames)
    if (r.kind == k) return r.name;
  return "?";
}

RunnerKind runnerFromName(const std::string& name, const std::string& what) {
  for (const auto& r : kRunnerNames)
    if (name == r.name) return r.kind;
  throw ConfigError(fmt::format(
      "{}: unknown launcher '{}' (expected one of local, ssh, pdsh, openmpi, mpich, slurm)", what,
      name));
}

std::string jobSpecToJson(const JobSpec& s) {
  json hosts = json::array();
  for (const auto& h : s.hosts) hosts.push_back({{"host", h.host}, {"slots", h.slots}});
  json j = {
      {"version", kFormatVersion},
      {"hosts", hosts},
      {"runner", runnerName(s.runner)},
      {"master_addr", s.masterAddr},
      {"master_port", s.masterPort},
      {"job_id", s.jobId},
      {"program", s.program},
      {"exports", s.exports},
      {"comm_backend", s.commBackend},
      {"no_local_rank", s.noLocalRank},
      {"local_rank_at", s.localRankAt},
      {"each_rank_log_dir", s.eachRankLogDir},
      {"bind_cores_to_rank", s.bindCoresToRank},
      {"bind_core_list", s.bindCoreList},
      {"save_pid_file", s.savePidFile},
      {"ssh_port", s.sshPort},
      {"launcher_args", s.launcherArgs},
      {"gpu_host", s.gpuHost},
      {"cwd", s.cwd},
      {"hostfile", s.hostfile},
  };
  return j.dump();
}

JobSpec jobSpecFromJson(const std::string& text, const std::string& what) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw ConfigError(fmt::format("{}: not valid JSON ({})", what, e.what()));
  }
  if (!j.is_object()) throw ConfigError(fmt::format("{}: expected a JSON object", what));
  static const char* kKeys[] = {"version",
                                "hosts",
                                "runner",
                                "master_addr",
                                "master_port",
                                "job_id",
                                "program",
                                "exports",
                                "comm_backend",
                                "no_local_rank",
                                "local_rank_at",
                                "each_rank_log_dir",
                                "bind_cores_to_rank",
                                "bind_core_list",
                                "save_pid_file",
                                "ssh_port",
                                "launcher_args",
                                "gpu_host",
                                "cwd",
                                "hostfile"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool known = false;
    for (const char* k : kKeys) known = known || it.key() == k;
    if (!known) throw ConfigError(fmt::format("{}: unknown key '{}'", what, it.key()));
  }
  int version = field<int>(j, "version", what);
  if (version != kFormatVersion)
    throw ConfigError(
        fmt::format("{}: job format version {} (this dsrun reads version {}; use "
                    "the same dsrun build on every host)",
                    what, version, kFormatVersion));
  JobSpec s;
  for (const auto& h : field<json>(j, "hosts", what)) {
    HostSlots hs;
    hs.host = field<std::string>(h, "host", what + " hosts[]");
    hs.slots = field<std::vector<int>>(h, "slots", what + " hosts[]");
    s.hosts.push_back(std::move(hs));
  }
  s.runner = runnerFromName(field<std::string>(j, "runner", what), what);
  s.masterAddr = field<std::string>(j, "master_addr", what);
  s.masterPort = field<int>(j, "master_port", what);
  s.jobId = field<std::string>(j, "job_id", what);
  s.program = field<std::vector<std::string>>(j, "program", what);
  s.exports = field<EnvMap>(j, "exports", what);
  s.commBackend = field<std::string>(j, "comm_backend", what);
  s.noLocalRank = field<bool>(j, "no_local_rank", what);
  s.localRankAt = field<int>(j, "local_rank_at", what);
  if (s.localRankAt < -1 || s.localRankAt > static_cast<int>(s.program.size()))
    throw ConfigError(fmt::format("{}: local_rank_at {} is outside the program's {} words", what,
                                  s.localRankAt, s.program.size()));
  s.eachRankLogDir = field<std::string>(j, "each_rank_log_dir", what);
  s.bindCoresToRank = field<bool>(j, "bind_cores_to_rank", what);
  s.bindCoreList = field<std::string>(j, "bind_core_list", what);
  s.savePidFile = field<std::string>(j, "save_pid_file", what);
  s.sshPort = field<int>(j, "ssh_port", what);
  s.launcherArgs = field<std::string>(j, "launcher_args", what);
  s.gpuHost = field<bool>(j, "gpu_host", what);
  s.cwd = field<std::string>(j, "cwd", what);
  s.hostfile = field<std::string>(j, "hostfile", what);
  return s;
}

std::string encodeJobSpec(const JobSpec& spec) { return base64UrlEncode(jobSpecToJson(spec)); }

JobSpec decodeJobSpec(const std::string& b64) {
  return jobSpecFromJson(base64UrlDecode(b64, "--job"), "--job");
}

}  // namespace ds::launcher
