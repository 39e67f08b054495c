// kc-engine-bench — the engine's speed, measured through the scheduler and the GPU model step as a
// user runs them, against the batch-1 bandwidth bound, and written as a table.
//
//   kc-engine-bench --synthetic smollm2-135m,llama-3.2-1b,llama-3.1-8b --markdown docs/benchmarks/h200
//   kc-engine-bench --model SmolLM2-135M-Instruct.Q4_1.gguf --contexts 128,2048
//
// A model is a checkpoint (--model: GGUF file or HF directory, its weights as loaded) or a
// published configuration with random weights drawn on the GPU (--synthetic: the shape decides
// the time, not the values). For each model, with the decode steps eager and as captured CUDA
// graphs (--cuda-graphs both|on|off), and with the norms fused into the projections or not
// (--fuse-kernels on|off|both, default on as RunnerOptions::fuse_kernels), with the step's kernels
// launched as programmatic dependents or the ordinary way (--programmatic-launch on|off|both,
// default on as RunnerOptions::programmatic_launch), with the paged decode attention's rung
// (--decode-attention: a comma list of early, fused, mma and cuda-cores — stage 3's decode rungs
// 05, 04, 03 and 02 — default early as RunnerOptions::decode_attention; both = mma,cuda-cores), with
// the decode steps' RoPE and cache write inside the attention (stage 3's decode rungs 06 to 11) or in their
// own kernel (--rope-in-attention on|off|both, default on as RunnerOptions::rope_in_attention), and
// then with rung 11, 10, 09, 08, 07 or 06 (--decode-rope-rung: a comma list of 11, 10, 09, 08, 07 and 06, both = 08,07,
// default 10 as
// RunnerOptions::decode_rope_rung), with the
// MLP's two projections in one launch or two (--one-launch-mlp on|off|both, default off as
// RunnerOptions::one_launch_mlp), with the L2 warmed before each decode attention or not
// (--l2-warm-mib: a comma list of budgets in MiB, 0 = no warming link, default as
// RunnerOptions::l2_warm_bytes), after a
// warm-up that runs every batch size once. Quantized weights: --quantized q4_0|q4_1|q8_0 draws the published shapes'
// projections as random blocks of that type (their bf16 copy the blocks' dequantization; a GGUF
// --model keeps its own blocks), --quantized int4-gN (N = 32, 64 or a multiple of 128) as bf16
// quantized on the GPU into 4-bit groups of N (as a GPTQ/AWQ checkpoint, whose --model keeps its
// own groups, loads; a --model's projections without blocks or groups are quantized so at load:
// RunnerOptions::quantize_int4_group_size), and --native-quantized on|off|both runs the decode steps on the
// blocks (RunnerOptions::native_quantized) or on the dequantized copy, so one run gives both rows of
// the same weights; --int4-link-rung stage3|04|05|both holds a fused native step's 4-bit groups to
// stage 3's choice of link rung or to the one named (RunnerOptions::int4_link_rung), and
// --gguf-link-rung stage3|07|08|11|12|both its GGUF blocks (RunnerOptions::gguf_link_rung), and
// --spread-links on|off|both launches a native link of no more CTAs than SMs one CTA an SM or as
// many an SM as fit (default on as RunnerOptions::spread_small_links), and --gemv-first-trip
// on|off|both has stage 3's rung 12, launched as a programmatic dependent, issue its first trip's
// loads before the wait for the kernel ahead or after it (kc/stage3/small_m_gemv_knobs.hpp's
// set_small_m_gemv_first_trip_before_wait, default on; process-wide, so set before each runner is
// built and its graphs captured, and put back after). Every request
// decodes greedily unless --temperature T (> 0; with --top-k K and --top-p P, seed --seed plus the
// request's index) samples its tokens, on the GPU sampler or the host's reference sampler
// (--gpu-sampler on|off|both, default on as RunnerOptions::gpu_sampler; off and both need a
// temperature, the only case where the sampler runs):
//   decode      one request, a prompt of C random tokens, then --decode-tokens tokens; tok/s over
//               the tokens after the first (end-of-sequence ignored). Bytes a step: every
//               weight once (of the embedding table one row, unless it is also the output
//               projection; on the blocks, the blocks' bytes in place of the bf16 copy's)
//               plus the K/V rows read at the mean context; GB/s and % of the copy
//               bandwidth measured at the start of the run (cudaMemcpy device to device, read +
//               write bytes): the batch-1 bound is copy bandwidth / bytes per token.
//   prefill     one request of P random tokens and one output token: P / time to first token
//               (median of three).
//   concurrency K requests submitted at once, --concurrency-prompt random tokens each and
//               --concurrency-tokens output tokens: output tokens / wall time, and the time to
//               first token (p50, p99) from submission.
// --markdown DIR writes DIR/stage4.md and DIR/stage4.json (the GPU, driver, CUDA, date, commit
// and command head them, as kc-bench's tables). --peers FILE[,FILE] adds the rates of
// bench/peers/hf_engine_peers.py (HF transformers eager, same models, same GPU) and of
// bench/peers/llama_cpp_peer.py (llama.cpp's llama-bench on the same GGUF file) beside kc's, each
// with kc's rate over the peer's; the JSON rows carry them under "peers".
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <vector>

#include "kc/common/device.hpp"
#include "kc/common/error.hpp"
#include "kc/common/provenance.hpp"
#include "kc/common/text_io.hpp"
#include "kc/common/timing.hpp"
#include "kc/engine/model_loader.hpp"
#include "kc/engine/model_runner.hpp"
#include "kc/engine/published_configs.hpp"
#include "kc/engine/sampling.hpp"
#include "kc/engine/scheduler.hpp"
#include "kc/stage3/small_m_gemv_knobs.hpp"

#include <fstream>
#include <nlohmann/json.hpp>

