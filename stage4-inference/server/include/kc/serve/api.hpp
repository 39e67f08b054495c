// kc/serve/api.hpp — the OpenAI-compatible request and response bodies of kc-serve, as pure
// functions: a JSON body in, a request struct or an OpenAI-style error out; results in, JSON out.
//
// No HTTP and no engine here, so every rule about what a client may send is unit-tested on its
// own (tests/serve_api_test.cpp). What a field may hold follows the OpenAI API: unknown fields
// are ignored (clients send many), known fields of the wrong type or out of range are a 400
// naming the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace kc::serve {

// An OpenAI-style error: the HTTP status and the body {"error": {"message", "type", "param",
// "code"}}.
struct ApiError {
  int status = 400;
  std::string type = "invalid_request_error";
  std::string message;
  std::string param;  // the offending field, empty when none
};
std::string error_body(const ApiError& error);

// POST /v1/completions.
struct CompletionRequest {
  std::string model;                  // echoed back; kc-serve serves one model
  std::string prompt;
  std::int32_t max_tokens = 16;       // >= 1
  float temperature = 1.0f;           // [0, 2]; 0 is greedy
  float top_p = 1.0f;                 // (0, 1]
  std::optional<std::uint64_t> seed;  // none: the server picks one
  std::vector<std::string> stop;      // at most 4, none empty
  bool stream = false;
};
std::variant<CompletionRequest, ApiError> parse_completion_request(std::string_view body);

// The non-streaming body of a finished completion ("text_completion").
struct CompletionResult {
  std::string id;     // "cmpl-..."
  std::string model;
  std::int64_t created = 0;  // Unix seconds
  std::string text;
  std::string finish_reason;  // "stop" or "length"
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
};
std::string completion_body(const CompletionResult& result);
// One server-sent event's JSON for a streamed piece of text; finish_reason empty while running.
std::string completion_chunk(const std::string& id, const std::string& model,
                             std::int64_t created, const std::string& text,
                             const std::string& finish_reason);

// GET /v1/models.
std::string models_body(const std::string& model, std::int64_t created);

}  // namespace kc::serve
