// kc-generate — text from a model on the GPU, streamed as it is generated, with the rates at the
// end.
//
//   kc-generate --model SmolLM2-135M-Instruct.Q4_1.gguf --chat --prompt "What is the capital of France?"
//   kc-generate --model DIR --ids 1,2,3 --max-tokens 32          (a directory without a tokenizer)
//
// The model is a GGUF file or a Hugging Face directory (kc/engine/model_loader.hpp); it runs
// through the engine's model step (kc/engine/model_runner.hpp) under the continuous-batching
// scheduler, one request. Greedy unless --temperature > 0 (then top-k, top-p and the seed apply:
// the GPU sampler, or with --cpu-sampler the reference sampler of kc/engine/sampling.hpp).
// Generation stops at an end-of-sequence token — config.json's, generation_config.json's and the
// tokenizer's (unless --ignore-eos) — or after --max-tokens. The last lines give the prompt's tokens and
// time (time to first token), the generated tokens and the decode rate (tokens after the first
// over the time after the first), the kernels that ran and the device memory taken. Decode steps
// replay as captured CUDA graphs and temperature sampling runs on the GPU unless --no-cuda-graphs
// or --cpu-sampler says otherwise, and each RMSNorm (and SwiGLU) runs inside the projection that
// reads it where it can unless --no-fuse-kernels says otherwise, and the step's kernels launch as
// programmatic dependents on an sm_90 GPU unless --no-programmatic-launch says otherwise
// (kc/engine/model_runner.hpp).
// --native-quantized keeps a GGUF file's q4_0, q4_1 and q8_0 projections as stored (and a GPTQ or
// AWQ checkpoint's 4-bit groups) beside their bf16 copy and runs the decode steps on them
// (RunnerOptions::native_quantized); the memory line then gives both sizes. --quantize-int4 G
// quantizes the other layer projections on the GPU at load into 4-bit groups of G (round to
// nearest; RunnerOptions::quantize_int4_group_size), so that a bf16 checkpoint runs as a GPTQ one
// of those groups would, natively with --native-quantized.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "kc/common/device.hpp"
#include "kc/common/error.hpp"
#include "kc/common/text_io.hpp"
#include "kc/engine/model_loader.hpp"
#include "kc/engine/model_runner.hpp"
#include "kc/engine/scheduler.hpp"

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kUsage =
    "usage: kc-generate --model PATH (--prompt TEXT [--chat] | --ids N,N,...) [--max-tokens N]\n"
    "                   [--temperature T] [--top-k K] [--top-p P] [--seed S] [--ignore-eos]\n"
    "                   [--block-size 16|32|64] [--kv-fraction F] [--max-model-len N] [--no-cuda-graphs]\n"
    "                   [--no-fuse-kernels] [--no-programmatic-launch] [--cpu-sampler] [--native-quantized]\n"
    "                   [--quantize-int4 G] [--verbose]\n";

struct Args {
  std::string model, prompt, ids;
  bool chat = false, ignore_eos = false, verbose = false;
  int max_tokens = 64;
  kc::engine::SamplingParams sampling;
  kc::engine::RunnerOptions runner;
};