namespace {

using Clock = std::chrono::steady_clock;
using kc::engine::TokenId;

// The engine's default warming budget (RunnerOptions::l2_warm_bytes), in MiB as --l2-warm-mib takes it.
const int kDefaultL2WarmMib = static_cast<int>(kc::engine::RunnerOptions{}.l2_warm_bytes >> 20);

constexpr const char* kUsage =
    "usage: kc-engine-bench [--synthetic NAME[,NAME...]] [--model PATH] (at least one) [--seed 1]\n"
    "                       [--contexts 128,2048,8192] [--decode-tokens 128] [--prefill 512,2048]\n"
    "                       [--concurrency 1,8,64,256] [--concurrency-prompt 128]\n"
    "                       [--concurrency-tokens 128] [--cuda-graphs both|on|off] [--fuse-kernels on|off|both]\n"
    "                       [--programmatic-launch on|off|both] [--decode-attention early,fused,mma,cuda-cores|both]\n"
    "                       [--rope-in-attention on|off|both] [--decode-rope-rung 11,10,09,08,07,06|both]\n"
    "                       [--one-launch-mlp off|on|both] [--l2-warm-mib MIB[,MIB...]]\n"
    "                       [--max-model-len 8448] [--kv-fraction 0.6] [--decode-min-split-keys 256]\n"
    "                       [--quantized q4_0|q4_1|q8_0|int4-gN] [--native-quantized on|off|both]\n"
    "                       [--int4-link-rung stage3,04,05|both] [--gguf-link-rung stage3,07,08,11,12|both]\n"
    "                       [--spread-links on|off|both] [--gemv-first-trip on|off|both]\n"
    "                       [--temperature 0] [--top-k 0] [--top-p 1] [--gpu-sampler on|off|both]\n"
    "                       [--peers hf.json[,llama.json]]\n"
    "                       [--markdown DIR]\n"
    "  NAME: smollm2-135m, llama-3.2-1b, llama-3.1-8b (published shapes, random weights)\n";

struct Args {
  std::string model, synthetic, markdown, peers, graphs = "both", fuse_kernels = "on", command;
  std::string programmatic_launch = "on", rope_in_attention = "on", one_launch_mlp = "off";
  std::string decode_attention = "early";  // RunnerOptions::decode_attention: early, fused, mma, cuda-cores
  std::string decode_rope_rung = "10";     // RunnerOptions::decode_rope_rung: 10, 09, 08, 07, 06 or both
  std::string quantized;                 // "": bf16 random weights; q4_0, q4_1, q8_0: random blocks; int4-gN
  std::string native_quantized = "off";  // on, off or both (RunnerOptions::native_quantized)
  std::string int4_link_rung = "stage3";  // RunnerOptions::int4_link_rung: stage3, 04, 05 or both
  std::string gguf_link_rung = "stage3";  // RunnerOptions::gguf_link_rung: stage3, 07, 08, 11, 12 or both
  std::string spread_links = "on";        // RunnerOptions::spread_small_links: on, off or both
  std::string gemv_first_trip = kc::stage3::kSmallMGemvDefaultFirstTripBeforeWait ? "on" : "off";  // on, off or both
  kc::engine::SamplingParams sampling;  // every request's (its seed: --seed plus the request's index)
  std::string gpu_sampler = "on";  // RunnerOptions::gpu_sampler: on, off or both (a temperature only)
  int decode_min_split_keys = kc::engine::RunnerOptions{}.decode_min_keys_per_split;
  std::vector<int> l2_warm_mib{kDefaultL2WarmMib};  // RunnerOptions::l2_warm_bytes in MiB, one run per value
  std::uint64_t seed = 1;
  std::vector<int> contexts{128, 2048, 8192}, prefill{512, 2048}, concurrency{1, 8, 64, 256};
  int decode_tokens = 128, concurrency_prompt = 128, concurrency_tokens = 128;
  std::int64_t max_model_len = 8448;
  double kv_fraction = 0.6;
};

// A comma list of integers from `lowest` to `highest` (`what` names the range in the refusal).
std::vector<int> parse_list(const std::string& flag, const std::string& text, int lowest = 1,
                            int highest = std::numeric_limits<int>::max(), const char* what = "positive") {
  std::vector<int> values;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const int value = kc::parse_int(flag, item);
    kc::require(value >= lowest && value <= highest, "{}: {} is not {}", flag, value, what);
    values.push_back(value);
  }
  kc::require(!values.empty(), "{} holds no value", flag);
  return values;
}

using DecodeRung = kc::stage3::PagedDecodeAttention::Rung;

// --decode-attention's names: early (rung 05), fused (rung 04), mma (rung 03), cuda-cores (rung 02); "both" is
// mma,cuda-cores (the comparison of tensor cores and CUDA cores).
std::vector<DecodeRung> parse_decode_attention(const std::string& text) {
  std::vector<DecodeRung> rungs;
  std::stringstream in(text == "both" ? std::string("mma,cuda-cores") : text);
  for (std::string item; std::getline(in, item, ',');) {
    if (item == "early")
      rungs.push_back(DecodeRung::early_pages);
    else if (item == "fused")
      rungs.push_back(DecodeRung::fused_combine);
    else if (item == "mma")
      rungs.push_back(DecodeRung::mma_split_kv);
    else if (item == "cuda-cores")
      rungs.push_back(DecodeRung::split_kv);
    else
      kc::require(false, "--decode-attention: '{}' is not early, fused, mma, cuda-cores or both", item);
  }
  kc::require(!rungs.empty(), "--decode-attention holds no rung");
  return rungs;
}

// A kc-bench id without its stage and op ("stage3/attention_decode_paged/04_fused_combine" ->
// "04_fused_combine"), for the JSON.
std::string rung_name(std::string_view id) { return std::string(id.substr(id.rfind('/') + 1)); }

std::string decode_attention_id(DecodeRung rung) {
  return rung_name(kc::stage3::PagedDecodeAttention::rung_id(rung));
}

// The rung in a table section's mode: "rung 03 (combine kernel)".
const char* decode_attention_name(DecodeRung rung) {
  switch (rung) {
    case DecodeRung::early_pages: return "rung 05 (first pages before the wait)";
    case DecodeRung::fused_combine: return "rung 04 (merged in the launch)";
    case DecodeRung::mma_split_kv: return "rung 03 (combine kernel)";
    case DecodeRung::split_kv: return "rung 02 (CUDA cores)";
  }
  return "?";
}

using RopeRung = kc::stage3::PagedDecodeAttention::RopeRung;

// An on|off|both flag's modes, off before on; kc::Error naming `flag` for any other value.
std::vector<bool> on_off_modes(const std::string& text, const char* flag) {
  kc::require(text == "both" || text == "on" || text == "off", "{}: '{}' is not both, on or off", flag, text);
  std::vector<bool> modes;
  if (text != "on") modes.push_back(false);
  if (text != "off") modes.push_back(true);
  return modes;
}

// A comma list of rungs, each given by its two digits and one of `named` (with `takes_stage3`, also
// the word stage3 for 0: stage 3's own choice); "both" stands for `both_means`. The flags
// --decode-rope-rung, --int4-link-rung and --gguf-link-rung take their lists through it.
std::vector<int> parse_rung_list(const std::string& text, const char* flag, const std::vector<int>& named,
                                 const char* both_means, bool takes_stage3) {
  std::string names = takes_stage3 ? "stage3" : "";
  for (const int rung : named) names += fmt::format("{}{:02d}", names.empty() ? "" : ", ", rung);
  std::vector<int> rungs;
  std::stringstream in(text == "both" ? std::string(both_means) : text);
  for (std::string item; std::getline(in, item, ',');) {
    int rung = -1;
    if (takes_stage3 && item == "stage3") rung = 0;
    for (const int n : named)
      if (item == fmt::format("{:02d}", n)) rung = n;
    kc::require(rung >= 0, "{}: '{}' is not {} or both", flag, item, names);
    rungs.push_back(rung);
  }
  kc::require(!rungs.empty(), "{} holds no rung", flag);
  return rungs;
}

// --decode-rope-rung's names: a rung's two digits (PagedDecodeAttention::rope_rung_number: 11 the
// heads handed over by counted columns, 10 the release/acquire merge, 09 workers first, 08 the page walk, 07 pages before the wait, 06 RoPE
// inside); "both" is 08,07 (rung 08, the default before rung 10, and the rung before it).
std::vector<RopeRung> parse_decode_rope_rung(const std::string& text) {
  using kc::stage3::PagedDecodeAttention;
  std::vector<int> numbers;  // 11, 10, 09, 08, 07, 06: the ladder from its top
  for (const RopeRung rung : PagedDecodeAttention::kRopeRungs)
    numbers.insert(numbers.begin(), PagedDecodeAttention::rope_rung_number(rung));
  std::vector<RopeRung> rungs;
  for (const int number : parse_rung_list(text, "--decode-rope-rung", numbers, "08,07", false))
    for (const RopeRung rung : PagedDecodeAttention::kRopeRungs)
      if (PagedDecodeAttention::rope_rung_number(rung) == number) rungs.push_back(rung);
  return rungs;
}

