// Test helpers for `dsrt serve` end to end: a GPT trained by `dsrt train` for the server to load,
// the server as a real background process (one rank, or several under dsrun) whose first stdout
// line names its port, and the requests and answers the e2e tests compare.
#pragma once

#include <catch2/catch.hpp>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "ds/config.h"
#include "tests/runtime/serve/curl_client.h"
#include "tests/support/spawn_ranks.h"

namespace ds::test::serve {

using Clock = std::chrono::steady_clock;

inline std::string dsrt() { return dsrtCommand(); }

// Trains a 2-layer GPT (context 64) on byte shards for 8 steps; the checkpoint is dir/ck.
inline void train(const TempDir& dir) {
  {
    std::ofstream f(dir.file("text.txt"), std::ios::binary);
    for (int i = 0; i < 300; ++i)
      f << "to be or not to be, " << i % 11 << " that is the question\n";
  }
  std::string out;
  REQUIRE(runCommand(dsrt() + "prepare-data " + dir.file("text.txt") + " " + dir.file("d/tok") +
                         " --val_fraction 0.2",
                     &out) == 0);
  writeFile(dir.file("plan.yaml"),
            "model:\n  gpt: {n_layer: 2, n_head: 4, n_embd: 32, seq_len: 64, vocab_size: 256}\n"
            "data: {shards: d/tok_train_*.bin, val: d/tok_val_*.bin}\n"
            "train: {steps: 8, checkpoint: {dir: ck}}\n"
            "deepspeed: {train_batch_size: 4, optimizer: {type: AdamW, params: {lr: 0.01}}}\n");
  INFO(out);
  REQUIRE(runCommand("cd " + dir.path() + " && " + dsrt() + "train plan.yaml", &out) == 0);
}

// `dsrt serve <args>` in the background: stdout on a pipe (its first line names the port),
// stderr in a file. ranks > 1: under `dsrun --num_gpus ranks` (its lines prefixed "[rank] ").
// The destructor kills it if stop() did not run.
class ServeProcess {
 public:
  // env: "NAME=value ..." set for the launcher and its ranks (empty: none).
  ServeProcess(const std::string& args, std::string log, int ranks = 1, const std::string& env = "")
      : log_(std::move(log)) {
    int p[2];
    REQUIRE(::pipe(p) == 0);
    const std::string launch =
        ranks == 1
            ? dsrt()
            : std::string(DS_BINARY_DIR) + "/dsrun --num_gpus " + std::to_string(ranks) +
                  " --master_port " + std::to_string(freePort()) + " " + DS_BINARY_DIR + "/dsrt ";
    const std::string cmd =
        "exec " + (env.empty() ? "" : "env " + env + " ") + launch + "serve " + args + " 2>" + log_;
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(p[1], 1);
      ::close(p[0]);
      ::close(p[1]);
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(p[1]);
    out_ = p[0];
  }
  ~ServeProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(out_);
  }
  // The port from "dsrt serve: listening on http://127.0.0.1:PORT/...", or 0 when the process
  // printed no such line within 120 s.
  int port() {
    std::string line;
    const auto deadline = Clock::now() + std::chrono::seconds(120);
    while (line.find('\n') == std::string::npos && Clock::now() < deadline) {
      pollfd pfd{out_, POLLIN, 0};
      if (::poll(&pfd, 1, 1000) <= 0) continue;
      char buf[256];
      const ssize_t n = ::read(out_, buf, sizeof buf);
      if (n <= 0) break;
      line.append(buf, static_cast<size_t>(n));
    }
    const std::string key = "listening on http://127.0.0.1:";
    const size_t at = line.find(key);
    if (at == std::string::npos) return 0;
    return std::stoi(line.substr(at + key.size()));
  }
  // SIGTERM, then the exit status within 60 s (SIGKILL and kHung after that).
  int stop() {
    ::kill(pid_, SIGTERM);
    return exitStatus();
  }
  // The exit status once it exits by itself, within 60 s (SIGKILL and kHung after that).
  static constexpr int kHung = -1;
  int exitStatus() {
    int status = 0;
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        pid_ = -1;
        return kHung;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  std::string log() const { return readFile(log_); }

 private:
  std::string log_;
  pid_t pid_ = -1;
  int out_ = -1;
};

inline std::string request(const std::string& prompt, int maxTokens, bool stream = false) {
  return nlohmann::json{{"model", "ck"},
                        {"prompt", prompt},
                        {"max_tokens", maxTokens},
                        {"temperature", 0},
                        {"stream", stream}}
      .dump();
}

// dsrt generate's greedy texts for prompts, n tokens each (one batched run).
inline std::vector<std::string> generated(const std::string& ck,
                                          const std::vector<std::string>& prompts, int n) {
  std::string cmd = dsrt() + "generate " + ck + " --tokenizer byte --greedy --format json " +
                    "--max_new_tokens " + std::to_string(n);
  for (const auto& p : prompts) cmd += " --prompt '" + p + "'";
  std::string out;
  INFO(cmd);
  REQUIRE(runCommand(cmd + " 2>/dev/null", &out) == 0);
  std::vector<std::string> texts;
  size_t pos = 0;
  while (pos < out.size()) {
    const size_t end = out.find('\n', pos);
    texts.push_back(nlohmann::json::parse(out.substr(pos, end - pos))["text"]);
    pos = end == std::string::npos ? out.size() : end + 1;
  }
  REQUIRE(texts.size() == prompts.size());
  return texts;
}

inline std::string completionText(const CurlResult& r) {
  INFO(r.body);
  REQUIRE(r.status == 200);
  return nlohmann::json::parse(r.body)["choices"][0]["text"];
}

}  // namespace ds::test::serve
