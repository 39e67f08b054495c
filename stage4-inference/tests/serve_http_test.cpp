// kc-serve end to end on the CPU: the real tokenizer, scheduler, bridge and HTTP routes, with the
// scripted fake model step, on an ephemeral loopback port, spoken to in raw HTTP/1.1.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kc/serve/bridge.hpp"
#include "kc/serve/fake_model.hpp"
#include "kc/serve/http_server.hpp"

#ifndef KC_TOKENIZER_TEST_DATA
#error "KC_TOKENIZER_TEST_DATA must name the tokenizer test data folder"
#endif

namespace kc::serve {
namespace {

using nlohmann::json;

// A connected loopback socket; closes on destruction.
class Connection {
 public:
  explicit Connection(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  }
  ~Connection() { close(); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  void send(const std::string& data) {
    EXPECT_EQ(::send(fd_, data.data(), data.size(), 0), static_cast<ssize_t>(data.size()));
  }
  // Reads until `marker` appears in what was read (or the peer closes); returns all of it.
  std::string read_until(const std::string& marker) {
    std::string data;
    char buffer[4096];
    while (data.find(marker) == std::string::npos) {
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      data.append(buffer, static_cast<std::size_t>(n));
    }
    return data;
  }

 private:
  int fd_;
};

struct Response {
  int status = 0;
  std::string head;  // status line and headers
  std::string body;  // de-chunked
};

std::string dechunk(const std::string& raw) {
  std::string body;
  std::size_t at = 0;
  for (;;) {
    const std::size_t line_end = raw.find("\r\n", at);
    if (line_end == std::string::npos) break;
    const std::size_t size = std::stoul(raw.substr(at, line_end - at), nullptr, 16);
    if (size == 0) break;
    body += raw.substr(line_end + 2, size);
    at = line_end + 2 + size + 2;
  }
  return body;
}

Response parse_response(const std::string& raw) {
  Response response;
  const std::size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos) {
    ADD_FAILURE() << "no HTTP head in: " << raw;
    return response;
  }
  response.head = raw.substr(0, head_end);
  response.status = std::stoi(raw.substr(9, 3));
  const std::string rest = raw.substr(head_end + 4);
  response.body = response.head.find("Transfer-Encoding: chunked") != std::string::npos
                      ? dechunk(rest)
                      : rest;
  return response;
}

std::string request_text(const std::string& method, const std::string& path,
                         const std::string& body, const std::string& key) {
  std::string text = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!key.empty()) text += "Authorization: Bearer " + key + "\r\n";
  if (method == "POST")
    text += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
            "\r\n";
  return text + "\r\n" + body;
}

class ServeHttp : public ::testing::Test {
 protected:
  static constexpr const char* kKey = "test-key-1234";

  void start(std::chrono::milliseconds step_delay = std::chrono::milliseconds(0)) {
    tokenizer_ = std::make_unique<engine::Tokenizer>(engine::Tokenizer::from_tokenizer_json(
        std::string(KC_TOKENIZER_TEST_DATA) + "/gpt2-synthetic.tokenizer.json"));
    auto fake = std::make_unique<FakeModelExecutor>(*tokenizer_, step_delay);
    script_ = fake->script();
    engine::SchedulerConfig config;
    config.num_blocks = 32;
    config.block_size = 16;
    config.max_model_len = 256;
    bridge_ = std::make_unique<EngineBridge>(config, engine::streaming_detokenizer(*tokenizer_),
                                             std::move(fake));
    ServerOptions options;
    options.port = 0;
    options.api_key = kKey;
    options.model_name = "kc-test";
    server_ = std::make_unique<HttpServer>(options, *tokenizer_, *bridge_);
    port_ = server_->bind();
    listener_ = std::thread([this] { server_->listen(); });
  }

  void TearDown() override {
    if (server_) server_->stop();
    if (listener_.joinable()) listener_.join();
    server_.reset();
    bridge_.reset();
  }

  Response call(const std::string& method, const std::string& path, const std::string& body = "",
                const std::string& key = kKey) {
    Connection connection(port_);
    connection.send(request_text(method, path, body, key));
    return parse_response(connection.read_until("\r\n0\r\n\r\n"));
  }

  // The text the fake model writes in `count` tokens.
  std::string script_text(std::size_t count) const {
    std::vector<engine::TokenId> ids;
    for (std::size_t i = 0; i < count; ++i) ids.push_back(script_[i % script_.size()]);
    return tokenizer_->decode(ids);
  }

  std::unique_ptr<engine::Tokenizer> tokenizer_;
  std::vector<engine::TokenId> script_;
  std::unique_ptr<EngineBridge> bridge_;
  std::unique_ptr<HttpServer> server_;
  std::thread listener_;
  int port_ = 0;
};

TEST_F(ServeHttp, HealthAndModels) {
  start();
  const Response health = call("GET", "/health", "", "");
  ASSERT_EQ(health.status, 200) << health.body;
  EXPECT_EQ(json::parse(health.body)["status"], "ok");
  const Response models = call("GET", "/v1/models");
  ASSERT_EQ(models.status, 200) << models.body;
  EXPECT_EQ(json::parse(models.body)["data"][0]["id"], "kc-test");
}

TEST_F(ServeHttp, Completion) {
  start();
  const Response response =
      call("POST", "/v1/completions", R"({"prompt": "Hello there", "max_tokens": 9, "seed": 1})");
  ASSERT_EQ(response.status, 200) << response.body;
  const json body = json::parse(response.body);
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["choices"][0]["text"], script_text(9));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["completion_tokens"], 9);
  EXPECT_EQ(body["usage"]["prompt_tokens"], tokenizer_->encode("Hello there").size());
}

