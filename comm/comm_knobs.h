// The environment knobs comm reads (bootstrap, the gloo algorithms' tuning, the nccl peer
// watchdog). Declarations only: read them with core/knobs.h's accessors. comm also reads core's
// DS_TIMEOUT, MASTER_ADDR, LOCAL_RANK and the launchers' rank variables (core/core_knobs.h).
#pragma once

#include "core/knobs.h"

// Declarations name only the fields they set (designated initializers; the rest keep their
// defaults), which GCC's -Wmissing-field-initializers would flag.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace ds::knobs {

// comm/bootstrap.cc
inline constexpr Knob kStoreBindAddr{
    .name = "DS_STORE_BIND_ADDR",
    .type = KnobType::kString,
    .doc =
        "Address rank 0's rendezvous store listens on. Unset or empty: MASTER_ADDR itself; "
        "0.0.0.0 for all interfaces (e.g. when MASTER_ADDR is a name that maps to a NAT "
        "address).",
    .readBy = kReadByDsrt};

// comm/gloo/blocks.cc: algorithm thresholds and message splitting (docs/comm.md).
constexpr int64_t kGiB = int64_t{1} << 30;
inline constexpr Knob kGlooSmallAllreduceBytes{
    .name = "DS_GLOO_SMALL_ALLREDUCE_BYTES",
    .type = KnobType::kInt,
    .dflt = "32768",
    .doc =
        "gloo: an allreduce at or below this many (fp32-staged) bytes uses the direct "
        "algorithm (more than 2 ranks).",
    .readBy = kReadByDsrt,
    .lo = 0,
    .hi = kGiB};
inline constexpr Knob kGlooSegmentBytes{.name = "DS_GLOO_SEGMENT_BYTES",
                                        .type = KnobType::kInt,
                                        .dflt = "1048576",
                                        .doc = "gloo: broadcast pipeline segment.",
                                        .readBy = kReadByDsrt,
                                        .lo = 4096,
                                        .hi = kGiB};
inline constexpr Knob kGlooRingSegmentBytes{
    .name = "DS_GLOO_RING_SEGMENT_BYTES",
    .type = KnobType::kInt,
    .dflt = "1048576",
    .doc = "gloo: ring reduce-scatter segment (at most 8 per block).",
    .readBy = kReadByDsrt,
    .lo = 1024,
    .hi = kGiB};
inline constexpr Knob kGlooPairAllreduceBytes{
    .name = "DS_GLOO_PAIR_ALLREDUCE_BYTES",
    .type = KnobType::kInt,
    .dflt = "4194304",
    .doc =
        "gloo: a 2-rank allreduce at or below this many (fp32-staged) bytes uses the pair "
        "exchange; 0 disables it.",
    .readBy = kReadByDsrt,
    .lo = 0,
    .hi = kGiB};
inline constexpr Knob kGlooDirectReduceScatterBytes{
    .name = "DS_GLOO_DIRECT_REDUCE_SCATTER_BYTES",
    .type = KnobType::kInt,
    .dflt = "4194304",
    .doc =
        "gloo: a reduce_scatter whose (fp32-staged) input is at most this many bytes uses the "
        "direct round; 0 disables it.",
    .readBy = kReadByDsrt,
    .lo = 0,
    .hi = kGiB};
inline constexpr Knob kGlooPieceBytes{
    .name = "DS_GLOO_PIECE_BYTES",
    .type = KnobType::kInt,
    .dflt = "393216",
    .doc =
        "gloo: largest piece of a pair-allreduce, direct-reduce_scatter or allgather message "
        "(rounded down to 64 bytes); 0 sends whole messages.",
    .readBy = kReadByDsrt,
    .lo = 0,
    .hi = kGiB};

// comm/shm/shm_backend.cc: the shared-memory transport within a host (docs/comm.md).
inline constexpr Knob kCommShm{
    .name = "DS_COMM_SHM",
    .type = KnobType::kBool,
    .dflt = "1",
    .doc =
        "gloo: when every rank of a group runs on one host (same CROSS_RANK and kernel), "
        "collectives go through a shared-memory segment in /dev/shm instead of TCP; 0 turns "
        "it off.",
    .readBy = kReadByDsrt};
inline constexpr Knob kCommHierarchical{
    .name = "DS_COMM_HIERARCHICAL",
    .type = KnobType::kBool,
    .dflt = "1",
    .doc =
        "gloo: a group whose ranks span hosts, with 2+ ranks on some host, runs allreduce, "
        "reduce_scatter, allgather and broadcast hierarchically: within each host over shared "
        "memory, among one leader per host over the network, back within the host; 0 keeps the "
        "flat ring.",
    .readBy = kReadByDsrt};
inline constexpr Knob kCommHierMinBytes{
    .name = "DS_COMM_HIER_MIN_BYTES",
    .type = KnobType::kInt,
    .dflt = "65536",
    .doc =
        "hierarchical collectives: buffers of fewer bytes stay on the flat backend (one "
        "network round instead of three steps).",
    .readBy = kReadByDsrt};