Args parse(int argc, char** argv) {
  Args args;
  auto value = [&](int& i) -> std::string {
    kc::require(i + 1 < argc, "{} needs a value\n{}", argv[i], kUsage);
    return argv[++i];
  };
  auto number = [&](int& i) {
    const std::string flag = argv[i];
    return kc::parse_double(flag, value(i));
  };
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--model") args.model = value(i);
    else if (flag == "--prompt") args.prompt = value(i);
    else if (flag == "--ids") args.ids = value(i);
    else if (flag == "--chat") args.chat = true;
    else if (flag == "--ignore-eos") args.ignore_eos = true;
    else if (flag == "--verbose") args.verbose = true;
    else if (flag == "--no-cuda-graphs") args.runner.cuda_graphs = false;
    else if (flag == "--no-fuse-kernels") args.runner.fuse_kernels = false;
    else if (flag == "--no-programmatic-launch") args.runner.programmatic_launch = false;
    else if (flag == "--cpu-sampler") args.runner.gpu_sampler = false;
    else if (flag == "--native-quantized") args.runner.native_quantized = true;
    else if (flag == "--quantize-int4") args.runner.quantize_int4_group_size = static_cast<int>(number(i));
    else if (flag == "--max-tokens") args.max_tokens = static_cast<int>(number(i));
    else if (flag == "--temperature") args.sampling.temperature = static_cast<float>(number(i));
    else if (flag == "--top-k") args.sampling.top_k = static_cast<int>(number(i));
    else if (flag == "--top-p") args.sampling.top_p = static_cast<float>(number(i));
    else if (flag == "--seed") args.sampling.seed = static_cast<std::uint64_t>(number(i));
    else if (flag == "--block-size") args.runner.block_size = static_cast<int>(number(i));
    else if (flag == "--kv-fraction") args.runner.kv_memory_fraction = number(i);
    else if (flag == "--max-model-len") args.runner.max_model_len = static_cast<std::int64_t>(number(i));
    else if (flag == "--help" || flag == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else {
      throw kc::Error(fmt::format("unknown flag '{}'\n{}", flag, kUsage));
    }
  }
  kc::require(!args.model.empty(), "--model is required\n{}", kUsage);
  kc::require(args.prompt.empty() != args.ids.empty(), "give --prompt or --ids (one of them)\n{}", kUsage);
  kc::require(args.max_tokens >= 1, "--max-tokens must be >= 1");
  kc::require(args.runner.quantize_int4_group_size == 0 ||
                  kc::stage3::int4_group_size_supported(args.runner.quantize_int4_group_size),
              "--quantize-int4 {}: a group size of 32, 64 or a multiple of 128", args.runner.quantize_int4_group_size);
  kc::engine::validate_sampling_params(args.sampling);
  return args;
}

std::vector<kc::engine::TokenId> parse_ids(const std::string& text) {
  std::vector<kc::engine::TokenId> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) ids.push_back(kc::parse_int("--ids", item));
  kc::require(!ids.empty(), "--ids holds no token id");
  return ids;
}