std::string decode_rope_rung_id(RopeRung rung) {
  return rung_name(kc::stage3::PagedDecodeAttention::rope_rung_id(rung));
}

// ", int4 link rung 05" / ", GGUF link rung 11" (`format` "int4" or "GGUF"): where a native fused
// step's 4-bit groups or GGUF blocks were held to a named link rung.
std::string link_note(const char* format, int rung, bool native, bool fuse) {
  return rung == 0 || !native || !fuse ? std::string() : fmt::format(", {} link rung {:02d}", format, rung);
}

// The decode attention of a mode where it is not the engine's default (", decode attention rung 04
// (merged in the launch)"); the RoPE rung counts only where the steps run it (RoPE inside the
// attention, fused kernels). Empty for the defaults.
std::string decode_attention_note(DecodeRung rung, RopeRung rope_rung, bool rope_in, bool fuse) {
  const kc::engine::RunnerOptions defaults;
  return (rung == defaults.decode_attention ? std::string()
                                            : fmt::format(", decode attention {}", decode_attention_name(rung))) +
         (rope_rung == defaults.decode_rope_rung || !rope_in || !fuse
              ? std::string()
              : fmt::format(", decode attention {}", decode_rope_rung_id(rope_rung)));
}

// ", L2 warmed with 24 MiB before each attention" (or ", no L2 warming"): where the budget is not the
// engine's default; only a fused step has the warming link.
std::string l2_warm_note(int mib, bool fuse) {
  if (!fuse || mib == kDefaultL2WarmMib) return std::string();
  return mib == 0 ? std::string(", no L2 warming") : fmt::format(", L2 warmed with {} MiB before each attention", mib);
}

// One measurement row.
struct DecodeRow {
  int context = 0, tokens = 0;
  double tok_s = 0, bytes_per_token = 0, gb_s = 0, pct_copy = 0;
};
struct PrefillRow {
  int prompt = 0;
  double ttft_ms = 0, tok_s = 0;
};
struct ConcurrencyRow {
  int requests = 0, prompt = 0, tokens = 0;
  double tok_s = 0, ttft_p50_ms = 0, ttft_p99_ms = 0;
};
struct ModelResult {
  std::string name, source;
  bool cuda_graphs = false;
  bool fuse_kernels = false;
  bool programmatic_launch = false;
  bool rope_in_attention = false;
  bool one_launch_mlp = false;
  kc::stage3::PagedDecodeAttention::Rung decode_attention = kc::engine::RunnerOptions{}.decode_attention;
  RopeRung decode_rope_rung = kc::engine::RunnerOptions{}.decode_rope_rung;
  bool native_quantized = false;
  int int4_link_rung = 0;  // RunnerOptions::int4_link_rung
  int gguf_link_rung = 0;  // RunnerOptions::gguf_link_rung
  bool spread_links = true;  // RunnerOptions::spread_small_links
  bool gemv_first_trip = kc::stage3::kSmallMGemvDefaultFirstTripBeforeWait;  // rung 12's first trip before the wait
  std::string block_type;  // the blocks' type where the weights have blocks ("q4_1"), else empty
  int decode_min_split_keys = kc::engine::RunnerOptions{}.decode_min_keys_per_split;
  int l2_warm_mib = kDefaultL2WarmMib;
  kc::engine::SamplingParams sampling;  // its seed is the first request's
  bool gpu_sampler = true;
  double params = 0, weight_bytes = 0, kv_bytes_per_token = 0, pool_mib = 0;
  double block_bytes = 0;        // quantized blocks in the pool beside the bf16 copy (native rows)
  double weight_bytes_read = 0;  // a decode step reads every weight except the embedding table
                                 // (one row of it), which a tied model reads as its output; a
                                 // native row reads the projections' blocks instead of their copy
  int num_blocks = 0, block_size = 0;
  std::vector<DecodeRow> decode;
  std::vector<PrefillRow> prefill;
  std::vector<ConcurrencyRow> concurrency;
  std::int64_t graph_replays = 0;
};

double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  const double at = p * static_cast<double>(values.size() - 1);
  const std::size_t low = static_cast<std::size_t>(at);
  const std::size_t high = std::min(low + 1, values.size() - 1);
  return values[low] + (values[high] - values[low]) * (at - static_cast<double>(low));
}

// Requests, run to completion, with each request's token times.
struct Timeline {
  Clock::time_point submitted;
  std::vector<std::vector<Clock::time_point>> token_times;
};

// Request i samples with `sampling` and the seed sampling.seed + i (greedy where the temperature is 0).
Timeline run_requests(kc::engine::ModelRunner& runner, const std::vector<std::vector<TokenId>>& prompts,
                      const std::vector<int>& max_tokens, const kc::engine::SamplingParams& sampling) {
  kc::engine::Scheduler scheduler(runner.scheduler_config());
  Timeline timeline;
  timeline.token_times.resize(prompts.size());
  timeline.submitted = Clock::now();
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    kc::engine::GenerationRequest request;
    request.prompt = prompts[i];
    request.max_tokens = max_tokens[i];
    request.sampling = sampling;
    request.sampling.seed = sampling.seed + i;
    request.on_output = [&timeline, i](const kc::engine::StreamEvent&) {
      timeline.token_times[i].push_back(Clock::now());
    };
    scheduler.submit(std::move(request));
  }
  scheduler.run_to_completion(runner);
  return timeline;
}

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

class Prompts {
 public:
  Prompts(std::int64_t vocab, std::uint64_t seed) : vocab_(vocab), rng_(seed) {}
  std::vector<TokenId> next(int length) {
    std::uniform_int_distribution<TokenId> pick(0, static_cast<TokenId>(vocab_ - 1));
    std::vector<TokenId> ids(static_cast<std::size_t>(length));
    for (TokenId& id : ids) id = pick(rng_);
    return ids;
  }

 private:
  std::int64_t vocab_;
  std::mt19937_64 rng_;
};

