// The GPU model step (kc/engine/model_runner.hpp).
#include "kc/engine/model_runner.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <nvtx3/nvtx3.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>

#include "kc/common/buffer.hpp"
#include "kc/common/error.hpp"
#include "kc/common/fill.hpp"
#include "kc/core/dependent_launch.hpp"
#include "kc/engine/dequantize.hpp"
#include "kc/engine/engine_kernels.hpp"
#include "kc/engine/gguf_blocks.hpp"
#include "kc/engine/gpu_sampler.hpp"
#include "kc/engine/graph_buckets.hpp"
#include "kc/engine/int4_groups_gpu.hpp"
#include "kc/engine/rope_table.hpp"
#include "kc/engine/sampling.hpp"
#include "kc/stage2/embedding.hpp"
#include "kc/stage2/ops.hpp"
#include "kc/stage3/attention_ops.hpp"
#include "kc/stage3/gemm.hpp"
#include "kc/stage3/quantize_int4.hpp"
#include "kc/stage3/quantized_gemv.hpp"

namespace kc::engine {
namespace {

// The roles of a layer's shared-A projections, in the order of Impl::qkv_weights.
constexpr const char* kQkvRoles[3] = {"q", "k", "v"};

using bf16 = __nv_bfloat16;

std::size_t elements(std::int64_t a, std::int64_t b = 1, std::int64_t c = 1) {
  return static_cast<std::size_t>(a) * static_cast<std::size_t>(b) * static_cast<std::size_t>(c);
}

// The names of a layer's pieces in the pool.
std::string layer_piece(std::int64_t layer, const char* what) {
  return fmt::format("layer {} {}", layer, what);
}

// A projection's blocks in the pool, in the quantized GEMV's prepared layout (quants then scales;
// quants null: none, or not used: RunnerOptions::native_quantized off). group_size > 0: 4-bit
// groups of a GPTQ/AWQ checkpoint in the int4 GEMV's layout (kc/stage3/gemv_int4_args.hpp), run by
// stage3::int4_gemv; 0: GGUF blocks of `type`, run by stage3::quantized_gemv (and its link).
struct Blocks {
  const std::uint8_t* quants = nullptr;
  const void* scales = nullptr;
  stage3::GgufBlockType type = stage3::GgufBlockType::q4_0;
  int group_size = 0;
};

bool is_gemv_block_type(GgmlType type) {
  return type == GgmlType::q4_0 || type == GgmlType::q4_1 || type == GgmlType::q8_0;
}

// A projection that has blocks: `key` the pool piece of its bf16 copy ("layer 3 q", "layer 3
// gate_up", "output projection", or "token embedding" when tied), `piece` the blocks' piece.
// group_size > 0: 4-bit groups (a GPTQ/AWQ checkpoint's, or random ones); 0: GGUF blocks of
// `type`. Both go up as stored into a scratch buffer and are prepared on the GPU into the piece.
struct BlockPiece {
  std::string key, piece;
  GgmlType type = GgmlType::q4_0;
  std::int64_t rows = 0, k = 0;
  int group_size = 0;
  bool quantized_at_load = false;  // groups made on the GPU from the bf16 copy (nothing is sent up)
  std::size_t block_count() const { return static_cast<std::size_t>(rows) * static_cast<std::size_t>(k / 32); }
  // The bytes sent up: blocks or groups as stored (the groups' three arrays without their padding).
  std::size_t bytes() const {
    return group_size > 0 ? static_cast<std::size_t>(rows) * static_cast<std::size_t>(k / 2) + 3 * stored_entries()
                          : block_count() * ggml_type_info(type).block_bytes;
  }
  // Its piece in the pool: the blocks prepared for the quantized GEMV (padding included).
  stage3::GgufBlockType gemv_type() const { return static_cast<stage3::GgufBlockType>(static_cast<int>(type)); }
  std::size_t quant_bytes() const {
    if (group_size > 0) return stage3::int4_prepared_quant_bytes(static_cast<int>(rows), static_cast<int>(k));
    return stage3::quantized_gemv_prepared_quant_bytes(gemv_type(), static_cast<int>(rows), static_cast<int>(k));
  }
  std::size_t prepared_bytes() const {
    if (group_size > 0)
      return quant_bytes() + stage3::int4_prepared_scale_bytes(static_cast<int>(rows), static_cast<int>(k), group_size);
    return quant_bytes() +
           stage3::quantized_gemv_prepared_scale_bytes(gemv_type(), static_cast<int>(rows), static_cast<int>(k));
  }
  // The groups as stored in the scratch buffer before the prepare (qweight, half scales, zero
  // bytes; each from a 16-byte boundary): sent up from a checkpoint, or written by the GPU quantizer.
  std::size_t stored_qweight_bytes() const { return (static_cast<std::size_t>(rows) * static_cast<std::size_t>(k / 2) + 15) / 16 * 16; }
  std::size_t stored_entries() const { return static_cast<std::size_t>(rows) * static_cast<std::size_t>(k / group_size); }
  std::size_t stored_bytes() const { return stored_qweight_bytes() + (stored_entries() * 2 + 15) / 16 * 16 + stored_entries(); }
  // "q4_1", or "int4 g128".
  std::string type_name() const {
    return group_size > 0 ? fmt::format("int4 g{}", group_size) : std::string(ggml_type_name(type));
  }
};

// The per-step int32 inputs, in one staging buffer and one copy: where each lives in it.
struct StepInts {
  std::size_t ids = 0, positions = 0, slots = 0, lengths = 0, table = 0, sample_rows = 0, total = 0;
};

StepInts step_int_layout(std::int64_t tokens, std::int64_t rows, std::int64_t table_slots) {
  StepInts layout;
  auto take = [&](std::size_t count) {
    const std::size_t at = layout.total;
    layout.total += (count + 3) / 4 * 4;  // 16-byte aligned pieces
    return at;
  };
  layout.ids = take(static_cast<std::size_t>(tokens));
  layout.positions = take(static_cast<std::size_t>(tokens));
  layout.slots = take(static_cast<std::size_t>(tokens));
  layout.lengths = take(static_cast<std::size_t>(rows));
  layout.table = take(static_cast<std::size_t>(table_slots));
  layout.sample_rows = take(static_cast<std::size_t>(rows));
  return layout;
}

}  // namespace

struct ModelRunner::Impl {
  ModelConfig config;
  RunnerOptions options;
  std::int64_t max_model_len = 0, max_blocks_per_seq = 0;
  std::int64_t q_width = 0, kv_width = 0;  // heads x head_dim
  std::size_t block_elements = 0;          // one block of one layer's K (or V)
  StepInts ints;  // the largest step's (every token, row and table slot): sizes the staging and device ints

  DevicePool pool;
  stage3::Gemm gemm;
  stage3::PagedDecodeAttention decode;
  cudaStream_t stream = nullptr;
  PinnedBuffer<std::int32_t> staging;
  PinnedBuffer<std::int32_t> sampled_host;
  std::map<std::string, std::string, std::less<>> used;
  // (role, path) already in `used`: a projection runs different kernels at different M
  std::set<std::pair<std::string_view, std::pair<stage3::GemmKernel, stage3::GemmFallback>>> gemms_noted;
  std::set<std::string_view> quantized_noted;  // roles already noted on their blocks

  // Device pointers.
  bf16 *embedding = nullptr, *output = nullptr, *final_norm = nullptr;
  std::vector<std::string> layer_ranges;  // NVTX range names, "layer 0" ...: made once, not per step
  struct Layer {
    bf16 *attn_norm, *q, *k, *v, *o, *ffn_norm, *gate_up, *down, *k_cache, *v_cache;
    Blocks q_blocks, k_blocks, v_blocks, o_blocks, gate_up_blocks, down_blocks;  // native_quantized
  };
  std::vector<Layer> layers;
  float* cos_sin = nullptr;
  std::int32_t *step_ints = nullptr, *sampled = nullptr, *embedding_error = nullptr;
  // sampled_host as the device sees it (pinned host memory is mapped): the greedy argmax writes
  // the chosen tokens there itself, so a step ends with its last kernel, not with a copy.
  std::int32_t* sampled_host_mapped = nullptr;
  bf16 *residual[2] = {nullptr, nullptr}, *normed = nullptr, *q = nullptr, *k = nullptr, *v = nullptr,
       *attn = nullptr, *proj = nullptr, *gate_up = nullptr, *act = nullptr, *gathered = nullptr,
       *logits = nullptr, *k_gather = nullptr, *v_gather = nullptr;
  float* lse = nullptr;
  // Decode rung 11's hand-over (RunnerOptions::decode_rope_rung heads_handed_over): for each layer
  // and kv head, the q|k|v projection's count of the columns it has written (Gemm::ColumnCounts),
  // zeroed at the start of every step that counts them.
  std::uint32_t* qkv_counts = nullptr;
  // The projection's column counts for layer `l`: q's columns in slices of a kv head's query heads,
  // k's and v's a head each, so counter h reaches qkv_count_target() once kv head h's rows are written.
  stage3::Gemm::ColumnCounts qkv_column_counts(std::size_t l) const {
    stage3::Gemm::ColumnCounts counts;
    counts.counters = qkv_counts + l * static_cast<std::size_t>(config.num_kv_heads);
    const auto head_dim = static_cast<int>(config.head_dim);
    counts.slice_columns[0] = static_cast<int>(config.num_heads / config.num_kv_heads) * head_dim;
    counts.slice_columns[1] = head_dim;
    counts.slice_columns[2] = head_dim;
    return counts;
  }
  unsigned qkv_count_target() const {
    return static_cast<unsigned>((config.num_heads / config.num_kv_heads + 2) * config.head_dim);
  }
  // The projections that have blocks (a file's kept ones, or random ones of random_type); in the
  // pool with native_quantized.
  std::vector<BlockPiece> block_plan;
  GgmlType random_type = GgmlType::bf16;
  // > 0: projections without kept blocks or groups quantized at load into 4-bit groups of this
  // size (a random model's from the constructor, a weight table's RunnerOptions::quantize_int4_group_size).
  int load_group_size = 0;
  Blocks output_blocks;
  bool has_blocks = false;  // some projection runs on its blocks in a native step
  ModelRunner::WeightBytes weight_bytes;

  // weights == nullptr: random weights from `seed` (the benchmark constructor), projections drawn
  // as blocks of `projection_type` when it is q4_0, q4_1 or q8_0.
  // random_int4_group_size > 0 (weights == nullptr, projection_type bf16): the projections drawn
  // as bf16, quantized on the GPU into 4-bit groups of that size, the copy their dequantization.
  Impl(const ModelConfig& model_config, const ModelWeights* weights, std::uint64_t seed, const RunnerOptions& opts,
       const std::vector<float>& freq_factors, GgmlType projection_type = GgmlType::bf16,
       int random_int4_group_size = 0);
  ~Impl() {
    for (auto& [bucket, exec] : graphs) cudaGraphExecDestroy(exec);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }

  PoolLayout layout(std::int64_t num_blocks) const;
  // Fills block_plan from the table's kept blocks (or random_type).
  void plan_blocks(const ModelWeights* weights);
  const BlockPiece* find_block_piece(const std::string& key) const;
  void count_weight_bytes();
  void upload(const ModelWeights* weights, std::uint64_t seed, const std::vector<float>& freq_factors);
  // c = a . w^T (+ c when beta = 1: the residual stream with fuse_kernels)
  void gemm_into(const char* role, const bf16* a, const bf16* w, bf16* c, std::int64_t m, std::int64_t n,
                 std::int64_t k, float beta = 0.f);
  // c = a . w^T: on the blocks through the quantized GEMV when `native` and the projection has
  // them, else the bf16 GEMM on the copy (gemm_into, beta 0).
  void project(const char* role, const bf16* a, const bf16* w, const Blocks& blocks, bool native, bf16* c,
               std::int64_t m, std::int64_t n, std::int64_t k);
  // q, k and v = normed . W^T of `layer` for `m` tokens: one launch where the GEMM entry fuses them
  // (decode: Gemm::run_shared_a), three GEMMs otherwise; each on its blocks in a native step.
  void qkv_into(const bf16* normed_rows, const Layer& layer, std::int64_t m, bool native = false);
  // The q, k and v projections of `layer` as one shared-A call: weights and output buffers.
  std::array<stage3::Gemm::SharedAWeight, 3> qkv_weights(const Layer& layer) const;
  // Notes `path` for a projection the first time it runs there (roles run different kernels at
  // different M); `how` says what the launch also did ("q, k and v in one launch").
  void note_projection(std::string_view role, std::int64_t m, const stage3::GemmPath& path, std::string_view how = {});
  // fuse_kernels: rmsnorm(x) . W^T for the weights (q, k and v; or [gate | up]; or the output
  // projection), the norm inside the projection's launch where the GEMM entry can
  // (Gemm::run_rmsnorm_shared_a), else stage 2's rmsnorm into `normed` and then the GEMMs.
  // With `counts` (q, k and v only), the one launch also counts the columns it writes (decode rung
  // 11's hand-over); returns whether it did (false: not one launch, nothing counted).
  bool norm_then_project(const char* role, const bf16* x, const bf16* norm_weight, const Layer* layer, const bf16* w,
                         bf16* c, std::int64_t m, std::int64_t n,
                         const stage3::Gemm::ColumnCounts* counts = nullptr);
  // The fused step on blocks or groups (a native step that fuse_kernels and the link allow): one
  // launch of kc::stage3::quantized_gemv_link, or int4_gemv_link for 4-bit groups (`what` names
  // it), for `outputs` (the role, blocks, y and N of each; they share x and K), with the prologue
  // (the RMSNorm of x with `norm_weight`, or SwiGLU of x = [gate | up]) inside and y += x . w^T
  // where beta = 1.
  struct LinkOutput {
    const char* role;  // "q", "o", ...: the note's
    const Blocks* blocks;
    bf16* y;
    std::int64_t n;
  };
  void link_project(const char* what, const bf16* x, stage3::GgufGemvPrologue prologue, const bf16* norm_weight,
                    std::initializer_list<LinkOutput> outputs, std::int64_t m, std::int64_t k, float beta);
  // Whether a native step of `tokens` rows can run fused: every projection with blocks or groups
  // through its link (x fits next to the rung's ring; q, k and v all on blocks of one type, or
  // groups of one size, or none of them). Asked once a row count at load (native_link_rows), not
  // every step.
  bool native_links_fit(std::int64_t tokens) const;
  // The link rung options.int4_link_rung names (4 or 5).
  stage3::Int4GemvKernel int4_link_kernel() const {
    return options.int4_link_rung == 5 ? stage3::Int4GemvKernel::gemv_int4_05_x_f16
                                       : stage3::Int4GemvKernel::gemv_int4_04_x_resident;
  }
  // The link rung options.gguf_link_rung names (7, 8, 11 or 12).
  stage3::QuantizedGemvKernel gguf_link_kernel() const {
    return options.gguf_link_rung == 8    ? stage3::QuantizedGemvKernel::gemv_gguf_08_x_f16
           : options.gguf_link_rung == 11 ? stage3::QuantizedGemvKernel::gemv_gguf_11_x_in_step
           : options.gguf_link_rung == 12 ? stage3::QuantizedGemvKernel::gemv_gguf_12_x_cluster_staged
                                          : stage3::QuantizedGemvKernel::gemv_gguf_07_x_resident;
  }
  // native_link_rows[m]: native_links_fit(m), for the row counts of a native step (1..16).
  std::array<bool, stage3::kGgufGemvMaxRows + 1> native_link_rows{};
  // Called for every launch of a step: looks up without allocating, copies on the first time only.
  void note(std::string_view role, std::string_view what) {
    if (used.find(role) == used.end()) used.emplace(role, what);
  }
  // A step's shape, as launch() runs it.
  struct PrefillChunk {
    std::int64_t row, offset, tokens, length;  // table row, first token index, tokens, keys
  };
  struct StepPlan {
    std::int64_t tokens = 0, rows = 0, num_decodes = 0, stride = 0;
    std::vector<PrefillChunk> prefills;
    int samples = 0;  // sampling rows (their token indices are in the staging ints)
    // Sampling row i is token i for every token (a step of decodes that all sample: every graph
    // step): the output projection reads the residual stream's rows as they are, no gather.
    bool samples_are_tokens = false;
    // Projections with blocks run on them (native_quantized, at most kGgufGemvMaxRows tokens).
    bool native = false;
    // The fused step's norms inside the projections, SwiGLU inside down and the residual added
    // by beta = 1 (fuse_kernels; in a native step where native_links_fit: on the blocks through
    // quantized_gemv_link, rung 07 or 08, and on 4-bit groups through int4_gemv_link, rung 04).
    bool fused = false;
    // Where the step's ints lie in the staging buffer and on the device: packed for this step's
    // sizes. A captured graph's copy has a fixed size, so a graph step packs them for its bucket
    // (bucket rows of the runner's full table width): the same layout every replay of that bucket,
    // and a batch-1 step copies a row of the table instead of max_running rows.
    StepInts ints;
  };
  // Checks the batch and fills the staging ints (padded to `padded_rows` decode rows at the
  // runner's table width when > 0: a graph bucket), and queues the block copies. Throws
  // kc::Error, launching nothing, for a batch this runner cannot take.
  StepPlan prepare(const StepBatch& batch, std::int64_t padded_rows);
  // The forward pass: staging ints to the device, every layer, the final norm into `normed`.
  void launch(const StepPlan& plan);
  // The sampling rows' logits and their argmax, written into sampled_host by the kernel.
  void launch_greedy(const StepPlan& plan);
  cudaGraphExec_t decode_graph(std::int64_t bucket, const StepPlan& plan);
  std::vector<float> logits_to_host(std::int64_t rows);

  std::unique_ptr<GpuSampler> sampler;               // RunnerOptions::gpu_sampler
  PinnedBuffer<GpuSamplingRow> sampling_host;
  DeviceBuffer<GpuSamplingRow> sampling_device;
  std::vector<std::int32_t> buckets;                 // graph buckets (graph_buckets.hpp)
  std::map<std::int64_t, cudaGraphExec_t> graphs;    // captured decode steps by bucket
  std::int64_t graph_replays = 0;
};

PoolLayout ModelRunner::Impl::layout(std::int64_t num_blocks) const {
  const ModelConfig& c = config;
  const std::size_t b = sizeof(bf16);
  PoolLayout layout;
  layout.add("token embedding", elements(c.vocab_size, c.hidden_size) * b);
  if (!c.tie_word_embeddings) layout.add("output projection", elements(c.vocab_size, c.hidden_size) * b);
  layout.add("final norm", elements(c.hidden_size) * b);
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    layout.add(layer_piece(l, "attn_norm"), elements(c.hidden_size) * b);
    layout.add(layer_piece(l, "q"), elements(q_width, c.hidden_size) * b);
    layout.add(layer_piece(l, "k"), elements(kv_width, c.hidden_size) * b);
    layout.add(layer_piece(l, "v"), elements(kv_width, c.hidden_size) * b);
    layout.add(layer_piece(l, "o"), elements(c.hidden_size, q_width) * b);
    layout.add(layer_piece(l, "ffn_norm"), elements(c.hidden_size) * b);
    layout.add(layer_piece(l, "gate_up"), elements(2 * c.intermediate_size, c.hidden_size) * b);
    layout.add(layer_piece(l, "down"), elements(c.hidden_size, c.intermediate_size) * b);
  }
  if (options.native_quantized)
    for (const BlockPiece& blocks : block_plan) layout.add(blocks.piece, blocks.prepared_bytes());
  layout.add("rope cos/sin", elements(max_model_len, c.head_dim) * sizeof(float));
  const std::int64_t t = options.max_batched_tokens, rows = options.max_running;
  layout.add("step inputs", ints.total * sizeof(std::int32_t));
  layout.add("sampled tokens", elements(rows) * sizeof(std::int32_t));
  layout.add("embedding error record", sizeof(std::int32_t));
  layout.add("residual 0", elements(t, c.hidden_size) * b);
  layout.add("residual 1", elements(t, c.hidden_size) * b);
  layout.add("normed", elements(t, c.hidden_size) * b);
  layout.add("q", elements(t, q_width) * b);
  layout.add("k", elements(t, kv_width) * b);
  layout.add("v", elements(t, kv_width) * b);
  layout.add("attention out", elements(t, q_width) * b);
  layout.add("projection out", elements(t, c.hidden_size) * b);
  layout.add("gate_up", elements(t, 2 * c.intermediate_size) * b);
  layout.add("swiglu out", elements(t, c.intermediate_size) * b);
  layout.add("lse", elements(t, c.num_heads) * sizeof(float));
  layout.add("q|k|v column counts", elements(c.num_layers, c.num_kv_heads) * sizeof(std::uint32_t));
  layout.add("gathered rows", elements(rows, c.hidden_size) * b);
  layout.add("logits", elements(rows, c.vocab_size) * b);
  layout.add("prefill K", elements(c.num_kv_heads, max_model_len, c.head_dim) * b);
  layout.add("prefill V", elements(c.num_kv_heads, max_model_len, c.head_dim) * b);
  if (num_blocks > 0)
    layout.add("kv cache", elements(2 * c.num_layers, num_blocks) * block_elements * b);
  return layout;
}

