// kc/serve/http_server.hpp — kc-serve's HTTP routes on cpp-httplib.
//
//   GET  /health                {"status": "ok", ...} with the queue and KV-cache occupancy; no key
//   GET  /metrics               Prometheus text (metrics.hpp); no key
//   GET  /v1/models             the one model served
//   POST /v1/completions        OpenAI text completions, whole or streamed as server-sent events
//   POST /v1/chat/completions   OpenAI chat completions: the messages rendered with the model's
//                               chat template (kc/engine/chat_template.hpp), the reply stopped at
//                               the template's end of turn or EOS; whole or streamed
//
// Handler threads (httplib's pool) parse and validate the body (api.hpp), tokenize the prompt,
// submit to the EngineBridge and read the request's stream; a streaming client that goes away
// cancels its request, which frees its KV blocks. With an API key every /v1/ route wants
// "Authorization: Bearer <key>", compared in constant time.
//
// Statuses besides 200: 400 for a request the API refuses (OpenAI's error body, naming the
// field), 401 without the key, 413 for a body over max_body_bytes, 429 with Retry-After when the
// bridge's queue is full, 500 when the model step failed for this request (a stream gets an
// error event instead, its status being sent already), 503 once the server shuts down.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kc/engine/chat_template.hpp"
#include "kc/engine/tokenizer.hpp"
#include "kc/serve/api.hpp"
#include "kc/serve/bridge.hpp"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace kc::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;          // 0: any free port (bind() returns it)
  std::string api_key;      // empty: no key needed
  std::string model_name = "kc";
  std::vector<engine::TokenId> stop_token_ids;  // e.g. the tokenizer's EOS
  // The chat format; none: /v1/chat/completions answers that the model has no chat template.
  std::optional<engine::ChatTemplate> chat_template;
  // Tokens that end a chat reply besides stop_token_ids: the template's end of turn.
  std::vector<engine::TokenId> end_of_turn_ids;
  std::size_t max_body_bytes = std::size_t{4} << 20;
  int retry_after_seconds = 1;  // the Retry-After of a 429
  // Connections served at once: each one a thread (started when needed) for as long as its
  // request streams, so this, not the scheduler, would bound the concurrency if it were smaller
  // than the bridge. 0: the bridge's capacity (sequence slots + queue) plus kSpareConnections
  // for the requests it refuses, /health and /metrics, at most kMaxConnections.
  std::size_t max_connections = 0;
  static constexpr std::size_t kSpareConnections = 64;
  static constexpr std::size_t kMaxConnections = 4096;
};

// True when `given` equals `secret`; the time taken depends only on the secret's length.
bool constant_time_equal(const std::string& given, const std::string& secret);

// The tokens that end an assistant turn in `chat_template`'s format, as `tokenizer` has them:
// <|im_end|> for ChatML, <|eot_id|> for Llama 3, </s> (the EOS) for Llama 2. Empty when the
// tokenizer lacks the token.
std::vector<engine::TokenId> end_of_turn_tokens(const engine::ChatTemplate& chat_template,
                                                const engine::Tokenizer& tokenizer);

class HttpServer {
 public:
  // The tokenizer and the bridge must outlive the server.
  HttpServer(ServerOptions options, const engine::Tokenizer& tokenizer, EngineBridge& bridge);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds options.host:options.port and returns the port; throws kc::Error when it cannot.
  int bind();
  // Serves until stop(); call bind() first.
  void listen();
  // The first half of a graceful stop: requests already received run on; new requests to /v1/
  // get 503 with Retry-After and "Connection: close", /health answers 503 "draining" (so a load
  // balancer sends no more), /metrics still answers.
  void begin_drain();
  // Closes the listening socket; listen() returns once the handlers running have returned.
  // httplib ends a stream still being written when its listening socket closes, which is why a
  // graceful stop drains first and stops last.
  void stop();
  // Generation requests being answered (from parsing to the last byte of a stream).
  int active_generations() const { return active_generations_.load(); }

 private:
  void add_routes();
  // The part /v1/completions and /v1/chat/completions share: submit, then answer whole or
  // streamed in the endpoint's format.
  void generate(const httplib::Request& http_request, httplib::Response& response,
                const GenerationOptions& options, std::vector<engine::TokenId> prompt,
                bool chat);

  ServerOptions options_;
  const engine::Tokenizer& tokenizer_;
  EngineBridge& bridge_;
  std::atomic<int> active_generations_{0};
  std::atomic<bool> draining_{false};
  std::unique_ptr<httplib::Server> http_;
};

}  // namespace kc::serve