int run(int argc, char** argv) {
  const Args args = parse(argc, argv);
  if (!kc::gpu_visible_or_explain("kc-generate", "; the model runs on a GPU.")) return 1;

  const auto load_start = Clock::now();
  kc::engine::WeightLoadOptions load;
  load.keep_quantized_blocks = args.runner.native_quantized;
  kc::engine::LoadedModel model = kc::engine::load_model(args.model, load);
  const kc::engine::ModelConfig config = model.weights.config;  // a copy: the weights are dropped below
  const auto loaded = Clock::now();
  kc::engine::RunnerOptions options = args.runner;
  const bool terminal = isatty(fileno(stderr)) != 0;
  if (terminal)  // a progress bar on the terminal, redrawn in place
    options.upload_progress = [](std::uint64_t done, std::uint64_t total) {
      const int width = 40, filled = total > 0 ? static_cast<int>(width * done / total) : width;
      std::fprintf(stderr, "\rkc-generate: uploading [%.*s%*s] %5.1f%% of %.0f MiB", filled,
                   "########################################", width - filled, "",
                   total > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0,
                   static_cast<double>(total) / (1 << 20));
    };
  kc::engine::ModelRunner runner(model.weights, options, model.rope_freq_factors);
  if (terminal) std::fprintf(stderr, "\n");
  model.weights = kc::engine::ModelWeights{};  // the host copy is no longer needed
  const auto uploaded = Clock::now();
  std::fprintf(stderr, "kc-generate: %s (%s): %lld layers, hidden %lld, %lld/%lld heads, vocab %lld\n",
               args.model.c_str(), model.format.c_str(), static_cast<long long>(config.num_layers),
               static_cast<long long>(config.hidden_size), static_cast<long long>(config.num_heads),
               static_cast<long long>(config.num_kv_heads), static_cast<long long>(config.vocab_size));
  for (const std::string& note : model.notes) std::fprintf(stderr, "kc-generate: %s\n", note.c_str());
  const kc::engine::ModelRunner::WeightBytes& weights = runner.weight_bytes();
  const std::string blocks =
      weights.blocks > 0
          ? fmt::format(" + {:.1f} MiB of {} blocks", static_cast<double>(weights.blocks) / (1 << 20), weights.block_type)
          : std::string();
  std::fprintf(stderr,
               "kc-generate: loaded in %.2f s, uploaded in %.2f s; device pool %.1f MiB (weights %.1f MiB in bf16%s; "
               "%d KV blocks of %d)\n",
               std::chrono::duration<double>(loaded - load_start).count(),
               std::chrono::duration<double>(uploaded - loaded).count(),
               static_cast<double>(runner.pool().total_bytes()) / (1 << 20),
               static_cast<double>(weights.bf16) / (1 << 20), blocks.c_str(), runner.scheduler_config().num_blocks,
               runner.scheduler_config().block_size);

  kc::engine::GenerationRequest request;
  if (!args.ids.empty()) {
    request.prompt = parse_ids(args.ids);
  } else {
    kc::require(model.tokenizer.has_value(), "{} has no tokenizer: give --ids", args.model);
    std::string text = args.prompt;
    if (args.chat) {
      kc::require(model.chat_template.has_value(), "{} has no chat format the engine renders", args.model);
      text = model.chat_template->render({{"user", args.prompt}});
    }
    request.prompt = model.tokenizer->encode(text, !args.chat);
  }
  request.max_tokens = args.max_tokens;
  request.sampling = args.sampling;
  if (!args.ignore_eos) {
    for (std::int64_t id : config.eos_token_ids) request.stop_token_ids.push_back(static_cast<kc::engine::TokenId>(id));
    if (model.tokenizer && model.tokenizer->eos_id()) request.stop_token_ids.push_back(*model.tokenizer->eos_id());
  }

  kc::engine::Scheduler scheduler(runner.scheduler_config(),
                                  model.tokenizer ? kc::engine::streaming_detokenizer(*model.tokenizer)
                                                  : kc::engine::DetokenizerFactory{});
  Clock::time_point first_token{}, last_token{};
  int generated = 0;
  request.on_output = [&](const kc::engine::StreamEvent& event) {
    last_token = Clock::now();
    if (generated++ == 0) first_token = last_token;
    if (model.tokenizer) std::fputs(event.text.c_str(), stdout);
    else std::printf("%d ", event.token);
    std::fflush(stdout);
  };
  const std::size_t prompt_tokens = request.prompt.size();
  const auto start = Clock::now();
  scheduler.submit(std::move(request));
  scheduler.run_to_completion(runner);
  std::printf("\n");

  const double ttft = std::chrono::duration<double>(first_token - start).count();
  const double decode_seconds = std::chrono::duration<double>(last_token - first_token).count();
  std::fprintf(stderr, "kc-generate: prompt %zu tokens, first token after %.1f ms (%.0f prompt tok/s)\n",
               prompt_tokens, 1e3 * ttft, static_cast<double>(prompt_tokens) / ttft);
  if (generated > 1)
    std::fprintf(stderr, "kc-generate: %d tokens generated, decode %.1f tok/s (batch 1, %s)\n", generated,
                 (generated - 1) / decode_seconds,
                 args.runner.cuda_graphs ? "CUDA graphs" : "no CUDA graphs");
  if (args.verbose)
    for (const auto& [role, kernel] : runner.kernels_used())
      std::fprintf(stderr, "kc-generate:   %-36s %s\n", role.c_str(), kernel.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "kc-generate: %s\n", error.what());
    return 2;
  }
}