ModelRunner::Impl::Impl(const ModelConfig& model_config, const ModelWeights* weights, std::uint64_t seed,
                        const RunnerOptions& opts, const std::vector<float>& freq_factors, GgmlType projection_type,
                        int random_int4_group_size)
    : config(model_config),
      options(opts),
      random_type(projection_type),
      load_group_size(weights == nullptr ? random_int4_group_size : opts.quantize_int4_group_size) {
  const ModelConfig& c = config;
  require(c.head_dim == 64 || c.head_dim == 128,
          "the model's head_dim is {}; the attention kernels are compiled for 64 and 128", c.head_dim);
  require(options.block_size == 16 || options.block_size == 32 || options.block_size == 64,
          "block_size {} is not 16, 32 or 64", options.block_size);
  require(options.max_batched_tokens >= 1 && options.max_running >= 1,
          "max_batched_tokens ({}) and max_running ({}) must be >= 1", options.max_batched_tokens,
          options.max_running);
  require(options.num_blocks >= 0, "num_blocks {} is negative", options.num_blocks);
  require(options.int4_link_rung == 0 || options.int4_link_rung == 4 || options.int4_link_rung == 5,
          "int4_link_rung {} is not 0 (stage 3's choice), 4 or 5", options.int4_link_rung);
  require(options.gguf_link_rung == 0 || options.gguf_link_rung == 7 || options.gguf_link_rung == 8 ||
              options.gguf_link_rung == 11 || options.gguf_link_rung == 12,
          "gguf_link_rung {} is not 0 (stage 3's choice), 7, 8, 11 or 12", options.gguf_link_rung);
  require(options.decode_min_keys_per_split >= 64 && options.decode_min_keys_per_split % 64 == 0,
          "decode_min_keys_per_split {} is not a positive multiple of 64 (whole 32-key tiles and pages)",
          options.decode_min_keys_per_split);
  require(options.kv_memory_fraction > 0.0 && options.kv_memory_fraction <= 0.95,
          "kv_memory_fraction {} must be in (0, 0.95]", options.kv_memory_fraction);
  max_model_len = options.max_model_len > 0 ? options.max_model_len
                                            : std::min(c.max_position_embeddings, kDefaultMaxModelLen);
  require(max_model_len >= 1 && max_model_len <= c.max_position_embeddings,
          "max_model_len {} must be in [1, {}] (the model's max_position_embeddings)", max_model_len,
          c.max_position_embeddings);
  max_blocks_per_seq = (max_model_len + options.block_size - 1) / options.block_size;
  q_width = c.num_heads * c.head_dim;
  kv_width = c.num_kv_heads * c.head_dim;
  block_elements = elements(c.num_kv_heads, options.block_size, c.head_dim);
  ints = step_int_layout(options.max_batched_tokens, options.max_running,
                         static_cast<std::int64_t>(options.max_running) * max_blocks_per_seq);
  require(random_type == GgmlType::bf16 || is_gemv_block_type(random_type),
          "random weights in {}: the projections are drawn as bf16 or as q4_0, q4_1 or q8_0 blocks",
          ggml_type_name(random_type));
  require(random_int4_group_size == 0 || (weights == nullptr && random_type == GgmlType::bf16),
          "random 4-bit groups: a random model (no weights) whose projections are not drawn as blocks");
  require(options.quantize_int4_group_size == 0 || weights != nullptr,
          "quantize_int4_group_size: a random model takes its group size from the constructor");
  plan_blocks(weights);

  std::int64_t num_blocks = options.num_blocks;
  if (num_blocks == 0) {
    std::size_t free_bytes = 0, total_bytes = 0;
    KC_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    const std::size_t rest = layout(0).total_bytes();
    require(free_bytes > rest, "the model needs {} MiB of device memory before its KV cache; {} MiB are free",
            rest >> 20, free_bytes >> 20);
    const double kv_bytes = static_cast<double>(free_bytes - rest) * options.kv_memory_fraction;
    num_blocks = static_cast<std::int64_t>(kv_bytes / static_cast<double>(2 * c.num_layers * block_elements *
                                                                          sizeof(bf16)));
    num_blocks = std::min<std::int64_t>(num_blocks, 1 << 30);
    require(num_blocks >= max_blocks_per_seq,
            "the KV cache would hold {} blocks, fewer than one sequence of max_model_len {} needs ({})", num_blocks,
            max_model_len, max_blocks_per_seq);
  }
  require(num_blocks * options.block_size <= INT32_MAX, "{} blocks of {} tokens exceed 2^31 - 1 cache slots",
          num_blocks, options.block_size);
  options.num_blocks = static_cast<std::int32_t>(num_blocks);

  pool = DevicePool(layout(num_blocks));
  count_weight_bytes();
  KC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  staging = PinnedBuffer<std::int32_t>(ints.total);
  sampled_host = PinnedBuffer<std::int32_t>(static_cast<std::size_t>(options.max_running));
  KC_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&sampled_host_mapped), sampled_host.data(), 0));
  // A padded decode step has one token a row: its bucket fits the step's token buffers too.
  buckets = default_graph_buckets(std::min(options.max_running, options.max_batched_tokens));
  if (options.gpu_sampler) {
    sampler = std::make_unique<GpuSampler>(static_cast<int>(c.vocab_size), std::min(options.max_running, 32));
    sampling_host = PinnedBuffer<GpuSamplingRow>(static_cast<std::size_t>(options.max_running));
    sampling_device = DeviceBuffer<GpuSamplingRow>(static_cast<std::size_t>(options.max_running));
  }
  upload(weights, seed, freq_factors);
}

void ModelRunner::Impl::plan_blocks(const ModelWeights* weights) {
  const ModelConfig& c = config;
  // The type a projection's blocks have, if it has any: the kept blocks of a file, or random_type.
  const auto type_of = [&](const std::optional<QuantizedTensor>* kept) -> std::optional<GgmlType> {
    if (weights == nullptr)
      return is_gemv_block_type(random_type) ? std::optional<GgmlType>(random_type) : std::nullopt;
    if (kept == nullptr || !kept->has_value() || !is_gemv_block_type((*kept)->type)) return std::nullopt;
    return (*kept)->type;
  };
  const auto add = [&](std::string key, std::optional<GgmlType> type, std::int64_t rows, std::int64_t k_dim) {
    if (!type) return;
    std::string piece = fmt::format("{} ({} blocks)", key, ggml_type_name(*type));
    block_plan.push_back(BlockPiece{std::move(key), std::move(piece), *type, rows, k_dim});
  };
  // A checkpoint's 4-bit groups (`parts` one after the other; all of them, of one group size).
  const auto add_groups = [&](std::string key, std::initializer_list<const std::optional<stage3::Int4GroupHost>*> parts,
                              std::int64_t rows, std::int64_t k_dim) {
    int group_size = 0;
    for (const std::optional<stage3::Int4GroupHost>* part : parts) {
      if (part == nullptr || !part->has_value() || (group_size != 0 && (*part)->group_size != group_size)) return;
      group_size = (*part)->group_size;
    }
    BlockPiece piece{std::move(key), {}, GgmlType::q4_0, rows, k_dim, group_size};
    piece.piece = fmt::format("{} ({} blocks)", piece.key, piece.type_name());
    block_plan.push_back(std::move(piece));
  };
  // A projection quantized at load into groups of load_group_size (none when it is 0, or when the
  // projection has kept blocks or groups already).
  const auto add_load_groups = [&](std::string key, std::int64_t rows, std::int64_t k_dim) {
    if (load_group_size == 0 || find_block_piece(key) != nullptr) return;
    stage3::check_int4_group_shape(
        rows, k_dim, load_group_size,
        fmt::format("{} 4-bit groups of '{}'", weights == nullptr ? "random" : "quantize_int4_group_size:", key).c_str());
    BlockPiece piece{std::move(key), {}, GgmlType::q4_0, rows, k_dim, load_group_size, true};
    piece.piece = fmt::format("{} ({} blocks)", piece.key, piece.type_name());
    block_plan.push_back(std::move(piece));
  };
  const std::int64_t H = c.hidden_size, I = c.intermediate_size;
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    const QuantizedLayer* kept = weights != nullptr ? &weights->layers[static_cast<std::size_t>(l)].blocks : nullptr;
    add(layer_piece(l, "q"), type_of(kept ? &kept->q : nullptr), q_width, H);
    add(layer_piece(l, "k"), type_of(kept ? &kept->k : nullptr), kv_width, H);
    add(layer_piece(l, "v"), type_of(kept ? &kept->v : nullptr), kv_width, H);
    add(layer_piece(l, "o"), type_of(kept ? &kept->o : nullptr), H, q_width);
    // gate and up run as one [gate | up] product: on blocks only when both have them, of one type
    const std::optional<GgmlType> gate = type_of(kept ? &kept->gate : nullptr), up = type_of(kept ? &kept->up : nullptr);
    add(layer_piece(l, "gate_up"), gate == up ? gate : std::nullopt, 2 * I, H);
    add(layer_piece(l, "down"), type_of(kept ? &kept->down : nullptr), H, I);
    if (weights != nullptr) {
      const Int4Layer& groups = weights->layers[static_cast<std::size_t>(l)].groups;
      add_groups(layer_piece(l, "q"), {&groups.q}, q_width, H);
      add_groups(layer_piece(l, "k"), {&groups.k}, kv_width, H);
      add_groups(layer_piece(l, "v"), {&groups.v}, kv_width, H);
      add_groups(layer_piece(l, "o"), {&groups.o}, H, q_width);
      add_groups(layer_piece(l, "gate_up"), {&groups.gate, &groups.up}, 2 * I, H);
      add_groups(layer_piece(l, "down"), {&groups.down}, H, I);
    }
    for (const auto& [piece, rows, k_dim] : {std::tuple<const char*, std::int64_t, std::int64_t>{"q", q_width, H},
                                             {"k", kv_width, H},
                                             {"v", kv_width, H},
                                             {"o", H, q_width},
                                             {"gate_up", 2 * I, H},
                                             {"down", H, I}})
      add_load_groups(layer_piece(l, piece), rows, k_dim);
  }
  const char* output_key = c.tie_word_embeddings ? "token embedding" : "output projection";
  add(output_key, type_of(weights != nullptr ? &weights->output_blocks : nullptr), c.vocab_size, H);
  if (weights != nullptr) add_groups(output_key, {&weights->output_groups}, c.vocab_size, H);
  if (weights == nullptr) add_load_groups(output_key, c.vocab_size, H);  // a real model's output stays as it is
  for (const BlockPiece& blocks : block_plan)
    require(blocks.group_size > 0 || blocks.k % stage3::kGgufBlockWeights == 0, "'{}': K = {} is not whole blocks of 32",
            blocks.piece, blocks.k);
  has_blocks = options.native_quantized && !block_plan.empty();
}

const BlockPiece* ModelRunner::Impl::find_block_piece(const std::string& key) const {
  for (const BlockPiece& blocks : block_plan)
    if (blocks.key == key) return &blocks;
  return nullptr;
}

void ModelRunner::Impl::count_weight_bytes() {
  const bool tied = config.tie_word_embeddings;
  WeightBytes& w = weight_bytes;
  for (const PoolPiece& piece : pool.pieces()) {
    const bool layer = piece.name.rfind("layer ", 0) == 0;
    const bool blocks = piece.name.find(" blocks)") != std::string::npos;
    const bool embedding_table = piece.name.rfind("token embedding", 0) == 0;
    if (!(layer || embedding_table || piece.name.rfind("output projection", 0) == 0 || piece.name == "final norm"))
      continue;
    if (blocks) {
      w.blocks += piece.bytes;
      continue;
    }
    w.bf16 += piece.bytes;
    // A step reads the embedding's one row, unless it is also the output projection; a projection
    // that runs on its blocks at one token reads them instead of its copy.
    if (embedding_table && !tied) continue;
    const BlockPiece* kept = options.native_quantized ? find_block_piece(piece.name) : nullptr;
    w.read_per_token += kept != nullptr ? kept->prepared_bytes() : piece.bytes;
  }
  if (options.native_quantized && !block_plan.empty()) w.block_type = block_plan.front().type_name();
  for (const BlockPiece& blocks : block_plan)
    if (options.native_quantized && blocks.type_name() != w.block_type) w.block_type = "mixed";
}

