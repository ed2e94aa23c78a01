// `dsrt serve` (see serve_command.h and docs/inference.md): checks the flags, loads the model,
// starts the HTTP server's I/O thread and runs the decode loop on this thread until SIGINT or
// SIGTERM. On the first signal it stops accepting, answers the waiting requests 503, lets the
// running ones finish and exits 0; a second signal exits at once (1).
// Several ranks (dsrun): tensor-parallel. Rank 0 does all of the above over its shard and
// announces every decode call to the others (runtime/serve/decode_link.h), which follow it
// (follower.h) until it sends stop; they ignore a first signal and wait for that stop. When a
// follower fails, rank 0 answers every request in flight with a 500 naming the failure, stops
// serving and exits non-zero.
#include "runtime/cmd/serve_command.h"

#include <CLI/CLI.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <fmt/format.h>

#include "comm/process_group.h"
#include "comm/store/tcp_socket.h"
#include "core/env.h"
#include "core/error.h"
#include "core/knobs.h"
#include "core/log.h"
#include "core/rank_env.h"
#include "runtime/cmd/rank_model.h"
#include "runtime/inference/inference_model.h"
#include "runtime/serve/batch_scheduler.h"
#include "runtime/serve/completion_service.h"
#include "runtime/serve/decode_link.h"
#include "runtime/serve/follower.h"
#include "runtime/serve/http_server.h"
#include "runtime/tensor/tensor_knobs.h"
#include "runtime/tensor/thread_policy.h"
#include "runtime/tokenizer/tokenizer.h"

namespace ds::runtime {
namespace {

using namespace std::chrono_literals;

struct Flags {
  std::string model, tag, tokenizer, vocab, dtype = "fp32", host = "127.0.0.1", name;
  int port = 8000, nHead = 0, vocabSize = 0, threads = 0, localRank = -1;
  int maxBatch = 8, maxQueue = 64, maxTokensLimit = 256, maxConnections = 256;
  size_t maxRequestBytes = 1 << 20;
  double requestTimeout = 30.0;
  uint64_t seed = 0;
};

void addFlags(CLI::App& app, Flags& f) {
  app.add_option("model", f.model, "a checkpoint root written by dsrt train or an llm.c gpt2_*.bin")
      ->required();
  app.add_option("--tokenizer", f.tokenizer,
                 "text in and out: byte (id = byte value) or gpt2 (GPT-2's BPE, from --vocab)")
      ->required();
  app.add_option("--vocab", f.vocab, "gpt2's vocabulary folder or tokenizer.json file");
  app.add_option("--host", f.host,
                 "address to listen on; 0.0.0.0 exposes the server beyond this machine")
      ->capture_default_str();
  app.add_option("--port", f.port, "TCP port; 0 picks a free one (printed on the first line)")
      ->capture_default_str();
  app.add_option("--max_batch", f.maxBatch,
                 "requests decoded together (KV-cache slots); more wait in the queue")
      ->capture_default_str();
  app.add_option("--max_queue", f.maxQueue, "requests waiting for a slot; beyond, new ones get 429")
      ->capture_default_str();
  app.add_option("--max_request_bytes", f.maxRequestBytes,
                 "largest request body; larger ones get 413")
      ->capture_default_str();
  app.add_option("--max_tokens_limit", f.maxTokensLimit,
                 "largest max_tokens a request may ask for; larger ones get 400")
      ->capture_default_str();
  app.add_option("--max_connections", f.maxConnections, "open connections; beyond, 503")
      ->capture_default_str();
  app.add_option("--request_timeout", f.requestTimeout,
                 "seconds a client has to send its whole request, and to take each answer "
                 "chunk, before it is dropped")
      ->capture_default_str();
  app.add_option("--seed", f.seed, "sampling seed of requests that give none")
      ->capture_default_str();
  app.add_option("--served_model_name", f.name,
                 "the \"model\" in answers (default: the model path)");
  app.add_option("--dtype", f.dtype, "weights: fp32, or bf16 (rounded, half the memory)")
      ->capture_default_str();
  app.add_option("--tag", f.tag, "checkpoint tag (default: the one named by <model>/latest)");
  app.add_option("--n_head", f.nHead, "attention heads (default: recorded in the checkpoint)");
  app.add_option("--vocab_size", f.vocabSize,
                 "real vocabulary, <= wte's rows (default: recorded in the checkpoint)");
  app.add_option("--local_rank", f.localRank,
                 "set by dsrun (the rank comes from the environment; tensor-parallel)");
  app.add_option("--threads", f.threads,
                 "compute threads (default: OMP_NUM_THREADS, else cores / local ranks; "
                 "docs/plan.md train.threads)");
}

void checkFlags(const Flags& f) {
  auto atLeast = [](const char* flag, int64_t v, int64_t lo) {
    if (v < lo) throw ConfigError(fmt::format("{} {}: expected >= {}", flag, v, lo));
  };
  atLeast("--max_batch", f.maxBatch, 1);
  atLeast("--max_queue", f.maxQueue, 1);
  atLeast("--max_tokens_limit", f.maxTokensLimit, 1);
  atLeast("--max_connections", f.maxConnections, 1);
  atLeast("--threads", f.threads, 0);
  atLeast("--max_request_bytes", static_cast<int64_t>(f.maxRequestBytes), 1);
  if (f.port < 0 || f.port > 65535)
    throw ConfigError(fmt::format("--port {}: expected 0..65535", f.port));
  if (!(f.requestTimeout > 0.0 && f.requestTimeout <= 86400.0))
    throw ConfigError(
        fmt::format("--request_timeout {}: expected seconds in (0, 86400]", f.requestTimeout));
  if (f.dtype != "fp32" && f.dtype != "bf16")
    throw ConfigError(fmt::format("--dtype {}: expected fp32 or bf16", f.dtype));
}

// SIGINT/SIGTERM: the handler (any thread may run it; OpenBLAS and OpenMP start threads of their
// own) counts the signal and writes a byte to a pipe; a watcher thread polls the pipe and wakes
// the decode loop through onStop (the scheduler's wake on rank 0). A second signal exits at once
// from the handler.
std::atomic<int> gSignals{0};
int gSignalPipe = -1;

extern "C" void onStopSignal(int) {
  if (gSignals.fetch_add(1) > 0) std::_Exit(1);
  const char b = 1;
  [[maybe_unused]] ssize_t n = ::write(gSignalPipe, &b, 1);
}

class SignalWatch {
 public:
  SignalWatch(std::function<void()> onStop, std::string what)
      : onStop_(std::move(onStop)), what_(std::move(what)) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) throw SystemError("pipe2 for signals", errno);
    read_.reset(p[0]);
    write_.reset(p[1]);
    gSignalPipe = write_.get();
    struct sigaction sa {};
    sa.sa_handler = onStopSignal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, &oldInt_);
    ::sigaction(SIGTERM, &sa, &oldTerm_);
    thread_ = std::thread([this] { watch(); });
  }
  ~SignalWatch() {
    done_ = true;
    thread_.join();
    ::sigaction(SIGINT, &oldInt_, nullptr);
    ::sigaction(SIGTERM, &oldTerm_, nullptr);
  }
  bool stopRequested() const { return gSignals.load() > 0; }

 private:
  void watch() {
    while (!done_) {
      pollfd pfd{read_.get(), POLLIN, 0};
      if (::poll(&pfd, 1, 200) <= 0) continue;  // 200 ms: how often it checks done_
      char sink[16];
      while (::read(read_.get(), sink, sizeof sink) > 0) {
      }
      DS_LOG_INFO("serve", "stop requested by signal: {} (a second signal exits at once)", what_);
      if (onStop_) onStop_();
    }
  }
  std::function<void()> onStop_;
  std::string what_;
  comm::Fd read_, write_;
  struct sigaction oldInt_ {
  }, oldTerm_{};
  std::thread thread_;
  std::atomic<bool> done_{false};
};

