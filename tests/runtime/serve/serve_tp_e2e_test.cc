// Tensor-parallel `dsrt serve` end to end (runtime/serve/decode_link.h, follower.h): dsrun starts 2
// real ranks, curl is the client. Greedy completions, one at a time and several at once (streamed
// or not), equal 1-rank serve's; SIGTERM stops both ranks with exit 0 (dsrun then reports the
// signal). A follower that dies
// mid-request (DS_SERVE_FAULT_KILL) makes rank 0 answer the request in flight with an error and
// exit non-zero, without hanging.
#include <catch2/catch.hpp>

#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include "tests/runtime/serve/serve_process.h"
#include "tests/support/skip.h"

using namespace ds::test::serve;
using ds::test::curlRequest;
using ds::test::CurlResult;
using ds::test::TempDir;

namespace {

const char* const kPath = "/v1/completions";

// Each prompt's greedy text from a server on `ranks` ranks: one at a time, then all at once
// (every other one streamed); both passes must agree. Stops the server (exit 0).
std::vector<std::string> serveTexts(const TempDir& dir, int ranks, const std::string& dtype,
                                    const std::vector<std::string>& prompts) {
  const std::string log = dir.file("serve" + std::to_string(ranks) + dtype + ".log");
  ServeProcess server(dir.file("ck") + " --tokenizer byte --port 0 --max_batch 3 --dtype " + dtype,
                      log, ranks);
  const int port = server.port();
  INFO(server.log());
  REQUIRE(port > 0);
  std::vector<std::string> seq;
  for (const auto& p : prompts)
    seq.push_back(completionText(curlRequest(dir, port, kPath, request(p, 20))));
  std::vector<CurlResult> results(prompts.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i)
    clients.emplace_back([&, i] {
      results[i] = curlRequest(dir, port, kPath, request(prompts[i], 20, i % 2 == 1));
    });
  for (auto& t : clients) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) {
    INFO(ranks << " ranks, " << dtype << ", prompt " << i << ": " << prompts[i]);
    std::string text;
    if (i % 2 == 1) {
      REQUIRE(results[i].status == 200);
      std::string finish;
      bool done = false;
      text = ds::test::sseText(results[i].body, &finish, &done);
      CHECK(done);
    } else {
      text = completionText(results[i]);
    }
    CHECK(text == seq[i]);
  }
  const int status = server.stop();
  if (ranks > 1) {
    const std::string out = server.log();
    INFO(out);
    CHECK_THAT(out, Catch::Contains("following rank 0's decode steps"));
    CHECK_THAT(out, Catch::Contains("rank 1: stopped by rank 0 after"));
    // dsrun reports the SIGTERM it was stopped by (128 + 15) when every rank exited 0; a rank
    // that exited otherwise would be its exit status and a line naming it.
    CHECK(status == 128 + SIGTERM);
    CHECK_THAT(out, !Catch::Contains("exited with code"));
  } else {
    CHECK(status == 0);
  }
  return seq;
}

}  // namespace

TEST_CASE("dsrt serve: 2 tensor-parallel ranks answer 1 rank's greedy text, SIGTERM stops both",
          "[multiproc]") {
  if (!ds::test::haveCurl()) DS_SKIP("curl is not installed (scripts/install_deps.sh installs it)");
  TempDir dir;
  train(dir);
  const std::vector<std::string> prompts = {"to be", "that is 3", "t", "or not to be, 7",
                                            "the question"};
  for (const std::string dtype : {"fp32", "bf16"}) {
    const auto one = serveTexts(dir, 1, dtype, prompts);
    const auto two = serveTexts(dir, 2, dtype, prompts);
    INFO(dtype);
    CHECK(one == two);
  }
}

TEST_CASE("dsrt serve: a follower that dies fails the request in flight, rank 0 exits non-zero",
          "[multiproc]") {
  if (!ds::test::haveCurl()) DS_SKIP("curl is not installed (scripts/install_deps.sh installs it)");
  TempDir dir;
  train(dir);
  for (const bool stream : {false, true}) {
    INFO((stream ? "streamed" : "not streamed"));
    // Forward 1 is the prefill, 2.. the decode steps: rank 1 dies with the request half done.
    ServeProcess server(dir.file("ck") + " --tokenizer byte --port 0",
                        dir.file(stream ? "s.log" : "n.log"), 2,
                        "DS_SERVE_FAULT_KILL=rank=1,forward=6");
    const int port = server.port();
    INFO(server.log());
    REQUIRE(port > 0);
    const CurlResult r = curlRequest(dir, port, kPath, request("to be", 40, stream));
    INFO("status " << r.status << ", body " << r.body);
    if (stream) {
      CHECK(r.status == 200);  // the head went out before the failure; the error is an event
      CHECK_THAT(r.body, Catch::Contains("\"error\""));
      CHECK_THAT(r.body, Catch::Contains("data: [DONE]"));
    } else {
      CHECK(r.status == 500);
    }
    CHECK_THAT(r.body, Catch::Contains("the server failed and is stopping"));
    const int status = server.exitStatus();
    const std::string log = server.log();
    INFO(log);
    CHECK(status != ServeProcess::kHung);  // it ended by itself, no one had to kill it
    CHECK(status != 0);                    // dsrun reports the follower's death (128 + 9)
    CHECK_THAT(log, Catch::Contains("[0] ERROR dsrt: CommError"));  // rank 0's own exit: 1
    CHECK_THAT(log, Catch::Contains("DS_SERVE_FAULT_KILL: rank 1 sends itself SIGKILL"));
    CHECK_THAT(log, Catch::Contains("answered 1 requests in flight with 500"));
  }
}