void ModelRunner::Impl::upload(const ModelWeights* weights, std::uint64_t seed,
                               const std::vector<float>& freq_factors) {
  const ModelConfig& c = config;
  // Weights go up in pieces through two pinned staging buffers on a side stream: while piece n is
  // on its way from one buffer, piece n + 1 is copied into the other (an event says when a
  // buffer is free again); options.upload_progress hears how far it is after every piece.
  // Without a weight table each tensor is drawn on the GPU instead (`put` of an absent tensor).
  const std::size_t chunk_bytes = std::size_t{64} << 20;
  const std::size_t staging_bytes = weights != nullptr ? chunk_bytes : 1;
  PinnedBuffer<std::byte> staging_buffers[2] = {PinnedBuffer<std::byte>(staging_bytes),
                                                PinnedBuffer<std::byte>(staging_bytes)};
  struct UploadResources {  // the side stream and the two buffers' events, released on every path
    cudaStream_t stream = nullptr;
    cudaEvent_t freed[2] = {nullptr, nullptr};
    bool recorded[2] = {false, false};
    ~UploadResources() {
      if (stream != nullptr) {
        cudaStreamSynchronize(stream);
        cudaStreamDestroy(stream);
      }
      for (cudaEvent_t event : freed)
        if (event != nullptr) cudaEventDestroy(event);
    }
  } side;
  KC_CUDA_CHECK(cudaStreamCreateWithFlags(&side.stream, cudaStreamNonBlocking));
  for (cudaEvent_t& event : side.freed) KC_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  std::uint64_t total_bytes = 0, done_bytes = 0;
  if (weights != nullptr) {
    const auto add = [&](const HostTensor& t) { total_bytes += t.data.size() * sizeof(std::uint16_t); };
    add(weights->token_embedding);
    add(weights->final_norm);
    if (!c.tie_word_embeddings) add(weights->lm_head);
    for (const LayerWeights& layer : weights->layers)
      for (const HostTensor* t : {&layer.attn_norm, &layer.q, &layer.k, &layer.v, &layer.o, &layer.ffn_norm,
                                  &layer.gate, &layer.up, &layer.down})
        add(*t);
    if (options.native_quantized)
      for (const BlockPiece& blocks : block_plan)
        if (!blocks.quantized_at_load) total_bytes += blocks.bytes();
  }
  int which = 0;
  std::uint64_t tensor_index = 0;
  auto draw = [&](bf16* to, std::size_t count, std::int64_t fan_in) {
    // fan_in > 0: a projection, uniform with variance 1 / fan_in; 0: a norm weight (all 1); -1:
    // the embedding, uniform in [-1, 1).
    const double bound = fan_in > 0 ? std::sqrt(3.0 / static_cast<double>(fan_in)) : 1.0;
    const FillSpec spec = fan_in == 0 ? FillSpec::uniform(1.0, 1.0) : FillSpec::uniform(-bound, bound);
    fill_random(to, DType::bf16, count, seed * 1000003u + tensor_index++, spec, stream);
  };
  auto send = [&](const void* from, std::size_t bytes, void* to) {
    for (std::size_t done = 0; done < bytes; done += chunk_bytes) {
      const std::size_t n = std::min(chunk_bytes, bytes - done);
      if (side.recorded[which]) KC_CUDA_CHECK(cudaEventSynchronize(side.freed[which]));  // its last piece has left
      std::memcpy(staging_buffers[which].data(), static_cast<const std::byte*>(from) + done, n);
      KC_CUDA_CHECK(cudaMemcpyAsync(static_cast<std::byte*>(to) + done, staging_buffers[which].data(), n,
                                    cudaMemcpyHostToDevice, side.stream));
      KC_CUDA_CHECK(cudaEventRecord(side.freed[which], side.stream));
      side.recorded[which] = true;
      which = 1 - which;
      done_bytes += n;
      if (options.upload_progress) options.upload_progress(done_bytes, total_bytes);
    }
  };
  auto put = [&](const HostTensor* tensor, bf16* to, std::size_t count, std::int64_t fan_in,
                 std::size_t offset_elements = 0) {
    if (tensor == nullptr) {
      draw(to + offset_elements, count, fan_in);
      return;
    }
    require(tensor->data.size() == count, "weight '{}' holds {} elements; the model's shape needs {}", tensor->name,
            tensor->data.size(), count);
    send(tensor->data.data(), count * sizeof(std::uint16_t), to + offset_elements);
  };
  // Blocks as a file stores them (or as drawn) wait here to be dequantized into the bf16 copy and,
  // with native_quantized, prepared for the quantized GEMV into their pool piece.
  std::size_t scratch_bytes = 0;
  if (weights == nullptr || options.native_quantized || load_group_size > 0)
    for (const BlockPiece& blocks : block_plan)
      scratch_bytes = std::max(scratch_bytes, blocks.group_size == 0 ? blocks.bytes() : blocks.stored_bytes());
  DeviceBuffer<std::uint8_t> scratch(scratch_bytes);
  // A projection's bf16 copy (`parts` one after the other: gate and up), and where block_plan has
  // blocks for it: a file's kept blocks sent up beside it, or random blocks drawn here and the copy
  // their dequantization; or a checkpoint's 4-bit `groups`, prepared here and sent up. Returns the
  // blocks the steps use (none without native_quantized).
  auto projection = [&](const std::string& key, std::initializer_list<const HostTensor*> parts,
                        std::initializer_list<const std::optional<QuantizedTensor>*> kept,
                        std::initializer_list<const std::optional<stage3::Int4GroupHost>*> groups, bf16* to,
                        std::size_t part_elements, std::int64_t fan_in) -> Blocks {
    const BlockPiece* plan = find_block_piece(key);
    std::uint8_t* in_pool = plan != nullptr && options.native_quantized ? pool.get<std::uint8_t>(plan->piece) : nullptr;
    // The bf16 copy, part after part: sent up from the table, or drawn where there is none.
    const auto put_parts = [&] {
      std::size_t offset = 0;
      for (const HostTensor* part : parts) {
        put(part, to, part_elements, fan_in, offset);
        offset += part_elements;
      }
    };
    if (plan != nullptr && plan->group_size > 0) {
      // 4-bit groups: their stored form in the scratch buffer (qweight, then half scales, then
      // zero bytes, each from a 16-byte boundary), then prepared on the GPU into the pool.
      stage3::Int4GroupWeights stored;
      std::uint8_t* const qweight = scratch.data();
      std::uint16_t* const scales = reinterpret_cast<std::uint16_t*>(scratch.data() + plan->stored_qweight_bytes());
      std::uint8_t* const zeros = scratch.data() + plan->stored_bytes() - plan->stored_entries();
      stored.qweight = qweight;
      stored.scales = scales;
      stored.zeros = zeros;
      stored.n = static_cast<int>(plan->rows);
      stored.k = static_cast<int>(plan->k);
      stored.group_size = plan->group_size;
      put_parts();
      if (plan->quantized_at_load) {
        // Quantized at load: the copy drawn (a random model) or sent up (a weight table), quantized
        // on the GPU, and overwritten by the groups' dequantization.
        if (weights != nullptr) KC_CUDA_CHECK(cudaStreamWaitEvent(stream, side.freed[1 - which], 0));  // the copy is up
        stage3::QuantizeInt4Args quantize;
        quantize.rows = plan->rows;
        quantize.k = static_cast<int>(plan->k);
        quantize.group_size = plan->group_size;
        quantize.x = to;
        quantize.qweight = qweight;
        quantize.scales = scales;
        quantize.zeros = zeros;
        stage3::quantize_int4_groups(quantize, stream);
        dequantize_int4_groups_on_device(stored, to, stream);
      } else {
        // A checkpoint's, kept in the table: with native_quantized the stored form of each part
        // (gate, then up: one [2I, K] weight) sent up beside the bf16 copy.
        if (in_pool == nullptr) return Blocks{};
        std::size_t rows = 0;
        for (const std::optional<stage3::Int4GroupHost>* part : groups) {
          const stage3::Int4GroupHost& g = **part;  // plan_blocks: every part has groups of one size
          require(g.k == plan->k && g.group_size == plan->group_size && rows + static_cast<std::size_t>(g.n) <=
                      static_cast<std::size_t>(plan->rows),
                  "'{}': the kept 4-bit groups are not the projection's {} x {} weight in groups of {}", key,
                  plan->rows, plan->k, plan->group_size);
          const std::size_t entries = static_cast<std::size_t>(g.k / g.group_size);
          send(g.qweight.data(), g.qweight.size(), qweight + rows * static_cast<std::size_t>(g.k / 2));
          send(g.scales.data(), g.scales.size() * sizeof(std::uint16_t), scales + rows * entries);
          send(g.zeros.data(), g.zeros.size(), zeros + rows * entries);
          rows += static_cast<std::size_t>(g.n);
        }
        require(rows == static_cast<std::size_t>(plan->rows), "'{}': the kept 4-bit groups hold {} rows; the shape has {}",
                key, rows, plan->rows);
        // The scratch is read on `stream` next: the side stream's copies into it come first.
        KC_CUDA_CHECK(cudaStreamWaitEvent(stream, side.freed[1 - which], 0));
      }
      if (in_pool != nullptr)
        stage3::prepare_int4_groups_on_device(stored, in_pool, reinterpret_cast<std::uint32_t*>(in_pool + plan->quant_bytes()),
                                              stream);
      // The next projection's groups overwrite the scratch: the side stream waits for this one.
      KC_CUDA_CHECK(cudaStreamSynchronize(stream));
      if (in_pool == nullptr) return Blocks{};
      return Blocks{in_pool, in_pool + plan->quant_bytes(), stage3::GgufBlockType::q4_0, plan->group_size};
    }
    if (weights == nullptr && plan != nullptr) {
      draw_gguf_blocks(plan->type, scratch.data(), plan->block_count(), seed * 1000003u + tensor_index++, stream);
      dequantize_gguf_blocks(plan->type, scratch.data(), plan->block_count(), to, stream);
    } else {
      put_parts();
      std::size_t at = 0;
      if (in_pool != nullptr) {
        for (const std::optional<QuantizedTensor>* blocks : kept) {
          send((*blocks)->bytes.data(), (*blocks)->bytes.size(), scratch.data() + at);
          at += (*blocks)->bytes.size();
        }
        // The scratch is read on `stream` next: the side stream's copies into it come first.
        cudaEvent_t sent = side.freed[1 - which];
        KC_CUDA_CHECK(cudaStreamWaitEvent(stream, sent, 0));
      }
      require(in_pool == nullptr || at == plan->bytes(), "'{}': the kept blocks hold {} bytes; the shape needs {}",
              key, at, plan == nullptr ? 0 : plan->bytes());
    }
    if (in_pool == nullptr) return Blocks{};
    // The blocks (gate and up one after the other: one [2I, K] weight) in the GEMV's layout.
    stage3::quantized_gemv_prepare(plan->gemv_type(), scratch.data(), static_cast<int>(plan->rows),
                                   static_cast<int>(plan->k), in_pool, in_pool + plan->quant_bytes(), stream);
    // The next projection's blocks overwrite the scratch: the side stream waits for this one.
    KC_CUDA_CHECK(cudaStreamSynchronize(stream));
    return Blocks{in_pool, in_pool + plan->quant_bytes(), plan->gemv_type()};
  };
  const std::int64_t H = c.hidden_size, I = c.intermediate_size;
  const LayerWeights* w = nullptr;
  embedding = pool.get<bf16>("token embedding");
  const std::optional<QuantizedTensor>* kept_output = weights ? &weights->output_blocks : nullptr;
  const std::optional<stage3::Int4GroupHost>* output_groups = weights ? &weights->output_groups : nullptr;
  output = embedding;
  if (c.tie_word_embeddings) {  // the embedding is the output projection: its blocks are the output's
    output_blocks = projection("token embedding", {weights ? &weights->token_embedding : nullptr}, {kept_output},
                               {output_groups}, embedding, elements(c.vocab_size, H), -1);
  } else {
    put(weights ? &weights->token_embedding : nullptr, embedding, elements(c.vocab_size, H), -1);
    output = pool.get<bf16>("output projection");
    output_blocks = projection("output projection", {weights ? &weights->lm_head : nullptr}, {kept_output},
                               {output_groups}, output, elements(c.vocab_size, H), H);
  }
  final_norm = pool.get<bf16>("final norm");
  put(weights ? &weights->final_norm : nullptr, final_norm, elements(H), 0);
  bf16* cache = pool.get<bf16>("kv cache");
  const std::size_t pool_elements = static_cast<std::size_t>(options.num_blocks) * block_elements;
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    if (weights != nullptr) w = &weights->layers[static_cast<std::size_t>(l)];
    Layer layer{};
    layer.attn_norm = pool.get<bf16>(layer_piece(l, "attn_norm"));
    layer.q = pool.get<bf16>(layer_piece(l, "q"));
    layer.k = pool.get<bf16>(layer_piece(l, "k"));
    layer.v = pool.get<bf16>(layer_piece(l, "v"));
    layer.o = pool.get<bf16>(layer_piece(l, "o"));
    layer.ffn_norm = pool.get<bf16>(layer_piece(l, "ffn_norm"));
    layer.gate_up = pool.get<bf16>(layer_piece(l, "gate_up"));
    layer.down = pool.get<bf16>(layer_piece(l, "down"));
    const QuantizedLayer* kept = w ? &w->blocks : nullptr;
    const Int4Layer* g = w ? &w->groups : nullptr;
    put(w ? &w->attn_norm : nullptr, layer.attn_norm, elements(H), 0);
    layer.q_blocks = projection(layer_piece(l, "q"), {w ? &w->q : nullptr}, {kept ? &kept->q : nullptr},
                                {g ? &g->q : nullptr}, layer.q, elements(q_width, H), H);
    layer.k_blocks = projection(layer_piece(l, "k"), {w ? &w->k : nullptr}, {kept ? &kept->k : nullptr},
                                {g ? &g->k : nullptr}, layer.k, elements(kv_width, H), H);
    layer.v_blocks = projection(layer_piece(l, "v"), {w ? &w->v : nullptr}, {kept ? &kept->v : nullptr},
                                {g ? &g->v : nullptr}, layer.v, elements(kv_width, H), H);
    layer.o_blocks = projection(layer_piece(l, "o"), {w ? &w->o : nullptr}, {kept ? &kept->o : nullptr},
                                {g ? &g->o : nullptr}, layer.o, elements(H, q_width), q_width);
    put(w ? &w->ffn_norm : nullptr, layer.ffn_norm, elements(H), 0);
    // rows [0, I): gate; rows [I, 2I): up — swiglu's [gate | up], and so their blocks
    layer.gate_up_blocks = projection(layer_piece(l, "gate_up"), {w ? &w->gate : nullptr, w ? &w->up : nullptr},
                                      {kept ? &kept->gate : nullptr, kept ? &kept->up : nullptr},
                                      {g ? &g->gate : nullptr, g ? &g->up : nullptr}, layer.gate_up, elements(I, H), H);
    layer.down_blocks = projection(layer_piece(l, "down"), {w ? &w->down : nullptr}, {kept ? &kept->down : nullptr},
                                   {g ? &g->down : nullptr}, layer.down, elements(H, I), I);
    layer.k_cache = cache + static_cast<std::size_t>(2 * l) * pool_elements;
    layer.v_cache = cache + static_cast<std::size_t>(2 * l + 1) * pool_elements;
    layers.push_back(layer);
    layer_ranges.push_back(fmt::format("layer {}", l));
  }
  for (int m = 1; m <= stage3::kGgufGemvMaxRows; ++m)
    native_link_rows[static_cast<std::size_t>(m)] = native_links_fit(m);

  const std::vector<float> table = rope_cos_sin_table(c, max_model_len, freq_factors);
  cos_sin = pool.get<float>("rope cos/sin");
  KC_CUDA_CHECK(cudaMemcpyAsync(cos_sin, table.data(), table.size() * sizeof(float), cudaMemcpyHostToDevice, stream));

  step_ints = pool.get<std::int32_t>("step inputs");
  sampled = pool.get<std::int32_t>("sampled tokens");
  embedding_error = pool.get<std::int32_t>("embedding error record");
  const std::int32_t no_bad_token = stage2::kNoBadToken;
  KC_CUDA_CHECK(cudaMemcpyAsync(embedding_error, &no_bad_token, sizeof no_bad_token, cudaMemcpyHostToDevice, stream));
  residual[0] = pool.get<bf16>("residual 0");
  residual[1] = pool.get<bf16>("residual 1");
  normed = pool.get<bf16>("normed");
  q = pool.get<bf16>("q");
  k = pool.get<bf16>("k");
  v = pool.get<bf16>("v");
  attn = pool.get<bf16>("attention out");
  proj = pool.get<bf16>("projection out");
  gate_up = pool.get<bf16>("gate_up");
  act = pool.get<bf16>("swiglu out");
  lse = pool.get<float>("lse");
  qkv_counts = pool.get<std::uint32_t>("q|k|v column counts");
  gathered = pool.get<bf16>("gathered rows");
  logits = pool.get<bf16>("logits");
  k_gather = pool.get<bf16>("prefill K");
  v_gather = pool.get<bf16>("prefill V");
  KC_CUDA_CHECK(cudaStreamSynchronize(side.stream));  // every weight is up
  KC_CUDA_CHECK(cudaStreamSynchronize(stream));

  // The decode attention's split workspace at its largest, before any step, so that no step
  // allocates (a captured graph keeps the workspace's address): the split depends on the batch
  // (fewer sequences get more splits) and on the table's width, not steadily (a narrower table
  // can get one more split), and the scheduler's tables may be narrower than the runner's — so
  // every batch size at every width. Host arithmetic (and, once, an occupancy query of the decode
  // rung's kernel); the buffer grows a few times at most.
  decode.set_min_keys_per_split(options.decode_min_keys_per_split);  // checked with the options above
  decode.set_rung(options.decode_attention);
  decode.set_rope_rung(options.decode_rope_rung);
  stage3::DecodeArgs<bf16> shape;
  shape.q_heads = static_cast<int>(c.num_heads);
  shape.kv_heads = static_cast<int>(c.num_kv_heads);
  shape.q_len = 1;
  shape.head_dim = static_cast<int>(c.head_dim);
  shape.block_size = options.block_size;
  for (int width = 1; width <= max_blocks_per_seq; ++width)
    for (int rows = 1; rows <= options.max_running; ++rows) {
      shape.max_blocks = width;
      shape.batch = rows;
      decode.reserve(shape);
    }
}

