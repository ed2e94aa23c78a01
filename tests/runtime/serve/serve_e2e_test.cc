// `dsrt serve` end to end: a GPT trained by `dsrt train`, the real binary listening on loopback
// (port 0, read from its first line), the real curl as the client. Greedy completions equal
// `dsrt generate`'s, streamed or not, and 16 concurrent requests equal their sequential results;
// a client that disconnects mid-stream leaves the others served; limits and bad requests are
// 4xx naming the fault; SIGTERM stops it with exit 0. Bad flags are refused by name.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/runtime/serve/serve_process.h"
#include "tests/support/skip.h"

using namespace ds::test::serve;
using ds::test::curlRequest;
using ds::test::runCommand;
using ds::test::TempDir;

TEST_CASE("dsrt serve: curl completions equal dsrt generate, 16 at once, limits, SIGTERM",
          "[e2e]") {
  if (!ds::test::haveCurl()) DS_SKIP("curl is not installed (scripts/install_deps.sh installs it)");
  TempDir dir;
  train(dir);
  const std::string ck = dir.file("ck");
  ServeProcess server(ck + " --tokenizer byte --port 0 --max_batch 4 --max_queue 32 "
                           "--max_request_bytes 2048 --max_tokens_limit 60",
                      dir.file("serve.log"));
  const int port = server.port();
  INFO(server.log());
  REQUIRE(port > 0);
  const std::string path = "/v1/completions";

  // One request, not streamed, then streamed: dsrt generate's text.
  const std::string want = generated(ck, {"to be"}, 24)[0];
  CHECK(completionText(curlRequest(dir, port, path, request("to be", 24))) == want);
  const auto s = curlRequest(dir, port, path, request("to be", 24, true));
  REQUIRE(s.status == 200);
  std::string finish;
  bool done = false;
  CHECK(ds::test::sseText(s.body, &finish, &done) == want);
  CHECK(finish == "length");
  CHECK(done);

  // 16 prompts: one at a time, then all at once (4 slots, the rest queued and joining between
  // decode steps); the same texts, and dsrt generate's.
  std::vector<std::string> prompts;
  for (int i = 0; i < 16; ++i)
    prompts.push_back(i % 2 ? "that is " + std::to_string(i) : "to be or " + std::to_string(i));
  const auto expect = generated(ck, prompts, 20);
  std::vector<std::string> seq(16), par(16);
  for (size_t i = 0; i < 16; ++i)
    seq[i] = completionText(curlRequest(dir, port, path, request(prompts[i], 20)));
  std::vector<ds::test::CurlResult> results(16);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < 16; ++i)
    clients.emplace_back(
        [&, i] { results[i] = curlRequest(dir, port, path, request(prompts[i], 20, i % 3 == 0)); });
  for (auto& t : clients) t.join();
  for (size_t i = 0; i < 16; ++i) {
    INFO("prompt " << i << ": " << prompts[i]);
    if (i % 3 == 0) {
      REQUIRE(results[i].status == 200);
      par[i] = ds::test::sseText(results[i].body, &finish, &done);
    } else {
      par[i] = completionText(results[i]);
    }
    CHECK(seq[i] == expect[i]);
    CHECK(par[i] == seq[i]);
  }

  // A client that goes away mid-stream (head exits after one byte; curl dies on its next write)
  // while others are served; the server goes on serving.
  std::vector<ds::test::CurlResult> others(3);
  std::thread quitter([&] {
    ds::test::writeFile(dir.file("long.json"), request("to be", 60, true));
    std::string out;
    runCommand("curl -sN --max-time 60 -H 'Content-Type: application/json' --data-binary @" +
                   dir.file("long.json") + " http://127.0.0.1:" + std::to_string(port) + path +
                   " | head -c 1",
               &out);
  });
  for (size_t i = 0; i < 3; ++i) others[i] = curlRequest(dir, port, path, request(prompts[i], 20));
  quitter.join();
  for (size_t i = 0; i < 3; ++i) CHECK(completionText(others[i]) == expect[i]);
  CHECK(completionText(curlRequest(dir, port, path, request("to be", 24))) == want);

  // Limits and bad input: 4xx naming the fault.
  const auto big = curlRequest(dir, port, path, request(std::string(3000, 'a'), 4));
  CHECK(big.status == 413);
  CHECK_THAT(big.body, Catch::Contains("over the limit of 2048 bytes (--max_request_bytes)"));
  const auto longPrompt = curlRequest(dir, port, path, request(std::string(65, 'a'), 4));
  CHECK(longPrompt.status == 400);
  CHECK_THAT(longPrompt.body, Catch::Contains("65 tokens, longer than the model's context of 64"));
  const auto many = curlRequest(dir, port, path, request("x", 61));
  CHECK(many.status == 400);
  CHECK_THAT(many.body, Catch::Contains("'max_tokens': 61 outside [0, 60]"));
  const auto badJson = curlRequest(dir, port, path, "{\"prompt\": ");
  CHECK(badJson.status == 400);
  CHECK_THAT(badJson.body, Catch::Contains("invalid JSON in the request body"));
  std::string raw;
  // Not HTTP at all, over a bare socket (bash's /dev/tcp): 400 naming the line.
  CHECK(runCommand("timeout 30 bash -c 'exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(port) +
                       "; printf \"HELLO\\r\\n\\r\\n\" >&3; cat <&3'",
                   &raw) == 0);
  CHECK_THAT(raw, Catch::Contains("HTTP/1.1 400 Bad Request"));
  CHECK_THAT(raw, Catch::Contains("malformed HTTP request line 'HELLO'"));
  CHECK(completionText(curlRequest(dir, port, path, request("to be", 24))) == want);

  // SIGTERM while a stream runs: the stream still ends whole ([DONE]) and the exit is 0.
  const std::string wantLong = generated(ck, {"to be"}, 59)[0];
  ds::test::CurlResult last;
  std::thread lastClient([&] { last = curlRequest(dir, port, path, request("to be", 59, true)); });
  const auto seen = Clock::now() + std::chrono::seconds(60);
  // Its first token, not only its arrival: a request still queued at SIGTERM is refused (503).
  auto startedAfterSubmit = [&] {
    const std::string log = server.log();
    const size_t at = log.find("max_tokens 59, stream");
    return at != std::string::npos && log.find(": started", at) != std::string::npos;
  };
  while (!startedAfterSubmit() && Clock::now() < seen)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(server.stop() == 0);
  lastClient.join();
  INFO("curl exit " << last.rc << ", body " << last.body << "\nserver log:\n" << server.log());
  REQUIRE(last.status == 200);
  CHECK(ds::test::sseText(last.body, &finish, &done) == wantLong);
  CHECK(done);
  const std::string log = server.log();
  CHECK_THAT(log, Catch::Contains(": malformed HTTP request line 'HELLO'"));
  CHECK_THAT(log, Catch::Contains("stopped"));
}