ModelResult measure(kc::engine::ModelRunner& runner, const kc::engine::ModelConfig& config, const Args& args,
                    double copy_gbps) {
  ModelResult result;
  kc::engine::SamplingParams sampling = args.sampling;
  sampling.seed = args.seed;
  result.sampling = sampling;
  const auto scheduler_config = runner.scheduler_config();
  result.num_blocks = scheduler_config.num_blocks;
  result.block_size = scheduler_config.block_size;
  result.pool_mib = static_cast<double>(runner.pool().total_bytes()) / (1 << 20);
  const kc::engine::ModelRunner::WeightBytes& weights = runner.weight_bytes();
  result.weight_bytes = static_cast<double>(weights.bf16);
  result.block_bytes = static_cast<double>(weights.blocks);
  result.weight_bytes_read = static_cast<double>(weights.read_per_token);
  result.params = result.weight_bytes / 2;
  result.kv_bytes_per_token = 2.0 * static_cast<double>(config.num_layers * config.num_kv_heads * config.head_dim) * 2;
  Prompts prompts(config.vocab_size, args.seed);

  // The longest sequence the scheduler takes: the context, and the cache's slots.
  const std::int64_t longest = std::min<std::int64_t>(
      scheduler_config.max_model_len, static_cast<std::int64_t>(scheduler_config.num_blocks) * scheduler_config.block_size);
  // Warm-up: every batch size from the largest concurrency down to 1 (requests finishing one a
  // step), so that each graph bucket is captured and cuBLAS has seen each decode shape before
  // timing; then one prompt of each prefill length (first-use host work for those shapes).
  const int widest = std::min(*std::max_element(args.concurrency.begin(), args.concurrency.end()),
                              scheduler_config.max_running);
  {
    std::vector<std::vector<TokenId>> p;
    std::vector<int> m;
    for (int i = 0; i < widest; ++i) {
      p.push_back(prompts.next(16));
      m.push_back(2 + i);
    }
    run_requests(runner, p, m, sampling);
    for (int prompt : args.prefill)
      if (prompt + 2 <= longest) run_requests(runner, {prompts.next(prompt)}, {1}, sampling);
  }

  for (int context : args.contexts) {
    if (context + args.decode_tokens + 1 > longest) {
      std::printf("  decode   context %5d: skipped (longer than the %lld tokens a sequence may hold)\n", context,
                  static_cast<long long>(longest));
      continue;
    }
    const Timeline t = run_requests(runner, {prompts.next(context)}, {args.decode_tokens + 1}, sampling);
    const auto& times = t.token_times[0];
    DecodeRow row;
    row.context = context;
    row.tokens = static_cast<int>(times.size()) - 1;
    row.tok_s = row.tokens / (ms_between(times.front(), times.back()) / 1e3);
    row.bytes_per_token =
        result.weight_bytes_read + result.kv_bytes_per_token * (context + args.decode_tokens / 2.0);
    row.gb_s = row.tok_s * row.bytes_per_token / 1e9;
    row.pct_copy = 100.0 * row.gb_s / copy_gbps;
    result.decode.push_back(row);
    std::printf("  decode   context %5d: %8.1f tok/s, %7.1f GB/s (%5.1f%% of copy)\n", context, row.tok_s, row.gb_s,
                row.pct_copy);
  }
  for (int prompt : args.prefill) {
    if (prompt + 2 > longest) continue;
    std::vector<double> ttft;
    for (int repeat = 0; repeat < 3; ++repeat) {
      const Timeline t = run_requests(runner, {prompts.next(prompt)}, {1}, sampling);
      ttft.push_back(ms_between(t.submitted, t.token_times[0].front()));
    }
    PrefillRow row{prompt, percentile(ttft, 0.5), 0};
    row.tok_s = prompt / (row.ttft_ms / 1e3);
    result.prefill.push_back(row);
    std::printf("  prefill  %5d tokens: %8.1f ms to the first token, %9.0f tok/s\n", prompt, row.ttft_ms, row.tok_s);
  }
  for (int requests : args.concurrency) {
    if (requests > scheduler_config.max_running) continue;
    std::vector<std::vector<TokenId>> p;
    for (int i = 0; i < requests; ++i) p.push_back(prompts.next(args.concurrency_prompt));
    const Timeline t = run_requests(runner, p, std::vector<int>(p.size(), args.concurrency_tokens), sampling);
    std::vector<double> ttft;
    Clock::time_point last = t.submitted;
    long long tokens = 0;
    for (const auto& times : t.token_times) {
      ttft.push_back(ms_between(t.submitted, times.front()));
      last = std::max(last, times.back());
      tokens += static_cast<long long>(times.size());
    }
    ConcurrencyRow row{requests, args.concurrency_prompt, args.concurrency_tokens, 0, percentile(ttft, 0.5),
                       percentile(ttft, 0.99)};
    row.tok_s = static_cast<double>(tokens) / (ms_between(t.submitted, last) / 1e3);
    result.concurrency.push_back(row);
    std::printf("  %4d requests: %9.1f output tok/s, first token p50 %7.1f ms, p99 %7.1f ms\n", requests, row.tok_s,
                row.ttft_p50_ms, row.ttft_p99_ms);
  }
  result.graph_replays = runner.graph_replays();
  return result;
}

// The type of a checkpoint's kept blocks ("q4_1", "mixed"), or "" when it has none.
std::string loaded_block_type(const kc::engine::LoadedModel& model) {
  std::string type;
  const auto see = [&](const std::optional<kc::engine::QuantizedTensor>& blocks) {
    if (!blocks) return;
    const std::string name(kc::engine::ggml_type_name(blocks->type));
    type = type.empty() || type == name ? name : "mixed";
  };
  for (const kc::engine::LayerWeights& layer : model.weights.layers)
    for (const auto* blocks : {&layer.blocks.q, &layer.blocks.k, &layer.blocks.v, &layer.blocks.o, &layer.blocks.gate,
                               &layer.blocks.up, &layer.blocks.down})
      see(*blocks);
  see(model.weights.output_blocks);
  const auto see_groups = [&](const std::optional<kc::stage3::Int4GroupHost>& groups) {
    if (!groups) return;
    const std::string name = fmt::format("int4 g{}", groups->group_size);
    type = type.empty() || type == name ? name : "mixed";
  };
  for (const kc::engine::LayerWeights& layer : model.weights.layers)
    for (const auto* groups : {&layer.groups.q, &layer.groups.k, &layer.groups.v, &layer.groups.o, &layer.groups.gate,
                               &layer.groups.up, &layer.groups.down})
      see_groups(*groups);
  see_groups(model.weights.output_groups);
  return type;
}

// N of --quantized int4-gN where N is a group size the int4 layout takes, else 0.
int int4_group_size_of(const std::string& quantized) {
  constexpr std::string_view kPrefix = "int4-g";
  if (quantized.size() <= kPrefix.size() || quantized.compare(0, kPrefix.size(), kPrefix) != 0) return 0;
  const std::string digits = quantized.substr(kPrefix.size());
  if (digits.size() > 5 || digits.find_first_not_of("0123456789") != std::string::npos) return 0;
  const int size = std::stoi(digits);
  return kc::stage3::int4_group_size_supported(size) ? size : 0;
}

std::string fixed(double value, int digits) { return fmt::format("{:.{}f}", value, digits); }

// ", temperature 0.7, top-p 0.9, GPU sampler": how requests chose their tokens, where not greedily.
std::string sampling_note(const kc::engine::SamplingParams& sampling, bool gpu_sampler) {
  if (sampling.temperature == 0.f) return {};
  return fmt::format(", temperature {}{}{}, {} sampler", sampling.temperature,
                     sampling.top_k > 0 ? fmt::format(", top-k {}", sampling.top_k) : std::string(),
                     sampling.top_p < 1.f ? fmt::format(", top-p {}", sampling.top_p) : std::string(),
                     gpu_sampler ? "GPU" : "host");
}

// ", small links packed" where a fused native step's links of no more CTAs than SMs ran as many
// an SM as fit (RunnerOptions::spread_small_links off); empty otherwise.
std::string spread_note(bool spread, bool native, bool fuse) {
  return !spread && native && fuse ? ", small links packed" : "";
}

