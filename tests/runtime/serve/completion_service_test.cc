// The serving stack in one process on a random GPT, with the test driving the decode loop:
// continuous batching gives every request the tokens generate() gives it alone; cancelling frees
// the slot; and over real sockets with real curl, a full queue is 429 while the queued requests
// still complete, bad requests are 4xx naming the fault, and a client that disconnects
// mid-stream cancels only its own request.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/data/rng.h"
#include "runtime/inference/generate.h"
#include "runtime/model/model.h"
#include "runtime/serve/batch_scheduler.h"
#include "runtime/serve/completion_service.h"
#include "runtime/serve/http_server.h"
#include "tests/runtime/serve/curl_client.h"
#include "tests/support/skip.h"

using namespace ds::runtime;
using namespace ds::runtime::serve;
using ds::test::curlRequest;
using ds::test::TempDir;
using Clock = std::chrono::steady_clock;

namespace {

InferenceModel randomModel() {
  ModelConfig c;
  c.nLayer = 2;
  c.nHead = 4;
  c.nEmbd = 32;
  c.seqLen = 64;
  c.vocabSize = 256;
  c.paddedVocab = 256;
  auto model = makeModel(c);
  std::vector<float> flat(model->numParamsTotal());
  model->initParams(flat.data(), 11);
  SplitMix64 rng(5);
  for (float& x : flat) x += static_cast<float>((rng.uniform() - 0.5) * 0.4);
  return InferenceModel(c, std::move(flat), ds::DType::kF32);
}

std::vector<int32_t> alone(const InferenceModel& m, const BatchJob& j) {
  GenerateOptions o;
  o.maxNewTokens = j.maxTokens;
  o.sampling = j.sampling;
  o.seed = j.seed;
  return generate(m, {j.prompt}, o)[0].tokens;
}

// Waits until pred holds, up to 30 s; false on timeout.
template <class Pred>
bool waitFor(Pred pred) {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (!pred()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// The service, scheduler and server of `dsrt serve`, without its decode loop.
struct Stack {
  InferenceModel model = randomModel();
  std::unique_ptr<Tokenizer> tok = makeTokenizer("byte", "");
  CompletionService service;
  BatchScheduler sched;
  HttpServer server;
  Stack(int maxBatch, int maxQueue)
      : service({{256, 64, 48, 0}, "test-model", maxBatch, maxQueue}, *tok),
        sched(model, {maxBatch, maxQueue}, [this](const BatchEvent& e) { service.onEvent(e); }),
        server(options(), service) {
    service.attach(server, sched);
    server.serve();
  }
  static HttpServerOptions options() {
    HttpServerOptions o;
    o.limits.maxBodyBytes = 4096;
    return o;
  }
  // What generate() gives the byte prompt alone, greedy.
  std::string expected(const std::string& prompt, int maxTokens) {
    BatchJob j;
    j.prompt = tok->encode(prompt);
    j.maxTokens = maxTokens;
    j.sampling.temperature = 0.0f;
    const auto ids = alone(model, j);
    return sanitizeUtf8(tok->decode(ids));  // as the answers carry it
  }
};

std::string body(const std::string& prompt, int maxTokens, bool stream = false) {
  return nlohmann::json{
      {"prompt", prompt}, {"max_tokens", maxTokens}, {"temperature", 0}, {"stream", stream}}
      .dump();
}

}  // namespace

TEST_CASE("batch scheduler: continuous batching gives each request its tokens alone", "[unit]") {
  const InferenceModel m = randomModel();
  std::map<uint64_t, std::vector<int32_t>> got;
  std::map<uint64_t, std::string> finish;
  BatchScheduler sched(m, {3, 16}, [&](const BatchEvent& e) {
    if (e.token >= 0) got[e.id].push_back(e.token);
    if (!e.finish.empty()) finish[e.id] = e.finish;
  });
  std::vector<BatchJob> jobs;
  for (int i = 0; i < 7; ++i) {
    BatchJob j;
    j.id = static_cast<uint64_t>(100 + i);
    for (int t = 0; t <= i * 3; ++t) j.prompt.push_back((t * 37 + i) % 256);
    j.maxTokens = 4 + 5 * (i % 3);
    if (i % 2) {
      j.sampling.temperature = 0.9f;
      j.sampling.topP = 0.9f;
      j.seed = static_cast<uint64_t>(i);
    } else {
      j.sampling.temperature = 0.0f;
    }
    jobs.push_back(j);
  }
  jobs[6].prompt.assign(62, 7);  // reaches the context (64) before max_tokens
  jobs[6].maxTokens = 10;
  for (int i = 0; i < 4; ++i) REQUIRE(sched.submit(jobs[static_cast<size_t>(i)]));
  int steps = 0;
  while (sched.step()) {  // the rest join while the first ones decode
    if (++steps == 2)
      for (int i = 4; i < 7; ++i) REQUIRE(sched.submit(jobs[static_cast<size_t>(i)]));
    REQUIRE(steps < 1000);
  }
  CHECK(sched.running() == 0);
  for (const BatchJob& j : jobs) {
    INFO("job " << j.id);
    CHECK(got[j.id] == alone(m, j));
    CHECK(finish[j.id] == "length");
  }
  CHECK(got[106].size() == 3);  // 62 + 3 = 65 positions: the third token has none left

  // A cancelled job stops; the others are unaffected. max_tokens 0 finishes at once.
  got.clear();
  finish.clear();
  BatchJob zero = jobs[0];
  zero.id = 1;
  zero.maxTokens = 0;
  REQUIRE(sched.submit(jobs[1]));
  REQUIRE(sched.submit(jobs[2]));
  REQUIRE(sched.submit(zero));
  sched.step();
  CHECK(finish[1] == "length");
  CHECK(got[1].empty());
  sched.cancel(jobs[1].id);
  while (sched.step()) {
  }
  CHECK(got[jobs[1].id].size() == 2);
  CHECK(finish.count(jobs[1].id) == 0);
  CHECK(got[jobs[2].id] == alone(m, jobs[2]));

  // A full queue refuses.
  BatchScheduler small(m, {1, 2}, [](const BatchEvent&) {});
  CHECK(small.submit(jobs[0]));
  CHECK(small.submit(jobs[1]));
  CHECK(!small.submit(jobs[2]));
  CHECK(small.drainQueue().size() == 2);
  CHECK(small.waiting() == 0);
}

TEST_CASE("completion service: utf-8 chunks end on character boundaries", "[unit]") {
  CHECK(utf8CompletePrefix("abc") == 3);
  CHECK(utf8CompletePrefix("a\xc3") == 1);         // é's first byte
  CHECK(utf8CompletePrefix("a\xc3\xa9") == 3);     // é
  CHECK(utf8CompletePrefix("a\xe2\x82") == 1);     // € missing its last byte
  CHECK(utf8CompletePrefix("\xf0\x9f\x98") == 0);  // an emoji's first 3 bytes
  CHECK(utf8CompletePrefix("\xf0\x9f\x98\x80") == 4);
  CHECK(utf8CompletePrefix("a\x80") == 2);  // invalid: not held back
  CHECK(utf8CompletePrefix("") == 0);
  CHECK(sanitizeUtf8("a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80") ==
        "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  const std::string bad = "\xef\xbf\xbd";
  CHECK(sanitizeUtf8("a\x80"
                     "b") == "a" + bad + "b");
  CHECK(sanitizeUtf8("\xe2\x82") == bad + bad);                      // unfinished: one per byte
  CHECK(sanitizeUtf8("\xc0\xaf") == bad + bad);                      // overlong
  CHECK(sanitizeUtf8("\xed\xa0\x80") == bad + bad + bad);            // a surrogate
  CHECK(sanitizeUtf8("\xf4\x90\x80\x80") == bad + bad + bad + bad);  // above U+10FFFF
}

TEST_CASE("completion service over curl: 429 when the queue is full, 4xx for bad requests",
          "[e2e]") {
  if (!ds::test::haveCurl()) DS_SKIP("curl is not installed (scripts/install_deps.sh installs it)");
  TempDir dir;
  Stack s(1, 2);
  const int port = s.server.port();
  // Two requests wait (no decode loop yet); a third is refused.
  ds::test::CurlResult a, b;
  std::atomic<int> finished{0};
  std::thread ta([&] {
    a = curlRequest(dir, port, "/v1/completions", body("to be", 6));
    ++finished;
  });
  std::thread tb([&] {
    b = curlRequest(dir, port, "/v1/completions", body("that is", 9, true));
    ++finished;
  });
  const bool queued = waitFor([&] { return s.sched.waiting() == 2; });
  ds::test::CurlResult c;
  if (queued) c = curlRequest(dir, port, "/v1/completions", body("or not", 3));
  // Now the decode loop runs: both queued requests complete.
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (finished < 2 && Clock::now() < deadline)
    if (!s.sched.step()) s.sched.waitForWork(std::chrono::milliseconds(5));
  ta.join();
  tb.join();
  REQUIRE(queued);
  CHECK(c.status == 429);
  CHECK_THAT(c.body, Catch::Contains("too many requests: 2 wait for the 1 decode slots"));
  REQUIRE(a.status == 200);
  const auto ja = nlohmann::json::parse(a.body);
  CHECK(ja["choices"][0]["text"] == s.expected("to be", 6));
  CHECK(ja["choices"][0]["finish_reason"] == "length");
  CHECK(ja["usage"]["prompt_tokens"] == 5);
  CHECK(ja["usage"]["completion_tokens"] == 6);
  CHECK(ja["usage"]["total_tokens"] == 11);
  CHECK(ja["model"] == "test-model");
  CHECK(ja["object"] == "text_completion");
  REQUIRE(b.status == 200);
  std::string finish;
  bool done = false;
  CHECK(ds::test::sseText(b.body, &finish, &done) == s.expected("that is", 9));
  CHECK(finish == "length");
  CHECK(done);

  struct Bad {
    std::string path, method, body;
    int status;
    std::string msg;
  };
  const Bad bad[] = {
      {"/v1/completions", "POST", "{\"prompt\": \"x\",,}", 400, "parse error at line 1, column 16"},
      {"/v1/completions", "POST", "{\"prompt\": \"x\", \"temp\": 1}", 400, "unknown field 'temp'"},
      {"/v1/completions", "POST", std::string(5000, ' '), 413,
       "request body of 5000 bytes is over the limit of 4096 bytes"},
      {"/v1/completions", "POST", body(std::string(65, 'a'), 3), 400,
       "65 tokens, longer than the model's context of 64 tokens"},
      {"/v1/completions", "POST", body("x", 49), 400, "'max_tokens': 49 outside [0, 48]"},
      {"/v1/completions", "GET", "", 405, "/v1/completions takes POST, not GET"},
      {"/v1/chat", "POST", "{}", 404, "no such endpoint /v1/chat"},
  };
  for (const Bad& x : bad) {
    INFO(x.method << " " << x.path << " " << x.body.substr(0, 80));
    const auto r = curlRequest(dir, port, x.path, x.body, x.method);
    CHECK(r.status == x.status);
    CHECK_THAT(r.body, Catch::Contains(x.msg));
    if (r.status >= 400) {
      const auto j = nlohmann::json::parse(r.body);
      CHECK(j["error"]["code"] == x.status);
    }
  }
  const auto health = curlRequest(dir, port, "/health", "", "GET");
  CHECK(health.status == 200);
  // GET /v1/models lists the one model served, as OpenAI clients expect on connect.
  const auto models = curlRequest(dir, port, "/v1/models", "", "GET");
  CHECK(models.status == 200);
  const auto list = nlohmann::json::parse(models.body);
  CHECK(list["object"] == "list");
  REQUIRE(list["data"].size() == 1);
  CHECK(list["data"][0]["object"] == "model");
  CHECK(list["data"][0]["id"].get<std::string>().size() > 0);
  const auto postModels = curlRequest(dir, port, "/v1/models", "{}", "POST");
  CHECK(postModels.status == 405);
  CHECK(s.service.inFlight() == 0);
}

TEST_CASE("completion service: a client gone mid-stream cancels only its request", "[e2e]") {
  TempDir dir;
  Stack s(2, 4);
  // CLOEXEC: curl, forked meanwhile, must not hold this connection open.
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(s.server.port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  timeval tv{30, 0};  // every read below is bounded
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const std::string json = body("to be or not", 40, true);
  const std::string req =
      "POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: " + std::to_string(json.size()) +
      "\r\n\r\n" + json;
  REQUIRE(::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size()));
  REQUIRE(waitFor([&] { return s.sched.waiting() == 1; }));
  // A second, non-streamed request shares the batch.
  ds::test::CurlResult other;
  std::atomic<bool> otherDone{false};
  std::thread t([&] {
    other = curlRequest(dir, s.server.port(), "/v1/completions", body("that is", 20));
    otherDone = true;
  });
  REQUIRE(waitFor([&] { return s.sched.waiting() == 2; }));
  s.sched.step();  // both admitted: prefill + one decode step, the stream's first chunks sent
  std::string got;
  char buf[4096];
  while (got.find("data: {") == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    REQUIRE(n > 0);
    got.append(buf, static_cast<size_t>(n));
  }
  CHECK(got.rfind("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream", 0) == 0);
  ::close(fd);                                                // gone mid-stream (38 tokens to go)
  CHECK(waitFor([&] { return s.service.inFlight() == 1; }));  // only the other one is left
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (!otherDone && Clock::now() < deadline)
    if (!s.sched.step()) s.sched.waitForWork(std::chrono::milliseconds(5));
  t.join();
  CHECK(s.sched.running() == 0);
  REQUIRE(other.status == 200);
  CHECK(nlohmann::json::parse(other.body)["choices"][0]["text"] == s.expected("that is", 20));
}
