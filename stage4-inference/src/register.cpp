// The engine's own kernels as kc-bench ops: the KV-cache write of a step, the fused RoPE + cache
// write, the greedy choice and the sampler.
// Each is memory-bound and judged against a copy of its bytes, like stage 2's ops; their table is
// "stage4-kernels" (kc-engine-bench writes the engine's own, stage4.md).
#include "kc/stage4/register.hpp"

#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <map>
#include <string>
#include <utility>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "kc/common/buffer.hpp"
#include "kc/common/error.hpp"
#include "kc/common/fill.hpp"
#include "kc/common/op_builder.hpp"
#include "kc/engine/engine_kernels.hpp"
#include "kc/engine/gpu_sampler.hpp"
#include "kc/engine/sampling.hpp"
#include "kc/stage2/kernels.hpp"
#include "kc/stage2/references.hpp"

namespace kc::stage4 {
namespace {

constexpr const char* kReport = "stage4-kernels";

KernelEntry engine_kernel(const std::string& op, const std::string& name, std::string idea, LaunchFn launch) {
  KernelEntry entry;
  entry.id = "stage4/" + op + "/" + name;
  entry.op = op;
  entry.rung = 1;
  entry.idea = std::move(idea);
  entry.dtypes = {DType::bf16};
  entry.launch = std::move(launch);
  entry.report = kReport;
  return entry;
}

// ---- kv_cache_write: dims {tokens, kv_heads, head_dim, num_blocks}, parameter block_size --------

std::int64_t block_size_of(const Problem& p) { return static_cast<std::int64_t>(p.param("block_size")); }

// `tokens` distinct cache slots out of num_blocks x block_size, shuffled by the seed: the tokens of
// a step land in scattered blocks and rows. `tokens_dim`, `blocks_dim`: where the problem keeps them.
OperandSpec shuffled_slots(int tokens_dim, int blocks_dim) {
  OperandSpec slots = input("slots", dims_at({tokens_dim}), FillSpec{}, DType::i32);
  slots.initialize = [tokens_dim, blocks_dim](const Problem& p, Tensor& tensor, std::uint64_t seed,
                                              cudaStream_t stream) {
    std::vector<std::int32_t> all(static_cast<std::size_t>(p.dims[blocks_dim] * block_size_of(p)));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), std::mt19937_64(seed));
    tensor.upload(all.data(), static_cast<std::size_t>(p.dims[tokens_dim]) * sizeof(std::int32_t), stream);
  };
  return slots;
}

// Element d of kv head h of cache slot `slot` in a [num_blocks, kv_heads, block_size, head_dim] cache.
std::size_t cache_index(std::int64_t slot, std::int64_t h, std::int64_t d, std::int64_t kv_heads,
                        std::int64_t block_size, std::int64_t head_dim) {
  return static_cast<std::size_t>((((slot / block_size) * kv_heads + h) * block_size + slot % block_size) * head_dim +
                                  d);
}

