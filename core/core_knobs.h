// The environment knobs core reads (logging, the default timeout, the rank contract and the
// launchers' variables it is derived from, core/rank_env.h). Declarations only: read them with
// core/knobs.h's accessors. Other components that read one of these use this declaration.
#pragma once

#include "core/knobs.h"

// Declarations name only the fields they set (designated initializers; the rest keep their
// defaults), which GCC's -Wmissing-field-initializers would flag.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace ds::knobs {

constexpr unsigned kBoth = kReadByDsrun | kReadByDsrt;
constexpr int64_t kMaxRanks = 1 << 20;

// core/log.cc
inline constexpr Knob kLogLevel{
    .name = "DS_LOG_LEVEL",
    .type = KnobType::kChoice,
    .dflt = "info",
    .doc = "Log threshold: error, warn, info or debug. Empty counts as unset.",
    .readBy = kBoth | kReadByBench,
    .choices = "error|warn|info|debug"};
inline constexpr Knob kDebug{
    .name = "DS_DEBUG",
    .type = KnobType::kFlag,
    .dflt = "0",
    .doc = "Any value but empty or 0 means DS_LOG_LEVEL=debug (DS_LOG_LEVEL wins when set).",
    .readBy = kBoth | kReadByBench};

// core/env.cc (defaultTimeout), comm/bootstrap.cc
inline constexpr Knob kTimeout{
    .name = "DS_TIMEOUT",
    .type = KnobType::kSeconds,
    .dflt = "300",
    .doc =
        "Default timeout of every blocking call (rendezvous, store requests, collectives, "
        "waits, the node agent reading its token), in seconds.",
    .readBy = kBoth | kReadByBench,
    .lo = 0};

// core/rank_env.cc: the rank contract dsrun sets (DESIGN.md §4.3); torchrun sets the same.
inline constexpr Knob kRank{
    .name = "RANK",
    .type = KnobType::kInt,
    .doc =
        "This rank's index in the job, below WORLD_SIZE. RANK or WORLD_SIZE set means the "
        "rank contract is in use (it beats mpirun's and srun's variables).",
    .readBy = kReadByDsrt | kReadByBench,
    .origin = KnobOrigin::kRankContract,
    .lo = 0,
    .hi = kMaxRanks - 1};
inline constexpr Knob kWorldSize{.name = "WORLD_SIZE",
                                 .type = KnobType::kInt,
                                 .doc = "Number of ranks in the job; needed with RANK.",
                                 .readBy = kReadByDsrt | kReadByBench,
                                 .origin = KnobOrigin::kRankContract,
                                 .lo = 1,
                                 .hi = kMaxRanks};
inline constexpr Knob kLocalRank{
    .name = "LOCAL_RANK",
    .type = KnobType::kInt,
    .dflt = "0",
    .doc =
        "Index of this rank on its node, below LOCAL_WORLD_SIZE; the nccl backend's device "
        "(modulo the visible devices).",
    .readBy = kReadByDsrt,
    .origin = KnobOrigin::kRankContract,
    .lo = 0,
    .hi = kMaxRanks - 1};
inline constexpr Knob kLocalWorldSize{.name = "LOCAL_WORLD_SIZE",
                                      .type = KnobType::kInt,
                                      .doc = "Ranks on this node; unset: LOCAL_SIZE, else 1.",
                                      .readBy = kReadByDsrt,
                                      .origin = KnobOrigin::kRankContract,
                                      .lo = 1,
                                      .hi = kMaxRanks};
inline constexpr Knob kLocalSize{
    .name = "LOCAL_SIZE",
    .type = KnobType::kInt,
    .dflt = "1",
    .doc = "Ranks on this node (Horovod's name; LOCAL_WORLD_SIZE wins).",
    .readBy = kReadByDsrt,
    .origin = KnobOrigin::kRankContract,
    .lo = 1,
    .hi = kMaxRanks};
inline constexpr Knob kCrossRank{.name = "CROSS_RANK",
                                 .type = KnobType::kInt,
                                 .dflt = "0",
                                 .doc = "Index of this rank's node, below CROSS_SIZE.",
                                 .readBy = kReadByDsrt,
                                 .origin = KnobOrigin::kRankContract,
                                 .lo = 0,
                                 .hi = kMaxRanks - 1};
inline constexpr Knob kCrossSize{.name = "CROSS_SIZE",
                                 .type = KnobType::kInt,
                                 .dflt = "1",
                                 .doc = "Number of nodes.",
                                 .readBy = kReadByDsrt,
                                 .origin = KnobOrigin::kRankContract,
                                 .lo = 1,
                                 .hi = kMaxRanks};
