// CompletionService (see completion_service.h).
#include "runtime/serve/completion_service.h"

#include <chrono>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/log.h"
#include "runtime/serve/http_response.h"

namespace ds::runtime::serve {
namespace {

using nlohmann::ordered_json;

std::string dump(const ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

int64_t unixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

size_t utf8CompletePrefix(const std::string& s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = (c & 0xE0) == 0xC0   ? 2
                        : (c & 0xF0) == 0xE0 ? 3
                        : (c & 0xF8) == 0xF0 ? 4
                                             : 1;
    return need > back ? n - back : n;  // an unfinished character starts at n - back
  }
  return n;
}

namespace {
// The length of the well-formed character at s[i], or 0 when s[i] does not start one.
size_t utf8Length(const std::string& s, size_t i) {
  auto at = [&](size_t k) { return static_cast<unsigned>(static_cast<unsigned char>(s[k])); };
  const unsigned c = at(i);
  if (c < 0x80) return 1;
  size_t n = 4;
  unsigned lo = 0x80, hi = 0xBF;  // the second byte's range (RFC 3629's table)
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c == 0xF0) {
    lo = 0x90;
  } else if (c == 0xF4) {
    hi = 0x8F;  // nothing above U+10FFFF
  } else if (c < 0xF1 || c > 0xF3) {
    return 0;
  }
  if (i + n > s.size() || at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if ((at(i + k) & 0xC0) != 0x80) return 0;
  return n;
}
}  // namespace

std::string sanitizeUtf8(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8Length(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  return out;
}

CompletionService::CompletionService(const CompletionServiceOptions& opts,
                                     const Tokenizer& tokenizer)
    : opts_(opts), tokenizer_(tokenizer), started_(unixSeconds()) {}

void CompletionService::attach(HttpServer& server, BatchScheduler& scheduler) {
  server_ = &server;
  scheduler_ = &scheduler;
}

int CompletionService::inFlight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(pending_.size());
}

void CompletionService::onRequest(uint64_t conn, const HttpRequest& req, const std::string& peer) {
  const std::string path = req.target.substr(0, req.target.find('?'));
  try {
    if (path == "/health") {
      if (req.method != "GET") throw HttpError(405, "/health takes GET");
      server_->send(conn, httpResponse(200, "application/json", "{\"status\":\"ok\"}\n"), true);
    } else if (path == "/v1/models") {  // what OpenAI clients ask first: the one model served
      if (req.method != "GET")
        throw HttpError(405, fmt::format("/v1/models takes GET, not {}", req.method));
      const ordered_json model = {{"id", opts_.modelName},
                                  {"object", "model"},
                                  {"created", started_},
                                  {"owned_by", "dsrun"}};
      const ordered_json list = {{"object", "list"}, {"data", ordered_json::array({model})}};
      server_->send(conn, httpResponse(200, "application/json", dump(list) + "\n"), true);
    } else if (path == "/v1/completions") {
      if (req.method != "POST")
        throw HttpError(405, fmt::format("/v1/completions takes POST, not {}", req.method));
      submit(conn, req, peer);
    } else {
      throw HttpError(
          404,
          fmt::format("no such endpoint {} (POST /v1/completions, GET /v1/models, GET /health)",
                      path));
    }
  } catch (const HttpError& e) {
    DS_LOG_WARN("serve", "request {} from {}: {} {}", conn, peer, e.status(), e.what());
    server_->send(conn, httpErrorResponse(e.status(), e.what()), true);
  }
}

void CompletionService::submit(uint64_t conn, const HttpRequest& req, const std::string& peer) {
  const CompletionRequest r = parseCompletionRequest(req.body, tokenizer_, opts_.limits);
  BatchJob job;
  job.id = conn;
  job.prompt = r.prompt;
  job.maxTokens = r.maxTokens;
  job.sampling = r.sampling;
  job.seed = r.seed;
  if (tokenizer_.eosId() >= 0) job.stop.push_back(tokenizer_.eosId());
  std::lock_guard<std::mutex> lock(mu_);
  if (shuttingDown_) throw HttpError(503, "the server is shutting down");
  Pending p;
  p.stream = r.stream;
  p.model = r.model.empty() ? opts_.modelName : r.model;
  p.created = unixSeconds();
  if (!scheduler_->submit(std::move(job)))
    throw HttpError(429, fmt::format("too many requests: {} wait for the {} decode slots "
                                     "(--max_queue, --max_batch); retry later",
                                     opts_.maxQueue, opts_.maxBatch));
  DS_LOG_INFO("serve", "request {} from {}: {} prompt tokens, max_tokens {}{}", conn, peer,
              r.prompt.size(), r.maxTokens, r.stream ? ", stream" : "");
  if (p.stream) server_->send(conn, sseHead(), false);
  pending_.emplace(conn, std::move(p));
}

void CompletionService::onDisconnect(uint64_t conn, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_.erase(conn) == 0) return;
  }
  scheduler_->cancel(conn);
  DS_LOG_WARN("serve", "request {} cancelled: {}", conn, why);
}

