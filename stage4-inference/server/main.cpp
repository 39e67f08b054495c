// kc-serve — the engine behind an OpenAI-compatible HTTP API (kc/serve/http_server.hpp).
//
//   kc-serve --model SmolLM2-135M-Instruct.gguf                  (the model on the GPU)
//   kc-serve --model SmolLM2-135M-Instruct.gguf --fake-model     (its tokenizer, scripted tokens)
//   kc-serve --tokenizer tests/data/tokenizer/gpt2-synthetic.tokenizer.json --fake-model
//   kc-serve --synthetic llama-3.2-1b --tokenizer smollm2.tokenizer.json   (a shape, random weights)
//   curl -s localhost:8000/v1/completions -d '{"prompt": "Hi", "max_tokens": 8}'
//
// The model is a GGUF file or a Hugging Face directory (kc/engine/model_loader.hpp); it runs
// through the engine's GPU model step (kc/engine/model_runner.hpp), whose cache and limits give
// the scheduler's. --fake-model (kc/serve/fake_model.hpp) replaces the model step with a scripted
// one, for machines without a GPU. --synthetic NAME serves a published configuration
// (kc/engine/published_configs.hpp) with random weights drawn on the GPU and the vocabulary of
// the --tokenizer given (its size replaces the configuration's): load tests of a model's shape
// without its checkpoint; the text is noise. --native-quantized runs a GGUF file's q4_0, q4_1 and
// q8_0 projections on their blocks (and a GPTQ/AWQ checkpoint's on its 4-bit groups) at decode
// (RunnerOptions::native_quantized); --quantize-int4 G quantizes a --model's other layer
// projections on the GPU at load into 4-bit groups of G (RunnerOptions::quantize_int4_group_size). The tokenizer and the chat template come from the model (GGUF:
// tokenizer.ggml.* and tokenizer.chat_template; a directory: tokenizer.json and
// tokenizer_config.json) or, with --fake-model, from a tokenizer.json, which carries no template:
// then chat uses plain ChatML unless --chat-template names a file with one. A template the engine
// does not render is refused here, at startup. The API key comes from --api-key or the
// KC_SERVE_API_KEY environment variable.
//
// SIGTERM or SIGINT: new requests get 503 (Connection: close), requests already received run to
// their end for at most --drain-timeout seconds (a second signal cuts that short), those still
// running then end with a 503 (an error event on a stream), the listening socket closes and the
// program exits 0. The signals are blocked in every thread and taken by one thread with
// sigwait(), so nothing runs in a signal handler.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>

#include "kc/common/device.hpp"
#include "kc/common/error.hpp"
#include "kc/common/text_io.hpp"
#include "kc/engine/chat_template.hpp"
#include "kc/engine/gguf.hpp"
#include "kc/engine/model_loader.hpp"
#include "kc/engine/model_runner.hpp"
#include "kc/engine/published_configs.hpp"
#include "kc/serve/bridge.hpp"
#include "kc/serve/fake_model.hpp"
#include "kc/serve/http_server.hpp"

