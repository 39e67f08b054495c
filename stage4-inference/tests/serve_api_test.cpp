// kc-serve's request validation (kc/serve/api.hpp): what a client may send, and the error a
// client gets for what it may not.
#include <limits>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kc/serve/api.hpp"
#include "kc/serve/http_server.hpp"

namespace kc::serve {
namespace {

// The request a body parsed into; a test failure when it was refused.
template <typename Request>
Request accepted(const std::string& body, const std::variant<Request, ApiError>& parsed) {
  if (const ApiError* error = std::get_if<ApiError>(&parsed)) {
    ADD_FAILURE() << body << " -> " << error->message;
    return {};
  }
  return std::get<Request>(parsed);
}

CompletionRequest parse_ok(const std::string& body) {
  return accepted(body, parse_completion_request(body));
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
      error_body(ApiError{400, "invalid_request_error", "'n' must be 1", "n", ""}));
  EXPECT_EQ(body["error"]["message"], "'n' must be 1");
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(body["error"]["param"], "n");
  EXPECT_TRUE(body["error"]["code"].is_null());
  EXPECT_TRUE(nlohmann::json::parse(error_body(ApiError{401, "x", "m", "", ""}))["error"]["param"]
                  .is_null());
}

TEST(ServeApi, ErrorBodyCarriesTheCode) {
  const auto body = nlohmann::json::parse(
      error_body(ApiError{429, "rate_limit_error", "full", "", "queue_full"}));
  EXPECT_EQ(body["error"]["code"], "queue_full");
}

ChatRequest parse_chat_ok(const std::string& body) {
  return accepted(body, parse_chat_request(body));
}

TEST(ServeApi, ChatRequestFields) {
  const ChatRequest chat = parse_chat_ok(
      R"({"model": "m", "messages": [{"role": "system", "content": "S"},
          {"role": "user", "content": "U", "name": "ignored"},
          {"role": "assistant", "content": ""}], "temperature": 0.5, "seed": 9, "stop": "x",
          "stream": true, "stream_options": {"include_usage": true}})");
  ASSERT_EQ(chat.messages.size(), 3u);
  EXPECT_EQ(chat.messages[0].role, "system");
  EXPECT_EQ(chat.messages[1].content, "U");
  EXPECT_EQ(chat.messages[2].content, "");
  EXPECT_EQ(chat.max_tokens, std::numeric_limits<std::int32_t>::max())
      << "no default length: the reply runs to its end of turn or the context";
  EXPECT_EQ(chat.temperature, 0.5f);
  EXPECT_EQ(chat.seed, 9u);
  EXPECT_EQ(chat.stop, std::vector<std::string>{"x"});
  EXPECT_TRUE(chat.stream);
  EXPECT_TRUE(chat.include_usage);
  const std::string user = R"("messages": [{"role": "user", "content": "U"}])";
  EXPECT_EQ(parse_chat_ok("{" + user + R"(, "max_tokens": 7})").max_tokens, 7);
  EXPECT_EQ(
      parse_chat_ok("{" + user + R"(, "max_tokens": 7, "max_completion_tokens": 5})").max_tokens,
      5)
      << "max_completion_tokens wins";
}

TEST(ServeApi, BadChatRequestsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({})", "messages"},
      {R"({"messages": []})", "messages"},
      {R"({"messages": {"role": "user", "content": "x"}})", "messages"},
      {R"({"messages": [1]})", "messages"},
      {R"({"messages": [{"role": "tool", "content": "x"}]})", "messages"},
      {R"({"messages": [{"role": 1, "content": "x"}]})", "messages"},
      {R"({"messages": [{"role": "user", "content": null}]})", "messages"},
      {R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]})",
       "messages"},
      {R"({"messages": [{"role": "user", "content": "x"}], "n": 3})", "n"},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_p": 0})", "top_p"},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": -1})",
       "max_completion_tokens"},
      {R"({"messages": [{"role": "user", "content": "x"}], "stream_options": true})",
       "stream_options"},
  };
  for (const auto& [body, param] : cases) {
    auto parsed = parse_chat_request(body);
    ASSERT_TRUE(std::holds_alternative<ApiError>(parsed)) << body << " was accepted";
    const ApiError& error = std::get<ApiError>(parsed);
    EXPECT_EQ(error.status, 400) << body;
    EXPECT_EQ(error.param, param) << body;
    EXPECT_FALSE(error.message.empty()) << body;
  }
}

TEST(ServeApi, NestingIsLimited) {
  const auto nested = [](int depth) {
    return R"({"prompt": "Hi", "user": )" + std::string(depth, '[') + std::string(depth, ']') +
           "}";
  };
  parse_ok(nested(kMaxJsonDepth - 1));  // with the body object: kMaxJsonDepth levels
  for (const int depth : {kMaxJsonDepth, 1000000}) {
    const ApiError error = parse_error(nested(depth));
    EXPECT_EQ(error.status, 400);
    EXPECT_NE(error.message.find("more than 64 deep"), std::string::npos) << error.message;
  }
  const ApiError objects = parse_error(std::string(100, '{'));
  EXPECT_EQ(objects.status, 400);
}

TEST(ServeApi, FirstInvalidUtf8) {
  EXPECT_EQ(first_invalid_utf8(""), std::nullopt);
  EXPECT_EQ(first_invalid_utf8("plain ascii"), std::nullopt);
  EXPECT_EQ(first_invalid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF"),
            std::nullopt)
      << "two-, three- and four-byte characters, U+10FFFF the last";
  const std::pair<std::string, std::size_t> bad[] = {
      {"ab\x80", 2},                 // a continuation byte with no lead
      {"a\xC3(", 1},                 // a lead without its continuation
      {"\xC0\xAF", 0},               // overlong '/'
      {"xy\xE0\x80\xAF", 2},         // overlong, three bytes
      {"\xED\xA0\x80", 0},           // a surrogate, U+D800
      {"\xF4\x90\x80\x80", 0},       // U+110000
      {"\xE2\x82", 0},               // cut short at the end
      {"ok\xFF", 2},                 // never a UTF-8 byte
      {"\xF8\x88\x80\x80\x80", 0},   // a five-byte form
  };
  for (const auto& [text, at] : bad) EXPECT_EQ(first_invalid_utf8(text), at) << text;
  const ApiError error = parse_error(std::string(R"({"prompt": "a)") + "\xC3\x28" + R"("})");
  EXPECT_NE(error.message.find("UTF-8 (byte 13)"), std::string::npos) << error.message;
}

TEST(ServeApi, ChunkShapes) {
  const ChunkHeader header{"chatcmpl-7", "m", 5};
  const auto role = nlohmann::json::parse(chat_role_chunk(header));
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["delta"]["role"], "assistant");
  const auto content = nlohmann::json::parse(chat_content_chunk(header, "hi"));
  EXPECT_EQ(content["choices"][0]["delta"], nlohmann::json({{"content", "hi"}}));
  EXPECT_TRUE(content["choices"][0]["finish_reason"].is_null());
  const auto finish = nlohmann::json::parse(chat_finish_chunk(header, "stop"));
  EXPECT_TRUE(finish["choices"][0]["delta"].empty());
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "stop");
  const auto usage = nlohmann::json::parse(usage_chunk(header, "text_completion", 3, 4));
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["total_tokens"], 7);
  // Text cut inside a character (a length stop) is repaired, not an exception.
  const auto cut = nlohmann::json::parse(completion_chunk(header, "a\xE2\x82", "length"));
  EXPECT_EQ(cut["choices"][0]["text"], "a\xEF\xBF\xBD");
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