inline constexpr Knob kMasterAddr{
    .name = "MASTER_ADDR",
    .type = KnobType::kString,
    .doc =
        "Rank 0's address, where the rendezvous store listens; must not be empty. Unset: "
        "127.0.0.1 on one node, the first host of SLURM_JOB_NODELIST under srun, else an error.",
    .readBy = kReadByDsrt,
    .origin = KnobOrigin::kRankContract};
inline constexpr Knob kMasterPort{.name = "MASTER_PORT",
                                  .type = KnobType::kInt,
                                  .dflt = "29500",
                                  .doc = "The rendezvous store's port.",
                                  .readBy = kReadByDsrt,
                                  .origin = KnobOrigin::kRankContract,
                                  .lo = 1,
                                  .hi = 65535};
inline constexpr Knob kJobId{
    .name = "DS_JOB_ID",
    .type = KnobType::kString,
    .doc =
        "The job's id (store keys, logs). Unset: the launcher's job id. dsrun --no_ssh: "
        "shared by every node (unset: derived from the master, hosts and program).",
    .readBy = kBoth,
    .origin = KnobOrigin::kRankContract};
inline constexpr Knob kJobToken{
    .name = "DS_JOB_TOKEN",
    .type = KnobType::kString,
    .doc =
        "Secret every rank presents to the rendezvous store; never on a command line. "
        "Unset: the guessable 'job:<job id>', with a warning. dsrun sets a random one; "
        "dsrun --agent and --no_ssh read it (empty counts as unset there).",
    .readBy = kBoth,
    .origin = KnobOrigin::kRankContract};
inline constexpr Knob kCommBackend{
    .name = "DS_COMM_BACKEND",
    .type = KnobType::kString,
    .doc =
        "The user's default collective backend (gloo, mpi, nccl); dsrt --comm_backend, "
        "dsrun --comm_backend and the plan's comm_backend win over it.",
    .readBy = kReadByDsrt,
    .origin = KnobOrigin::kRankContract};
inline constexpr Knob kCommBackendFlag{
    .name = "DS_COMM_BACKEND_FLAG",
    .type = KnobType::kString,
    .doc = "dsrun's --comm_backend, passed to its ranks (set by dsrun, not by hand).",
    .readBy = kReadByDsrt,
    .origin = KnobOrigin::kRankContract};

// core/rank_env.cc: the launchers' own variables, when mpirun, mpiexec (hydra) or srun started
// the rank. comm/mpi/mpi_runtime.cc reads OMPI_COMM_WORLD_SIZE, PMIX_RANK and PMI_RANK too.
constexpr KnobOrigin kThirdParty = KnobOrigin::kThirdParty;  // shorthand below
inline constexpr Knob kOmpiWorldSize{.name = "OMPI_COMM_WORLD_SIZE",
                                     .type = KnobType::kInt,
                                     .doc = "Open MPI: number of ranks.",
                                     .readBy = kReadByDsrt,
                                     .origin = kThirdParty,
                                     .lo = 1,
                                     .hi = kMaxRanks};
inline constexpr Knob kOmpiWorldRank{
    .name = "OMPI_COMM_WORLD_RANK",
    .type = KnobType::kInt,
    .doc = "Open MPI: this rank (selects Open MPI's variables when RANK/WORLD_SIZE are unset).",
    .readBy = kReadByDsrt,
    .origin = kThirdParty,
    .lo = 0,
    .hi = kMaxRanks - 1};
inline constexpr Knob kOmpiLocalSize{.name = "OMPI_COMM_WORLD_LOCAL_SIZE",
                                     .type = KnobType::kInt,
                                     .dflt = "1",
                                     .doc = "Open MPI: ranks on this node.",
                                     .readBy = kReadByDsrt,
                                     .origin = kThirdParty,
                                     .lo = 1,
                                     .hi = kMaxRanks};
inline constexpr Knob kOmpiLocalRank{.name = "OMPI_COMM_WORLD_LOCAL_RANK",
                                     .type = KnobType::kInt,
                                     .dflt = "0",
                                     .doc = "Open MPI: this rank's index on its node.",
                                     .readBy = kReadByDsrt,
                                     .origin = kThirdParty,
                                     .lo = 0,
                                     .hi = kMaxRanks - 1};
inline constexpr Knob kOmpiNumNodes{
    .name = "OMPI_MCA_orte_num_nodes",
    .type = KnobType::kInt,
    .dflt = "1",
    .doc = "Open MPI: number of nodes (at least what the local size implies).",
    .readBy = kReadByDsrt,
    .origin = kThirdParty,
    .lo = 1,
    .hi = kMaxRanks};