TEST_F(ServeHttp, StopStringEndsTheCompletion) {
  start();
  const Response response = call("POST", "/v1/completions",
                                 R"({"prompt": "Hi", "max_tokens": 40, "stop": "fake"})");
  ASSERT_EQ(response.status, 200) << response.body;
  const json body = json::parse(response.body);
  const std::string full = FakeModelExecutor::kScriptText;
  EXPECT_EQ(body["choices"][0]["text"], full.substr(0, full.find("fake")));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
}

TEST_F(ServeHttp, StreamSendsChunksInOrderThenDone) {
  start();
  const Response response = call("POST", "/v1/completions",
                                 R"({"prompt": "Hi", "max_tokens": 12, "stream": true})");
  ASSERT_EQ(response.status, 200) << response.body;
  EXPECT_NE(response.head.find("text/event-stream"), std::string::npos) << response.head;
  std::vector<std::string> events;
  std::size_t at = 0;
  while ((at = response.body.find("data: ", at)) != std::string::npos) {
    const std::size_t end = response.body.find("\n\n", at);
    ASSERT_NE(end, std::string::npos) << "an event without its blank line";
    events.push_back(response.body.substr(at + 6, end - at - 6));
    at = end + 2;
  }
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  for (std::size_t i = 0; i + 1 < events.size(); ++i) {
    const json chunk = json::parse(events[i]);
    text += chunk["choices"][0]["text"].get<std::string>();
    const bool last = i + 2 == events.size();
    EXPECT_EQ(chunk["choices"][0]["finish_reason"].is_null(), !last) << events[i];
  }
  EXPECT_EQ(text, script_text(12)) << "the chunks, in order, are the completion";
  EXPECT_EQ(json::parse(events[events.size() - 2])["choices"][0]["finish_reason"], "length");
}

TEST_F(ServeHttp, BadRequestsAre400) {
  start();
  for (const char* body : {"{not json", R"({"prompt": "Hi", "max_tokens": 0})",
                           R"({"prompt": "Hi", "max_tokens": -1})", R"({"prompt": ["Hi"]})"}) {
    const Response response = call("POST", "/v1/completions", body);
    EXPECT_EQ(response.status, 400) << body;
    const json error = json::parse(response.body)["error"];
    EXPECT_EQ(error["type"], "invalid_request_error") << body;
    EXPECT_FALSE(error["message"].get<std::string>().empty()) << body;
  }
  std::string long_prompt;
  for (int i = 0; i < 400; ++i) long_prompt += " word";
  const Response too_long = call("POST", "/v1/completions",
                                 json{{"prompt", long_prompt}, {"max_tokens", 4}}.dump());
  EXPECT_EQ(too_long.status, 400) << too_long.body;
  EXPECT_EQ(json::parse(too_long.body)["error"]["param"], "prompt");
}

TEST_F(ServeHttp, WrongOrMissingKeyIs401) {
  start();
  const std::string body = R"({"prompt": "Hi", "max_tokens": 2})";
  for (const char* key : {"wrong-key", "", "test-key-123", "test-key-12345"}) {
    const Response response = call("POST", "/v1/completions", body, key);
    EXPECT_EQ(response.status, 401) << "key '" << key << "'";
    EXPECT_TRUE(json::parse(response.body).contains("error"));
  }
  EXPECT_EQ(call("GET", "/v1/models", "", "wrong-key").status, 401);
  EXPECT_EQ(call("POST", "/v1/completions", body).status, 200);
}

TEST_F(ServeHttp, DisconnectMidStreamCancelsAndFreesBlocks) {
  // 200 tokens at 30 ms a step run for seconds; the cancellation must free the blocks sooner.
  start(std::chrono::milliseconds(30));
  const BridgeStats idle = bridge_->stats();
  {
    Connection connection(port_);
    connection.send(request_text("POST", "/v1/completions",
                                 R"({"prompt": "Hi", "max_tokens": 200, "stream": true})", kKey));
    const std::string first = connection.read_until("data: ");
    ASSERT_NE(first.find("data: "), std::string::npos);
    EXPECT_EQ(bridge_->stats().running, 1u);
    EXPECT_LT(bridge_->stats().free_blocks, idle.free_blocks);
  }  // the client goes away
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  BridgeStats now = bridge_->stats();
  while ((now.running > 0 || now.free_blocks != idle.free_blocks) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    now = bridge_->stats();
  }
  EXPECT_EQ(now.running, 0u) << "the request still runs after its client left";
  EXPECT_EQ(now.free_blocks, idle.free_blocks) << "its KV blocks were not freed";
}

}  // namespace
}  // namespace kc::serve
