// kc-serve end to end on the CPU: the real tokenizer, scheduler, bridge and HTTP routes, with the
// scripted fake model step, on an ephemeral loopback port, spoken to in raw HTTP/1.1.
#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kc/engine/chat_template.hpp"
#include "kc/engine/tokenizer.hpp"
#include "kc/serve/api.hpp"
#include "kc/serve/bridge.hpp"
#include "kc/serve/fake_model.hpp"
#include "kc/serve/http_server.hpp"
#include "support/serve_client.hpp"

#ifndef KC_TOKENIZER_TEST_DATA
#error "KC_TOKENIZER_TEST_DATA must name the tokenizer test data folder"
#endif

namespace kc::serve {
namespace {

using nlohmann::json;
using test_support::Connection;
using test_support::parse_response;
using test_support::request_text;
using test_support::Response;
using test_support::sse_events;

// How a test's server is set up; the defaults are the first tests' server.
struct ServerSetup {
  std::string tokenizer = "gpt2-synthetic.tokenizer.json";
  std::chrono::milliseconds step_delay{0};
  std::int32_t max_running = 256;
  std::int32_t num_blocks = 32;
  std::size_t max_connections = 0;  // ServerOptions::max_connections
  std::size_t max_queue = EngineBridge::kUnboundedQueue;
  // The fake model ends its script with the chat template's end of turn (when the tokenizer has
  // one), as kc-serve --fake-model does.
  bool end_of_turn = false;
  // Wraps the fake model step, e.g. in one that throws.
  std::function<std::unique_ptr<engine::ModelExecutor>(std::unique_ptr<FakeModelExecutor>)> wrap;
};

class ServeHttp : public ::testing::Test {
 protected:
  static constexpr const char* kKey = "test-key-1234";
  static constexpr std::size_t kMaxBodyBytes = 64 * 1024;

  void start(std::chrono::milliseconds step_delay = std::chrono::milliseconds(0)) {
    ServerSetup setup;
    setup.step_delay = step_delay;
    start(setup);
  }

  void start(const ServerSetup& setup) {
    tokenizer_ = std::make_unique<engine::Tokenizer>(engine::Tokenizer::from_tokenizer_json(
        std::string(KC_TOKENIZER_TEST_DATA) + "/" + setup.tokenizer));
    ServerOptions options;
    options.port = 0;
    options.api_key = kKey;
    options.model_name = "kc-test";
    options.max_body_bytes = kMaxBodyBytes;
    options.max_connections = setup.max_connections;
    options.chat_template = engine::ChatTemplate::chatml();
    options.end_of_turn_ids = end_of_turn_tokens(*options.chat_template, *tokenizer_);
    std::optional<engine::TokenId> end_token;
    if (setup.end_of_turn && !options.end_of_turn_ids.empty())
      end_token = options.end_of_turn_ids.front();
    auto fake = std::make_unique<FakeModelExecutor>(*tokenizer_, setup.step_delay, end_token);
    script_ = fake->script();
    std::unique_ptr<engine::ModelExecutor> executor;
    if (setup.wrap)
      executor = setup.wrap(std::move(fake));
    else
      executor = std::move(fake);
    engine::SchedulerConfig config;
    config.num_blocks = setup.num_blocks;
    config.block_size = 16;
    config.max_model_len = 256;
    config.max_running = setup.max_running;
    bridge_ = std::make_unique<EngineBridge>(config, engine::streaming_detokenizer(*tokenizer_),
                                             std::move(executor), setup.max_queue);
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
    return tokenizer_->decode(ids, /*skip_special_tokens=*/true);
  }