void ModelRunner::Impl::gemm_into(const char* role, const bf16* a, const bf16* w, bf16* c, std::int64_t m,
                                  std::int64_t n, std::int64_t k_dim, float beta) {
  stage3::HgemmArgs args;
  args.m = static_cast<int>(m);
  args.n = static_cast<int>(n);
  args.k = static_cast<int>(k_dim);
  args.a = a;
  args.b = w;
  args.c = c;
  args.lda = static_cast<int>(k_dim);
  args.ldb = static_cast<int>(k_dim);
  args.ldc = static_cast<int>(n);
  args.beta = beta;  // 1: C += A.W^T (the residual stream, fuse_kernels)
  note_projection(role, m, gemm.run(args, stream));
}

void ModelRunner::Impl::project(const char* role, const bf16* a, const bf16* w, const Blocks& blocks, bool native,
                                bf16* c, std::int64_t m, std::int64_t n, std::int64_t k_dim) {
  if (!native || blocks.quants == nullptr) {
    gemm_into(role, a, w, c, m, n, k_dim);
    return;
  }
  if (blocks.group_size > 0) {  // a checkpoint's 4-bit groups
    stage3::Int4GemvArgs args;
    args.m = static_cast<int>(m);
    args.n = static_cast<int>(n);
    args.k = static_cast<int>(k_dim);
    args.group_size = blocks.group_size;
    args.x = a;
    args.quants = blocks.quants;  // prepared at load (prepare_int4_groups)
    args.scales = static_cast<const std::uint32_t*>(blocks.scales);
    args.y = c;
    const stage3::Int4GemvKernel kernel = stage3::int4_gemv(args, stream);
    if (quantized_noted.insert(role).second)  // formatted once per role
      note(fmt::format("projection {}, int4 g{} groups (first at M = {})", role, blocks.group_size, m),
           stage3::int4_gemv_kernel_name(kernel));
    return;
  }
  stage3::QuantizedGemvArgs args;
  args.type = blocks.type;
  args.quants = blocks.quants;  // prepared at load (quantized_gemv_prepare)
  args.scales = blocks.scales;
  args.x = a;
  args.y = c;
  args.m = static_cast<int>(m);
  args.n = static_cast<int>(n);
  args.k = static_cast<int>(k_dim);
  const stage3::QuantizedGemvKernel kernel = stage3::quantized_gemv(args, stream);
  if (quantized_noted.insert(role).second)  // formatted once per role
    note(fmt::format("projection {}, {} blocks (first at M = {})", role, stage3::gguf_block_type_name(blocks.type), m),
         stage3::quantized_gemv_kernel_name(kernel));
}

void ModelRunner::Impl::link_project(const char* what, const bf16* x, stage3::GgufGemvPrologue prologue,
                                     const bf16* norm_weight, std::initializer_list<LinkOutput> outputs,
                                     std::int64_t m, std::int64_t k_dim, float beta) {
  // Blocks or groups: native_links_fit holds every weight of a link to one kind, type and group size.
  const Blocks& first = *outputs.begin()->blocks;
  // What the two links' arguments share; then each weight's pointers, as its link takes them.
  const auto shared_args = [&](auto& args) {
    args.m = static_cast<int>(m);
    args.k = static_cast<int>(k_dim);
    args.x = x;
    args.prologue = prologue;
    args.norm_weight = norm_weight;
    args.norm_eps = static_cast<float>(config.rms_norm_eps);
    args.beta = beta;
    args.spread_over_sms = options.spread_small_links;
    args.weights = 0;
  };
  std::string_view kernel_name;
  if (first.group_size > 0) {
    stage3::Int4GemvLinkArgs args;
    shared_args(args);
    args.group_size = first.group_size;
    for (const LinkOutput& out : outputs)
      args.weight[args.weights++] = {out.blocks->quants, static_cast<const std::uint32_t*>(out.blocks->scales), out.y,
                                     static_cast<int>(out.n)};
    kernel_name = stage3::int4_gemv_kernel_name(options.int4_link_rung == 0
                                                    ? stage3::int4_gemv_link(args, stream)
                                                    : stage3::int4_gemv_link(args, int4_link_kernel(), stream));
  } else {
    stage3::QuantizedGemvLinkArgs args;
    shared_args(args);
    args.type = first.type;
    for (const LinkOutput& out : outputs)
      args.weight[args.weights++] = {out.blocks->quants, out.blocks->scales, out.y, static_cast<int>(out.n)};
    kernel_name = stage3::quantized_gemv_kernel_name(options.gguf_link_rung == 0
                                                         ? stage3::quantized_gemv_link(args, stream)
                                                         : stage3::quantized_gemv_link(args, gguf_link_kernel(), stream));
  }
  if (quantized_noted.insert(what).second) {  // formatted once per launch site
    static constexpr const char* kInside[] = {"", "the RMSNorm inside", "SwiGLU inside"};
    std::string how = outputs.size() > 1 ? "q, k and v in one launch" : "";
    if (prologue != stage3::GgufGemvPrologue::none)
      how += fmt::format("{}{}", how.empty() ? "" : "; ", kInside[static_cast<int>(prologue)]);
    if (beta != 0.f) how += fmt::format("{}added to the residual stream", how.empty() ? "" : "; ");
    const std::string weights = first.group_size > 0 ? fmt::format("int4 g{} groups", first.group_size)
                                                      : fmt::format("{} blocks", stage3::gguf_block_type_name(first.type));
    for (const LinkOutput& out : outputs)
      note(fmt::format("projection {}, {} (first at M = {})", out.role, weights, m),
           how.empty() ? std::string(kernel_name) : fmt::format("{} ({})", kernel_name, how));
  }
}

