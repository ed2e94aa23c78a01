// HTTP responses and SSE events (see http_response.h).
#include "runtime/serve/http_response.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace ds::runtime::serve {

const char* reasonPhrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
  }
}

std::string httpResponse(int status, std::string_view contentType, std::string_view body) {
  return fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
      status, reasonPhrase(status), contentType, body.size(), body);
}

std::string httpErrorResponse(int status, std::string_view message) {
  const nlohmann::json body = {{"error",
                                {{"message", message},
                                 {"type", status < 500 ? "invalid_request_error" : "server_error"},
                                 {"code", status}}}};
  return httpResponse(status, "application/json",
                      body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

std::string sseHead() {
  return "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
         "Connection: close\r\n\r\n";
}

std::string sseEvent(std::string_view payload) { return fmt::format("data: {}\n\n", payload); }

}  // namespace ds::runtime::serve