// DS_SERVE_FAULT_KILL "rank=R,forward=N": the forward op at which rank R (a follower) SIGKILLs
// itself, for this rank; 0 when unset or meant for another rank. ConfigError naming the knob.
uint64_t serveFaultKill(const EnvMap& env) {
  const std::string text = knobString(knobs::kServeFaultKill, env).value_or("");
  if (text.empty()) return 0;
  int rank = -1;
  unsigned long long forward = 0;
  int used = 0;
  if (std::sscanf(text.c_str(), "rank=%d,forward=%llu%n", &rank, &forward, &used) != 2 ||
      static_cast<size_t>(used) != text.size() || rank < 1 || forward < 1)
    throw ConfigError(fmt::format(
        "DS_SERVE_FAULT_KILL='{}': expected 'rank=R,forward=N' with a follower rank R >= 1 and "
        "N >= 1",
        text));
  return rank == deriveRankEnv(env).rank ? forward : 0;
}

// A follower rank: ignores a first signal (rank 0 decides when serving ends) and follows.
int followRank0(const InferenceModel& model, serve::DecodeLink& link, int maxBatch,
                uint64_t faultKill) {
  SignalWatch signals(nullptr, "waiting for rank 0 to finish and send stop");
  DS_LOG_INFO("serve", "rank {} of {} (pid {}): following rank 0's decode steps, {} slots",
              link.group().rank(), link.group().size(), ::getpid(), maxBatch);
  const auto stats = serve::followLeader(model, link, {maxBatch, faultKill});
  DS_LOG_INFO("serve", "rank {}: stopped by rank 0 after {} forward steps", link.group().rank(),
              stats.forwards);
  return 0;
}

