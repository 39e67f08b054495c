// kc/serve/http_server.hpp — kc-serve's HTTP routes on cpp-httplib.
//
//   GET  /health           {"status": "ok", ...} with the queue and KV-cache occupancy; no key
//   GET  /v1/models        the one model served
//   POST /v1/completions   OpenAI text completions, whole or streamed as server-sent events
//
// Handler threads (httplib's pool) parse and validate the body (api.hpp), tokenize the prompt,
// submit to the EngineBridge and read the request's stream; a streaming client that goes away
// cancels its request, which frees its KV blocks. With an API key every /v1/ route wants
// "Authorization: Bearer <key>", compared in constant time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kc/engine/tokenizer.hpp"
#include "kc/serve/bridge.hpp"

namespace httplib {
class Server;
}

namespace kc::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;          // 0: any free port (bind() returns it)
  std::string api_key;      // empty: no key needed
  std::string model_name = "kc";
  std::vector<engine::TokenId> stop_token_ids;  // e.g. the tokenizer's EOS
};

// True when `given` equals `secret`; the time taken depends only on the secret's length.
bool constant_time_equal(const std::string& given, const std::string& secret);

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
  void stop();

 private:
  void add_routes();

  ServerOptions options_;
  const engine::Tokenizer& tokenizer_;
  EngineBridge& bridge_;
  std::unique_ptr<httplib::Server> http_;
};

}  // namespace kc::serve
