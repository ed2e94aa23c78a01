// HttpRequestParser (see http_request.h).
#include "runtime/serve/http_request.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace ds::runtime::serve {
namespace {

// RFC 9110 token characters (method and header names).
bool isToken(std::string_view s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) ||
           std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
  });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Printable form of client bytes for an error message: at most 60 characters, controls escaped.
std::string quoted(std::string_view s) {
  std::string out;
  for (unsigned char c : s.substr(0, 60))
    out += (c >= 0x20 && c < 0x7f) ? std::string(1, static_cast<char>(c))
                                   : fmt::format("\\x{:02x}", c);
  return "'" + out + (s.size() > 60 ? "...'" : "'");
}

}  // namespace

std::optional<std::string> HttpRequest::header(const std::string& name) const {
  auto it = headers.find(name);
  if (it == headers.end()) return std::nullopt;
  return it->second;
}

bool HttpRequestParser::feed(std::string_view bytes) {
  if (done_) return true;
  started_ = started_ || !bytes.empty();
  buf_.append(bytes);
  if (!headDone_) {
    // The same error whatever pieces the bytes come in: a bare LF within the first
    // maxHeaderBytes of the head first, then the size.
    const size_t end = buf_.find("\r\n\r\n");
    const size_t headBytes = end == std::string::npos ? buf_.size() : end + 4;
    const size_t scanTo = std::min(headBytes, limits_.maxHeaderBytes);
    for (; scanned_ < scanTo; ++scanned_)
      if (buf_[scanned_] == '\n' && (scanned_ == 0 || buf_[scanned_ - 1] != '\r'))
        throw HttpError(400, "malformed HTTP: header lines must end with CRLF (\\r\\n)");
    if (headBytes > limits_.maxHeaderBytes)
      throw HttpError(
          431, fmt::format("the request line and headers exceed {} bytes", limits_.maxHeaderBytes));
    if (end == std::string::npos) return false;
    parseHead(std::string_view(buf_).substr(0, end));
    buf_.erase(0, end + 4);
    headDone_ = true;
  }
  if (buf_.size() < bodyLength_) return false;
  req_.body = buf_.substr(0, bodyLength_);
  buf_.clear();
  done_ = true;
  return true;
}

void HttpRequestParser::parseHead(std::string_view head) {
  size_t pos = head.find("\r\n");
  parseRequestLine(head.substr(0, pos));
  while (pos != std::string_view::npos) {
    const size_t start = pos + 2;
    pos = head.find("\r\n", start);
    parseHeaderLine(head.substr(start, pos == std::string_view::npos ? pos : pos - start));
  }
  checkFraming();
}

void HttpRequestParser::parseRequestLine(std::string_view line) {
  const size_t a = line.find(' ');
  const size_t b = a == std::string_view::npos ? a : line.find(' ', a + 1);
  if (b == std::string_view::npos || line.find(' ', b + 1) != std::string_view::npos)
    throw HttpError(400, fmt::format("malformed HTTP request line {}: expected 'METHOD /path "
                                     "HTTP/1.1'",
                                     quoted(line)));
  req_.method = std::string(line.substr(0, a));
  req_.target = std::string(line.substr(a + 1, b - a - 1));
  req_.version = std::string(line.substr(b + 1));
  if (!isToken(req_.method))
    throw HttpError(400, fmt::format("malformed HTTP method {}", quoted(req_.method)));
  const bool targetOk = !req_.target.empty() && req_.target[0] == '/' &&
                        std::all_of(req_.target.begin(), req_.target.end(),
                                    [](unsigned char c) { return c > 0x20 && c < 0x7f; });
  if (!targetOk)
    throw HttpError(400, fmt::format("malformed HTTP request target {}: expected a path such "
                                     "as /v1/completions",
                                     quoted(req_.target)));
  if (req_.version.rfind("HTTP/", 0) != 0)
    throw HttpError(400, fmt::format("malformed HTTP version {}", quoted(req_.version)));
  if (req_.version != "HTTP/1.1" && req_.version != "HTTP/1.0")
    throw HttpError(505, fmt::format("HTTP version {} is not supported (HTTP/1.1 or HTTP/1.0)",
                                     quoted(req_.version)));
}

void HttpRequestParser::parseHeaderLine(std::string_view line) {
  if (!line.empty() && (line[0] == ' ' || line[0] == '\t'))
    throw HttpError(400, "malformed HTTP header: folded (continuation) lines are not allowed");
  const size_t colon = line.find(':');
  const std::string_view name = line.substr(0, colon);
  if (colon == std::string_view::npos || !isToken(name))
    throw HttpError(
        400, fmt::format("malformed HTTP header line {}: expected 'Name: value'", quoted(line)));
  std::string key(name);
  std::transform(key.begin(), key.end(), key.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const std::string value(trim(line.substr(colon + 1)));
  auto [it, fresh] = req_.headers.emplace(key, value);
  if (!fresh) {
    if (key == "content-length" && it->second != value)
      throw HttpError(400, "malformed HTTP: two different Content-Length headers");
    if (key != "content-length") it->second += ", " + value;
  }
}

void HttpRequestParser::checkFraming() {
  if (req_.version == "HTTP/1.1" && !req_.header("host"))
    throw HttpError(400, "malformed HTTP/1.1 request: no Host header");
  if (req_.header("transfer-encoding"))
    throw HttpError(501,
                    "Transfer-Encoding (chunked request bodies) is not supported; send the "
                    "body with a Content-Length header");
  const auto length = req_.header("content-length");
  if (!length) {
    if (req_.method == "POST" || req_.method == "PUT")
      throw HttpError(411, fmt::format("{} without a Content-Length header", req_.method));
    return;
  }
  const bool digits =
      !length->empty() && length->size() <= 18 &&
      std::all_of(length->begin(), length->end(), [](unsigned char c) { return std::isdigit(c); });
  if (!digits)
    throw HttpError(400, fmt::format("malformed Content-Length {}: expected a number of bytes",
                                     quoted(*length)));
  bodyLength_ = std::stoull(*length);
  if (bodyLength_ > limits_.maxBodyBytes)
    throw HttpError(413, fmt::format("request body of {} bytes is over the limit of {} bytes "
                                     "(--max_request_bytes)",
                                     bodyLength_, limits_.maxBodyBytes));
}

}  // namespace ds::runtime::serve