// Rank 0: the HTTP server, the scheduler and the decode loop (link: the followers, or null).
int lead(const Flags& f, const Tokenizer& codec, const InferenceModel& model,
         const std::string& source, serve::DecodeLink* link) {
  serve::CompletionServiceOptions so;
  so.limits = {model.vocab(), model.config().seqLen, f.maxTokensLimit, f.seed};
  so.modelName = f.name.empty() ? f.model : f.name;
  so.maxBatch = f.maxBatch;
  so.maxQueue = f.maxQueue;
  serve::CompletionService service(so, codec);
  serve::BatchScheduler sched(model, {f.maxBatch, f.maxQueue, link},
                              [&](const serve::BatchEvent& ev) { service.onEvent(ev); });
  serve::HttpServerOptions ho;
  ho.host = f.host;
  ho.port = f.port;
  ho.limits.maxBodyBytes = f.maxRequestBytes;
  ho.maxConnections = f.maxConnections;
  ho.readTimeout = ho.writeTimeout =
      std::chrono::milliseconds(static_cast<int64_t>(f.requestTimeout * 1000.0));
  serve::HttpServer server(ho, service);
  service.attach(server, sched);
  SignalWatch signals([&] { sched.wake(); }, "finishing the running requests, then exiting");
  server.serve();
  std::printf("dsrt serve: listening on http://%s:%d/v1/completions\n", f.host.c_str(),
              server.port());
  std::fflush(stdout);
  if (f.host.rfind("127.", 0) != 0 && f.host != "localhost" && f.host != "::1")
    DS_LOG_WARN("serve",
                "--host {}: listening beyond loopback; anyone who can reach port {} "
                "can use the model (there is no authentication)",
                f.host, server.port());
  const int ranks = link ? link->group().size() : 1;
  DS_LOG_INFO("serve",
              "{} on http://{}:{} ({} slots, queue {}, max_tokens <= {}, context {}, {} "
              "tensor-parallel rank{})",
              source, f.host, server.port(), f.maxBatch, f.maxQueue, f.maxTokensLimit,
              model.config().seqLen, ranks, ranks == 1 ? "" : "s");
  // Let the last answers reach their clients: bounded by the write timeout.
  auto closeConnections = [&] {
    const auto deadline = std::chrono::steady_clock::now() + ho.writeTimeout;
    while (server.connectionCount() > 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(10ms);
    if (server.connectionCount() > 0)
      DS_LOG_WARN("serve", "{} connections still open after {} ms; closing them",
                  server.connectionCount(), ho.writeTimeout.count());
    server.stop();
  };
  // Idle waits no longer than the heartbeat interval, so the followers hear from rank 0 in time.
  const auto heartbeat = serve::DecodeLinkOptions{}.heartbeatInterval;
  try {
    while (!signals.stopRequested()) {
      if (!sched.step()) {
        sched.waitForWork(heartbeat);
        if (link) link->heartbeatIfIdle();
      }
    }
    server.stopAccepting();
    service.shutdown();
    while (sched.running() > 0) sched.step();
    if (link) link->send({serve::DecodeOp::kStop, {}, {}, {}, {}});
  } catch (const Error& e) {
    // A follower gone (or any failure of the decode loop): no request may wait for an answer
    // that will never come.
    DS_LOG_ERROR("serve", "decode loop failed: {}", e.what());
    server.stopAccepting();
    const int failed =
        service.abort(fmt::format("the server failed and is stopping: {}", e.what()));
    DS_LOG_ERROR("serve", "answered {} requests in flight with 500; exiting", failed);
    closeConnections();
    throw;
  }
  closeConnections();
  DS_LOG_INFO("serve", "stopped");
  return 0;
}

}  // namespace

int serveCommand(int argc, char** argv) {
  CLI::App app{
      "Serve OpenAI-style /v1/completions over HTTP from a trained GPT-2, with "
      "continuous batching; see docs/inference.md",
      "serve"};
  Flags f;
  addFlags(app, f);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    throw ConfigError("serve: " + std::string(e.what()));
  }
  checkFlags(f);
  const EnvMap env = currentEnv();
  const uint64_t faultKill = serveFaultKill(env);
  const auto codec = makeTokenizer(f.tokenizer, f.vocab);
  setupThreads(env, f.threads, "--threads");
  // Several ranks (dsrun ... serve): tensor-parallel over all of them (docs/inference.md).
  LoadOptions lo;
  lo.tag = f.tag;
  lo.nHead = f.nHead;
  lo.vocabSize = f.vocabSize;
  lo.dtype = f.dtype == "bf16" ? DType::kBF16 : DType::kF32;
  RankModel loaded = loadRankModel(env, f.model, lo);
  const RankEnv& re = loaded.rank;
  const InferenceModel& model = loaded.model;
  const std::string& source = loaded.source;
  std::unique_ptr<comm::ProcessGroup>& group = loaded.group;
  requireModelVocab(*codec, model.vocab(), source);
  std::unique_ptr<serve::DecodeLink> link;
  if (group) link = std::make_unique<serve::DecodeLink>(*group);
  if (re.rank != 0) return followRank0(model, *link, f.maxBatch, faultKill);
  return lead(f, *codec, model, source, link.get());
}

}  // namespace ds::runtime
