// kc-serve — the engine behind an OpenAI-compatible HTTP API (kc/serve/http_server.hpp).
//
//   kc-serve --fake-model --tokenizer tests/data/tokenizer/gpt2-synthetic.tokenizer.json
//   curl -s localhost:8000/v1/completions -d '{"prompt": "Hi", "max_tokens": 8}'
//
// The GPU model step does not exist yet: --fake-model (kc/serve/fake_model.hpp) is the only
// mode. The API key comes from --api-key or the KC_SERVE_API_KEY environment variable.
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>

#include "kc/common/error.hpp"
#include "kc/serve/bridge.hpp"
#include "kc/serve/fake_model.hpp"
#include "kc/serve/http_server.hpp"

namespace {

constexpr const char* kUsage =
    "usage: kc-serve --fake-model --tokenizer FILE [--host 127.0.0.1] [--port 8000]\n"
    "                [--api-key KEY] [--model-name NAME] [--num-blocks 256] [--block-size 16]\n"
    "                [--max-model-len 2048] [--fake-step-ms 0]\n";

kc::serve::HttpServer* g_server = nullptr;
extern "C" void on_signal(int) {
  if (g_server) g_server->stop();
}

int run(int argc, char** argv) {
  kc::serve::ServerOptions options;
  std::string tokenizer_path;
  bool fake_model = false;
  int step_ms = 0;
  kc::engine::SchedulerConfig config;
  config.num_blocks = 256;
  config.max_model_len = 2048;
  if (const char* key = std::getenv("KC_SERVE_API_KEY")) options.api_key = key;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      kc::require(i + 1 < argc, "kc-serve: {} needs a value\n{}", arg, kUsage);
      return argv[++i];
    };
    if (arg == "--fake-model") fake_model = true;
    else if (arg == "--tokenizer") tokenizer_path = value();
    else if (arg == "--host") options.host = value();
    else if (arg == "--port") options.port = std::stoi(value());
    else if (arg == "--api-key") options.api_key = value();
    else if (arg == "--model-name") options.model_name = value();
    else if (arg == "--num-blocks") config.num_blocks = std::stoi(value());
    else if (arg == "--block-size") config.block_size = std::stoi(value());
    else if (arg == "--max-model-len") config.max_model_len = std::stoll(value());
    else if (arg == "--fake-step-ms") step_ms = std::stoi(value());
    else if (arg == "--help" || arg == "-h") { std::cout << kUsage; return 0; }
    else kc::require(false, "kc-serve: unknown argument '{}'\n{}", arg, kUsage);
  }
  kc::require(fake_model, "kc-serve: there is no GPU model step yet; run with --fake-model\n{}",
              kUsage);
  kc::require(!tokenizer_path.empty(), "kc-serve: --tokenizer FILE (a tokenizer.json) is needed\n{}",
              kUsage);

  const auto tokenizer = kc::engine::Tokenizer::from_tokenizer_json(tokenizer_path);
  if (tokenizer.eos_id()) options.stop_token_ids.push_back(*tokenizer.eos_id());
  kc::serve::EngineBridge bridge(config, kc::engine::streaming_detokenizer(tokenizer),
                                 std::make_unique<kc::serve::FakeModelExecutor>(
                                     tokenizer, std::chrono::milliseconds(step_ms)));
  kc::serve::HttpServer server(options, tokenizer, bridge);
  const int port = server.bind();
  std::cout << "kc-serve: listening on http://" << options.host << ":" << port
            << (options.api_key.empty() ? "" : " (API key required)") << std::endl;
  g_server = &server;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  server.listen();
  g_server = nullptr;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