bool ModelRunner::Impl::native_links_fit(std::int64_t tokens) const {
  const int m = static_cast<int>(tokens);
  // GGUF blocks through quantized_gemv_link (rungs 07 and 08, or the rung gguf_link_rung names),
  // 4-bit groups through int4_gemv_link (rung 04, or the rung int4_link_rung names).
  const auto fits = [&](const Blocks& blocks, std::int64_t k_dim) {
    if (blocks.quants == nullptr) return true;
    if (blocks.group_size == 0)
      return options.gguf_link_rung == 0
                 ? stage3::quantized_gemv_link_runs(blocks.type, m, static_cast<int>(k_dim))
                 : stage3::quantized_gemv_link_runs(blocks.type, m, static_cast<int>(k_dim), gguf_link_kernel());
    return options.int4_link_rung == 0
               ? stage3::int4_gemv_link_runs(m, static_cast<int>(k_dim), blocks.group_size)
               : stage3::int4_gemv_link_runs(m, static_cast<int>(k_dim), blocks.group_size, int4_link_kernel());
  };
  const std::int64_t H = config.hidden_size, I = config.intermediate_size;
  for (const Layer& layer : layers) {
    const bool has_q = layer.q_blocks.quants != nullptr, has_k = layer.k_blocks.quants != nullptr,
               has_v = layer.v_blocks.quants != nullptr;
    if (has_q != has_k || has_q != has_v) return false;  // one launch for the three, or none on blocks
    if (has_q && (layer.k_blocks.type != layer.q_blocks.type || layer.v_blocks.type != layer.q_blocks.type ||
                  layer.k_blocks.group_size != layer.q_blocks.group_size ||
                  layer.v_blocks.group_size != layer.q_blocks.group_size))
      return false;  // one launch takes one type of blocks, or groups of one size
    if (!fits(layer.q_blocks, H) || !fits(layer.o_blocks, q_width) || !fits(layer.gate_up_blocks, H) ||
        !fits(layer.down_blocks, I))
      return false;
  }
  return fits(output_blocks, H);
}

void ModelRunner::Impl::note_projection(std::string_view role, std::int64_t m, const stage3::GemmPath& path,
                                        std::string_view how) {
  if (gemms_noted.emplace(role, std::make_pair(path.kernel, path.fallback)).second)  // formatted once per path
    note(fmt::format("projection {} (first at M = {})", role, m),
         how.empty() ? path.name() : fmt::format("{} ({})", path.name(), how));
}

std::array<stage3::Gemm::SharedAWeight, 3> ModelRunner::Impl::qkv_weights(const Layer& layer) const {
  const int q_n = static_cast<int>(q_width), kv_n = static_cast<int>(kv_width);
  return {{{layer.q, q, q_n}, {layer.k, k, kv_n}, {layer.v, v, kv_n}}};
}

void ModelRunner::Impl::qkv_into(const bf16* normed_rows, const Layer& layer, std::int64_t m, bool native) {
  if (native && (layer.q_blocks.quants != nullptr || layer.k_blocks.quants != nullptr || layer.v_blocks.quants != nullptr)) {
    const int H = static_cast<int>(config.hidden_size);
    project("q", normed_rows, layer.q, layer.q_blocks, true, q, m, q_width, H);
    project("k", normed_rows, layer.k, layer.k_blocks, true, k, m, kv_width, H);
    project("v", normed_rows, layer.v, layer.v_blocks, true, v, m, kv_width, H);
    return;
  }
  const auto weights = qkv_weights(layer);
  stage3::GemmPath paths[3];
  gemm.run_shared_a(static_cast<int>(m), static_cast<int>(config.hidden_size), normed_rows, weights.data(), 3, stream,
                    paths);
  bool fused = true;  // run_shared_a fuses exactly when every weight takes rung 12
  for (const stage3::GemmPath& path : paths) fused = fused && path.kernel == stage3::GemmKernel::hgemm_12_small_m_gemv;
  for (int i = 0; i < 3; ++i) note_projection(kQkvRoles[i], m, paths[i], fused ? "q, k and v in one launch" : "");
}

bool ModelRunner::Impl::norm_then_project(const char* role, const bf16* x, const bf16* norm_weight, const Layer* layer,
                                          const bf16* w, bf16* c, std::int64_t m, std::int64_t n,
                                          const stage3::Gemm::ColumnCounts* counts) {
  const int H = static_cast<int>(config.hidden_size);
  const float eps = static_cast<float>(config.rms_norm_eps);
  std::array<stage3::Gemm::SharedAWeight, 3> weights{};
  int count = 1;
  if (layer != nullptr) {  // q, k and v
    weights = qkv_weights(*layer);
    count = 3;
  } else {
    weights[0] = {w, c, static_cast<int>(n)};
  }
  stage3::GemmPath paths[3];
  if (gemm.run_rmsnorm_shared_a(static_cast<int>(m), H, x, norm_weight, eps, weights.data(), count, stream, paths,
                                layer != nullptr ? counts : nullptr)) {
    note("rmsnorm (fused)", "in the projection that reads it: stage3/hgemm/12_small_m_gemv");
    for (int i = 0; i < count; ++i)
      note_projection(layer != nullptr ? kQkvRoles[i] : role, m, paths[i],
                      layer != nullptr && counts != nullptr ? "RMSNorm in the same pass; columns counted by kv head"
                                                            : "RMSNorm in the same pass");
    return layer != nullptr && counts != nullptr;
  }
  stage2::RmsNormArgs<bf16> norm{static_cast<int>(m), H, x, norm_weight, normed, eps};
  note("rmsnorm", stage2::rmsnorm(norm, stream));
  if (layer != nullptr)
    qkv_into(normed, *layer, m);
  else
    gemm_into(role, normed, w, c, m, n, H);
  return false;
}

ModelRunner::Impl::StepPlan ModelRunner::Impl::prepare(const StepBatch& batch, std::int64_t padded_rows) {
  const ModelConfig& c = config;
  const auto& sequences = batch.sequences;
  const std::int64_t rows = static_cast<std::int64_t>(sequences.size());
  require(rows >= 1, "an empty batch has nothing to run");
  require(rows <= options.max_running, "the batch has {} sequences; this runner takes at most {}", rows,
          options.max_running);
  require(batch.num_decodes >= 0 && batch.num_decodes <= rows, "num_decodes {} is outside [0, {}]",
          batch.num_decodes, rows);
  const PackedBlockTables& tables = batch.block_tables;
  require(tables.rows >= rows && tables.max_blocks_per_seq >= 1 && tables.max_blocks_per_seq <= max_blocks_per_seq &&
              tables.table.size() == static_cast<std::size_t>(tables.rows) * tables.max_blocks_per_seq &&
              tables.lengths.size() == static_cast<std::size_t>(tables.rows),
          "the batch's block tables ({} rows of {} slots) do not fit its {} sequences or this runner's {} slots",
          tables.rows, tables.max_blocks_per_seq, rows, max_blocks_per_seq);

  std::int64_t tokens = 0;
  for (const ScheduledSequence& s : sequences) tokens += static_cast<std::int64_t>(s.tokens.size());
  require(tokens >= 1 && tokens <= options.max_batched_tokens, "the batch has {} tokens; this runner takes 1 to {}",
          tokens, options.max_batched_tokens);
  for (const BlockCopy& copy : batch.block_copies)
    require(copy.source >= 0 && copy.source < options.num_blocks && copy.destination >= 0 &&
                copy.destination < options.num_blocks,
            "block copy {} -> {} is outside the pool of {} blocks", copy.source, copy.destination, options.num_blocks);

  // A padded plan (a captured graph's shape) holds decodes only, at the runner's table width.
  StepPlan plan;
  plan.rows = padded_rows > 0 ? padded_rows : rows;
  plan.tokens = padded_rows > 0 ? padded_rows : tokens;
  plan.num_decodes = padded_rows > 0 ? padded_rows : batch.num_decodes;
  plan.stride = padded_rows > 0 ? max_blocks_per_seq : tables.max_blocks_per_seq;
  require(padded_rows == 0 || (batch.num_decodes == rows && tokens == rows && padded_rows >= rows),
          "a padded step holds decodes only ({} of {} sequences, {} tokens, {} rows)", batch.num_decodes, rows,
          tokens, padded_rows);

  // The step's ints, checked on the host: nothing is launched for a batch that is refused.
  plan.ints = step_int_layout(plan.tokens, plan.rows, plan.rows * plan.stride);
  const StepInts& at = plan.ints;
  std::int32_t* host = staging.data();
  std::int64_t t = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const ScheduledSequence& s = sequences[static_cast<std::size_t>(r)];
    const std::int64_t n = static_cast<std::int64_t>(s.tokens.size());
    require(n >= 1, "sequence {} of the batch has no tokens", r);
    require(r >= batch.num_decodes || n == 1, "decode sequence {} has {} tokens (one expected)", r, n);
    const std::int64_t length = tables.lengths[static_cast<std::size_t>(r)];
    require(s.start_position >= 0 && s.start_position + n == length,
            "sequence {}: start {} + {} tokens != its table's length {}", r, s.start_position, n, length);
    require(length <= max_model_len, "sequence {} reaches position {}; this runner's max_model_len is {}", r,
            length - 1, max_model_len);
    // Every block the kernels will read for this sequence (attention reads all of them, not only
    // this step's) lies in its table row and in the pool.
    const std::int64_t used_blocks = (length + options.block_size - 1) / options.block_size;
    require(used_blocks <= tables.max_blocks_per_seq, "sequence {}: {} keys need {} blocks; its table row holds {}", r,
            length, used_blocks, tables.max_blocks_per_seq);
    for (std::int64_t slot = 0; slot < used_blocks; ++slot) {
      const std::int32_t id = tables.table[static_cast<std::size_t>(r * tables.max_blocks_per_seq + slot)];
      require(id >= 0 && id < options.num_blocks, "sequence {}: table slot {} holds block {} (pool of {})", r, slot, id,
              options.num_blocks);
    }
    if (r >= batch.num_decodes) plan.prefills.push_back(PrefillChunk{r, t, n, length});
    for (std::int64_t i = 0; i < n; ++i, ++t) {
      const TokenId id = s.tokens[static_cast<std::size_t>(i)];
      require(id >= 0 && id < c.vocab_size, "sequence {}: token id {} is outside the vocabulary [0, {})", r, id,
              c.vocab_size);
      const std::int64_t position = s.start_position + i;
      const std::int32_t block =
          tables.table[static_cast<std::size_t>(r * tables.max_blocks_per_seq + position / options.block_size)];
      require(block >= 0 && block < options.num_blocks, "sequence {}: position {} maps to block {} (pool of {})", r,
              position, block, options.num_blocks);
      host[at.ids + t] = id;
      host[at.positions + t] = static_cast<std::int32_t>(position);
      host[at.slots + t] = static_cast<std::int32_t>(block * options.block_size + position % options.block_size);
    }
    if (s.samples) host[at.sample_rows + plan.samples++] = static_cast<std::int32_t>(t - 1);
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    host[at.lengths + r] = tables.lengths[static_cast<std::size_t>(r)];
    std::int32_t* row = host + at.table + r * plan.stride;
    std::memcpy(row, tables.table.data() + r * tables.max_blocks_per_seq,
                tables.max_blocks_per_seq * sizeof(std::int32_t));
    std::fill(row + tables.max_blocks_per_seq, row + plan.stride, kPaddingBlock);
  }
  // Padding rows: token 0 at position 0, written nowhere (slot -1), no keys (length 0).
  for (std::int64_t r = rows; r < plan.rows; ++r) {
    host[at.ids + r] = 0;
    host[at.positions + r] = 0;
    host[at.slots + r] = -1;
    host[at.lengths + r] = 0;
    std::fill(host + at.table + r * plan.stride, host + at.table + (r + 1) * plan.stride, kPaddingBlock);
    host[at.sample_rows + r] = static_cast<std::int32_t>(r);
  }
  if (padded_rows > 0) plan.samples = static_cast<int>(padded_rows);
  plan.samples_are_tokens = plan.samples == plan.tokens;
  for (int i = 0; plan.samples_are_tokens && i < plan.samples; ++i)
    plan.samples_are_tokens = host[at.sample_rows + i] == i;
  plan.native = has_blocks && plan.tokens <= stage3::kGgufGemvMaxRows;
  plan.fused = options.fuse_kernels && (!plan.native || native_link_rows[static_cast<std::size_t>(plan.tokens)]);

  // Copy-on-write blocks the scheduler asked for, every layer's K and V, before the step.
  const std::size_t block_bytes = block_elements * sizeof(bf16);
  for (const BlockCopy& copy : batch.block_copies)
    for (const Layer& layer : layers)
      for (bf16* pool_base : {layer.k_cache, layer.v_cache})
        KC_CUDA_CHECK(cudaMemcpyAsync(pool_base + copy.destination * block_elements,
                                      pool_base + copy.source * block_elements, block_bytes,
                                      cudaMemcpyDeviceToDevice, stream));
  return plan;
}

