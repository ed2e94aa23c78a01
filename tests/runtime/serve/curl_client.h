// Test helpers for `dsrt serve`: requests through the real curl binary (status, body), the text
// of a server-sent-events body, and whether curl is here at all (tests skip visibly without it).
#pragma once

#include <atomic>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/support/spawn_ranks.h"

namespace ds::test {

inline bool haveCurl() {
  std::string out;
  return runCommand("command -v curl", &out) == 0;
}

struct CurlResult {
  int rc = -1;     // curl's exit status
  int status = 0;  // HTTP status (0 when none arrived)
  std::string body;
};

// POSTs body (or sends `method` with no body when body is empty and method is not POST) to
// http://127.0.0.1:port<path>. curl's own limit (--max-time) bounds it.
inline CurlResult curlRequest(const TempDir& dir, int port, const std::string& path,
                              const std::string& body, const std::string& method = "POST") {
  static std::atomic<int> counter{0};
  const std::string n = std::to_string(counter++);
  const std::string in = dir.file("req" + n + ".json"), out = dir.file("resp" + n);
  writeFile(in, body);
  std::string cmd = "curl -sS -N --max-time 60 -o " + out + " -w '%{http_code}' -X " + method +
                    " http://127.0.0.1:" + std::to_string(port) + path;
  if (method == "POST") cmd += " -H 'Content-Type: application/json' --data-binary @" + in;
  CurlResult r;
  std::string status;
  r.rc = runCommand(cmd, &status, std::chrono::seconds(90));
  try {
    r.status = std::stoi(status);
  } catch (...) {
    r.status = 0;
  }
  try {
    r.body = readFile(out);
  } catch (...) {
  }
  return r;
}

// The concatenated choices[0].text of `data: {...}` events; finish: the last finish_reason;
// done: whether `data: [DONE]` ended the stream.
inline std::string sseText(const std::string& body, std::string* finish, bool* done) {
  std::string text;
  *done = false;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    const std::string payload =
        body.substr(pos + 6, end == std::string::npos ? end : end - pos - 6);
    pos = end == std::string::npos ? body.size() : end + 2;
    if (payload == "[DONE]") {
      *done = true;
      continue;
    }
    const auto j = nlohmann::json::parse(payload);
    text += j["choices"][0]["text"].get<std::string>();
    if (!j["choices"][0]["finish_reason"].is_null())
      *finish = j["choices"][0]["finish_reason"].get<std::string>();
  }
  return text;
}

}  // namespace ds::test