std::string CompletionService::chunk(uint64_t id, const Pending& p, const std::string& text,
                                     const std::string& finish) const {
  ordered_json c = {{"text", sanitizeUtf8(text)}, {"index", 0}, {"logprobs", nullptr}};
  c["finish_reason"] = finish.empty() ? ordered_json(nullptr) : ordered_json(finish);
  const ordered_json j = {{"id", fmt::format("cmpl-{}", id)},
                          {"object", "text_completion"},
                          {"created", p.created},
                          {"model", p.model},
                          {"choices", ordered_json::array({c})}};
  return sseEvent(dump(j));
}

std::string CompletionService::body(uint64_t id, const Pending& p, const BatchEvent& ev) const {
  const ordered_json choice = {{"text", sanitizeUtf8(p.text)},
                               {"index", 0},
                               {"logprobs", nullptr},
                               {"finish_reason", ev.finish}};
  const ordered_json j = {{"id", fmt::format("cmpl-{}", id)},
                          {"object", "text_completion"},
                          {"created", p.created},
                          {"model", p.model},
                          {"choices", ordered_json::array({choice})},
                          {"usage",
                           {{"prompt_tokens", ev.promptTokens},
                            {"completion_tokens", ev.completionTokens},
                            {"total_tokens", ev.promptTokens + ev.completionTokens}}}};
  return dump(j) + "\n";
}

void CompletionService::onEvent(const BatchEvent& ev) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pending_.find(ev.id);
  if (it == pending_.end()) return;  // cancelled
  Pending& p = it->second;
  if (!p.started) {
    p.started = true;
    DS_LOG_INFO("serve", "request {}: started", ev.id);
  }
  if (ev.token >= 0) p.text += tokenizer_.decode(std::vector<int32_t>{ev.token});
  const bool last = !ev.finish.empty();
  if (p.stream) {
    const size_t n = last ? p.text.size() : utf8CompletePrefix(p.text);
    if (n > 0 || last) {
      server_->send(ev.id, chunk(ev.id, p, p.text.substr(0, n), ev.finish), false);
      p.text.erase(0, n);
    }
    if (last) server_->send(ev.id, sseEvent("[DONE]"), true);
  } else if (last) {
    server_->send(ev.id, httpResponse(200, "application/json", body(ev.id, p, ev)), true);
  }
  if (last) {
    DS_LOG_INFO("serve", "request {}: {} tokens, finish {}", ev.id, ev.completionTokens, ev.finish);
    pending_.erase(it);
  }
}

void CompletionService::fail(uint64_t conn, const Pending& p, int status, const std::string& msg) {
  if (p.stream) {
    const ordered_json j = {
        {"error", {{"message", msg}, {"type", "server_error"}, {"code", status}}}};
    server_->send(conn, sseEvent(dump(j)) + sseEvent("[DONE]"), true);
  } else {
    server_->send(conn, httpErrorResponse(status, msg), true);
  }
}

void CompletionService::shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  shuttingDown_ = true;
  for (uint64_t id : scheduler_->drainQueue()) {
    auto it = pending_.find(id);
    if (it == pending_.end()) continue;
    fail(id, it->second, 503, "the server is shutting down; the request was not started");
    pending_.erase(it);
  }
}

int CompletionService::abort(const std::string& msg) {
  std::lock_guard<std::mutex> lock(mu_);
  shuttingDown_ = true;
  scheduler_->drainQueue();
  const int count = static_cast<int>(pending_.size());
  for (const auto& [id, p] : pending_) fail(id, p, 500, msg);
  pending_.clear();
  return count;
}

}  // namespace ds::runtime::serve
