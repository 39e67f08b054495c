// RoPE (rotate-half and interleaved) and the embedding gather: op descriptions and ladders.
#include <fmt/format.h>

#include <cmath>

#include "kc/common/fill.hpp"
#include "kc/stage2/embedding.hpp"
#include "kc/stage2/kernels.hpp"
#include "kc/stage2/references.hpp"
#include "register_helpers.hpp"

namespace kc::stage2::detail {
namespace {

// ---- RoPE: dims {tokens, q_heads, kv_heads, head_dim}; parameter position_offset ----------------

std::int64_t position_offset(const Problem& p) {
  return static_cast<std::int64_t>(p.param("position_offset"));
}

// Copies host values into the tensor on `stream` (after anything queued there) and waits.
template <typename V>
void upload(Tensor& tensor, const std::vector<V>& values, cudaStream_t stream) {
  tensor.upload(values.data(), values.size() * sizeof(V), stream);
}

OpConfig rope_config(RopeLayout layout, const std::shared_ptr<CopyScratch>& scratch) {
  const bool rotate_half = layout == RopeLayout::rotate_half;
  OpConfig config = memory_op(
      rotate_half ? "rope_half" : "rope_interleaved",
      fmt::format("RoPE in place on Q (tokens x q_heads x head_dim) and K (tokens x kv_heads x "
                  "head_dim), {} layout, base {:g}, token t at position position_offset + t, "
                  "cos/sin from a float table",
                  rotate_half ? "rotate-half (Llama/HF)" : "interleaved (RoFormer)", kRopeBase),
      {"tokens", "q_heads", "kv_heads", "head_dim"}, scratch);
  config.params = {{"position_offset", 0.0, "the position of the first token"}};
  OperandSpec q = input("q", dims_at({0, 1, 3}));
  q.role = Role::input_output;
  OperandSpec k = input("k", dims_at({0, 2, 3}));
  k.role = Role::input_output;
  OperandSpec positions = input("positions", dims_at({0}), FillSpec{}, DType::i32);
  positions.initialize = [](const Problem& p, Tensor& tensor, std::uint64_t, cudaStream_t stream) {
    std::vector<std::int32_t> values(static_cast<std::size_t>(p.dims[0]));
    for (std::size_t t = 0; t < values.size(); ++t)
      values[t] = static_cast<std::int32_t>(position_offset(p) + static_cast<std::int64_t>(t));
    upload(tensor, values, stream);
  };
  OperandSpec table = input(
      "cos_sin", [](const Problem& p) { return Shape{position_offset(p) + p.dims[0], p.dims[3]}; },
      FillSpec{}, DType::f32);
  table.initialize = [](const Problem& p, Tensor& tensor, std::uint64_t, cudaStream_t stream) {
    // cos and sin of every pair's angle at positions 0 .. offset + tokens - 1, computed in double.
    upload(tensor, rope_cos_sin_table(position_offset(p) + p.dims[0], p.dims[3], kRopeBase), stream);
  };
  config.operands = {q, k, positions, table};
  config.supports = [](const Problem& p) -> std::string {
    if (p.dims[3] % 2 != 0) return fmt::format("RoPE needs an even head_dim (got {})", p.dims[3]);
    const double offset = p.param("position_offset");
    if (offset < 0 || offset != std::floor(offset) || offset + static_cast<double>(p.dims[0]) > INT32_MAX)
      return fmt::format("position_offset is the first token's position: a whole number >= 0 (got {})",
                         offset);
    return {};
  };
  // Q and K read and written, positions read, and one table row (head_dim floats) per token.
  config.bytes = [](const Problem& p) {
    const double tokens = static_cast<double>(p.dims[0]);
    const double head_dim = static_cast<double>(p.dims[3]);
    const double heads = static_cast<double>(p.dims[1] + p.dims[2]);
    return 2.0 * tokens * heads * head_dim * static_cast<double>(dtype_bytes(p.dtype, 1)) +
           tokens * 4.0 + tokens * head_dim * 4.0;
  };
  config.flops = [](const Problem& p) {
    return 3.0 * static_cast<double>(p.dims[0] * (p.dims[1] + p.dims[2]) * p.dims[3]);
  };
  config.host_reference = [layout](const Problem& p, const HostTensors& in) {
    std::vector<double> q_out = in.at("q"), k_out = in.at("k");
    const double* positions_in = in.at("positions").data();
    rope_reference(layout, q_out.data(), p.dims[0], p.dims[1], p.dims[3], positions_in, kRopeBase);
    rope_reference(layout, k_out.data(), p.dims[0], p.dims[2], p.dims[3], positions_in, kRopeBase);
    return HostTensors{{"q", std::move(q_out)}, {"k", std::move(k_out)}};
  };
  // Llama 3 8B's heads: Q and K of 16384 tokens are 160 MiB in bf16, well beyond the L2 (RoPE
  // works in place, so an L2-sized problem would keep written lines in the cache).
  config.bench = {{{16384, 32, 8, 128}}};
  // Odd token counts, GQA and MHA, head_dims that do and do not split into 16-byte vectors,
  // positions starting at 0 and far from it.
  const auto at = [](Shape dims, double offset) {
    return ProblemSpec(std::move(dims), std::nullopt, {{"position_offset", offset}});
  };
  config.conformance = {at({1, 1, 1, 2}, 0.0),      at({3, 4, 2, 64}, 5.0),
                        at({31, 8, 1, 128}, 4093.0), at({257, 3, 3, 96}, 17.0),
                        at({7, 32, 8, 128}, 100.0),  at({5, 2, 1, 6}, 1.0),
                        at({2, 1, 1, 8}, 3.0),       at({1000, 2, 1, 16}, 31.0)};
  return config;
}

// ---- embedding: dims {tokens, vocab, hidden} --------------------------------------------------

OpConfig embedding_config(const std::shared_ptr<CopyScratch>& scratch) {
  OpConfig config = memory_op("embedding",
                              "out[t] = table[ids[t]] (table vocab x hidden); ids outside [0, vocab) "
                              "are reported, never read",
                              {"tokens", "vocab", "hidden"}, scratch);
  OperandSpec ids = input("ids", dims_at({0}), FillSpec{}, DType::i32);
  ids.initialize = [](const Problem& p, Tensor& tensor, std::uint64_t seed, cudaStream_t stream) {
    fill_random(tensor.raw(), DType::i32, tensor.count(), seed,
                FillSpec::uniform(0.0, static_cast<double>(p.dims[1] - 1)), stream);
  };
  // Written only when an id is bad; starts at kNoBadToken (-1) and must stay there.
  OperandSpec error = output("error", [](const Problem&) { return Shape{1}; }, DType::i32);
  error.initialize = [](const Problem&, Tensor& tensor, std::uint64_t, cudaStream_t stream) {
    KC_CUDA_CHECK(cudaMemsetAsync(tensor.raw(), 0xff, sizeof(std::int32_t), stream));
  };
  config.operands = {ids, input("table", dims_at({1, 2})), output("out", dims_at({0, 2})), error};
  // The ids, then one table row read and one output row written per token.
  config.bytes = [](const Problem& p) {
    const double tokens = static_cast<double>(p.dims[0]);
    return tokens * 4.0 +
           2.0 * tokens * static_cast<double>(p.dims[2]) * static_cast<double>(dtype_bytes(p.dtype, 1));
  };
  config.host_reference = [](const Problem& p, const HostTensors& in) {
    std::vector<double> out(static_cast<std::size_t>(p.dims[0] * p.dims[2]));
    embedding_reference(in.at("ids").data(), in.at("table").data(), p.dims[0], p.dims[1], p.dims[2],
                        out.data());
    return HostTensors{{"out", std::move(out)}, {"error", {static_cast<double>(kNoBadToken)}}};
  };
  // Llama 3.2 1B's vocabulary and hidden size: 32768 random ids repeat a row only ~12% of the
  // time, so the rows the kernel must fetch are close to the rows counted (the table, 501 MiB in
  // bf16, is far larger than the L2). One shape: the CPU check converts the whole table.
  config.bench = {{{32768, 128256, 2048}}};
  for (std::int64_t hidden : {1, 31, 1000, 4097})
    for (std::int64_t tokens : {1, 3, 257}) config.conformance.push_back({{tokens, 1000, hidden}});
  config.conformance.push_back({{64, 50, 4096}});
  config.conformance.push_back({{7, 5, 8192}});
  config.conformance.push_back({{3, 1, 31}});
  return config;
}

}  // namespace

void register_rope_and_embedding_ops(Registry& registry, const std::shared_ptr<CopyScratch>& scratch) {
  for (RopeLayout layout : {RopeLayout::rotate_half, RopeLayout::interleaved}) {
    OpConfig config = rope_config(layout, scratch);
    const std::string op = config.name;
    registry.add_op(build_op(std::move(config)));
    add_ladder<RopeArgs>(
        registry, op,
        [layout](const Problem& p, Operands& o, auto type) {
          using T = typename decltype(type)::type;
          RopeArgs<T> a;
          a.layout = layout;
          a.tokens = static_cast<int>(p.dims[0]);
          a.q_heads = static_cast<int>(p.dims[1]);
          a.kv_heads = static_cast<int>(p.dims[2]);
          a.head_dim = static_cast<int>(p.dims[3]);
          a.q = o["q"].data<T>();
          a.k = o["k"].data<T>();
          a.positions = o["positions"].data<std::int32_t>();
          a.cos_sin = o["cos_sin"].data<float>();
          return a;
        },
        {rung<RopeArgs>("01_naive", 1, "one thread per rotated pair",
                        [](const auto& a, cudaStream_t s) { rope_01_naive(a, s); }),
         rung<RopeArgs>("02_vectorized", 2, "a block per token: cos/sin read once for all heads, 16-byte accesses",
                        [](const auto& a, cudaStream_t s) { rope_02_vectorized(a, s); })});
  }

  registry.add_op(build_op(embedding_config(scratch)));
  add_ladder<EmbeddingArgs>(
      registry, "embedding",
      [](const Problem& p, Operands& o, auto type) {
        using T = typename decltype(type)::type;
        EmbeddingArgs<T> a;
        a.tokens = static_cast<int>(p.dims[0]);
        a.vocab = static_cast<int>(p.dims[1]);
        a.hidden = static_cast<int>(p.dims[2]);
        a.ids = o["ids"].data<std::int32_t>();
        a.table = o["table"].data<T>();
        a.out = o["out"].data<T>();
        a.error_record = o["error"].data<std::int32_t>();
        return a;
      },
      {rung<EmbeddingArgs>("01_naive", 1, "one thread per output element, id checked before any table read",
                           [](const auto& a, cudaStream_t s) { embedding_01_naive(a, s); }),
       rung<EmbeddingArgs>("02_vectorized", 2, "a block per token: one id check, 16-byte row copy",
                           [](const auto& a, cudaStream_t s) { embedding_02_vectorized(a, s); })});
}

}  // namespace kc::stage2::detail
