// HttpRequestParser: whole requests parse (in one piece or byte by byte), and every malformed or
// oversized request is an HttpError with the status the client gets and a message naming what
// was wrong.
#include <catch2/catch.hpp>

#include <string>

#include "runtime/serve/http_request.h"

using namespace ds::runtime::serve;

namespace {

// The HttpError status of feeding text at once, or 0 when it parses or needs more bytes.
int statusOf(const std::string& text, std::string* msg = nullptr, HttpLimits limits = {}) {
  HttpRequestParser p(limits);
  try {
    p.feed(text);
  } catch (const HttpError& e) {
    if (msg) *msg = e.what();
    return e.status();
  }
  return 0;
}

}  // namespace

TEST_CASE("http request: a POST with a body parses whole and byte by byte", "[unit]") {
  const std::string req =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length:  11 \r\nX-Dup: a\r\nx-dup: b\r\n\r\n{\"a\": true}trailing";
  HttpRequestParser whole({});
  REQUIRE(whole.feed(req));
  CHECK(whole.request().method == "POST");
  CHECK(whole.request().target == "/v1/completions");
  CHECK(whole.request().version == "HTTP/1.1");
  CHECK(whole.request().body == "{\"a\": true}");
  CHECK(whole.request().header("content-type") == "application/json");
  CHECK(whole.request().header("x-dup") == "a, b");
  CHECK(!whole.request().header("accept"));

  HttpRequestParser bytewise({});
  bool done = false;
  for (size_t i = 0; i < req.size() && !done; ++i) {
    done = bytewise.feed(req.substr(i, 1));
    CHECK(bytewise.started());
    if (!done) CHECK(i < req.size() - 9);  // complete once the last body byte is in
  }
  CHECK(done);
  CHECK(bytewise.request().body == "{\"a\": true}");

  HttpRequestParser get({});
  CHECK(!get.started());
  CHECK(get.feed("GET /health HTTP/1.0\r\n\r\n"));
  CHECK(get.request().body.empty());
}

TEST_CASE("http request: malformed requests are 4xx naming the fault", "[unit]") {
  struct Case {
    std::string text;
    int status;
    std::string msg;
  };
  const std::string host = "Host: x\r\n";
  const Case cases[] = {
      {"GARBAGE\r\n\r\n", 400, "malformed HTTP request line 'GARBAGE'"},
      {"POST  /x HTTP/1.1\r\n\r\n", 400, "malformed HTTP request line"},
      {"POST x HTTP/1.1\r\n" + host + "\r\n", 400, "malformed HTTP request target 'x'"},
      {"P(ST /x HTTP/1.1\r\n\r\n", 400, "malformed HTTP method 'P(ST'"},
      {"POST /x FTP/1.1\r\n\r\n", 400, "malformed HTTP version 'FTP/1.1'"},
      {"POST /x HTTP/2.0\r\n\r\n", 505, "HTTP version 'HTTP/2.0' is not supported"},
      {"POST /x HTTP/1.1\r\nno colon here\r\n\r\n", 400, "malformed HTTP header line 'no colon"},
      {"POST /x HTTP/1.1\r\nBad Name: 1\r\n\r\n", 400, "malformed HTTP header line"},
      {"POST /x HTTP/1.1\r\n" + host + " folded\r\n\r\n", 400, "folded"},
      {"POST /x HTTP/1.1\r\nContent-Length: 2\r\n\r\nab", 400, "no Host header"},
      {"POST /x HTTP/1.1\r\n" + host + "\r\n", 411, "POST without a Content-Length"},
      {"POST /x HTTP/1.1\r\n" + host + "Content-Length: -1\r\n\r\n", 400,
       "malformed Content-Length '-1'"},
      {"POST /x HTTP/1.1\r\n" + host + "Content-Length: 1\r\nContent-Length: 2\r\n\r\n", 400,
       "two different Content-Length"},
      {"POST /x HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\n\r\n", 501,
       "Transfer-Encoding"},
      {"POST /x HTTP/1.1\nHost: x\n\n", 400, "must end with CRLF"},
      {"POST /x HTTP/1.1\r\n" + host + "Content-Length: 2000000\r\n\r\n", 413,
       "request body of 2000000 bytes is over the limit of 1048576 bytes"},
  };
  for (const Case& c : cases) {
    std::string msg;
    INFO(c.text);
    CHECK(statusOf(c.text, &msg) == c.status);
    CHECK_THAT(msg, Catch::Contains(c.msg));
  }
  std::string msg;
  HttpLimits small;
  small.maxHeaderBytes = 64;
  CHECK(statusOf("GET /" + std::string(100, 'a'), &msg, small) == 431);
  CHECK_THAT(msg, Catch::Contains("exceed 64 bytes"));
  CHECK(statusOf("GET /x HTTP/1.1\r\nHost: x\r\n", nullptr, small) == 0);  // needs more
}