void ModelRunner::Impl::launch(const StepPlan& plan) {
  const core::ProgrammaticLaunchScope dependent_launches{options.programmatic_launch};
  const ModelConfig& c = config;
  KC_CUDA_CHECK(cudaMemcpyAsync(step_ints, staging.data(), plan.ints.total * sizeof(std::int32_t),
                                cudaMemcpyHostToDevice, stream));
  const int T = static_cast<int>(plan.tokens), H = static_cast<int>(c.hidden_size);
  const int* ids = step_ints + plan.ints.ids;
  const int* positions = step_ints + plan.ints.positions;
  const std::int32_t* slots = step_ints + plan.ints.slots;
  const std::int32_t* lengths = step_ints + plan.ints.lengths;
  const std::int32_t* table = step_ints + plan.ints.table;
  const float eps = static_cast<float>(c.rms_norm_eps);

  stage2::EmbeddingArgs<bf16> embed{T, static_cast<int>(c.vocab_size), H, ids, embedding, residual[0],
                                    embedding_error};
  note("embedding", stage2::embedding(embed, stream));
  int current = 0;  // residual[current] holds the residual stream (plan.fused: always residual[0])
  const bool fused = plan.fused, native = plan.native;
  // RoPE and the cache write inside the decode attention (the decode rung options.decode_rope_rung
  // names, rung 10 by default): decodes only (no prefill chunk: prepare() checked that every other
  // row is one token).
  const bool rope_in_attention = options.fuse_kernels && options.rope_in_attention &&
                                 options.decode_attention == stage3::PagedDecodeAttention::Rung::early_pages &&
                                 plan.prefills.empty();
  // The warming link before each attention (RunnerOptions::l2_warm_bytes): decodes only, fused,
  // on the bf16 weights (not a native step's blocks), as a programmatic dependent (its wait is what
  // times its prefetches).
  const bool warm_l2_links = options.l2_warm_bytes > 0 && fused && !native && plan.num_decodes > 0 &&
                             plan.prefills.empty() && warm_l2_takes_effect();
  // Decode rung 11's hand-over: where the attention is rung 11 in a fused step on the bf16 weights,
  // the q|k|v projection counts its columns by kv head and each attention CTA starts once its
  // head's are counted. The counts start from zero every step (a memset in the step, and in its
  // graph); a layer whose projection could not count them (not one launch) passes none, and rung
  // 11 waits for the projection as rung 10 does.
  const bool hand_over = rope_in_attention && fused && !native &&
                         decode.rope_rung() == stage3::PagedDecodeAttention::RopeRung::heads_handed_over;
  if (hand_over)
    KC_CUDA_CHECK(cudaMemsetAsync(qkv_counts, 0, layers.size() * static_cast<std::size_t>(c.num_kv_heads) *
                                                     sizeof(std::uint32_t), stream));
  bf16* x = residual[0];
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const nvtx3::scoped_range layer_range{layer_ranges[l].c_str()};
    const Layer& layer = layers[l];
    bool counted = false;  // the q|k|v projection counted its columns (hand_over)
    if (fused && native && layer.q_blocks.quants != nullptr) {  // native_links_fit: k and v have blocks too
      link_project("q|k|v", x, stage3::GgufGemvPrologue::rmsnorm, layer.attn_norm,
                   {{"q", &layer.q_blocks, q, q_width},
                    {"k", &layer.k_blocks, k, kv_width},
                    {"v", &layer.v_blocks, v, kv_width}},
                   T, H, 0.f);
    } else if (fused) {
      const stage3::Gemm::ColumnCounts counts = qkv_column_counts(l);
      counted = norm_then_project("q", x, layer.attn_norm, &layer, nullptr, nullptr, T, 0, hand_over ? &counts : nullptr);
    } else if (l == 0) {
      stage2::RmsNormArgs<bf16> norm{T, H, residual[0], layer.attn_norm, normed, eps};
      note("rmsnorm", stage2::rmsnorm(norm, stream));
    } else {  // the previous layer's MLP output joins the residual stream
      stage2::ResidualRmsNormArgs<bf16> norm{T, H, proj, residual[current], layer.attn_norm,
                                             residual[1 - current], normed, eps};
      note("residual + rmsnorm", stage2::residual_rmsnorm(norm, stream));
      current = 1 - current;
    }
    if (!fused) qkv_into(normed, layer, T, native);
    if (rope_in_attention) {
      // below, in the attention
    } else if (options.fuse_kernels) {  // RoPE on q and k and the cache write in one kernel
      rope_write_kv(q, k, v, positions, slots, cos_sin, static_cast<int>(max_model_len), T,
                    static_cast<int>(c.num_heads), static_cast<int>(c.num_kv_heads), static_cast<int>(c.head_dim),
                    options.block_size, layer.k_cache, layer.v_cache, stream);
      note("rope + cache write (fused)", "engine rope_write_kv");
    } else {
      stage2::RopeArgs<bf16> rope;
      rope.layout = stage2::RopeLayout::rotate_half;
      rope.tokens = T;
      rope.q_heads = static_cast<int>(c.num_heads);
      rope.kv_heads = static_cast<int>(c.num_kv_heads);
      rope.head_dim = static_cast<int>(c.head_dim);
      rope.q = q;
      rope.k = k;
      rope.positions = positions;
      rope.cos_sin = cos_sin;
      note("rope", stage2::rope(rope, static_cast<int>(max_model_len), stream));
      write_kv_cache(k, v, slots, T, static_cast<int>(c.num_kv_heads), static_cast<int>(c.head_dim),
                     options.block_size, layer.k_cache, layer.v_cache, stream);
    }

    if (warm_l2_links) {
      // the o projection and gate | up into the L2 while the attention runs (engine_kernels.hpp)
      warm_l2(l2_warm_after_attention(layer.o, elements(c.hidden_size, q_width) * sizeof(bf16), layer.gate_up,
                                      elements(2 * c.intermediate_size, c.hidden_size) * sizeof(bf16),
                                      options.l2_warm_bytes),
              stream);
      note("l2 warm (before the attention)", "engine warm_l2");
    }
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
    if (plan.num_decodes > 0) {
      stage3::DecodeArgs<bf16> d;
      d.q = q;
      d.k_cache = layer.k_cache;
      d.v_cache = layer.v_cache;
      d.block_table = table;
      d.seq_lens = lengths;
      d.o = attn;
      d.lse = lse;
      d.batch = static_cast<int>(plan.num_decodes);
      d.q_heads = static_cast<int>(c.num_heads);
      d.kv_heads = static_cast<int>(c.num_kv_heads);
      d.q_len = 1;
      d.head_dim = static_cast<int>(c.head_dim);
      d.block_size = options.block_size;
      d.max_blocks = static_cast<int>(plan.stride);
      d.scale = scale;
      if (rope_in_attention) {
        stage3::DecodeRopeArgs<bf16> rope;
        rope.k_new = k;
        rope.v_new = v;
        rope.cos_sin = cos_sin;
        rope.positions = static_cast<int>(max_model_len);
        rope.k_cache = layer.k_cache;
        rope.v_cache = layer.v_cache;
        if (counted) {
          rope.heads_written = qkv_counts + l * static_cast<std::size_t>(c.num_kv_heads);
          rope.heads_written_target = qkv_count_target();
          note("q|k|v to attention", "by kv head, counted columns (decode rung 11)");
        }
        const std::string_view rung = decode.run_rope(d, rope, stream);
        note("attention (decode)", rung);
        note("rope + cache write (in the decode attention)", rung);
      } else {
        note("attention (decode)", decode.run(d, stream));
      }
    }
    for (const PrefillChunk& chunk : plan.prefills) {
      const int n = static_cast<int>(chunk.tokens), length = static_cast<int>(chunk.length);
      gather_kv_pages(layer.k_cache, layer.v_cache, table + chunk.row * plan.stride, length,
                      static_cast<int>(c.num_kv_heads), static_cast<int>(c.head_dim), options.block_size, k_gather,
                      v_gather, stream);
      stage3::AttentionArgs<bf16> a;
      a.q = q + chunk.offset * q_width;
      a.k = k_gather;
      a.v = v_gather;
      a.o = attn + chunk.offset * q_width;
      a.lse = lse + chunk.offset * c.num_heads;
      a.batch = 1;
      a.q_heads = static_cast<int>(c.num_heads);
      a.kv_heads = static_cast<int>(c.num_kv_heads);
      a.q_len = n;
      a.kv_len = length;
      a.head_dim = static_cast<int>(c.head_dim);
      a.q_batch_stride = static_cast<std::int64_t>(n) * q_width;
      a.q_head_stride = c.head_dim;
      a.q_row_stride = q_width;
      a.kv_batch_stride = static_cast<std::int64_t>(length) * kv_width;
      a.kv_head_stride = static_cast<std::int64_t>(length) * c.head_dim;
      a.kv_row_stride = c.head_dim;
      a.scale = scale;
      a.causal = true;
      note("attention (prefill)", stage3::attention_forward(a, stream));
    }

    const int I = static_cast<int>(c.intermediate_size);
    if (fused) {
      // x += attn . Wo^T; then x += swiglu(rmsnorm(x) . [Wgate | Wup]^T) . Wdown^T: in one launch
      // (one_launch_mlp, where the entry takes it), else gate | up with the norm inside its
      // projection and down with the activation inside its own where they can be.
      if (native && layer.o_blocks.quants != nullptr)
        link_project("o", attn, stage3::GgufGemvPrologue::none, nullptr, {{"o", &layer.o_blocks, x, H}}, T, q_width,
                     1.f);
      else
        gemm_into("o", attn, layer.o, x, T, H, q_width, 1.f);
      if (native && (layer.gate_up_blocks.quants != nullptr || layer.down_blocks.quants != nullptr)) {
        // On blocks: gate | up with the norm inside, down with SwiGLU inside (either on its bf16
        // copy where it has no blocks).
        if (layer.gate_up_blocks.quants != nullptr)
          link_project("gate_up", x, stage3::GgufGemvPrologue::rmsnorm, layer.ffn_norm,
                       {{"gate_up", &layer.gate_up_blocks, gate_up, 2 * c.intermediate_size}}, T, H, 0.f);
        else
          norm_then_project("gate_up", x, layer.ffn_norm, nullptr, layer.gate_up, gate_up, T, 2 * c.intermediate_size);
        if (layer.down_blocks.quants != nullptr) {
          link_project("down", gate_up, stage3::GgufGemvPrologue::swiglu, nullptr, {{"down", &layer.down_blocks, x, H}},
                       T, I, 1.f);
        } else {
          stage2::SwigluArgs<bf16> swiglu{T, I, gate_up, act};
          note("swiglu", stage2::swiglu(swiglu, stream));
          gemm_into("down", act, layer.down, x, T, H, c.intermediate_size, 1.f);
        }
        continue;
      }
      stage3::GemmPath paths[2];
      if (options.one_launch_mlp &&
          gemm.run_rmsnorm_mlp(T, H, I, x, layer.ffn_norm, eps, layer.gate_up, gate_up, layer.down, stream, paths)) {
        note_projection("gate_up", T, paths[0], "the norm in the same pass; down in the same launch");
        note_projection("down", T, paths[1], "SwiGLU in the same pass; after gate_up in the same launch");
        continue;
      }
      norm_then_project("gate_up", x, layer.ffn_norm, nullptr, layer.gate_up, gate_up, T, 2 * c.intermediate_size);
      if (gemm.run_swiglu(T, I, gate_up, {layer.down, x, H}, 1.f, stream, paths)) {
        note("swiglu (fused)", "in the down projection: stage3/hgemm/12_small_m_gemv");
        note_projection("down", T, paths[0], "SwiGLU in the same pass");
      } else {
        stage2::SwigluArgs<bf16> swiglu{T, I, gate_up, act};
        note("swiglu", stage2::swiglu(swiglu, stream));
        gemm_into("down", act, layer.down, x, T, H, c.intermediate_size, 1.f);
      }
    } else {
      project("o", attn, layer.o, layer.o_blocks, native, proj, T, H, q_width);
      stage2::ResidualRmsNormArgs<bf16> norm{T, H, proj, residual[current], layer.ffn_norm, residual[1 - current],
                                             normed, eps};
      note("residual + rmsnorm", stage2::residual_rmsnorm(norm, stream));
      current = 1 - current;
      project("gate_up", normed, layer.gate_up, layer.gate_up_blocks, native, gate_up, T, 2 * c.intermediate_size, H);
      stage2::SwigluArgs<bf16> swiglu{T, I, gate_up, act};
      note("swiglu", stage2::swiglu(swiglu, stream));
      project("down", act, layer.down, layer.down_blocks, native, proj, T, H, c.intermediate_size);
    }
  }
  if (fused) return;  // the final norm comes with the output projection (launch_greedy; execute_all_logits)
  stage2::ResidualRmsNormArgs<bf16> norm{T, H, proj, residual[current], final_norm, residual[1 - current], normed,
                                         eps};
  note("residual + rmsnorm", stage2::residual_rmsnorm(norm, stream));
}