OpConfig kv_cache_write_config(const std::shared_ptr<CopyScratch>& scratch) {
  OpConfig config;
  config.name = "kv_cache_write";
  config.description =
      "K_cache[slot[t]] = k[t], V_cache[slot[t]] = v[t] for every kv head (caches [num_blocks, kv_heads, "
      "block_size, head_dim], slot = block x block_size + row); every other cache row unchanged";
  config.dim_names = {"tokens", "kv_heads", "head_dim", "num_blocks"};
  config.dtypes = {DType::bf16};
  config.params = {{"block_size", 16, "token rows a cache block holds"}};
  config.bound = Bound::memory;
  config.copy_scratch = scratch;
  const ShapeFn cache = [](const Problem& p) {
    return Shape{p.dims[3], p.dims[1], block_size_of(p), p.dims[2]};
  };
  const OperandSpec slots = shuffled_slots(0, 3);
  OperandSpec k_cache = input("k_cache", cache), v_cache = input("v_cache", cache);
  k_cache.role = v_cache.role = Role::input_output;
  config.operands = {input("k", dims_at({0, 1, 2})), input("v", dims_at({0, 1, 2})), slots, k_cache, v_cache};
  // k and v read, their rows written into the caches, the slots read.
  config.bytes = [](const Problem& p) {
    return 4.0 * static_cast<double>(p.dims[0] * p.dims[1] * p.dims[2]) * 2.0 + 4.0 * static_cast<double>(p.dims[0]);
  };
  config.supports = [](const Problem& p) -> std::string {
    const std::int64_t block = block_size_of(p);
    if (block != 16 && block != 32 && block != 64) return "block_size must be 16, 32 or 64";
    if (p.dims[2] % 8 != 0) return "head_dim must be a multiple of 8 (rows move in 16-byte pieces)";
    if (p.dims[0] > p.dims[3] * block) return "more tokens than cache slots";
    return "";
  };
  config.host_reference = [](const Problem& p, const HostTensors& in) {
    HostTensors out{{"k_cache", in.at("k_cache")}, {"v_cache", in.at("v_cache")}};
    const std::int64_t heads = p.dims[1], dim = p.dims[2], block = block_size_of(p);
    for (std::int64_t t = 0; t < p.dims[0]; ++t) {
      const auto slot = static_cast<std::int64_t>(in.at("slots")[static_cast<std::size_t>(t)]);
      for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t d = 0; d < dim; ++d) {
          const std::size_t from = static_cast<std::size_t>((t * heads + h) * dim + d);
          const std::size_t to = cache_index(slot, h, d, heads, block, dim);
          out["k_cache"][to] = in.at("k")[from];
          out["v_cache"][to] = in.at("v")[from];
        }
    }
    return out;
  };
  // A decode step of 256 sequences and a prefill chunk of 2048 tokens, Llama-3-8B's kv heads, a
  // cache of 4096 blocks of 16 rows.
  config.bench = {{{256, 8, 128, 4096}}, {{2048, 8, 128, 4096}}};
  config.conformance = {{{1, 1, 8, 1}},     {{17, 3, 64, 2}},  {{300, 2, 128, 40}},
                        ProblemSpec({{33, 4, 64, 3}}, std::nullopt, {{"block_size", 32}}),
                        ProblemSpec({{64, 1, 16, 1}}, std::nullopt, {{"block_size", 64}})};
  return config;
}

// ---- rope_kv_write: dims {tokens, q_heads, kv_heads, head_dim, num_blocks}, parameter block_size -
// RoPE (rotate-half, stage 2's table of base 10000) on q in place and on k into its cache slot, v
// into its slot: the two kernels before a step's attention in one.

constexpr std::int64_t kRopeTablePositions = 4096;  // positions drawn in [0, 4096)