  // The value of one sample line of GET /metrics ("name{labels}"); fails when it is absent.
  double metric(const std::string& exposition, const std::string& sample) {
    std::istringstream lines(exposition);
    for (std::string line; std::getline(lines, line);)
      if (line.rfind(sample + " ", 0) == 0) return std::stod(line.substr(sample.size() + 1));
    ADD_FAILURE() << "no sample " << sample << " in:\n" << exposition;
    return -1;
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
  const std::vector<std::string> events = sse_events(response.body);
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


// Chat runs on SmolLM2's real tokenizer, whose <|im_start|> and <|im_end|> are tokens: the
// prompt is the ChatML rendering, and the fake model ends its reply with <|im_end|>.
ServerSetup chat_setup() {
  ServerSetup setup;
  setup.tokenizer = "smollm2.tokenizer.json";
  setup.end_of_turn = true;
  return setup;
}

constexpr const char* kChatBody =
    R"({"messages": [{"role": "system", "content": "Be brief."},
                     {"role": "user", "content": "Hello there"}])";

// Each chat format's end of an assistant turn, as its tokenizer has it: Llama 2's is the EOS, </s>.
TEST(ServeEndOfTurn, Llama2ChatEndsItsTurnWithTheEos) {
  const std::string data = std::string(KC_TOKENIZER_TEST_DATA);
  const engine::Tokenizer llama2 = engine::Tokenizer::from_tokenizer_json(data + "/llama2-legacy.tokenizer.json");
  std::ifstream golden_file(data + "/chat-llama2.golden.json");
  const json golden = json::parse(golden_file);
  const engine::ChatTemplate chat =
      engine::ChatTemplate::recognize(golden.at("template").get<std::string>(), "chat-llama2.golden.json");
  ASSERT_EQ(chat.kind(), engine::ChatTemplateKind::llama2);
  ASSERT_TRUE(llama2.find_token("</s>").has_value());
  EXPECT_EQ(end_of_turn_tokens(chat, llama2), std::vector<engine::TokenId>{*llama2.find_token("</s>")});
}

TEST_F(ServeHttp, ChatCompletionStopsAtTheEndOfTurn) {
  start(chat_setup());
  ASSERT_EQ(end_of_turn_tokens(engine::ChatTemplate::chatml(), *tokenizer_),
            std::vector<engine::TokenId>{*tokenizer_->find_token("<|im_end|>")});
  const Response response =
      call("POST", "/v1/chat/completions", std::string(kChatBody) + R"(, "seed": 3})");
  ASSERT_EQ(response.status, 200) << response.body;
  const json body = json::parse(response.body);
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["id"].get<std::string>().rfind("chatcmpl-", 0), 0u) << body["id"];
  EXPECT_EQ(body["model"], "kc-test");
  const json& choice = body["choices"][0];
  EXPECT_EQ(choice["message"]["role"], "assistant");
  EXPECT_EQ(choice["message"]["content"], FakeModelExecutor::kScriptText)
      << "the reply is the script, without the <|im_end|> that ended it";
  EXPECT_EQ(choice["finish_reason"], "stop");
  const std::string rendered =
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello there<|im_end|>\n"
      "<|im_start|>assistant\n";
  EXPECT_EQ(body["usage"]["prompt_tokens"], tokenizer_->encode(rendered, false).size())
      << "the prompt is the ChatML rendering, its tags as single tokens";
  EXPECT_EQ(body["usage"]["completion_tokens"], script_.size()) << "the script and <|im_end|>";

