// kc/serve/api.hpp — the OpenAI-compatible request and response bodies of kc-serve, as pure
// functions: a JSON body in, a request struct or an OpenAI-style error out; results in, JSON out.
//
// No HTTP and no engine here, so every rule about what a client may send is unit-tested on its
// own (tests/serve_api_test.cpp). What a field may hold follows the OpenAI API: unknown fields
// are ignored (clients send many), known fields of the wrong type or out of range are a 400
// naming the field. Before any field is read, the body must be UTF-8 and JSON nested at most
// kMaxJsonDepth deep: deeper JSON is refused before it is built, so nothing recursive (dump() in
// an error message, a destructor) ever walks a crafted million-level value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kc/engine/chat_template.hpp"

namespace kc::serve {

// Objects and arrays a request body may nest; OpenAI requests need four or five.
constexpr int kMaxJsonDepth = 64;

// An OpenAI-style error: the HTTP status and the body {"error": {"message", "type", "param",
// "code"}}.
struct ApiError {
  int status = 400;
  std::string type = "invalid_request_error";
  std::string message;
  std::string param;  // the offending field, empty when none
  std::string code;   // a machine-readable reason, empty when none
};
std::string error_body(const ApiError& error);

// The fields /v1/completions and /v1/chat/completions share.
struct GenerationOptions {
  std::string model;                  // echoed back; kc-serve serves one model
  std::int32_t max_tokens = 16;       // >= 1; chat's default: up to the context
  float temperature = 1.0f;           // [0, 2]; 0 is greedy
  float top_p = 1.0f;                 // (0, 1]
  std::optional<std::uint64_t> seed;  // none: the server picks one
  std::vector<std::string> stop;      // at most 4, none empty
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage: a last chunk with usage
};

// POST /v1/completions.
struct CompletionRequest : GenerationOptions {
  std::string prompt;
};
std::variant<CompletionRequest, ApiError> parse_completion_request(std::string_view body);

// POST /v1/chat/completions. Roles are "system", "user" and "assistant"; content is a string.
// max_completion_tokens (the newer name) wins over max_tokens when both are given.
struct ChatRequest : GenerationOptions {
  std::vector<engine::ChatMessage> messages;
};
std::variant<ChatRequest, ApiError> parse_chat_request(std::string_view body);

// What a finished request's response says.
struct CompletionResult {
  std::string id;     // "cmpl-..." or "chatcmpl-..."
  std::string model;
  std::int64_t created = 0;  // Unix seconds
  std::string text;
  std::string finish_reason;  // "stop" or "length"
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
};
// The non-streaming bodies: "text_completion" and "chat.completion".
std::string completion_body(const CompletionResult& result);
std::string chat_completion_body(const CompletionResult& result);

// What every chunk of one streamed response repeats.
struct ChunkHeader {
  std::string id;
  std::string model;
  std::int64_t created = 0;
};
// One server-sent event's JSON for a streamed piece of text; finish_reason empty while running.
std::string completion_chunk(const ChunkHeader& header, const std::string& text,
                             const std::string& finish_reason);
// "chat.completion.chunk"s: the first says the role, then one per piece of text, then one with
// an empty delta and the finish reason.
std::string chat_role_chunk(const ChunkHeader& header);
std::string chat_content_chunk(const ChunkHeader& header, const std::string& text);
std::string chat_finish_chunk(const ChunkHeader& header, const std::string& finish_reason);
// The chunk stream_options.include_usage asks for last: no choices, the token counts. `object`
// is the endpoint's chunk object ("text_completion" or "chat.completion.chunk").
std::string usage_chunk(const ChunkHeader& header, const char* object, std::int64_t prompt_tokens,
                        std::int64_t completion_tokens);

// GET /v1/models.
std::string models_body(const std::string& model, std::int64_t created);

// The byte offset of the first byte that breaks UTF-8 (overlong forms, surrogates and code
// points past U+10FFFF included), none when `text` is valid.
std::optional<std::size_t> first_invalid_utf8(std::string_view text);

}  // namespace kc::serve
