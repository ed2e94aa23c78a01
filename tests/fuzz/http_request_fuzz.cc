// fuzz-sources: runtime/serve/http_request.cc runtime/serve/completion_request.cc
// fuzz-deps: ds_rt_serve
// Fuzz harness for `dsrt serve`'s request handling: the input (after byte 0) is what a client
// sends. It is parsed whole and in pieces of 1..8 bytes (byte 0 picks the size); then a parsed
// body goes through parseCompletionRequest with a byte-valued tokenizer. Invariants: only
// HttpError escapes (with a 4xx/5xx status), and the piecewise parse ends exactly as the whole one.
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "runtime/serve/completion_request.h"
#include "runtime/serve/http_request.h"

using namespace ds::runtime::serve;

namespace {

class Bytes : public ds::runtime::Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view t) const override {
    return std::vector<int32_t>(t.begin(), t.end());
  }
  std::string decode(std::span<const int32_t> ids) const override {
    return std::string(ids.begin(), ids.end());
  }
  int vocabSize() const override { return 256; }
  int eosId() const override { return -1; }
  std::string describe() const override { return "fuzz"; }
};

// The status of the parse (0 = complete, -1 = needs more), and the request when complete.
int parse(const std::string& text, size_t piece, std::optional<HttpRequest>* req) {
  HttpLimits limits;
  limits.maxHeaderBytes = 512;
  limits.maxBodyBytes = 4096;
  HttpRequestParser p(limits);
  try {
    for (size_t i = 0; i < text.size(); i += piece)
      if (p.feed(std::string_view(text).substr(i, piece))) break;
  } catch (const HttpError& e) {
    if (e.status() < 400 || e.status() > 599) std::abort();
    return e.status();
  }
  if (!p.done()) return -1;
  *req = p.request();
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::optional<HttpRequest> whole, pieces;
  const int a = parse(text, text.size() + 1, &whole);
  const int b = parse(text, data[0] % 8 + 1, &pieces);
  if (a != b) std::abort();
  if (a != 0) return 0;
  if (whole->body != pieces->body || whole->headers != pieces->headers) std::abort();
  const Bytes tok;
  try {
    parseCompletionRequest(whole->body, tok, {256, 64, 32, 0});
  } catch (const HttpError& e) {
    if (e.status() != 400) std::abort();
  }
  return 0;
}