OpConfig rope_kv_write_config(const std::shared_ptr<CopyScratch>& scratch) {
  OpConfig config;
  config.name = "rope_kv_write";
  config.description =
      "q = rope(q) in place; K_cache[slot[t]] = rope(k[t]), V_cache[slot[t]] = v[t] (rotate-half, base 10000, "
      "token t at positions[t]; caches [num_blocks, kv_heads, block_size, head_dim]); other cache rows unchanged";
  config.dim_names = {"tokens", "q_heads", "kv_heads", "head_dim", "num_blocks"};
  config.dtypes = {DType::bf16};
  config.params = {{"block_size", 16, "token rows a cache block holds"}};
  config.bound = Bound::memory;
  config.copy_scratch = scratch;
  const ShapeFn cache = [](const Problem& p) {
    return Shape{p.dims[4], p.dims[2], block_size_of(p), p.dims[3]};
  };
  OperandSpec q = input("q", dims_at({0, 1, 3}));
  q.role = Role::input_output;
  OperandSpec positions = input("positions", dims_at({0}), FillSpec{}, DType::i32);
  positions.initialize = [](const Problem& p, Tensor& tensor, std::uint64_t seed, cudaStream_t stream) {
    std::mt19937_64 random(seed);
    std::uniform_int_distribution<std::int32_t> position(0, kRopeTablePositions - 1);
    std::vector<std::int32_t> values(static_cast<std::size_t>(p.dims[0]));
    for (std::int32_t& v : values) v = position(random);
    tensor.upload(values.data(), values.size() * sizeof(std::int32_t), stream);
  };
  const OperandSpec slots = shuffled_slots(0, 4);
  OperandSpec table = input(
      "cos_sin", [](const Problem& p) { return Shape{kRopeTablePositions, p.dims[3]}; }, FillSpec{}, DType::f32);
  table.initialize = [](const Problem& p, Tensor& tensor, std::uint64_t, cudaStream_t stream) {
    const std::vector<float> values = stage2::rope_cos_sin_table(kRopeTablePositions, p.dims[3], stage2::kRopeBase);
    tensor.upload(values.data(), values.size() * sizeof(float), stream);
  };
  OperandSpec k_cache = input("k_cache", cache), v_cache = input("v_cache", cache);
  k_cache.role = v_cache.role = Role::input_output;
  config.operands = {q, input("k", dims_at({0, 2, 3})), input("v", dims_at({0, 2, 3})), positions, slots, table,
                     k_cache, v_cache};
  // q read and written; k and v read and their rows written to the caches; a table row a token;
  // positions and slots.
  config.bytes = [](const Problem& p) {
    const double tokens = static_cast<double>(p.dims[0]), dim = static_cast<double>(p.dims[3]);
    return 2.0 * 2.0 * tokens * dim * static_cast<double>(p.dims[1] + 2 * p.dims[2]) + 4.0 * tokens * dim +
           8.0 * tokens;
  };
  config.supports = [](const Problem& p) -> std::string {
    const std::int64_t block = block_size_of(p);
    if (block != 16 && block != 32 && block != 64) return "block_size must be 16, 32 or 64";
    if (p.dims[3] % 16 != 0) return "head_dim must be a multiple of 16 (8 pairs, 16-byte pieces, a thread)";
    if (p.dims[0] > p.dims[4] * block) return "more tokens than cache slots";
    return "";
  };
  config.host_reference = [](const Problem& p, const HostTensors& in) {
    const std::int64_t tokens = p.dims[0], kv_heads = p.dims[2], dim = p.dims[3], block = block_size_of(p);
    std::vector<double> q_out = in.at("q"), k_rotated = in.at("k");
    const double* at = in.at("positions").data();
    stage2::rope_reference(stage2::RopeLayout::rotate_half, q_out.data(), tokens, p.dims[1], dim, at,
                           stage2::kRopeBase);
    stage2::rope_reference(stage2::RopeLayout::rotate_half, k_rotated.data(), tokens, kv_heads, dim, at,
                           stage2::kRopeBase);
    HostTensors out{{"q", std::move(q_out)}, {"k_cache", in.at("k_cache")}, {"v_cache", in.at("v_cache")}};
    for (std::int64_t t = 0; t < tokens; ++t) {
      const auto slot = static_cast<std::int64_t>(in.at("slots")[static_cast<std::size_t>(t)]);
      for (std::int64_t h = 0; h < kv_heads; ++h)
        for (std::int64_t d = 0; d < dim; ++d) {
          const std::size_t from = static_cast<std::size_t>((t * kv_heads + h) * dim + d);
          const std::size_t to = cache_index(slot, h, d, kv_heads, block, dim);
          out["k_cache"][to] = k_rotated[from];
          out["v_cache"][to] = in.at("v")[from];
        }
    }
    return out;
  };
  // A decode step of 256 sequences and a prefill chunk of 2048 tokens, Llama-3-8B's heads, a cache
  // of 4096 blocks of 16 rows.
  config.bench = {{{256, 32, 8, 128, 4096}}, {{2048, 32, 8, 128, 4096}}};
  config.conformance = {{{1, 1, 1, 16, 1}},    {{17, 9, 3, 64, 2}},  {{300, 4, 2, 128, 40}},
                        ProblemSpec({{33, 8, 4, 64, 3}}, std::nullopt, {{"block_size", 32}}),
                        ProblemSpec({{64, 2, 1, 16, 1}}, std::nullopt, {{"block_size", 64}}),
                        {{{5, 4, 4, 48, 1}}}};
  return config;
}

// ---- argmax_rows: dims {rows, vocab} ----------------------------------------------------------