TEST_CASE("dsrt serve: bad flags are refused by name", "[e2e]") {
  TempDir dir;
  std::string out;
  CHECK(runCommand(dsrt() + "serve --help", &out) == 0);
  for (const char* flag : {"--host", "--port", "--max_batch", "--max_queue", "--max_request_bytes",
                           "--max_tokens_limit", "--tokenizer", "--dtype", "--request_timeout"})
    CHECK_THAT(out, Catch::Contains(flag));
  struct Bad {
    std::string args, msg;
  };
  const std::string m = dir.file("missing");
  const Bad bad[] = {
      {m + " --tokenizer byte --max_batch 0", "--max_batch 0: expected >= 1"},
      {m + " --tokenizer byte --max_queue 0", "--max_queue 0: expected >= 1"},
      {m + " --tokenizer byte --port 70000", "--port 70000: expected 0..65535"},
      {m + " --tokenizer byte --request_timeout 0", "--request_timeout 0"},
      {m + " --tokenizer byte", "model '" + m + "' does not exist"},
      {m, "--tokenizer is required"},
  };
  for (const Bad& b : bad) {
    INFO(b.args);
    CHECK(runCommand(dsrt() + "serve " + b.args + " 2>&1", &out) == 2);
    CHECK_THAT(out, Catch::Contains(b.msg));
  }
}