// ", rung 12's first trip after the wait" (or "before") where rung 12, launched as a programmatic
// dependent, issued its first trip's loads otherwise than by default; empty for the default and
// for ordinary launches (no wait). The setting is named even where no rung 12 runs (native blocks).
std::string first_trip_note(bool first_trip, bool dependent) {
  return first_trip != kc::stage3::kSmallMGemvDefaultFirstTripBeforeWait && dependent
             ? (first_trip ? ", rung 12's first trip before the wait" : ", rung 12's first trip after the wait")
             : "";
}

// "eager, unfused kernels", "CUDA graphs, fused kernels", ...: a table section's mode; for quantized
// weights whether the decode steps ran on the blocks ("q4_1 native") or on their bf16 copy ("q4_1
// dequantized"); the decode split floor when it is not the engine's default.
std::string mode_name(const ModelResult& r) {
  return std::string(r.cuda_graphs ? "CUDA graphs" : "eager") + (r.fuse_kernels ? ", fused kernels" : ", unfused kernels") +
         (r.block_type.empty() ? std::string()
                               : fmt::format(", {} {}", r.block_type, r.native_quantized ? "native" : "dequantized")) +
         (r.decode_min_split_keys != kc::engine::RunnerOptions{}.decode_min_keys_per_split ? fmt::format(", decode splits of at least {} keys", r.decode_min_split_keys)
                                         : std::string()) +
         (r.programmatic_launch ? std::string() : ", ordinary launches") +
         (r.rope_in_attention || !r.fuse_kernels ? std::string() : ", RoPE and cache write in their own kernel") +
         (r.one_launch_mlp && r.fuse_kernels ? ", the MLP in one launch" : std::string()) +
         l2_warm_note(r.l2_warm_mib, r.fuse_kernels) +
         decode_attention_note(r.decode_attention, r.decode_rope_rung, r.rope_in_attention, r.fuse_kernels) +
         link_note("int4", r.int4_link_rung, r.native_quantized, r.fuse_kernels) +
         link_note("GGUF", r.gguf_link_rung, r.native_quantized, r.fuse_kernels) +
         spread_note(r.spread_links, r.native_quantized, r.fuse_kernels) +
         first_trip_note(r.gemv_first_trip, r.programmatic_launch) + sampling_note(r.sampling, r.gpu_sampler);
}

// One peer's rates, from bench/peers/hf_engine_peers.py or bench/peers/llama_cpp_peer.py:
// (model, metric, size) -> tok/s; `name` is its "peer". A row's model is kc's model name, or for a
// checkpoint run (--model PATH) the file's name without its directory.
struct Peer {
  std::string name, date, device;  // date and device: where and when the peer's script measured
  std::map<std::tuple<std::string, std::string, int>, double> rates;

  static Peer read(const std::string& path) {
    Peer peer;
    std::ifstream in(path);
    kc::require(static_cast<bool>(in), "--peers: cannot read '{}'", path);
    const nlohmann::json json = nlohmann::json::parse(in, nullptr, false);
    const std::string tool = json.is_object() ? json.value("tool", "") : "";
    kc::require((tool == "hf_engine_peers" || tool == "llama_cpp_peer") && json.contains("rows"),
                "--peers: '{}' is not the output of bench/peers/hf_engine_peers.py or llama_cpp_peer.py", path);
    peer.name = json.value("peer", "peer");
    peer.date = json.value("date", "");
    peer.device = json.value("device", "");
    for (const nlohmann::json& row : json.at("rows")) {
      const std::string metric = row.at("metric").get<std::string>();
      const char* size_key = metric == "decode" ? "context" : metric == "prefill" ? "prompt" : "requests";
      peer.rates[{row.at("model").get<std::string>(), metric, row.at(size_key).get<int>()}] =
          row.at("tok_s").get<double>();
    }
    return peer;
  }
  // The peer's rate for kc's model `model` (a name, or a checkpoint's path), or nothing.
  std::optional<double> rate(const std::string& model, const std::string& metric, int size) const {
    for (const std::string& key : {model, std::filesystem::path(model).filename().string()}) {
      const auto found = rates.find({key, metric, size});
      if (found != rates.end()) return found->second;
    }
    return std::nullopt;
  }
};

// The peers of --peers FILE[,FILE...], a pair of columns each in the tables.
struct Peers {
  std::vector<Peer> list;

  static Peers read(const std::string& paths) {
    Peers peers;
    std::stringstream in(paths);
    std::string path;
    while (std::getline(in, path, ','))
      if (!path.empty()) peers.list.push_back(Peer::read(path));
    return peers;
  }
  // "| 81.2 | 12.3× " cells for the tables ("– | –" where a peer has no row).
  std::string cells(const std::string& model, const std::string& metric, int size, double kc_rate) const {
    std::string out;
    for (const Peer& peer : list) {
      const std::optional<double> rate = peer.rate(model, metric, size);
      out += rate ? fmt::format(" {} | {}× |", fixed(*rate, 1), fixed(kc_rate / *rate, 2)) : " – | – |";
    }
    return out;
  }
  std::string headers() const {
    std::string out;
    for (const Peer& peer : list) out += fmt::format(" {} tok/s | kc / peer |", peer.name);
    return out;
  }
  std::string rules() const {
    std::string out;
    for (std::size_t i = 0; i < list.size(); ++i) out += "---:|---:|";
    return out;
  }
  // ", \"peers\": {\"HF ...\": 40.3}" for a JSON row, or "" when no peer has the row.
  std::string json(const std::string& model, const std::string& metric, int size) const {
    std::string out;
    for (const Peer& peer : list)
      if (const std::optional<double> rate = peer.rate(model, metric, size))
        out += fmt::format("{}{}: {:.2f}", out.empty() ? "" : ", ", kc::json_string(peer.name), *rate);
    return out.empty() ? "" : ", \"peers\": {" + out + "}";
  }
};