OpConfig argmax_rows_config(const std::shared_ptr<CopyScratch>& scratch) {
  OpConfig config;
  config.name = "argmax_rows";
  config.description = "out[r] = the index of the largest logit of row r, ties to the lower index (greedy decoding)";
  config.dim_names = {"rows", "vocab"};
  config.dtypes = {DType::bf16};
  config.bound = Bound::memory;
  config.copy_scratch = scratch;
  // Normal logits in bf16: equal values are common at the top of a long row, so ties are tested.
  config.operands = {input("logits", dims_at({0, 1}), FillSpec::normal(0.0, 3.0)),
                     output("out", dims_at({0}), DType::i32)};
  config.host_reference = [](const Problem& p, const HostTensors& in) {
    std::vector<double> out(static_cast<std::size_t>(p.dims[0]));
    const std::vector<double>& logits = in.at("logits");
    for (std::int64_t r = 0; r < p.dims[0]; ++r) {
      const auto row = logits.begin() + r * p.dims[1];
      out[static_cast<std::size_t>(r)] = static_cast<double>(std::max_element(row, row + p.dims[1]) - row);
    }
    return HostTensors{{"out", std::move(out)}};
  };
  // A decode step's logits: 256 sequences over Llama 3's vocabulary.
  config.bench = {{{256, 128256}}};
  config.conformance = {{{1, 1}}, {{3, 1000}}, {{5, 4097}}, {{64, 49152}}, {{2, 128256}}};
  return config;
}

// ---- sample_rows: dims {rows, vocab}, parameters temperature, top_k, top_p --------------------
// The sampler of a decode step with a temperature (kc/engine/sampling.hpp's rule, drawn on the GPU
// by kc/engine/gpu_sampler.hpp). Row r samples as token number r of a request seeded
// kSampleSeedBase + r, so the draws differ from row to row and are the same in every run.

constexpr std::uint64_t kSampleSeedBase = 0x5eed0000;

engine::SamplingParams sample_params(const Problem& p, std::int64_t row) {
  engine::SamplingParams params;
  params.temperature = static_cast<float>(p.param("temperature"));
  params.top_k = static_cast<std::int32_t>(p.param("top_k"));
  params.top_p = static_cast<float>(p.param("top_p"));
  params.seed = kSampleSeedBase + static_cast<std::uint64_t>(row);
  return params;
}

// A row of the logits operand as the floats the reference samples from.
std::vector<float> logits_row(const std::vector<double>& logits, std::int64_t row, std::int64_t vocab) {
  std::vector<float> out(static_cast<std::size_t>(vocab));
  for (std::int64_t c = 0; c < vocab; ++c) out[static_cast<std::size_t>(c)] = static_cast<float>(logits[static_cast<std::size_t>(row * vocab + c)]);
  return out;
}

// The sampler and each problem's parameter rows, made in the untimed warm-up launch.
struct SamplerState {
  std::map<std::pair<std::int64_t, std::int64_t>, std::unique_ptr<engine::GpuSampler>> samplers;
  std::map<std::string, DeviceBuffer<engine::GpuSamplingRow>> rows;
};