void ModelRunner::Impl::launch_greedy(const StepPlan& plan) {
  const core::ProgrammaticLaunchScope dependent_launches{options.programmatic_launch};
  const int samples = plan.samples;
  // The sampled rows of the residual stream (fused: the final norm comes with the projection) or
  // of `normed`; gathered into `gathered` unless they are the rows in order already.
  const bf16* rows = plan.fused ? residual[0] : normed;
  if (!plan.samples_are_tokens) {
    gather_rows(rows, step_ints + plan.ints.sample_rows, samples, static_cast<int>(config.hidden_size), gathered,
                stream);
    rows = gathered;
  }
  if (plan.fused && plan.native && output_blocks.quants != nullptr)
    link_project("output", rows, stage3::GgufGemvPrologue::rmsnorm, final_norm,
                 {{"output", &output_blocks, logits, config.vocab_size}}, samples, config.hidden_size, 0.f);
  else if (plan.fused)
    norm_then_project("output", rows, final_norm, nullptr, output, logits, samples, config.vocab_size);
  else
    project("output", rows, output, output_blocks, plan.native, logits, samples, config.vocab_size,
            config.hidden_size);
  argmax_rows(logits, samples, static_cast<int>(config.vocab_size), sampled_host_mapped, stream);
}

// The decode step of `bucket` rows as a CUDA graph: captured on first use, after one eager run of
// the same shape (which does the entries' one-time host work: kernel attributes, cuBLAS's
// choices), then replayed. The graph reads the staging ints, which prepare() fills before each
// replay, and writes the chosen tokens into sampled_host.
cudaGraphExec_t ModelRunner::Impl::decode_graph(std::int64_t bucket, const StepPlan& plan) {
  auto found = graphs.find(bucket);
  if (found != graphs.end()) return found->second;
  launch(plan);
  launch_greedy(plan);
  KC_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaGraph_t graph = nullptr;
  KC_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    launch(plan);
    launch_greedy(plan);
  } catch (...) {
    cudaStreamEndCapture(stream, &graph);
    if (graph != nullptr) cudaGraphDestroy(graph);
    throw;
  }
  KC_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  KC_CUDA_CHECK(instantiated);
  graphs.emplace(bucket, exec);
  return exec;
}

std::vector<float> ModelRunner::Impl::logits_to_host(std::int64_t rows) {
  std::vector<std::uint16_t> bits(elements(rows, config.vocab_size));
  KC_CUDA_CHECK(cudaMemcpyAsync(bits.data(), logits, bits.size() * sizeof(std::uint16_t), cudaMemcpyDeviceToHost,
                                stream));
  KC_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> values(bits.size());
  std::transform(bits.begin(), bits.end(), values.begin(), &bfloat16_to_float);
  return values;
}

ModelRunner::ModelRunner(const ModelWeights& weights, const RunnerOptions& options,
                         const std::vector<float>& rope_freq_factors)
    : impl_(std::make_unique<Impl>(weights.config, &weights, 0, options, rope_freq_factors)) {}

ModelRunner::ModelRunner(const ModelConfig& config, const RunnerOptions& options, std::uint64_t seed,
                         GgmlType projection_type, int int4_group_size)
    : impl_(std::make_unique<Impl>(config, nullptr, seed, options, std::vector<float>{}, projection_type,
                                   int4_group_size)) {}

ModelRunner::~ModelRunner() = default;

const ModelConfig& ModelRunner::config() const { return impl_->config; }

SchedulerConfig ModelRunner::scheduler_config() const {
  SchedulerConfig config;
  config.num_blocks = impl_->options.num_blocks;
  config.block_size = impl_->options.block_size;
  config.max_model_len = impl_->max_model_len;
  config.max_batched_tokens = impl_->options.max_batched_tokens;
  config.max_running = impl_->options.max_running;
  return config;
}

const DevicePool& ModelRunner::pool() const { return impl_->pool; }

const ModelRunner::WeightBytes& ModelRunner::weight_bytes() const { return impl_->weight_bytes; }

const std::map<std::string, std::string, std::less<>>& ModelRunner::kernels_used() const { return impl_->used; }

std::vector<TokenId> ModelRunner::execute(const StepBatch& batch) {
  Impl& m = *impl_;
  // NVTX (nsys, ncu --nvtx): one range per step, one per layer inside it as the step is launched
  // (a replayed graph's layers are not re-launched, so they show inside the capture only).
  const nvtx3::scoped_range step_range{batch.num_decodes == static_cast<std::int32_t>(batch.sequences.size())
                                           ? "kc step: decode"
                                           : "kc step: prefill + decode"};
  // A step of decodes alone replays the captured graph of its bucket when every row is greedy, or
  // when the GPU sampler is on: it then draws the rows from the logits the replay leaves, after
  // it on the same stream (the graph's own argmax is overwritten). Temperature sampling on the
  // host needs the eager step's logits of the batch's rows only.
  bool graph_step = m.options.cuda_graphs && batch.num_decodes == static_cast<std::int32_t>(batch.sequences.size());
  for (const ScheduledSequence& s : batch.sequences)
    graph_step = graph_step && s.samples && (s.sampling.temperature == 0.0f || m.sampler != nullptr);
  std::optional<GraphBucketChoice> bucket;
  if (graph_step) bucket = choose_graph_bucket(m.buckets, static_cast<std::int32_t>(batch.sequences.size()));

  int samples = 0;
  if (bucket) {
    const Impl::StepPlan plan = m.prepare(batch, bucket->bucket);
    const cudaGraphExec_t exec = m.decode_graph(bucket->bucket, plan);
    KC_CUDA_CHECK(cudaGraphLaunch(exec, m.stream));
    if (++m.graph_replays == 1) m.note("decode step", fmt::format("CUDA graphs (buckets up to {})", m.buckets.back()));
    samples = static_cast<int>(batch.sequences.size());
  } else {
    const Impl::StepPlan plan = m.prepare(batch, 0);
    m.launch(plan);
    samples = plan.samples;
    if (samples > 0) m.launch_greedy(plan);
  }
  KC_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  std::vector<TokenId> tokens;
  if (samples == 0) return tokens;

  bool with_temperature = false;
  for (const ScheduledSequence& s : batch.sequences) {
    if (!s.samples) continue;
    validate_sampling_params(s.sampling);  // as the reference sampler would, on either path
    with_temperature = with_temperature || (s.sampling.temperature > 0.0f && s.sampling.top_k != 1);
  }
  if (with_temperature && m.sampler) {  // every sampling row through the GPU sampler
    int row = 0;
    for (const ScheduledSequence& s : batch.sequences) {
      if (!s.samples) continue;
      m.sampling_host[static_cast<std::size_t>(row++)] =
          gpu_sampling_row(s.sampling, static_cast<std::uint64_t>(s.output_index));
    }
    KC_CUDA_CHECK(cudaMemcpyAsync(m.sampling_device.data(), m.sampling_host.data(), samples * sizeof(GpuSamplingRow),
                                  cudaMemcpyHostToDevice, m.stream));
    m.sampler->sample(m.logits, samples, m.sampling_device.data(), m.sampled, m.stream);
    KC_CUDA_CHECK(cudaMemcpyAsync(m.sampled_host.data(), m.sampled, samples * sizeof(std::int32_t),
                                  cudaMemcpyDeviceToHost, m.stream));
    KC_CUDA_CHECK(cudaStreamSynchronize(m.stream));
    m.note("sampling (temperature > 0)", "engine GPU sampler");
  }
  std::vector<float> host_logits;  // read once, only if a sequence samples with temperature on the host
  int sampler_row = 0;
  for (const ScheduledSequence& s : batch.sequences) {
    if (!s.samples) continue;
    const int row = sampler_row++;
    if (s.sampling.temperature == 0.0f || m.sampler) {
      const TokenId token = m.sampled_host[static_cast<std::size_t>(row)];
      require(token >= 0, "request {}: the logits hold a NaN (or no finite logit)", s.request);
      tokens.push_back(token);
      continue;
    }
    if (host_logits.empty()) host_logits = m.logits_to_host(samples);
    const auto begin = host_logits.begin() + static_cast<std::ptrdiff_t>(row) * m.config.vocab_size;
    const std::vector<float> row_logits(begin, begin + m.config.vocab_size);
    tokens.push_back(sample_token(row_logits, s.sampling, static_cast<std::uint64_t>(s.output_index)));
  }
  m.note("sampling (greedy)", "engine argmax_rows");
  if (!host_logits.empty()) m.note("sampling (temperature > 0)", "CPU reference sampler (logits copied back)");
  return tokens;
}

std::vector<float> ModelRunner::execute_all_logits(const StepBatch& batch) {
  Impl& m = *impl_;
  const Impl::StepPlan plan = m.prepare(batch, 0);
  m.launch(plan);
  if (plan.fused) {  // every row's final norm, which launch() leaves to the output projection
    stage2::RmsNormArgs<bf16> norm{static_cast<int>(plan.tokens), static_cast<int>(m.config.hidden_size), m.residual[0],
                                   m.final_norm, m.normed, static_cast<float>(m.config.rms_norm_eps)};
    m.note("rmsnorm", stage2::rmsnorm(norm, m.stream));
  }
  std::vector<float> all;
  all.reserve(elements(plan.tokens, m.config.vocab_size));
  for (std::int64_t first = 0; first < plan.tokens; first += m.options.max_running) {
    const std::int64_t rows = std::min<std::int64_t>(m.options.max_running, plan.tokens - first);
    m.project("output", m.normed + first * m.config.hidden_size, m.output, m.output_blocks, plan.native, m.logits, rows,
              m.config.vocab_size, m.config.hidden_size);
    const std::vector<float> part = m.logits_to_host(rows);
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

std::int64_t ModelRunner::graph_replays() const { return impl_->graph_replays; }

}  // namespace kc::engine
