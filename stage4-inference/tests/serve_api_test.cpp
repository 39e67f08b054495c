// kc-serve's request validation (kc/serve/api.hpp): what a client may send, and the error a
// client gets for what it may not.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kc/serve/api.hpp"
#include "kc/serve/http_server.hpp"

namespace kc::serve {
namespace {

CompletionRequest parse_ok(const std::string& body) {
  auto parsed = parse_completion_request(body);
  if (const ApiError* error = std::get_if<ApiError>(&parsed)) {
    ADD_FAILURE() << body << " -> " << error->message;
    return {};
  }
  return std::get<CompletionRequest>(parsed);
}

ApiError parse_error(const std::string& body) {
  auto parsed = parse_completion_request(body);
  if (!std::holds_alternative<ApiError>(parsed)) {
    ADD_FAILURE() << body << " was accepted";
    return {};
  }
  return std::get<ApiError>(parsed);
}

TEST(ServeApi, DefaultsAndEveryField) {
  const CompletionRequest plain = parse_ok(R"({"prompt": "Hi"})");
  EXPECT_EQ(plain.prompt, "Hi");
  EXPECT_EQ(plain.max_tokens, 16);
  EXPECT_EQ(plain.temperature, 1.0f);
  EXPECT_EQ(plain.top_p, 1.0f);
  EXPECT_FALSE(plain.seed.has_value());
  EXPECT_FALSE(plain.stream);

  const CompletionRequest full = parse_ok(
      R"({"model": "m", "prompt": "Hi", "max_tokens": 7, "temperature": 0, "top_p": 0.5,
          "seed": -3, "stop": ["a", "bc"], "n": 1, "stream": true, "user": "ignored",
          "presence_penalty": null})");
  EXPECT_EQ(full.model, "m");
  EXPECT_EQ(full.max_tokens, 7);
  EXPECT_EQ(full.temperature, 0.0f);
  EXPECT_EQ(full.top_p, 0.5f);
  EXPECT_EQ(full.seed, static_cast<std::uint64_t>(-3));
  EXPECT_EQ(full.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_TRUE(full.stream);
  EXPECT_EQ(parse_ok(R"({"prompt": "Hi", "stop": "x"})").stop, std::vector<std::string>{"x"});
}

TEST(ServeApi, BadRequestsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"prompt": "Hi", "max_tokens": 0})", "max_tokens"},
      {R"({"prompt": "Hi", "max_tokens": -5})", "max_tokens"},
      {R"({"prompt": "Hi", "max_tokens": 2.5})", "max_tokens"},
      {R"({"prompt": "Hi", "max_tokens": "8"})", "max_tokens"},
      {R"({"prompt": "Hi", "max_tokens": 18446744073709551615})", "max_tokens"},
      {R"({"prompt": "Hi", "temperature": -0.1})", "temperature"},
      {R"({"prompt": "Hi", "temperature": 2.5})", "temperature"},
      {R"({"prompt": "Hi", "temperature": "hot"})", "temperature"},
      {R"({"prompt": "Hi", "top_p": 0})", "top_p"},
      {R"({"prompt": "Hi", "top_p": 1.01})", "top_p"},
      {R"({"prompt": "Hi", "seed": 1.5})", "seed"},
      {R"({"prompt": "Hi", "stop": [1]})", "stop"},
      {R"({"prompt": "Hi", "stop": [""]})", "stop"},
      {R"({"prompt": "Hi", "stop": ["a", "b", "c", "d", "e"]})", "stop"},
      {R"({"prompt": "Hi", "n": 2})", "n"},
      {R"({"prompt": "Hi", "stream": 1})", "stream"},
      {R"({"prompt": "Hi", "model": 3})", "model"},
      {R"({"prompt": 42})", "prompt"},
      {R"({"prompt": ""})", "prompt"},
      {R"({"max_tokens": 4})", "prompt"},
  };
  for (const auto& [body, param] : cases) {
    const ApiError error = parse_error(body);
    EXPECT_EQ(error.status, 400) << body;
    EXPECT_EQ(error.param, param) << body;
    EXPECT_FALSE(error.message.empty()) << body;
  }
}

TEST(ServeApi, BodiesThatAreNotAJsonObject) {
  for (const char* body : {"", "{", "not json", "[1, 2]", "\"prompt\"", "{\"prompt\": \"a\",}"}) {
    const ApiError error = parse_error(body);
    EXPECT_EQ(error.status, 400) << body;
    EXPECT_EQ(error.type, "invalid_request_error") << body;
  }
}

TEST(ServeApi, ErrorBodyIsOpenAiShaped) {
  const auto body = nlohmann::json::parse(
      error_body(ApiError{400, "invalid_request_error", "'n' must be 1", "n"}));
  EXPECT_EQ(body["error"]["message"], "'n' must be 1");
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(body["error"]["param"], "n");
  EXPECT_TRUE(body["error"]["code"].is_null());
  EXPECT_TRUE(nlohmann::json::parse(error_body(ApiError{401, "x", "m", ""}))["error"]["param"]
                  .is_null());
}

TEST(ServeApi, ConstantTimeEqual) {
  EXPECT_TRUE(constant_time_equal("secret", "secret"));
  EXPECT_FALSE(constant_time_equal("secreT", "secret"));
  EXPECT_FALSE(constant_time_equal("secre", "secret"));
  EXPECT_FALSE(constant_time_equal("secret1", "secret"));
  EXPECT_FALSE(constant_time_equal("", "secret"));
  EXPECT_FALSE(constant_time_equal(std::string("secret\0", 7), "secret"));
}

}  // namespace
}  // namespace kc::serve
