// The environment knobs dsrun reads (the node agent's teardown, the ssh runner, .dsenv, and
// other programs' variables it honours), and dsrun's registry: core's table plus this one, what
// `dsrun --help-env` lists. Declarations only: read them with core/knobs.h's accessors. Not the
// variables dsrun forwards by family (NCCL*, DS_*, OMP_*, UCX*, PYTHON*; env_exports.h).
#pragma once

#include "core/core_knobs.h"

// Declarations name only the fields they set (designated initializers; the rest keep their
// defaults), which GCC's -Wmissing-field-initializers would flag.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace ds::knobs {

// launcher/agent/node_agent.cc, rank_exec.cc
inline constexpr Knob kKillGrace{
    .name = "DS_KILL_GRACE",
    .type = KnobType::kSeconds,
    .dflt = "5",
    .doc =
        "Seconds between SIGTERM and SIGKILL when the node agent, or the rank wrapper under "
        "mpich and slurm, stops its ranks (one grace period for the whole job: every rank is "
        "stopped at once).",
    .readBy = kReadByDsrun,
    .lo = 0,
    .hi = 3600};

// launcher/ssh/: the libssh runner.
inline constexpr Knob kSshConfig{
    .name = "DS_SSH_CONFIG",
    .type = KnobType::kPath,
    .doc =
        "The ssh_config the ssh runner and the master-address alias lookup honour, like "
        "ssh -F (Host aliases, HostName, Port, User, IdentityFile, UserKnownHostsFile, "
        "ConnectTimeout). Unset or empty: ~/.ssh/config then /etc/ssh/ssh_config, with ~ the "
        "user's home in the password database as for OpenSSH (not $HOME).",
    .readBy = kReadByDsrun};
inline constexpr Knob kSshConnectTimeout{
    .name = "DS_SSH_CONNECT_TIMEOUT",
    .type = KnobType::kInt,
    .dflt = "0",
    .doc =
        "Seconds libssh waits to connect to a host (TCP connect and handshake); 0: the "
        "ssh_config's ConnectTimeout, else 10. A host that does not answer in time fails the "
        "job before anything starts.",
    .readBy = kReadByDsrun,
    .lo = 0,
    .hi = 3600};
inline constexpr Knob kSshLogLevel{
    .name = "DS_SSH_LOG_LEVEL",
    .type = KnobType::kInt,
    .dflt = "0",
    .doc =
        "libssh's own log on stderr, for debugging a connection: 0 silent, 1 warnings, "
        "2 protocol, 3 packets, 4 functions.",
    .readBy = kReadByDsrun,
    .lo = 0,
    .hi = 4};
inline constexpr Knob kSshTeardownGrace{
    .name = "DS_SSH_TEARDOWN_GRACE",
    .type = KnobType::kInt,
    .dflt = "15",
    .doc =
        "Once the job is stopped (a failure, a signal), seconds the ssh runner waits for "
        "each host's agent to end after sending EOF before it closes the connection (the "
        "agent then sees the channel close and stops its ranks).",
    .readBy = kReadByDsrun,
    .lo = 1,
    .hi = 3600};

// launcher/env_exports.cc
inline constexpr Knob kEnvFile{
    .name = "DS_ENV_FILE",
    .type = KnobType::kPath,
    .dflt = ".deepspeed_env",
    .doc =
        "The exports file read from ~ then . (only this path when absolute), as in DeepSpeed; "
        "unset, ~ and . are each searched for .deepspeed_env then .dsenv. Set but missing is "
        "an error. Empty counts as unset.",
    .readBy = kReadByDsrun};

// Other programs' variables dsrun reads.
inline constexpr Knob kHome{
    .name = "HOME",
    .type = KnobType::kPath,
    .doc =
        "Where ~/.deepspeed_env and ~/.dsenv are looked up. Not used for ~/.ssh (the password "
        "database's home, as OpenSSH), but for a user without a password entry.",
    .readBy = kReadByDsrun,
    .origin = kThirdParty};
inline constexpr Knob kTmpDir{
    .name = "TMPDIR",
    .type = KnobType::kPath,
    .dflt = "/tmp",
    .doc =
        "Where dsrun keeps its private per-user folder dsrun-<uid> (mode 0700; the mpirun "
        "hostfile of --launcher openmpi). Empty counts as unset.",
    .readBy = kReadByDsrun,
    .origin = kThirdParty};
inline constexpr Knob kPath{
    .name = "PATH",
    .type = KnobType::kString,
    .dflt = "/usr/bin:/bin",
    .doc = "Where pdsh, mpirun, mpiexec and srun are looked up before a job starts.",
    .readBy = kReadByDsrun,
    .origin = kThirdParty};
inline constexpr Knob kKmpAffinity{
    .name = "KMP_AFFINITY",
    .type = KnobType::kString,
    .doc = "Set: --bind_cores_to_rank is an error (the two conflict).",
    .readBy = kReadByDsrun,
    .origin = kThirdParty};
inline constexpr Knob kPdshSshArgsAppend{
    .name = "PDSH_SSH_ARGS_APPEND",
    .type = KnobType::kString,
    .doc = "pdsh runner: kept, with dsrun's ssh options appended.",
    .readBy = kReadByDsrun,
    .origin = kThirdParty};

inline constexpr const Knob* kLauncherKnobList[] = {
    &kKillGrace,
    &kSshConfig,
    &kSshConnectTimeout,
    &kSshLogLevel,
    &kSshTeardownGrace,
    &kEnvFile,
    &kHome,
    &kTmpDir,
    &kPath,
    &kKmpAffinity,
    &kPdshSshArgsAppend,
};
inline constexpr KnobTable kLauncherKnobs{"launcher", kLauncherKnobList};

}  // namespace ds::knobs

#pragma GCC diagnostic pop

namespace ds::launcher {

inline constexpr KnobTable kDsrunKnobTables[] = {knobs::kCoreKnobs, knobs::kLauncherKnobs};

}  // namespace ds::launcher
