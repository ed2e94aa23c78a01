// HttpRequestParser: an incremental, strict parser of one HTTP/1.1 request (request line,
// headers, a Content-Length body) for `dsrt serve`. Not a general HTTP implementation: no chunked
// request bodies, no pipelining (bytes after the first request are ignored), no HTTP/2.
// Invariant: a request is only reported complete once its whole body is in; anything malformed
// or over a limit becomes an HttpError carrying the 4xx/5xx status the client gets and a message
// that names what was wrong. Not thread-safe; one parser per connection.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"

namespace ds::runtime::serve {

// A request the server refuses: status (400, 404, 405, 408, 411, 413, 429, 431, 501, 503...) and
// the message sent back in the error body.
class HttpError : public Error {
 public:
  HttpError(int status, const std::string& what) : Error(what), status_(status) {}
  const char* kind() const noexcept override { return "HttpError"; }
  int status() const noexcept { return status_; }

 private:
  int status_;
};

struct HttpRequest {
  std::string method;   // "GET", "POST", ... (as sent; methods are case-sensitive)
  std::string target;   // "/v1/completions" (the query string, if any, stays on it)
  std::string version;  // "HTTP/1.1" or "HTTP/1.0"
  std::map<std::string, std::string> headers;  // names lower-cased, values trimmed
  std::string body;
  // The value of header `name` (lower-case), if present.
  std::optional<std::string> header(const std::string& name) const;
};

struct HttpLimits {
  size_t maxHeaderBytes = 16 * 1024;  // request line + headers; over: 431
  size_t maxBodyBytes = 1 << 20;      // Content-Length over: 413 (before the body is read)
};

class HttpRequestParser {
 public:
  explicit HttpRequestParser(HttpLimits limits) : limits_(limits) {}
  // Appends bytes; returns true once a whole request has arrived (then request() is valid and
  // later bytes are ignored). Throws HttpError for a malformed request or one over the limits.
  bool feed(std::string_view bytes);
  bool done() const { return done_; }
  // True once any byte has arrived (an idle keep-alive connection has none).
  bool started() const { return started_; }
  const HttpRequest& request() const { return req_; }
  // The headers are in, the body is not, and the client asked for `Expect: 100-continue`.
  bool awaitsContinue() const {
    return headDone_ && !done_ && req_.header("expect") == std::string("100-continue");
  }

 private:
  void parseHead(std::string_view head);
  void parseRequestLine(std::string_view line);
  void parseHeaderLine(std::string_view line);
  void checkFraming();

  HttpLimits limits_;
  std::string buf_;
  bool started_ = false, headDone_ = false, done_ = false;
  size_t bodyLength_ = 0;
  size_t scanned_ = 0;  // head bytes checked for a bare LF
  HttpRequest req_;
};

}  // namespace ds::runtime::serve