  const Response short_reply = call("POST", "/v1/chat/completions",
                                    std::string(kChatBody) + R"(, "max_tokens": 3})");
  ASSERT_EQ(short_reply.status, 200) << short_reply.body;
  const json short_body = json::parse(short_reply.body);
  EXPECT_EQ(short_body["choices"][0]["message"]["content"], script_text(3));
  EXPECT_EQ(short_body["choices"][0]["finish_reason"], "length");
  const Response newer_name = call("POST", "/v1/chat/completions",
                                   std::string(kChatBody) + R"(, "max_completion_tokens": 2})");
  EXPECT_EQ(json::parse(newer_name.body)["usage"]["completion_tokens"], 2) << newer_name.body;
}

TEST_F(ServeHttp, ChatStreamSendsTheRoleThenTextThenTheFinishThenDone) {
  start(chat_setup());
  const Response response =
      call("POST", "/v1/chat/completions",
           std::string(kChatBody) + R"(, "stream": true, "stream_options": {"include_usage": true}})");
  ASSERT_EQ(response.status, 200) << response.body;
  EXPECT_NE(response.head.find("text/event-stream"), std::string::npos) << response.head;
  const std::vector<std::string> events = sse_events(response.body);
  ASSERT_GE(events.size(), 5u) << response.body;
  EXPECT_EQ(events.back(), "[DONE]");
  std::vector<json> chunks;
  for (std::size_t i = 0; i + 1 < events.size(); ++i) chunks.push_back(json::parse(events[i]));
  for (const json& chunk : chunks) {
    EXPECT_EQ(chunk["object"], "chat.completion.chunk") << chunk;
    EXPECT_EQ(chunk["id"], chunks[0]["id"]) << "one id for the whole stream";
  }
  const json& role = chunks.front()["choices"][0];
  EXPECT_EQ(role["delta"]["role"], "assistant") << "the first chunk says the role";
  EXPECT_EQ(role["delta"]["content"], "");
  EXPECT_TRUE(role["finish_reason"].is_null());
  const json& usage = chunks.back();
  EXPECT_TRUE(usage["choices"].empty()) << "the usage chunk has no choices";
  EXPECT_EQ(usage["usage"]["completion_tokens"], script_.size());
  const json& finish = chunks[chunks.size() - 2]["choices"][0];
  EXPECT_EQ(finish["finish_reason"], "stop");
  EXPECT_TRUE(finish["delta"].empty()) << "the finish chunk's delta is empty";
  std::string text;
  for (std::size_t i = 1; i + 2 < chunks.size(); ++i) {
    const json& choice = chunks[i]["choices"][0];
    EXPECT_TRUE(choice["finish_reason"].is_null()) << chunks[i];
    EXPECT_FALSE(choice["delta"].contains("role")) << "only the first chunk has the role";
    text += choice["delta"]["content"].get<std::string>();
  }
  EXPECT_EQ(text, FakeModelExecutor::kScriptText) << "the content deltas, in order, are the reply";

  // Without include_usage the finish chunk comes right before [DONE].
  const Response plain =
      call("POST", "/v1/chat/completions", std::string(kChatBody) + R"(, "stream": true})");
  const std::vector<std::string> plain_events = sse_events(plain.body);
  ASSERT_GE(plain_events.size(), 3u) << plain.body;
  EXPECT_EQ(json::parse(plain_events[plain_events.size() - 2])["choices"][0]["finish_reason"],
            "stop");
}

TEST_F(ServeHttp, BadChatRequestsAre400) {
  start(chat_setup());
  for (const char* body : {
           R"({})", R"({"messages": []})", R"({"messages": "Hi"})", R"({"messages": ["Hi"]})",
           R"({"messages": [{"role": "tool", "content": "x"}]})",
           R"({"messages": [{"content": "x"}]})",
           R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]})",
           R"({"messages": [{"role": "user"}]})",
           R"({"messages": [{"role": "user", "content": "x"}], "n": 2})",
           R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 0})"}) {
    const Response response = call("POST", "/v1/chat/completions", body);
    EXPECT_EQ(response.status, 400) << body;
    const json error = json::parse(response.body)["error"];
    EXPECT_EQ(error["type"], "invalid_request_error") << body;
    EXPECT_FALSE(error["param"].is_null()) << body;
  }
}