OpConfig sample_rows_config(const std::shared_ptr<CopyScratch>& scratch) {
  OpConfig config;
  config.name = "sample_rows";
  config.description =
      "out[r] = the token sampling.hpp's rule picks from row r of the logits with the problem's temperature, top-k "
      "and top-p, drawn as token r of a request seeded 0x5eed0000 + r; a neighbour in the order where the draw "
      "lies within FP32 rounding of the boundary between the two is accepted (sampling_boundary_neighbours)";
  config.dim_names = {"rows", "vocab"};
  config.dtypes = {DType::bf16};
  config.params = {{"temperature", 0.8, "softmax temperature; 0 is greedy"},
                   {"top_k", 0, "keep the k largest logits; 0 keeps all"},
                   {"top_p", 0.95, "keep the shortest prefix of the order whose probability reaches top_p"}};
  config.bound = Bound::memory;
  config.copy_scratch = scratch;
  config.operands = {input("logits", dims_at({0, 1}), FillSpec::normal(0.0, 3.0)),
                     output("out", dims_at({0}), DType::i32)};
  config.bytes = [](const Problem& p) {  // the logits read once, the tokens written
    return 2.0 * static_cast<double>(p.dims[0] * p.dims[1]) + 4.0 * static_cast<double>(p.dims[0]);
  };
  config.supports = [](const Problem& p) -> std::string {
    try {
      engine::validate_sampling_params(sample_params(p, 0));
    } catch (const Error& error) {
      return error.what();
    }
    if (p.dims[0] * p.dims[1] > INT32_MAX) return "rows x vocab must stay below 2^31 keys (the sort's)";
    return "";
  };
  config.host_reference = [](const Problem& p, const HostTensors& in) {
    std::vector<double> out(static_cast<std::size_t>(p.dims[0]));
    for (std::int64_t r = 0; r < p.dims[0]; ++r)
      out[static_cast<std::size_t>(r)] = engine::sample_token(logits_row(in.at("logits"), r, p.dims[1]),
                                                              sample_params(p, r), static_cast<std::uint64_t>(r));
    return HostTensors{{"out", std::move(out)}};
  };
  // A token id is a choice, not a number: equal to the reference's, or its neighbour at a boundary.
  config.compare_choice = [](const Problem& p, const Tensor& output, const DeviceBuffer<double>& reference,
                             const Operands& operands, cudaStream_t stream) {
    const std::vector<double> got = to_host_double(output.raw(), output.dtype, output.count(), stream);
    const std::vector<double> want = to_host_double(reference.data(), DType::f64, reference.size(), stream);
    const Tensor& logits_tensor = operands["logits"];
    const std::vector<double> logits = to_host_double(logits_tensor.raw(), logits_tensor.dtype, logits_tensor.count(), stream);
    CompareResult result;
    result.count = got.size();
    for (std::size_t r = 0; r < got.size(); ++r) {
      const auto token = static_cast<engine::TokenId>(got[r]), expected = static_cast<engine::TokenId>(want[r]);
      const std::int64_t row = static_cast<std::int64_t>(r);
      const bool ok = got[r] == want[r] ||
                      (got[r] == static_cast<double>(token) &&
                       engine::sampling_boundary_neighbours(logits_row(logits, row, p.dims[1]), sample_params(p, row),
                                                            static_cast<std::uint64_t>(row), expected, token));
      if (ok) continue;
      if (result.mismatches++ == 0) {
        result.first_bad_index = r;
        result.first_bad_out = got[r];
        result.first_bad_ref = want[r];
      }
    }
    result.passed = result.mismatches == 0;
    return result;
  };
  // A decode step's sampling: one sequence and 64 over Llama 3's vocabulary, 256 over SmolLM2's.
  config.bench = {{{1, 128256}}, {{64, 128256}}, {{256, 49152}}};
  config.conformance = {{{1, 1000}},
                        {{7, 4097}},
                        ProblemSpec({{3, 49152}}, std::nullopt, {{"temperature", 1.5}, {"top_p", 1.0}}),
                        ProblemSpec({{5, 1000}}, std::nullopt, {{"temperature", 0.0}}),
                        ProblemSpec({{4, 2048}}, std::nullopt, {{"top_k", 1}}),
                        ProblemSpec({{40, 3000}}, std::nullopt, {{"top_k", 50}, {"top_p", 0.5}})};
  return config;
}

}  // namespace