namespace {

constexpr const char* kUsage =
    "usage: kc-serve --model FILE.gguf|DIR [--kv-fraction 0.5] [--max-batched-tokens 2048] [--no-cuda-graphs]\n"
    "                [--cpu-sampler] [--no-fuse-kernels] [--no-programmatic-launch] [--native-quantized]\n"
    "                [--quantize-int4 G]\n"
    "       kc-serve --synthetic NAME --tokenizer tokenizer.json [--seed 1]   (random weights)\n"
    "       kc-serve (--model FILE.gguf | --tokenizer tokenizer.json) --fake-model [--fake-step-ms 0]\n"
    "                [--chat-template FILE|chatml] [--host 127.0.0.1] [--port 8000]\n"
    "                [--api-key KEY] [--model-name NAME] [--num-blocks N] [--block-size 16]\n"
    "                [--max-model-len 2048] [--max-running 256] [--max-queue 256]\n"
    "                [--drain-timeout 30]\n";

std::string read_text_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  kc::require(static_cast<bool>(file), "kc-serve: cannot read the chat template file '{}'", path);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

int parse_int(const std::string& option, const std::string& text, long long low) {
  std::size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  kc::require(used == text.size() && !text.empty() && value >= low && value <= 1 << 30,
              "kc-serve: {} wants an integer of at least {}, got '{}'", option, low, text);
  return static_cast<int>(value);
}

// Waits for SIGTERM/SIGINT (blocked in every thread), then drains: see the header comment.
void drain_on_signal(const sigset_t& signals, kc::serve::HttpServer& server,
                     kc::serve::EngineBridge& bridge, std::chrono::seconds drain_timeout,
                     const std::atomic<bool>& listen_returned) {
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  if (listen_returned) return;  // woken by main: nothing to drain
  server.begin_drain();
  std::cout << "kc-serve: " << strsignal(signal_number)
            << ": draining (new requests get 503); letting " << server.active_generations()
            << " request(s) finish (at most " << drain_timeout.count() << " s)" << std::endl;
  const auto wait_until_idle = [&](std::chrono::steady_clock::time_point deadline) {
    while (server.active_generations() > 0 && std::chrono::steady_clock::now() < deadline) {
      timespec poll{0, 50 * 1000 * 1000};
      if (sigtimedwait(&signals, nullptr, &poll) > 0) return false;  // a second signal
    }
    return server.active_generations() == 0;
  };
  if (wait_until_idle(std::chrono::steady_clock::now() + drain_timeout)) {
    std::cout << "kc-serve: every request finished" << std::endl;
  } else {
    std::cout << "kc-serve: drain ended (timeout or a second signal): ending "
              << server.active_generations() << " request(s) with 503" << std::endl;
    bridge.shutdown();  // their streams end with an error event, their handlers return
    wait_until_idle(std::chrono::steady_clock::now() + std::chrono::seconds(5));
  }
  server.stop();  // last: httplib cuts streams still being written when its socket closes
}

int run(int argc, char** argv) {
  kc::serve::ServerOptions options;
  std::string model_path, tokenizer_path, chat_template_option, synthetic;
  std::uint64_t seed = 1;
  bool fake_model = false;
  int step_ms = 0;
  int max_queue = 256;
  int drain_seconds = 30;
  int num_blocks = 0;  // 0: 256 with the fake model, kv_fraction of the free memory on the GPU
  double kv_fraction = 0.5;
  int max_batched_tokens = 2048;
  bool cuda_graphs = true, gpu_sampler = true, fuse_kernels = kc::engine::RunnerOptions{}.fuse_kernels;
  bool native_quantized = kc::engine::RunnerOptions{}.native_quantized;
  int quantize_int4 = 0;
  bool programmatic_launch = kc::engine::RunnerOptions{}.programmatic_launch;
  kc::engine::SchedulerConfig config;
  config.max_model_len = 2048;
  if (const char* key = std::getenv("KC_SERVE_API_KEY")) options.api_key = key;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      kc::require(i + 1 < argc, "kc-serve: {} needs a value\n{}", arg, kUsage);
      return argv[++i];
    };
    if (arg == "--fake-model") fake_model = true;
    else if (arg == "--no-cuda-graphs") cuda_graphs = false;
    else if (arg == "--cpu-sampler") gpu_sampler = false;
    else if (arg == "--no-fuse-kernels") fuse_kernels = false;
    else if (arg == "--no-programmatic-launch") programmatic_launch = false;
    else if (arg == "--native-quantized") native_quantized = true;
    else if (arg == "--quantize-int4") quantize_int4 = parse_int(arg, value(), 1);
    else if (arg == "--synthetic") synthetic = value();
    else if (arg == "--seed") seed = static_cast<std::uint64_t>(parse_int(arg, value(), 0));
    else if (arg == "--model") model_path = value();
    else if (arg == "--tokenizer") tokenizer_path = value();
    else if (arg == "--chat-template") chat_template_option = value();
    else if (arg == "--host") options.host = value();
    else if (arg == "--port") options.port = parse_int(arg, value(), 0);
    else if (arg == "--api-key") options.api_key = value();
    else if (arg == "--model-name") options.model_name = value();
    else if (arg == "--num-blocks") num_blocks = parse_int(arg, value(), 1);
    else if (arg == "--max-batched-tokens") max_batched_tokens = parse_int(arg, value(), 1);
    else if (arg == "--kv-fraction") {
      kv_fraction = kc::parse_double(arg, value());
      kc::require(kv_fraction > 0.0 && kv_fraction <= 0.95, "kc-serve: --kv-fraction wants a number in (0, 0.95], got {}",
                  kv_fraction);
    }
    else if (arg == "--block-size") config.block_size = parse_int(arg, value(), 1);
    else if (arg == "--max-model-len") config.max_model_len = parse_int(arg, value(), 2);
    else if (arg == "--max-running") config.max_running = parse_int(arg, value(), 1);
    else if (arg == "--max-queue") max_queue = parse_int(arg, value(), 1);
    else if (arg == "--drain-timeout") drain_seconds = parse_int(arg, value(), 0);
    else if (arg == "--fake-step-ms") step_ms = parse_int(arg, value(), 0);
    else if (arg == "--help" || arg == "-h") { std::cout << kUsage; return 0; }
    else kc::require(false, "kc-serve: unknown argument '{}'\n{}", arg, kUsage);
  }
  const bool synthetic_model = !synthetic.empty();
  kc::require(quantize_int4 == 0 || (kc::stage3::int4_group_size_supported(quantize_int4) && !model_path.empty() &&
                                     !fake_model),
              "kc-serve: --quantize-int4 {}: a group size of 32, 64 or a multiple of 128, for a --model served on "
              "the GPU\n{}",
              quantize_int4, kUsage);
  kc::require(synthetic_model ? (model_path.empty() && !tokenizer_path.empty() && !fake_model)
                              : model_path.empty() != tokenizer_path.empty(),
              "kc-serve: give the model (--model FILE.gguf or a Hugging Face directory), a shape with "
              "random weights and a tokenizer (--synthetic NAME --tokenizer tokenizer.json), or, with "
              "--fake-model, a tokenizer alone\n{}",
              kUsage);
  kc::require(fake_model || !model_path.empty() || synthetic_model,
              "kc-serve: --tokenizer alone serves the scripted model; add --fake-model, or give "
              "--model or --synthetic\n{}",
              kUsage);

  // The model step: the GPU one on the loaded model (or on random weights of a published shape),
  // or the scripted one.
  std::optional<kc::engine::LoadedModel> model;
  std::optional<kc::engine::Tokenizer> tokenizer_of_file;
  std::unique_ptr<kc::engine::ModelRunner> runner;
  if (!fake_model) {
    if (!kc::gpu_visible_or_explain("kc-serve", "; the model runs on a GPU (--fake-model serves scripted tokens without one)."))
      return 1;
    kc::engine::RunnerOptions runner_options;
    runner_options.block_size = config.block_size;
    runner_options.num_blocks = num_blocks;
    runner_options.kv_memory_fraction = kv_fraction;
    runner_options.max_batched_tokens = max_batched_tokens;
    runner_options.max_running = config.max_running;
    runner_options.max_model_len = config.max_model_len;
    runner_options.cuda_graphs = cuda_graphs;
    runner_options.gpu_sampler = gpu_sampler;
    runner_options.fuse_kernels = fuse_kernels;
    runner_options.programmatic_launch = programmatic_launch;
    runner_options.native_quantized = native_quantized;
    if (!synthetic_model) runner_options.quantize_int4_group_size = quantize_int4;
    if (synthetic_model) {
      tokenizer_of_file = kc::engine::Tokenizer::from_tokenizer_json(tokenizer_path);
      kc::engine::ModelConfig shape = kc::engine::published_model_config(synthetic);
      shape.vocab_size = static_cast<std::int64_t>(tokenizer_of_file->vocab_size());
      shape.eos_token_ids.clear();
      shape.bos_token_id.reset();
      std::cout << "kc-serve: " << synthetic << "'s shape with random weights (seed " << seed << ") and "
                << tokenizer_path << "'s vocabulary of " << shape.vocab_size << ": the text is noise" << std::endl;
      runner = std::make_unique<kc::engine::ModelRunner>(shape, runner_options, seed);
    } else {
      kc::engine::WeightLoadOptions load;
      load.keep_quantized_blocks = native_quantized;  // a GGUF file's blocks, for the native decode steps
      model = kc::engine::load_model(model_path, load);
      kc::require(model->tokenizer.has_value(), "kc-serve: {} carries no tokenizer", model_path);
      for (const std::string& note : model->notes) std::cout << "kc-serve: " << note << std::endl;
      runner = std::make_unique<kc::engine::ModelRunner>(model->weights, runner_options, model->rope_freq_factors);
      model->weights = kc::engine::ModelWeights{};  // uploaded: the host copy is not needed
      tokenizer_of_file = std::move(*model->tokenizer);
    }
    config = runner->scheduler_config();
    std::cout << "kc-serve: model on the GPU, " << runner->pool().total_bytes() / (1 << 20) << " MiB of device memory, "
              << config.num_blocks << " KV blocks of " << config.block_size << " tokens" << std::endl;
  } else {
    config.num_blocks = num_blocks > 0 ? num_blocks : 256;
  }

  const kc::engine::Tokenizer tokenizer =
      tokenizer_of_file    ? std::move(*tokenizer_of_file)
      : model_path.empty() ? kc::engine::Tokenizer::from_tokenizer_json(tokenizer_path)
                           : kc::engine::Tokenizer::from_gguf(kc::engine::GgufFile(model_path));
  if (tokenizer.eos_id()) options.stop_token_ids.push_back(*tokenizer.eos_id());
  if (chat_template_option == "chatml") {
    options.chat_template = kc::engine::ChatTemplate::chatml();
  } else if (!chat_template_option.empty()) {
    options.chat_template = kc::engine::ChatTemplate::recognize(
        read_text_file(chat_template_option), chat_template_option);
  } else if (!tokenizer.chat_template().empty()) {
    options.chat_template =
        kc::engine::ChatTemplate::recognize(tokenizer.chat_template(), tokenizer.source());
  } else {
    options.chat_template = kc::engine::ChatTemplate::chatml();
    std::cout << "kc-serve: " << tokenizer.source()
              << " carries no chat template; chat uses plain ChatML (--chat-template FILE gives "
                 "one)"
              << std::endl;
  }
  options.end_of_turn_ids = kc::serve::end_of_turn_tokens(*options.chat_template, tokenizer);
  std::cout << "kc-serve: chat template " << options.chat_template->name() << std::endl;

  // The fake model ends its script as a chat model ends a turn (or with EOS), so a chat reply
  // stops with finish_reason "stop".
  std::optional<kc::engine::TokenId> fake_end;
  if (!options.end_of_turn_ids.empty()) fake_end = options.end_of_turn_ids.front();
  else if (tokenizer.eos_id()) fake_end = tokenizer.eos_id();

  // Blocked before any thread starts, so every thread inherits the mask and only the drain
  // thread's sigwait() takes the signals.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::unique_ptr<kc::engine::ModelExecutor> executor;
  if (runner) {
    executor = std::move(runner);
  } else {
    executor = std::make_unique<kc::serve::FakeModelExecutor>(tokenizer, std::chrono::milliseconds(step_ms),
                                                              fake_end);
  }
  kc::serve::EngineBridge bridge(config, kc::engine::streaming_detokenizer(tokenizer), std::move(executor),
                                 static_cast<std::size_t>(max_queue));
  kc::serve::HttpServer server(options, tokenizer, bridge);
  const int port = server.bind();
  std::cout << "kc-serve: listening on http://" << options.host << ":" << port
            << (options.api_key.empty() ? "" : " (API key required)") << std::endl;

  std::atomic<bool> listen_returned{false};
  std::thread drainer(drain_on_signal, std::cref(signals), std::ref(server), std::ref(bridge),
                      std::chrono::seconds(drain_seconds), std::cref(listen_returned));
  server.listen();
  listen_returned = true;
  pthread_kill(drainer.native_handle(), SIGTERM);  // pending if the drain already took its signal
  drainer.join();
  std::cout << "kc-serve: stopped" << std::endl;
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
