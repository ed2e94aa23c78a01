// followLeader (see follower.h).
#include "runtime/serve/follower.h"

#include <csignal>
#include <cstdio>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>

#include "comm/process_group.h"
#include "core/error.h"
#include "runtime/inference/decoder.h"

namespace ds::runtime::serve {

FollowerStats followLeader(const InferenceModel& model, DecodeLink& link,
                           const FollowerOptions& opts) {
  Decoder decoder(model, opts.maxBatch, DecoderOptions{.group = &link.group()});
  std::vector<float> logits;
  FollowerStats stats;
  const int rank = link.group().rank();
  auto checkSlot = [&](int32_t slot) {
    if (slot < 0 || slot >= opts.maxBatch)
      throw InternalError(fmt::format(
          "serve: rank {}: op {} names slot {} outside [0, {}): do all ranks have the same "
          "--max_batch?",
          rank, link.sent(), slot, opts.maxBatch));
  };
  for (;;) {
    DecodeOp op = link.receive();
    if (op.kind == DecodeOp::kStop) return stats;
    if (op.kind == DecodeOp::kHeartbeat) {
      ++stats.heartbeats;
      continue;
    }
    ++stats.forwards;
    if (opts.killAtForward != 0 && stats.forwards == opts.killAtForward) {
      std::fprintf(stderr,
                   "dsrt: DS_SERVE_FAULT_KILL: rank %d sends itself SIGKILL at forward %llu\n",
                   rank, static_cast<unsigned long long>(stats.forwards));
      std::fflush(stderr);
      ::kill(::getpid(), SIGKILL);
    }
    for (int32_t slot : op.resets) {
      checkSlot(slot);
      decoder.reset(slot);
    }
    for (int32_t slot : op.slots) checkSlot(slot);
    size_t keep = op.slots.size();
    if (!op.logitRows.empty()) {
      keep = 0;
      for (bool row : op.logitRows) keep += row ? 1 : 0;
    }
    logits.resize(keep * static_cast<size_t>(model.vocab()));
    decoder.forward(op.slots.data(), op.tokens.data(), static_cast<int>(op.slots.size()),
                    op.logitRows, logits.data());
  }
}

}  // namespace ds::runtime::serve
