// The bytes `dsrt serve` writes back: a whole HTTP/1.1 response (status line, headers,
// Content-Length body), the head of a server-sent-events stream, one SSE event, and the JSON error
// body in OpenAI's shape ({"error": {"message", "type", "code"}}). Every response carries
// `Connection: close`: one request per connection, so a client's disconnect is its request's end.
#pragma once

#include <string>
#include <string_view>

namespace ds::runtime::serve {

// "Bad Request" for 400, ... ("Error" for a status it does not know).
const char* reasonPhrase(int status);
std::string httpResponse(int status, std::string_view contentType, std::string_view body);
// A JSON error response; the type is "invalid_request_error" for 4xx, "server_error" otherwise.
std::string httpErrorResponse(int status, std::string_view message);
// Status line and headers of a text/event-stream response (its body follows as sseEvent()s).
std::string sseHead();
// "data: <payload>\n\n"
std::string sseEvent(std::string_view payload);

}  // namespace ds::runtime::serve
