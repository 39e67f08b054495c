// fuzz/fuzz_request_json.cpp — kc-serve's request bodies (server/api.cpp) on arbitrary bytes. Byte 0
// picks the endpoint (even: /v1/completions, odd: /v1/chat/completions), the rest is the body. A
// body either parses into a request that keeps every rule the server relies on, or gives an
// OpenAI-style error whose body is JSON with the message; nothing throws.
//
//   build/fuzz/stage4-inference/fuzz/fuzz_request_json stage4-inference/fuzz/corpus/fuzz_request_json
#include <cmath>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "fuzz_check.hpp"
#include "kc/serve/api.hpp"

namespace {

void check_options(const kc::serve::GenerationOptions& options) {
  KC_FUZZ_CHECK(options.max_tokens >= 1);
  KC_FUZZ_CHECK(std::isfinite(options.temperature) && options.temperature >= 0.0f && options.temperature <= 2.0f);
  KC_FUZZ_CHECK(std::isfinite(options.top_p) && options.top_p > 0.0f && options.top_p <= 1.0f);
  KC_FUZZ_CHECK(options.stop.size() <= 4);
  for (const std::string& stop : options.stop) {
    KC_FUZZ_CHECK(!stop.empty());
    KC_FUZZ_CHECK(!kc::serve::first_invalid_utf8(stop).has_value());
  }
}

void check_error(const kc::serve::ApiError& error) {
  KC_FUZZ_CHECK(error.status >= 400 && error.status < 600);
  KC_FUZZ_CHECK(!error.message.empty());
  const std::string body = kc::serve::error_body(error);
  const nlohmann::json parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  KC_FUZZ_CHECK(parsed.is_object() && parsed.contains("error") && parsed["error"].is_object());
  KC_FUZZ_CHECK(parsed["error"].contains("message") && parsed["error"]["message"].is_string());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    const auto parsed = kc::serve::parse_completion_request(body);
    if (const auto* request = std::get_if<kc::serve::CompletionRequest>(&parsed)) {
      check_options(*request);
      KC_FUZZ_CHECK(!request->prompt.empty());
      KC_FUZZ_CHECK(!kc::serve::first_invalid_utf8(request->prompt).has_value());
    } else {
      check_error(std::get<kc::serve::ApiError>(parsed));
    }
  } else {
    const auto parsed = kc::serve::parse_chat_request(body);
    if (const auto* request = std::get_if<kc::serve::ChatRequest>(&parsed)) {
      check_options(*request);
      KC_FUZZ_CHECK(!request->messages.empty());
      for (const kc::engine::ChatMessage& message : request->messages) {
        KC_FUZZ_CHECK(message.role == "system" || message.role == "user" || message.role == "assistant");
        KC_FUZZ_CHECK(!kc::serve::first_invalid_utf8(message.content).has_value());
      }
    } else {
      check_error(std::get<kc::serve::ApiError>(parsed));
    }
  }
  return 0;
}