inline constexpr Knob kCommShmSlotBytes{
    .name = "DS_COMM_SHM_SLOT_BYTES",
    .type = KnobType::kInt,
    .dflt = "1048576",
    .doc =
        "shm: bytes per local rank in the shared-memory segment (two pipeline halves, rounded "
        "down to 4 KiB); the segment holds one slot per local rank.",
    .readBy = kReadByDsrt,
    .lo = 65536,
    .hi = kGiB};
inline constexpr Knob kCommShmCma{
    .name = "DS_COMM_SHM_CMA",
    .type = KnobType::kBool,
    .dflt = "1",
    .doc =
        "shm: collectives (all but barrier) on at least "
        "DS_COMM_SHM_CMA_MIN_BYTES copy straight between the ranks' buffers with cross-memory "
        "attach (process_vm_readv/writev; probed once per group, logged at rank 0); 0 keeps "
        "the two-copy path through the segment.",
    .readBy = kReadByDsrt};
inline constexpr Knob kCommShmCmaMinBytes{
    .name = "DS_COMM_SHM_CMA_MIN_BYTES",
    .type = KnobType::kInt,
    .dflt = "262144",
    .doc =
        "shm: collectives on fewer bytes keep the two-copy path through the segment (its "
        "steps cost less than the single-copy path's system calls there).",
    .readBy = kReadByDsrt,
    .lo = 1,
    .hi = int64_t{1} << 40};
inline constexpr Knob kCommShmCmaChunkBytes{
    .name = "DS_COMM_SHM_CMA_CHUNK_BYTES",
    .type = KnobType::kInt,
    .dflt = "0",
    .doc =
        "shm: the single-copy reductions' chunk per peer in bytes (rounded down to 4 KiB, "
        "16 KiB-4 MiB); 0 = half the CPU's L2 cache over the local ranks (the peers' chunks and "
        "this rank's stay in L2 while they are reduced; logged at rank 0).",
    .readBy = kReadByDsrt,
    .lo = 0,
    .hi = int64_t{1} << 30};

inline constexpr Knob kCommShmMap{
    .name = "DS_COMM_SHM_MAP",
    .type = KnobType::kBool,
    .dflt = "1",
    .doc =
        "shm: buffers the runtime allocates for collectives (ZeRO stage 0's gradients, "
        "comm-bench's buffers: comm/shared_host_buffer.h) live in shared memory (an unnamed "
        "memfd), and the single-copy path reads and writes a local peer's such buffer through "
        "its own mapping of it instead of a cross-memory-attach copy, also where CMA is refused "
        "(Yama ptrace_scope 1, a container's seccomp profile) when every rank's buffer is "
        "registered (a peer's pages this rank touches count in its resident set: ZeRO's memory "
        "table lists them). 0: private memory, CMA copies only.",
    .readBy = kReadByDsrt};

inline constexpr Knob kMpiShmMinBytes{
    .name = "DS_MPI_SHM_MIN_BYTES",
    .type = KnobType::kInt,
    .dflt = "1",
    .doc =
        "mpi: when every rank of the world group runs on one host, collectives on at least this "
        "many bytes go through the shared-memory path; smaller ones, barriers and point-to-point "
        "through Open MPI. Default 1, every collective: shm measured 1.2-4x Open MPI for "
        "allreduce and reduce_scatter from 4 KiB, at par below, allgather 0.7-1.0x at 4-64 MiB "
        "(bench/results/comm_efficiency.txt, bench/mpi_shm_crossover.sh); 0 = never. "
        "DS_COMM_SHM=0 turns it off too.",
    .readBy = kReadByDsrt,
    .lo = 0,
    .hi = int64_t{1} << 40};

// comm/nccl/peer_liveness.cc
inline constexpr Knob kNcclPeerTimeout{
    .name = "DS_NCCL_PEER_TIMEOUT",
    .type = KnobType::kSeconds,
    .dflt = "10",
    .doc =
        "nccl: a member whose heartbeat has not moved this long, while Work is pending, is "
        "dead (the communicator is aborted).",
    .readBy = kReadByDsrt,
    .lo = 0};
inline constexpr Knob kNcclHeartbeatMs{
    .name = "DS_NCCL_HEARTBEAT_MS",
    .type = KnobType::kInt,
    .dflt = "1000",
    .doc =
        "nccl: heartbeat and check period in milliseconds (at most a quarter of the peer "
        "timeout).",
    .readBy = kReadByDsrt,
    .lo = 1,
    .hi = 3600 * 1000};

inline constexpr const Knob* kCommKnobList[] = {
    &kStoreBindAddr,
    &kGlooSmallAllreduceBytes,
    &kGlooSegmentBytes,
    &kGlooRingSegmentBytes,
    &kGlooPairAllreduceBytes,
    &kGlooDirectReduceScatterBytes,
    &kGlooPieceBytes,
    &kCommShm,
    &kCommShmSlotBytes,
    &kCommShmCma,
    &kCommShmCmaMinBytes,
    &kCommShmCmaChunkBytes,
    &kCommShmMap,
    &kMpiShmMinBytes,
    &kCommHierarchical,
    &kCommHierMinBytes,
    &kNcclPeerTimeout,
    &kNcclHeartbeatMs,
};
inline constexpr KnobTable kCommKnobs{"comm", kCommKnobList};

}  // namespace ds::knobs

#pragma GCC diagnostic pop
