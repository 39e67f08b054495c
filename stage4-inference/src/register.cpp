// The engine's own kernels as kc-bench ops: the KV-cache write of a step and the greedy choice.
// Each is memory-bound and judged against a copy of its bytes, like stage 2's ops; their table is
// "stage4-kernels" (kc-engine-bench writes the engine's own, stage4.md).
#include "kc/stage4/register.hpp"

#include <cuda_bf16.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "kc/common/op_builder.hpp"
#include "kc/engine/engine_kernels.hpp"

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
  OperandSpec slots = input("slots", dims_at({0}), FillSpec{}, DType::i32);
  // Distinct slots, shuffled by the seed: tokens land in scattered blocks and rows.
  slots.initialize = [](const Problem& p, Tensor& tensor, std::uint64_t seed, cudaStream_t stream) {
    std::vector<std::int32_t> all(static_cast<std::size_t>(p.dims[3] * block_size_of(p)));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), std::mt19937_64(seed));
    tensor.upload(all.data(), static_cast<std::size_t>(p.dims[0]) * sizeof(std::int32_t), stream);
  };
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
          const std::size_t to = static_cast<std::size_t>((((slot / block) * heads + h) * block + slot % block) * dim + d);
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
  registry.add_op(build_op(argmax_rows_config(scratch)));
  registry.add_kernel(engine_kernel("argmax_rows", "01_block_per_row",
                                    "a block per row: strided maxima, then one CUB block reduction",
                                    [](const Problem& p, Operands& o, cudaStream_t stream) {
                                      engine::argmax_rows(o["logits"].data<__nv_bfloat16>(),
                                                          static_cast<int>(p.dims[0]), static_cast<int>(p.dims[1]),
                                                          o["out"].data<std::int32_t>(), stream);
                                    }));
}

}  // namespace kc::stage4