// With one sequence slot and a queue of two, a burst past the queue is refused with 429 and
// Retry-After while the running request and the two queued ones complete.
TEST_F(ServeHttp, BurstPastTheQueueGets429WhileTheOthersComplete) {
  ServerSetup setup;
  setup.step_delay = std::chrono::milliseconds(20);
  setup.max_running = 1;
  setup.max_queue = 2;
  start(setup);
  Response first;
  std::thread running([&] {
    first = call("POST", "/v1/completions", R"({"prompt": "Hi", "max_tokens": 30})");
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (bridge_->stats().running == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_EQ(bridge_->stats().running, 1u);

  constexpr int kBurst = 5;
  std::vector<Response> burst(kBurst);
  std::vector<std::thread> clients;
  for (int i = 0; i < kBurst; ++i)
    clients.emplace_back([&, i] {
      burst[i] = call("POST", "/v1/completions", R"({"prompt": "Hi", "max_tokens": 3})");
    });
  for (std::thread& client : clients) client.join();
  running.join();

  int accepted = 0, refused = 0;
  for (const Response& response : burst) {
    if (response.status == 200) {
      ++accepted;
      EXPECT_EQ(json::parse(response.body)["choices"][0]["text"], script_text(3));
    } else {
      ++refused;
      EXPECT_EQ(response.status, 429) << response.body;
      EXPECT_NE(response.head.find("Retry-After: 1"), std::string::npos) << response.head;
      const json error = json::parse(response.body)["error"];
      EXPECT_EQ(error["type"], "rate_limit_error");
      EXPECT_EQ(error["code"], "queue_full");
    }
  }
  EXPECT_EQ(accepted, 2) << "the queue holds two";
  EXPECT_EQ(refused, kBurst - 2);
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(json::parse(first.body)["choices"][0]["text"], script_text(30))
      << "the running request is unaffected";
  const std::string metrics = call("GET", "/metrics", "", "").body;
  EXPECT_EQ(metric(metrics, R"(kc_serve_requests_total{endpoint="/v1/completions",status="429"})"),
            kBurst - 2);
}

// More streams than cpp-httplib's default pool has threads (about 4 per core) all reach the
// scheduler at once: the server sizes its connection threads from the bridge's capacity.
// `pool_bound` is the negative control: a server held to 16 connections runs at most 16.
TEST_F(ServeHttp, EveryStreamUpToTheBridgesCapacityRunsAtOnce) {
  for (const bool pool_bound : {false, true}) {
    SCOPED_TRACE(pool_bound ? "max_connections = 16" : "max_connections from the bridge");
    ServerSetup setup;
    setup.step_delay = std::chrono::milliseconds(10);
    setup.max_running = 96;
    setup.num_blocks = 96 * 8;
    setup.max_queue = 8;
    setup.max_connections = pool_bound ? 16 : 0;
    start(setup);
    constexpr int kClients = 96;
    std::vector<Response> responses(kClients);
    std::vector<std::thread> clients;
    std::atomic<int> answered{0};
    for (int i = 0; i < kClients; ++i)
      clients.emplace_back([&, i] {
        responses[i] = call("POST", "/v1/completions", R"({"prompt": "Hi", "max_tokens": 100})");
        ++answered;
      });
    std::size_t most_running = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (most_running < kClients && answered < kClients &&
           std::chrono::steady_clock::now() < deadline) {
      most_running = std::max(most_running, bridge_->stats().running);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (std::thread& client : clients) client.join();
    for (const Response& response : responses) {
      ASSERT_EQ(response.status, 200) << response.body;
      EXPECT_EQ(json::parse(response.body)["choices"][0]["text"], script_text(100));
    }
    if (pool_bound)
      EXPECT_LE(most_running, 16u) << "the control: 16 connection threads run at most 16 streams";
    else
      EXPECT_EQ(most_running, static_cast<std::size_t>(kClients))
          << "every stream should run at once; fewer means the HTTP pool queued them";
    TearDown();
  }
}

// Every line of the exposition is a comment or "name{labels} value"; counters move with requests,
// histograms are cumulative, the gauges add up.
TEST_F(ServeHttp, MetricsParseAndCountersMove) {
  start();
  const std::string before = call("GET", "/metrics", "", "").body;
  EXPECT_EQ(metric(before, "kc_serve_completion_tokens_total"), 0);
  EXPECT_EQ(metric(before, "kc_serve_kv_blocks_free"), 32);
  EXPECT_EQ(call("POST", "/v1/completions", R"({"prompt": "Hello there", "max_tokens": 9})").status,
            200);
  EXPECT_EQ(call("POST", "/v1/completions", R"({"prompt": "Hi", "max_tokens": 0})").status, 400);
  EXPECT_EQ(call("POST", "/v1/completions", "{}", "wrong-key").status, 401);
  const Response response = call("GET", "/metrics", "", "");
  ASSERT_EQ(response.status, 200);
  EXPECT_NE(response.head.find("text/plain; version=0.0.4"), std::string::npos) << response.head;
  const std::string& text = response.body;

  const std::regex sample(R"(^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="[^"]*",?)*\})? )"
                          R"(([-+]?[0-9.]+([eE][-+]?[0-9]+)?|\+Inf|NaN)$)");
  const std::regex comment(R"(^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+$)");
  std::istringstream lines(text);
  int samples = 0;
  for (std::string line; std::getline(lines, line);) {
    EXPECT_TRUE(std::regex_match(line, sample) || std::regex_match(line, comment)) << line;
    samples += line[0] != '#';
  }
  EXPECT_GT(samples, 20);

  EXPECT_EQ(metric(text, R"(kc_serve_requests_total{endpoint="/v1/completions",status="200"})"), 1);
  EXPECT_EQ(metric(text, R"(kc_serve_requests_total{endpoint="/v1/completions",status="400"})"), 1);
  EXPECT_EQ(metric(text, R"(kc_serve_requests_total{endpoint="/v1/completions",status="401"})"), 1);
  EXPECT_EQ(metric(text, R"(kc_serve_requests_total{endpoint="/metrics",status="200"})"), 1)
      << "the first scrape; this one is counted once answered";
  EXPECT_EQ(metric(text, "kc_serve_prompt_tokens_total"),
            tokenizer_->encode("Hello there").size());
  EXPECT_EQ(metric(text, "kc_serve_completion_tokens_total"), 9);
  EXPECT_EQ(metric(text, "kc_serve_time_to_first_token_seconds_count"), 1);
  EXPECT_EQ(metric(text, "kc_serve_inter_token_latency_seconds_count"), 8);
  EXPECT_EQ(metric(text, R"(kc_serve_inter_token_latency_seconds_bucket{le="+Inf"})"), 8);
  EXPECT_LE(metric(text, R"(kc_serve_inter_token_latency_seconds_bucket{le="0.001"})"),
            metric(text, R"(kc_serve_inter_token_latency_seconds_bucket{le="0.01"})"))
      << "buckets are cumulative";
  EXPECT_GE(metric(text, "kc_serve_time_to_first_token_seconds_sum"), 0);
  EXPECT_EQ(metric(text, "kc_serve_queue_length"), 0);
  EXPECT_EQ(metric(text, "kc_serve_running_sequences"), 0);
  EXPECT_EQ(metric(text, "kc_serve_kv_blocks_used") + metric(text, "kc_serve_kv_blocks_free"), 32);
  EXPECT_EQ(metric(text, "kc_serve_model_step_failures_total"), 0);
}

// A model step that throws for one prompt, and one that returns too few tokens for another.
class FailingModel : public engine::ModelExecutor {
 public:
  FailingModel(std::unique_ptr<FakeModelExecutor> inner, std::vector<engine::TokenId> throw_on,
               std::vector<engine::TokenId> short_on)
      : inner_(std::move(inner)), throw_on_(std::move(throw_on)), short_on_(std::move(short_on)) {}
  std::vector<engine::TokenId> execute(const engine::StepBatch& batch) override {
    for (const engine::ScheduledSequence& sequence : batch.sequences) {
      if (sequence.start_position == 0 && sequence.tokens == throw_on_)
        throw std::runtime_error("fake model: this prompt fails");
      if (sequence.start_position == 0 && sequence.tokens == short_on_) return {};
    }
    return inner_->execute(batch);
  }

 private:
  std::unique_ptr<FakeModelExecutor> inner_;
  std::vector<engine::TokenId> throw_on_, short_on_;
};

TEST_F(ServeHttp, ModelStepFailureFailsItsRequestsAndTheServerServesOn) {
  ServerSetup setup;
  setup.wrap = [this](std::unique_ptr<FakeModelExecutor> fake) {
    return std::make_unique<FailingModel>(std::move(fake), tokenizer_->encode("FAIL now"),
                                          tokenizer_->encode("SHORT now"));
  };
  start(setup);
  const Response whole = call("POST", "/v1/completions", R"({"prompt": "FAIL now"})");
  EXPECT_EQ(whole.status, 500) << whole.body;
  const json error = json::parse(whole.body)["error"];
  EXPECT_EQ(error["type"], "server_error");
  EXPECT_NE(error["message"].get<std::string>().find("this prompt fails"), std::string::npos)
      << error;

  const Response stream =
      call("POST", "/v1/completions", R"({"prompt": "FAIL now", "stream": true})");
  EXPECT_EQ(stream.status, 200) << "a stream's status is sent before the step runs";
  const std::vector<std::string> events = sse_events(stream.body);
  ASSERT_EQ(events.size(), 2u) << stream.body;
  EXPECT_EQ(json::parse(events[0])["error"]["type"], "server_error");
  EXPECT_EQ(events[1], "[DONE]");

  const Response short_step = call("POST", "/v1/completions", R"({"prompt": "SHORT now"})");
  EXPECT_EQ(short_step.status, 500) << short_step.body;
  EXPECT_NE(short_step.body.find("returned 0 tokens"), std::string::npos) << short_step.body;

  const Response after = call("POST", "/v1/completions", R"({"prompt": "Hi", "max_tokens": 5})");
  ASSERT_EQ(after.status, 200) << "the server serves on: " << after.body;
  EXPECT_EQ(json::parse(after.body)["choices"][0]["text"], script_text(5));
  EXPECT_EQ(bridge_->stats().free_blocks, 32) << "the failed requests' blocks were freed";
  EXPECT_EQ(json::parse(call("GET", "/health", "", "").body)["status"], "ok");
  EXPECT_EQ(metric(call("GET", "/metrics", "", "").body, "kc_serve_model_step_failures_total"), 3);
}

std::string nested(const std::string& field, int depth) {
  return R"({"prompt": "Hi", ")" + field + R"(": )" + std::string(depth, '[') +
         std::string(depth, ']') + "}";
}

TEST_F(ServeHttp, NestingPastTheLimitIs400) {
  start();
  // The body object is level 1, so the field may hold kMaxJsonDepth - 1 levels.
  const Response deepest = call("POST", "/v1/completions", nested("user", kMaxJsonDepth - 1));
  EXPECT_EQ(deepest.status, 200) << "an unknown field nested to the limit is ignored";
  for (const int depth : {kMaxJsonDepth, 30000}) {  // 60 000 bytes: under the size cap
    const Response response = call("POST", "/v1/completions", nested("user", depth));
    EXPECT_EQ(response.status, 400) << depth;
    EXPECT_NE(response.body.find("deep"), std::string::npos) << response.body;
  }
  EXPECT_EQ(call("GET", "/health", "", "").status, 200);
}

TEST_F(ServeHttp, MalformedUtf8Is400) {
  start(chat_setup());
  const std::string bad_bytes[] = {"\xC3\x28", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80",
                                   "\xE2\x82", "\x80", "\xFF"};
  for (const std::string& bad : bad_bytes) {
    for (const auto& [path, body] :
         {std::pair<std::string, std::string>{"/v1/completions",
                                              R"({"prompt": "a)" + bad + R"(b"})"},
          std::pair<std::string, std::string>{
              "/v1/chat/completions",
              R"({"messages": [{"role": "user", "content": "a)" + bad + R"(b"}]})"}}) {
      const Response response = call("POST", path, body);
      EXPECT_EQ(response.status, 400) << path;
      EXPECT_NE(response.body.find("UTF-8"), std::string::npos) << response.body;
      EXPECT_NO_THROW(json::parse(response.body)) << "the error body itself is valid UTF-8";
    }
  }
  // A lone surrogate written as an escape is not a character either.
  EXPECT_EQ(call("POST", "/v1/completions", R"({"prompt": "a\ud800b"})").status, 400);
  EXPECT_EQ(call("POST", "/v1/completions", R"({"prompt": "caf\u00e9 \ud83d\ude00"})").status, 200)
      << "a valid escaped pair is fine";
}

TEST_F(ServeHttp, BodyOverTheCapIs413WithAnErrorBody) {
  start();
  const std::string body = R"({"prompt": ")" + std::string(kMaxBodyBytes, 'a') + R"("})";
  const Response response = call("POST", "/v1/completions", body);
  EXPECT_EQ(response.status, 413);
  EXPECT_NE(json::parse(response.body)["error"]["message"].get<std::string>().find("larger"),
            std::string::npos)
      << response.body;
  const Response unknown = call("GET", "/v1/nothing");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_TRUE(json::parse(unknown.body).contains("error"));
}

}  // namespace
}  // namespace kc::serve
