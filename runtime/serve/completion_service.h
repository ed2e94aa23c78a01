// CompletionService: the application behind `dsrt serve`'s HttpServer. Routes POST
// /v1/completions (and GET /v1/models, GET /health), turns a request into a BatchJob, and turns the
// scheduler's events into the OpenAI-shaped answer: one JSON body, or server-sent events `data:
// {...}` ending with `data: [DONE]`. Streamed text is cut only at UTF-8 character boundaries, so
// the chunks concatenate to the non-streamed text. A client that goes away cancels its job.
// Thread-safety: onRequest/onDisconnect run on the I/O thread, onEvent and shutdown on the decode
// thread; the per-request table is guarded by one mutex.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "runtime/serve/batch_scheduler.h"
#include "runtime/serve/completion_request.h"
#include "runtime/serve/http_server.h"
#include "runtime/tokenizer/tokenizer.h"

namespace ds::runtime::serve {

struct CompletionServiceOptions {
  CompletionLimits limits;
  std::string modelName;            // "model" in answers when a request names none
  int maxBatch = 8, maxQueue = 64;  // for the 429 message
};

class CompletionService : public HttpHandler {
 public:
  CompletionService(const CompletionServiceOptions& opts, const Tokenizer& tokenizer);
  // Both must be set before the server serves.
  void attach(HttpServer& server, BatchScheduler& scheduler);

  void onRequest(uint64_t conn, const HttpRequest& req, const std::string& peer) override;
  void onDisconnect(uint64_t conn, const std::string& why) override;
  // The scheduler's sink.
  void onEvent(const BatchEvent& ev);
  // From now on new requests get 503; the waiting ones are answered 503 too (running ones go on).
  void shutdown();
  // The decode loop failed (a tensor-parallel follower gone): every request waiting or running is
  // answered 500 with msg (a stream gets an error event and [DONE]) and new ones 503. Returns how
  // many were answered.
  int abort(const std::string& msg);
  int inFlight() const;

 private:
  struct Pending {
    bool stream = false;
    std::string model;
    std::string text;  // non-stream: all bytes; stream: bytes held back (an unfinished character)
    int64_t created = 0;
    bool started = false;  // its first token came: a shutdown now lets it finish
  };
  void submit(uint64_t conn, const HttpRequest& req, const std::string& peer);
  std::string chunk(uint64_t id, const Pending& p, const std::string& text,
                    const std::string& finish) const;
  std::string body(uint64_t id, const Pending& p, const BatchEvent& ev) const;
  void fail(uint64_t conn, const Pending& p, int status, const std::string& msg);

  CompletionServiceOptions opts_;
  const Tokenizer& tokenizer_;
  int64_t started_;  // unix seconds; "created" of the model in GET /v1/models
  HttpServer* server_ = nullptr;
  BatchScheduler* scheduler_ = nullptr;
  mutable std::mutex mu_;
  std::map<uint64_t, Pending> pending_;  // guarded by mu_
  bool shuttingDown_ = false;            // guarded by mu_
};

// How many leading bytes of s end on a UTF-8 character boundary: a trailing lead byte whose
// continuation bytes have not all arrived is held back (invalid bytes are not held).
size_t utf8CompletePrefix(const std::string& s);
// s with every byte that does not belong to a well-formed UTF-8 character (RFC 3629) replaced by
// U+FFFD, one per byte, so the same bytes give the same text whether streamed or not.
std::string sanitizeUtf8(const std::string& s);

}  // namespace ds::runtime::serve