void write_tables(const Args& args, const kc::DeviceInfo& device, double copy_gbps,
                  const std::vector<ModelResult>& results, const Peers& peers) {
  const std::string date = kc::utc_now(), commit = kc::source_commit();
  std::string md = fmt::format(
      "# stage4 — kc-engine-bench on {}\n\nGenerated by `kc-engine-bench`; do not edit by hand. Re-run the command "
      "below to reproduce.\n\n| | |\n|---|---|\n| GPU | {} |\n"
      "| measured copy bandwidth | {} GB/s (cudaMemcpy D2D, read + write) |\n| date | {} |\n| commit | `{}` |\n"
      "| command | `{}` |\n",
      device.name, device.summary(), fixed(copy_gbps, 0), date, commit, args.command);
  for (const Peer& peer : peers.list)
    md += fmt::format("| peer | {}, measured {} on {} |\n", peer.name, peer.date.empty() ? "(no date)" : peer.date,
                      peer.device.empty() ? "(no device)" : peer.device);
  md += "\n";
  md +=
      "Method: each measurement runs requests through the scheduler and the GPU model step as `kc-generate` and "
      "`kc-serve` do, after a warm-up that runs every batch size once. Decode: one request, tokens after the first "
      "over their time; bytes per token = all weights (in a native quantized row the projections' blocks in "
      "place of their bf16 copy) + the K/V rows read at the mean context; % of copy = those "
      "bytes x tok/s over the copy bandwidth above (the batch-1 bound). Prefill: prompt tokens over the time to "
      "the first token (median of three). Concurrency: requests submitted at once; output tokens over the wall "
      "time; time to first token from submission.\n\n";
  std::string json = fmt::format("{{\n  \"tool\": \"kc-engine-bench\", \"gpu\": {}, \"date\": {}, \"commit\": {}, "
                                 "\"command\": {}, \"copy_gbps\": {:.1f},\n  \"peer_runs\": [",
                                 kc::json_string(device.summary()), kc::json_string(date), kc::json_string(commit),
                                 kc::json_string(args.command), copy_gbps);
  for (std::size_t p = 0; p < peers.list.size(); ++p)
    json += fmt::format("{}{{\"peer\": {}, \"date\": {}, \"device\": {}}}", p ? ", " : "",
                        kc::json_string(peers.list[p].name), kc::json_string(peers.list[p].date),
                        kc::json_string(peers.list[p].device));
  json += "],\n  \"models\": [";
  for (std::size_t m = 0; m < results.size(); ++m) {
    const ModelResult& r = results[m];
    md += fmt::format("## {} ({}), {}\n\n{:.2f} B parameters, {:.0f} MiB of bf16 weights{}, {:.0f} KiB of KV cache a "
                      "token; device pool {:.0f} MiB ({} KV blocks of {} tokens); {:.0f} MiB of weights read a "
                      "decode token; {} decode steps replayed as graphs.\n\n",
                      r.name, r.source, mode_name(r), r.params / 1e9, r.weight_bytes / (1 << 20),
                      r.block_bytes > 0 ? fmt::format(" + {:.0f} MiB of {} blocks", r.block_bytes / (1 << 20),
                                                      r.block_type)
                                        : std::string(),
                      r.kv_bytes_per_token / 1024, r.pool_mib, r.num_blocks, r.block_size,
                      r.weight_bytes_read / (1 << 20), r.graph_replays);
    md += fmt::format("| decode, batch 1 | tok/s | GB/s | % of copy |{}\n|---|---:|---:|---:|{}\n", peers.headers(),
                      peers.rules());
    for (const DecodeRow& d : r.decode)
      md += fmt::format("| context {} | {} | {} | {}% |{}\n", d.context, fixed(d.tok_s, 1), fixed(d.gb_s, 0),
                        fixed(d.pct_copy, 1), peers.cells(r.name, "decode", d.context, d.tok_s));
    md += fmt::format("\n| prefill | time to first token (ms) | tok/s |{}\n|---|---:|---:|{}\n", peers.headers(),
                      peers.rules());
    for (const PrefillRow& p : r.prefill)
      md += fmt::format("| {} tokens | {} | {} |{}\n", p.prompt, fixed(p.ttft_ms, 1), fixed(p.tok_s, 0),
                        peers.cells(r.name, "prefill", p.prompt, p.tok_s));
    md += fmt::format("\n| concurrent requests | output tok/s | first token p50 (ms) | p99 (ms) |{}\n"
                      "|---|---:|---:|---:|{}\n",
                      peers.headers(), peers.rules());
    for (const ConcurrencyRow& c : r.concurrency)
      md += fmt::format("| {} × ({} prompt + {} output) | {} | {} | {} |{}\n", c.requests, c.prompt, c.tokens,
                        fixed(c.tok_s, 1), fixed(c.ttft_p50_ms, 1), fixed(c.ttft_p99_ms, 1),
                        peers.cells(r.name, "concurrency", c.requests, c.tok_s));
    md += "\n";
    json += fmt::format("{}\n    {{\"name\": {}, \"source\": {}, \"cuda_graphs\": {}, \"fuse_kernels\": {}, \"programmatic_launch\": {}, \"rope_in_attention\": {}, \"decode_rope_rung\": {}, \"one_launch_mlp\": {}, \"l2_warm_mib\": {}, \"decode_attention\": {}, "
                        "\"block_type\": {}, \"native_quantized\": {}, \"int4_link_rung\": {}, \"gguf_link_rung\": {}, \"spread_links\": {}, \"gemv_first_trip\": {}, "
                        "\"decode_min_split_keys\": {}, \"temperature\": {}, \"top_k\": {}, \"top_p\": {}, "
                        "\"gpu_sampler\": {}, \"params\": {:.0f}, "
                        "\"weight_bytes\": {:.0f}, \"block_bytes\": {:.0f}, \"weight_bytes_read\": {:.0f}, "
                        "\"kv_bytes_per_token\": {:.0f}, \"pool_mib\": {:.1f}, "
                        "\"num_blocks\": {}, \"block_size\": {}, \"graph_replays\": {},\n     \"decode\": [",
                        m ? "," : "", kc::json_string(r.name), kc::json_string(r.source),
                        r.cuda_graphs ? "true" : "false", r.fuse_kernels ? "true" : "false",
                        r.programmatic_launch ? "true" : "false", r.rope_in_attention ? "true" : "false",
                        kc::json_string(decode_rope_rung_id(r.decode_rope_rung)), r.one_launch_mlp ? "true" : "false", r.l2_warm_mib, kc::json_string(decode_attention_id(r.decode_attention)),
                        kc::json_string(r.block_type), r.native_quantized ? "true" : "false", r.int4_link_rung, r.gguf_link_rung,
                        r.spread_links ? "true" : "false", r.gemv_first_trip ? "true" : "false", r.decode_min_split_keys, r.sampling.temperature, r.sampling.top_k, r.sampling.top_p,
                        r.gpu_sampler ? "true" : "false", r.params, r.weight_bytes, r.block_bytes, r.weight_bytes_read, r.kv_bytes_per_token,
                        r.pool_mib, r.num_blocks, r.block_size, r.graph_replays);
    for (std::size_t i = 0; i < r.decode.size(); ++i)
      json += fmt::format("{}{{\"context\": {}, \"tokens\": {}, \"tok_s\": {:.2f}, \"bytes_per_token\": {:.0f}, "
                          "\"gb_s\": {:.1f}, \"pct_copy\": {:.2f}{}}}",
                          i ? ", " : "", r.decode[i].context, r.decode[i].tokens, r.decode[i].tok_s,
                          r.decode[i].bytes_per_token, r.decode[i].gb_s, r.decode[i].pct_copy,
                          peers.json(r.name, "decode", r.decode[i].context));
    json += "],\n     \"prefill\": [";
    for (std::size_t i = 0; i < r.prefill.size(); ++i)
      json += fmt::format("{}{{\"prompt\": {}, \"ttft_ms\": {:.3f}, \"tok_s\": {:.1f}{}}}", i ? ", " : "",
                          r.prefill[i].prompt, r.prefill[i].ttft_ms, r.prefill[i].tok_s,
                          peers.json(r.name, "prefill", r.prefill[i].prompt));
    json += "],\n     \"concurrency\": [";
    for (std::size_t i = 0; i < r.concurrency.size(); ++i)
      json += fmt::format("{}{{\"requests\": {}, \"prompt\": {}, \"tokens\": {}, \"tok_s\": {:.2f}, "
                          "\"ttft_p50_ms\": {:.3f}, \"ttft_p99_ms\": {:.3f}{}}}",
                          i ? ", " : "", r.concurrency[i].requests, r.concurrency[i].prompt, r.concurrency[i].tokens,
                          r.concurrency[i].tok_s, r.concurrency[i].ttft_p50_ms, r.concurrency[i].ttft_p99_ms,
                          peers.json(r.name, "concurrency", r.concurrency[i].requests));
    json += "]}";
  }
  json += "\n  ]\n}\n";
  kc::write_text_file(args.markdown + "/stage4.md", md);
  kc::write_text_file(args.markdown + "/stage4.json", json);
  std::printf("wrote %s/stage4.md and stage4.json\n", args.markdown.c_str());
}