void register_kernels(Registry& registry) {
  const auto scratch = std::make_shared<CopyScratch>();
  registry.add_op(build_op(kv_cache_write_config(scratch)));
  registry.add_kernel(engine_kernel(
      "kv_cache_write", "01_scatter_rows", "a thread per 16-byte piece of a token's K and V rows, to its slot",
      [](const Problem& p, Operands& o, cudaStream_t stream) {
        engine::write_kv_cache(o["k"].data<__nv_bfloat16>(), o["v"].data<__nv_bfloat16>(),
                               o["slots"].data<std::int32_t>(), static_cast<int>(p.dims[0]),
                               static_cast<int>(p.dims[1]), static_cast<int>(p.dims[2]),
                               static_cast<int>(block_size_of(p)), o["k_cache"].data<__nv_bfloat16>(),
                               o["v_cache"].data<__nv_bfloat16>(), stream);
      }));
  registry.add_op(build_op(rope_kv_write_config(scratch)));
  registry.add_kernel(engine_kernel(
      "rope_kv_write", "01_fused", "a thread per 8 pairs of a head: q rotated in place, k rotated into its cache slot, "
      "v copied beside it",
      [](const Problem& p, Operands& o, cudaStream_t stream) {
        engine::rope_write_kv(o["q"].data<__nv_bfloat16>(), o["k"].data<__nv_bfloat16>(), o["v"].data<__nv_bfloat16>(),
                              o["positions"].data<std::int32_t>(), o["slots"].data<std::int32_t>(),
                              o["cos_sin"].data<float>(), static_cast<int>(kRopeTablePositions),
                              static_cast<int>(p.dims[0]), static_cast<int>(p.dims[1]), static_cast<int>(p.dims[2]),
                              static_cast<int>(p.dims[3]), static_cast<int>(block_size_of(p)),
                              o["k_cache"].data<__nv_bfloat16>(), o["v_cache"].data<__nv_bfloat16>(), stream);
      }));
  registry.add_op(build_op(argmax_rows_config(scratch)));
  registry.add_kernel(engine_kernel("argmax_rows", "01_block_per_row",
                                    "a block per row: strided maxima, then one CUB block reduction",
                                    [](const Problem& p, Operands& o, cudaStream_t stream) {
                                      engine::argmax_rows_block_per_row(
                                          o["logits"].data<__nv_bfloat16>(), static_cast<int>(p.dims[0]),
                                          static_cast<int>(p.dims[1]), o["out"].data<std::int32_t>(), stream);
                                    }));
  KernelEntry cluster = engine_kernel(
      "argmax_rows", "02_cluster_per_row",
      "a cluster of 8 CTAs a row, each reducing an eighth, merged through distributed shared memory (Hopper)",
      [](const Problem& p, Operands& o, cudaStream_t stream) {
        engine::argmax_rows_cluster(o["logits"].data<__nv_bfloat16>(), static_cast<int>(p.dims[0]),
                                    static_cast<int>(p.dims[1]), o["out"].data<std::int32_t>(), stream);
      });
  cluster.rung = 2;
  cluster.min_compute_capability = 90;  // thread block clusters
  registry.add_kernel(std::move(cluster));
  registry.add_op(build_op(sample_rows_config(scratch)));
  const auto add_sampler = [&registry](const char* name, int rung, const char* idea, engine::GpuSortMethod method) {
    auto state = std::make_shared<SamplerState>();
    KernelEntry entry = engine_kernel(
        "sample_rows", name, idea, [state, method](const Problem& p, Operands& o, cudaStream_t stream) {
          auto& sampler = state->samplers[{p.dims[0], p.dims[1]}];
          if (!sampler) sampler = std::make_unique<engine::GpuSampler>(static_cast<int>(p.dims[1]), 32, method);
          auto found = state->rows.find(p.label());
          if (found == state->rows.end()) {
            std::vector<engine::GpuSamplingRow> rows(static_cast<std::size_t>(p.dims[0]));
            for (std::size_t r = 0; r < rows.size(); ++r)
              rows[r] = engine::gpu_sampling_row(sample_params(p, static_cast<std::int64_t>(r)), r);
            DeviceBuffer<engine::GpuSamplingRow> device(rows.size());
            device.copy_from_host(rows);
            found = state->rows.emplace(p.label(), std::move(device)).first;
          }
          sampler->sample(o["logits"].data<__nv_bfloat16>(), static_cast<int>(p.dims[0]), found->second.data(),
                          o["out"].data<std::int32_t>(), stream);
        });
    entry.rung = rung;
    registry.add_kernel(std::move(entry));
  };
  add_sampler("01_radix_sort", 1,
              "the vocabulary sorted per row by CUB's segmented radix sort (a thread block a row), a block scan of "
              "the weights, the cuts and the draw by binary search",
              engine::GpuSortMethod::segmented_per_row);
  add_sampler("02_one_sort", 2,
              "rung 01 with the rows of a pass (32) sorted by one device-wide radix sort, the row above the "
              "logit's bits in a 64-bit key, so that every SM sorts",
              engine::GpuSortMethod::one_sort);
}

}  // namespace kc::stage4
