// followLeader: what `dsrt serve` runs on tensor-parallel ranks 1..T-1. It holds this rank's shard
// of the model in a Decoder with the leader's slot count and makes every Decoder call rank 0's
// BatchScheduler announces over the DecodeLink (decode_link.h), in order: the collectives inside
// the forward pair with the leader's. It has no HTTP server and samples nothing; the logits it
// gets (all-gathered) are dropped. Returns when the leader sends stop; throws when the leader is
// gone or silent past the link's timeout (the exception names rank 0 and the op awaited).
#pragma once

#include <cstdint>

#include "runtime/inference/inference_model.h"
#include "runtime/serve/decode_link.h"

namespace ds::runtime::serve {

struct FollowerOptions {
  int maxBatch = 8;  // the leader's --max_batch: the KV-cache slots
  // Fault tests only (DS_SERVE_FAULT_KILL): SIGKILL this process on receiving this forward op
  // (counted from 1); 0: never.
  uint64_t killAtForward = 0;
};

struct FollowerStats {
  uint64_t forwards = 0, heartbeats = 0;
};

FollowerStats followLeader(const InferenceModel& model, DecodeLink& link,
                           const FollowerOptions& opts);

}  // namespace ds::runtime::serve