inline constexpr Knob kOmpiJobId{.name = "OMPI_MCA_ess_base_jobid",
                                 .type = KnobType::kString,
                                 .doc = "Open MPI: the job id.",
                                 .readBy = kReadByDsrt,
                                 .origin = kThirdParty};
inline constexpr Knob kPmixRank{.name = "PMIX_RANK",
                                .type = KnobType::kInt,
                                .doc = "PMIx: this rank (with PMI_SIZE).",
                                .readBy = kReadByDsrt,
                                .origin = kThirdParty,
                                .lo = 0,
                                .hi = kMaxRanks - 1};
inline constexpr Knob kPmixNamespace{.name = "PMIX_NAMESPACE",
                                     .type = KnobType::kString,
                                     .doc = "PMIx: the job id.",
                                     .readBy = kReadByDsrt,
                                     .origin = kThirdParty};
inline constexpr Knob kPmiRank{.name = "PMI_RANK",
                               .type = KnobType::kInt,
                               .doc = "Hydra (MPICH): this rank.",
                               .readBy = kReadByDsrt,
                               .origin = kThirdParty,
                               .lo = 0,
                               .hi = kMaxRanks - 1};
inline constexpr Knob kPmiSize{.name = "PMI_SIZE",
                               .type = KnobType::kInt,
                               .doc = "PMIx and hydra: number of ranks.",
                               .readBy = kReadByDsrt,
                               .origin = kThirdParty,
                               .lo = 1,
                               .hi = kMaxRanks};
inline constexpr Knob kPmiFd{.name = "PMI_FD",
                             .type = KnobType::kString,
                             .doc = "Hydra: used as the job id.",
                             .readBy = kReadByDsrt,
                             .origin = kThirdParty};
inline constexpr Knob kMpiLocalNRanks{.name = "MPI_LOCALNRANKS",
                                      .type = KnobType::kInt,
                                      .dflt = "1",
                                      .doc = "PMIx and hydra: ranks on this node.",
                                      .readBy = kReadByDsrt,
                                      .origin = kThirdParty,
                                      .lo = 1,
                                      .hi = kMaxRanks};
inline constexpr Knob kMpiLocalRankId{.name = "MPI_LOCALRANKID",
                                      .type = KnobType::kInt,
                                      .dflt = "0",
                                      .doc = "PMIx and hydra: this rank's index on its node.",
                                      .readBy = kReadByDsrt,
                                      .origin = kThirdParty,
                                      .lo = 0,
                                      .hi = kMaxRanks - 1};
inline constexpr Knob kSlurmNTasks{.name = "SLURM_NTASKS",
                                   .type = KnobType::kInt,
                                   .doc = "srun: number of ranks.",
                                   .readBy = kReadByDsrt,
                                   .origin = kThirdParty,
                                   .lo = 1,
                                   .hi = kMaxRanks};
inline constexpr Knob kSlurmProcId{.name = "SLURM_PROCID",
                                   .type = KnobType::kInt,
                                   .doc = "srun: this rank (with SLURM_NTASKS).",
                                   .readBy = kReadByDsrt,
                                   .origin = kThirdParty,
                                   .lo = 0,
                                   .hi = kMaxRanks - 1};
inline constexpr Knob kSlurmNNodes{
    .name = "SLURM_NNODES",
    .type = KnobType::kInt,
    .doc = "srun: number of nodes; unset: SLURM_JOB_NUM_NODES, else 1.",
    .readBy = kReadByDsrt,
    .origin = kThirdParty,
    .lo = 1,
    .hi = kMaxRanks};
inline constexpr Knob kSlurmJobNumNodes{.name = "SLURM_JOB_NUM_NODES",
                                        .type = KnobType::kInt,
                                        .dflt = "1",
                                        .doc = "srun: number of nodes (SLURM_NNODES wins).",
                                        .readBy = kReadByDsrt,
                                        .origin = kThirdParty,
                                        .lo = 1,
                                        .hi = kMaxRanks};
inline constexpr Knob kSlurmNodeId{.name = "SLURM_NODEID",
                                   .type = KnobType::kInt,
                                   .dflt = "0",
                                   .doc = "srun: this rank's node index.",
                                   .readBy = kReadByDsrt,
                                   .origin = kThirdParty,
                                   .lo = 0,
                                   .hi = kMaxRanks - 1};