int run(int argc, char** argv) {
  Args args;
  args.command = "kc-engine-bench";
  for (int i = 1; i < argc; ++i) args.command += std::string(" ") + argv[i];
  const bool go = kc::parse_flag_values(
      argc, argv, kUsage,
      {{"--model", [&](const std::string& v) { args.model = v; }},
       {"--synthetic", [&](const std::string& v) { args.synthetic = v; }},
       {"--seed", [&](const std::string& v) { args.seed = static_cast<std::uint64_t>(kc::parse_int("--seed", v)); }},
       {"--contexts", [&](const std::string& v) { args.contexts = parse_list("--contexts", v); }},
       {"--decode-tokens", [&](const std::string& v) { args.decode_tokens = kc::parse_int("--decode-tokens", v); }},
       {"--prefill", [&](const std::string& v) { args.prefill = parse_list("--prefill", v); }},
       {"--concurrency", [&](const std::string& v) { args.concurrency = parse_list("--concurrency", v); }},
       {"--concurrency-prompt",
        [&](const std::string& v) { args.concurrency_prompt = kc::parse_int("--concurrency-prompt", v); }},
       {"--concurrency-tokens",
        [&](const std::string& v) { args.concurrency_tokens = kc::parse_int("--concurrency-tokens", v); }},
       {"--cuda-graphs", [&](const std::string& v) { args.graphs = v; }},
       {"--fuse-kernels", [&](const std::string& v) { args.fuse_kernels = v; }},
       {"--programmatic-launch", [&](const std::string& v) { args.programmatic_launch = v; }},
       {"--rope-in-attention", [&](const std::string& v) { args.rope_in_attention = v; }},
       {"--one-launch-mlp", [&](const std::string& v) { args.one_launch_mlp = v; }},
       {"--decode-attention", [&](const std::string& v) { args.decode_attention = v; }},
       {"--decode-rope-rung", [&](const std::string& v) { args.decode_rope_rung = v; }},
       {"--int4-link-rung", [&](const std::string& v) { args.int4_link_rung = v; }},
       {"--gguf-link-rung", [&](const std::string& v) { args.gguf_link_rung = v; }},
       {"--spread-links", [&](const std::string& v) { args.spread_links = v; }},
       {"--gemv-first-trip", [&](const std::string& v) { args.gemv_first_trip = v; }},
       {"--l2-warm-mib",
        [&](const std::string& v) {
          args.l2_warm_mib = parse_list("--l2-warm-mib", v, 0, 1024, "a budget of 0 to 1024 MiB");
        }},
       {"--decode-min-split-keys",
        [&](const std::string& v) { args.decode_min_split_keys = kc::parse_int("--decode-min-split-keys", v); }},
       {"--max-model-len", [&](const std::string& v) { args.max_model_len = kc::parse_int("--max-model-len", v); }},
       {"--kv-fraction", [&](const std::string& v) { args.kv_fraction = kc::parse_double("--kv-fraction", v); }},
       {"--quantized", [&](const std::string& v) { args.quantized = v; }},
       {"--native-quantized", [&](const std::string& v) { args.native_quantized = v; }},
       {"--peers", [&](const std::string& v) { args.peers = v; }},
       {"--temperature",
        [&](const std::string& v) {
          args.sampling.temperature = static_cast<float>(kc::parse_double("--temperature", v));
        }},
       {"--top-k", [&](const std::string& v) { args.sampling.top_k = kc::parse_int("--top-k", v); }},
       {"--top-p",
        [&](const std::string& v) { args.sampling.top_p = static_cast<float>(kc::parse_double("--top-p", v)); }},
       {"--gpu-sampler", [&](const std::string& v) { args.gpu_sampler = v; }},
       {"--markdown", [&](const std::string& v) { args.markdown = v; }}});
  if (!go) {
    std::cout << kUsage;
    return 0;
  }
  kc::require(!args.model.empty() || !args.synthetic.empty(), "give --model, --synthetic or both\n{}", kUsage);
  const std::vector<bool> graph_modes = on_off_modes(args.graphs, "--cuda-graphs");
  const std::vector<bool> fuse_modes = on_off_modes(args.fuse_kernels, "--fuse-kernels");
  const std::vector<bool> launch_modes = on_off_modes(args.programmatic_launch, "--programmatic-launch");
  const std::vector<bool> rope_modes = on_off_modes(args.rope_in_attention, "--rope-in-attention");
  const std::vector<bool> mlp_modes = on_off_modes(args.one_launch_mlp, "--one-launch-mlp");
  const int int4_group_size = int4_group_size_of(args.quantized);
  kc::require(args.quantized.empty() || args.quantized == "q4_0" || args.quantized == "q4_1" ||
                  args.quantized == "q8_0" || int4_group_size > 0,
              "--quantized: '{}' is not q4_0, q4_1, q8_0 or int4-gN (N = 32, 64 or a multiple of 128)",
              args.quantized);
  const std::vector<bool> native_modes = on_off_modes(args.native_quantized, "--native-quantized");
  // On (the default) before off.
  const std::vector<bool> spread_on_first = on_off_modes(args.spread_links, "--spread-links");
  const std::vector<bool> spread_modes(spread_on_first.rbegin(), spread_on_first.rend());
  const std::vector<bool> first_trip_modes = on_off_modes(args.gemv_first_trip, "--gemv-first-trip");
  kc::engine::validate_sampling_params(args.sampling);  // before any GPU time
  const std::vector<bool> sampler_modes = on_off_modes(args.gpu_sampler, "--gpu-sampler");
  kc::require(args.gpu_sampler == "on" || args.sampling.temperature > 0.f,
              "--gpu-sampler {}: the sampler runs only for a temperature above 0 (greedy steps take the argmax); "
              "add --temperature",
              args.gpu_sampler);
  kc::require(args.decode_tokens >= 2 && args.concurrency_tokens >= 1 && args.concurrency_prompt >= 1,
              "--decode-tokens must be >= 2, --concurrency-prompt and --concurrency-tokens >= 1");
  const std::vector<DecodeRung> decode_modes = parse_decode_attention(args.decode_attention);
  const std::vector<RopeRung> rope_rungs = parse_decode_rope_rung(args.decode_rope_rung);
  // --int4-link-rung takes 04 and 05 (RunnerOptions::int4_link_rung; both = 04,05),
  // --gguf-link-rung 07, 08, 11 and 12 (RunnerOptions::gguf_link_rung; both = stage3,11: the
  // choice against rung 11, which stage 3 does not choose); stage3 is 0, stage 3's own choice.
  const std::vector<int> int4_link_rungs = parse_rung_list(args.int4_link_rung, "--int4-link-rung", {4, 5}, "04,05", true);
  const std::vector<int> gguf_link_rungs =
      parse_rung_list(args.gguf_link_rung, "--gguf-link-rung", {7, 8, 11, 12}, "stage3,11", true);
  if (!args.markdown.empty()) {  // the report's folder first: a run must not end unable to write it
    std::error_code error;
    std::filesystem::create_directories(args.markdown, error);
    kc::require(!error, "--markdown: cannot create the report folder '{}': {}", args.markdown, error.message());
  }
  const Peers peers = Peers::read(args.peers);  // read first: a bad file costs no GPU time
  if (!kc::gpu_visible_or_explain("kc-engine-bench", "; the engine runs on a GPU.")) return 1;

  const kc::DeviceInfo device = kc::query_device();
  cudaStream_t stream = nullptr;
  KC_CUDA_CHECK(cudaStreamCreate(&stream));
  const double copy_gbps = kc::measure_copy_bandwidth_gbps(std::size_t{1} << 30, stream);
  KC_CUDA_CHECK(cudaStreamDestroy(stream));
  std::printf("%s\ncopy bandwidth %.0f GB/s\n", device.summary().c_str(), copy_gbps);

  const kc::engine::GgmlType random_type = args.quantized == "q4_0"   ? kc::engine::GgmlType::q4_0
                                           : args.quantized == "q4_1" ? kc::engine::GgmlType::q4_1
                                           : args.quantized == "q8_0" ? kc::engine::GgmlType::q8_0
                                                                      : kc::engine::GgmlType::bf16;
  std::vector<std::pair<std::string, bool>> names;  // (name or path, a checkpoint)
  std::stringstream in(args.synthetic);
  for (std::string name; std::getline(in, name, ',');) names.emplace_back(name, false);
  if (!args.model.empty()) names.emplace_back(args.model, true);

  std::vector<ModelResult> results;
  for (const auto& [name, checkpoint] : names) {
    std::optional<kc::engine::LoadedModel> loaded;
    kc::engine::ModelConfig config;
    if (checkpoint) {
      kc::engine::WeightLoadOptions load;
      load.keep_quantized_blocks = args.native_quantized != "off";
      loaded = kc::engine::load_model(name, load);
      config = loaded->weights.config;
    } else {
      config = kc::engine::published_model_config(name);
    }
    for (bool native : native_modes)
    for (bool fuse : fuse_modes)
    for (bool dependent : launch_modes)
    for (const DecodeRung decode_rung : decode_modes)
    for (bool rope_in : rope_modes)
    for (const RopeRung rope_rung : rope_rungs)
    for (bool one_launch_mlp : mlp_modes)
    for (const int l2_warm_mib : args.l2_warm_mib)
    for (const int int4_link_rung : int4_link_rungs)
    for (const int gguf_link_rung : gguf_link_rungs)
    for (bool spread : spread_modes)
    for (bool first_trip : first_trip_modes)
    for (bool gpu_sampler : sampler_modes)
    for (bool graphs : graph_modes) {
      kc::engine::RunnerOptions options;
      options.cuda_graphs = graphs;
      options.gpu_sampler = gpu_sampler;
      options.fuse_kernels = fuse;
      options.programmatic_launch = dependent;
      options.decode_attention = decode_rung;
      options.rope_in_attention = rope_in;
      options.decode_rope_rung = rope_rung;
      options.one_launch_mlp = one_launch_mlp;
      options.l2_warm_bytes = static_cast<std::size_t>(l2_warm_mib) << 20;
      options.native_quantized = native;
      options.int4_link_rung = int4_link_rung;
      options.gguf_link_rung = gguf_link_rung;
      options.spread_small_links = spread;
      options.decode_min_keys_per_split = args.decode_min_split_keys;
      options.kv_memory_fraction = args.kv_fraction;
      if (loaded) options.quantize_int4_group_size = int4_group_size;  // a checkpoint's other projections
      options.max_model_len = std::min(args.max_model_len, config.max_position_embeddings);
      // Read at launch and at capture: set before the runner is built and kept until it is gone
      // (the restorer, made before the runner, goes after it).
      const kc::stage3::SmallMGemvKnobsRestorer restore_knobs;
      kc::stage3::set_small_m_gemv_first_trip_before_wait(first_trip);
      std::unique_ptr<kc::engine::ModelRunner> runner =
          loaded ? std::make_unique<kc::engine::ModelRunner>(loaded->weights, options, loaded->rope_freq_factors)
                 : std::make_unique<kc::engine::ModelRunner>(config, options, args.seed, random_type, int4_group_size);
      const kc::engine::ModelRunner::WeightBytes& bytes = runner->weight_bytes();
      std::string blocks = bytes.block_type;  // the blocks' type, also when they stay on the host
      if (blocks.empty() && !loaded && random_type != kc::engine::GgmlType::bf16) blocks = args.quantized;
      if (blocks.empty() && loaded && !native) blocks = loaded_block_type(*loaded);
      if (blocks.empty() && int4_group_size > 0) blocks = fmt::format("int4 g{}", int4_group_size);
      const std::string decode_note = decode_attention_note(decode_rung, rope_rung, rope_in, fuse);
      std::printf("%s, %s%s%s%s%s%s%s%s%s%s%s%s%s: %.0f MiB of bf16 weights%s, %.0f MiB read a decode token\n", name.c_str(),
                  graphs ? "CUDA graphs" : "eager", fuse ? ", fused kernels" : "",
                  dependent ? "" : ", ordinary launches", decode_note.c_str(),
                  rope_in || !fuse ? "" : ", RoPE and cache write in their own kernel",
                  one_launch_mlp && fuse ? ", the MLP in one launch" : "",
                  l2_warm_note(l2_warm_mib, fuse).c_str(),
                  blocks.empty() ? "" : fmt::format(", {} {}", blocks, native ? "native" : "dequantized").c_str(),
                  link_note("int4", int4_link_rung, native, fuse).c_str(),
                  link_note("GGUF", gguf_link_rung, native, fuse).c_str(), spread_note(spread, native, fuse).c_str(),
                  first_trip_note(first_trip, dependent).c_str(),
                  sampling_note(args.sampling, gpu_sampler).c_str(),
                  static_cast<double>(bytes.bf16) / (1 << 20),
                  bytes.blocks > 0 ? fmt::format(" + {:.0f} MiB of {} blocks", static_cast<double>(bytes.blocks) / (1 << 20),
                                                 bytes.block_type).c_str()
                                   : "",
                  static_cast<double>(bytes.read_per_token) / (1 << 20));
      ModelResult result = measure(*runner, config, args, copy_gbps);
      result.native_quantized = native;
      result.int4_link_rung = int4_link_rung;
      result.gguf_link_rung = gguf_link_rung;
      result.spread_links = spread;
      result.gemv_first_trip = first_trip;
      result.block_type = blocks;
      result.name = name;
      result.source = loaded ? "checkpoint, " + loaded->format : "published shape, random weights";
      result.cuda_graphs = graphs;
      result.fuse_kernels = fuse;
      result.programmatic_launch = dependent;
      result.decode_attention = decode_rung;
      result.rope_in_attention = rope_in;
      result.decode_rope_rung = rope_rung;
      result.one_launch_mlp = one_launch_mlp;
      result.l2_warm_mib = l2_warm_mib;
      result.decode_min_split_keys = args.decode_min_split_keys;
      result.gpu_sampler = gpu_sampler;
      results.push_back(std::move(result));
      runner.reset();
    }
  }
  if (!args.markdown.empty()) write_tables(args, device, copy_gbps, results, peers);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "kc-engine-bench: %s\n", error.what());
    return 2;
  }
}