inline constexpr Knob kSlurmLocalId{.name = "SLURM_LOCALID",
                                    .type = KnobType::kInt,
                                    .dflt = "0",
                                    .doc = "srun: this rank's index on its node.",
                                    .readBy = kReadByDsrt,
                                    .origin = kThirdParty,
                                    .lo = 0,
                                    .hi = kMaxRanks};
inline constexpr Knob kSlurmNTasksPerNode{
    .name = "SLURM_NTASKS_PER_NODE",
    .type = KnobType::kInt,
    .doc = "srun: ranks per node; unset: SLURM_NTASKS / nodes.",
    .readBy = kReadByDsrt,
    .origin = kThirdParty,
    .lo = 1,
    .hi = kMaxRanks};
inline constexpr Knob kSlurmJobId{.name = "SLURM_JOB_ID",
                                  .type = KnobType::kString,
                                  .doc = "srun: the job id (with SLURM_STEP_ID).",
                                  .readBy = kReadByDsrt,
                                  .origin = kThirdParty};
inline constexpr Knob kSlurmStepId{.name = "SLURM_STEP_ID",
                                   .type = KnobType::kString,
                                   .dflt = "0",
                                   .doc = "srun: the step id.",
                                   .readBy = kReadByDsrt,
                                   .origin = kThirdParty};
inline constexpr Knob kSlurmJobNodeList{
    .name = "SLURM_JOB_NODELIST",
    .type = KnobType::kString,
    .doc =
        "srun: the job's hosts; the first is MASTER_ADDR when that is unset and the job "
        "spans nodes.",
    .readBy = kReadByDsrt,
    .origin = kThirdParty};

// Read by dsrun (launcher/rank_plan.cc: passed on as is, or set to cores / local ranks) and by
// dsrt (runtime/tensor/thread_policy.cc: the rank's OpenMP team when train.threads is 0).
inline constexpr Knob kOmpNumThreads{
    .name = "OMP_NUM_THREADS",
    .type = KnobType::kString,
    .doc =
        "dsrun: set in the node agent's environment (or by --export), passed on as is; unset, "
        "dsrun sets cores / local ranks for every rank. dsrt: the rank's compute threads when "
        "the plan's train.threads is 0 (its first number); OpenBLAS stays at 1 thread.",
    .readBy = kReadByDsrun | kReadByDsrt,
    .origin = KnobOrigin::kThirdParty};

// Read by dsrun (launcher/job_builder.cc: the local slots) and by dsrt (comm/nccl/nccl_backend.cc:
// quoted when more local ranks than visible GPUs are refused).
inline constexpr Knob kCudaVisibleDevices{
    .name = "CUDA_VISIBLE_DEVICES",
    .type = KnobType::kString,
    .doc =
        "dsrun: local runs without --include/--exclude/--num_gpus/--num_nodes: the slots to use "
        "(numeric ids; otherwise ignored with a notice); dsrun sets it for every rank on a GPU "
        "host. dsrt: quoted by the nccl backend when a host has more local ranks than visible "
        "GPUs (CUDA itself decides what is visible).",
    .readBy = kReadByDsrun | kReadByDsrt,
    .origin = KnobOrigin::kThirdParty};

inline constexpr const Knob* kCoreKnobList[] = {
    &kOmpNumThreads,
    &kCudaVisibleDevices,
    &kLogLevel,
    &kDebug,
    &kTimeout,
    &kRank,
    &kWorldSize,
    &kLocalRank,
    &kLocalWorldSize,
    &kLocalSize,
    &kCrossRank,
    &kCrossSize,
    &kMasterAddr,
    &kMasterPort,
    &kJobId,
    &kJobToken,
    &kCommBackend,
    &kCommBackendFlag,
    &kOmpiWorldSize,
    &kOmpiWorldRank,
    &kOmpiLocalSize,
    &kOmpiLocalRank,
    &kOmpiNumNodes,
    &kOmpiJobId,
    &kPmixRank,
    &kPmixNamespace,
    &kPmiRank,
    &kPmiSize,
    &kPmiFd,
    &kMpiLocalNRanks,
    &kMpiLocalRankId,
    &kSlurmNTasks,
    &kSlurmProcId,
    &kSlurmNNodes,
    &kSlurmJobNumNodes,
    &kSlurmNodeId,
    &kSlurmLocalId,
    &kSlurmNTasksPerNode,
    &kSlurmJobId,
    &kSlurmStepId,
    &kSlurmJobNodeList,
};
inline constexpr KnobTable kCoreKnobs{"core", kCoreKnobList};

}  // namespace ds::knobs

#pragma GCC diagnostic pop
