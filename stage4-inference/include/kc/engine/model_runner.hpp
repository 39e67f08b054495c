// kc/engine/model_runner.hpp — the GPU model step: a Llama model's forward pass over a scheduled
// batch (decodes and prefill chunks together), with its weights, paged KV cache and activations
// in one device pool, and the greedy choice on the GPU.
//
// One step, as execute() runs it for the batch's T tokens (kernels in brackets; stage 2's entries
// are kc/stage2/ops.hpp, stage 3's kc/stage3/gemm.hpp and kc/stage3/attention_ops.hpp):
//
//   x = embed(ids)                                          [stage 2 embedding]
//   per layer:
//     h = rmsnorm(x)   (fused with the previous layer's residual add from layer 1 on)
//                                                           [stage 2 rmsnorm / residual_rmsnorm]
//     q, k, v = h Wq^T, h Wk^T, h Wv^T                       [stage 3 GEMM, three calls]
//     rotate q and k by their positions                      [stage 2 rope, rotate-half]
//     write k, v into the cache slots of their positions     [engine write_kv_cache]
//     attention: decodes (one token a sequence) all at once over their pages
//                                                           [stage 3 paged decode attention]
//                prefill chunks one sequence at a time: its pages gathered into contiguous K/V,
//                then causal attention of the chunk's queries over all its keys
//                                                           [engine gather_kv_pages, stage 3
//                                                            attention_forward]
//     x += attn Wo^T; h = rmsnorm(x)                         [stage 3 GEMM, stage 2
//                                                            residual_rmsnorm]
//     x += down(silu(gate(h)) * up(h))                       [stage 3 GEMM on the fused
//                                                            [gate | up] weight, stage 2 swiglu,
//                                                            stage 3 GEMM]
//   h = rmsnorm(x); logits = h Wout^T for the rows that sample  [stage 2, engine gather_rows
//                                                            (none when every token samples),
//                                                            stage 3 GEMM]
//   greedy: argmax on the GPU, written straight into pinned host memory [engine argmax_rows];
//   temperature > 0: the GPU sampler
//   (RunnerOptions::gpu_sampler, kc/engine/gpu_sampler.hpp) or that row's logits to the host and
//   the reference sampler (kc/engine/sampling.hpp).
//
// Everything is bf16 with FP32 accumulation inside each kernel, as transformers runs a bf16
// model. The KV cache is [layers][K | V][num_blocks][kv_heads][block_size][head_dim] bf16, the
// layout of kc/stage3/attention_decode.hpp; block ids are the scheduler's (KvBlockManager).
//
// CUDA graphs (RunnerOptions::cuda_graphs): a step of decodes alone, all greedy (or any sampling
// when the GPU sampler is on: it draws after the replay, from the logits the graph leaves), runs as
// the captured graph of its batch bucket (graph_buckets.hpp: 1, 2, 4, ... max_running), padded with
// rows that have no keys and write nowhere; the graph holds the copy of the step's ints to the
// device, the whole forward pass and the greedy choice (which writes the tokens into pinned host
// memory itself), so a step is
// one cudaGraphLaunch instead of about a dozen launches a layer. A bucket is captured on first
// use, after one eager run of its shape. Other steps (prefill chunks, temperature > 0 with the
// reference sampler on the host) run eagerly.
//
// Device memory: everything in the pool, except the decode attention's split workspace and the
// GPU sampler's sort scratch, which their owners allocate once, at construction, and the random
// blocks of a quantized random model without native_quantized, freed once dequantized at load.
//
// Quantized weights (RunnerOptions::native_quantized, off by default): projections that come with
// their GGUF blocks (q4_0, q4_1, q8_0) also keep them in the pool, and steps of at most 16 tokens
// run those projections through kc::stage3::quantized_gemv on the blocks; longer steps (prefill)
// run the bf16 copy, which is kept too in this first version (both in the pool). Projections that
// come with a GPTQ/AWQ checkpoint's 4-bit groups (LayerWeights::groups) keep them in the pool in
// the int4 GEMV's layout (prepared on the GPU at load) and run through kc::stage3::int4_gemv the
// same way, or fused through kc::stage3::int4_gemv_link (rung 04) as the blocks run through
// quantized_gemv_link. Without the option a quantized file runs dequantized to bf16.
//
// Not yet: fused kernels of the engine's own. Each step synchronizes its stream once, to read the
// sampled tokens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kc/engine/device_pool.hpp"
#include "kc/engine/model_weights.hpp"
#include "kc/engine/scheduler.hpp"
#include "kc/stage3/attention_ops.hpp"

namespace kc::engine {

struct RunnerOptions {
  std::int32_t block_size = 16;          // tokens a KV block: 16, 32 or 64
  std::int32_t num_blocks = 0;           // KV blocks; 0: kv_memory_fraction of the free memory
  double kv_memory_fraction = 0.5;       // of the device memory free once the rest is allocated
  std::int32_t max_batched_tokens = 2048;  // tokens a step (decodes and prefill chunks)
  std::int32_t max_running = 256;        // sequences a step
  // Positions a sequence may reach: 0 takes the model's max_position_embeddings, capped at
  // kDefaultMaxModelLen (the gather scratch of a prefill grows with it).
  std::int64_t max_model_len = 0;
  // Decode steps as captured CUDA graphs (above). On by default: the graph path gave the eager
  // path's tokens on the H200 (ModelRunner.CudaGraphDecodeStepsMatchTheEagerSteps) and ran faster
  // on every shape kc-engine-bench measured.
  bool cuda_graphs = true;
  // Sequences sampling with a temperature use the GPU sampler (kc/engine/gpu_sampler.hpp) instead
  // of the reference sampler on the host (their logits copied back). On by default: it gave the
  // reference sampler's tokens on the H200 (ModelRunner.GpuSamplerGivesTheReferenceSamplersTokens).
  bool gpu_sampler = true;
  // The fused decode step: the residual stream accumulated in place by the o and down projections
  // (beta = 1); RoPE and the cache write in one kernel (engine rope_write_kv); and where the GEMM
  // entry can (rung 12, one token a step) each RMSNorm inside the projection that reads it
  // (kc::stage3::Gemm::run_rmsnorm_shared_a) and SwiGLU inside the down projection
  // (Gemm::run_swiglu): four kernels a layer fewer at batch-1 decode. Elsewhere stage 2's rmsnorm
  // and swiglu run before the projections. On by default: it matched the double model on the H200
  // (ModelRunner.FusedKernelsMatchTheDoubleModel) and was faster than the unfused step on every
  // shape of docs/benchmarks/h200/stage4.md.
  bool fuse_kernels = true;
  // The step's chain of kernels as programmatic dependents (kc/core/dependent_launch.hpp): on an
  // sm_90 GPU the kernels written for it — stage 3's rung 12 (the M = 1 projections), the paged
  // decode attention and its combine, and the engine's RoPE + cache write, row gather and greedy
  // choice — start their blocks while the kernel before them drains, rung 12's blocks fetching
  // their first weights into the L2 before they wait for it. Eager steps and captured graphs
  // alike; elsewhere (sm_80, the other kernels) launches are ordinary.
  bool programmatic_launch = true;
  // The shortest context split of the paged decode attention (PagedDecodeAttention::
  // set_min_keys_per_split, a multiple of 64), stage 3's default of 256 keys. The engine took 128
  // while its decode attention walked a split's tiles slowly (more, shorter splits won on the
  // H200); with the current decode rungs 256 is faster at batch 1 on short contexts — one of up to
  // 256 keys runs in one split and pays no merge — and at 2048 keys faster on the SmolLM2 shape and
  // a little slower on the 1B's (stage4-inference/README.md, "The decode attention's split floor",
  // has the measurements). The split rules still cut fewer as the batch fills the SMs.
  std::int32_t decode_min_keys_per_split = kc::stage3::kDecodeMinKeysPerSplit;
  // The paged decode attention's rung (stage 3's PagedDecodeAttention::Rung): early_pages, decode
  // rung 05 (rung 04 with its first pages asked into L2 before it waits for the kernel ahead: the
  // step's block tables and lengths are copied before its chain of kernels, as that rung's
  // contract asks); fused_combine, rung 04 (mma.sync, a cp.async page pipeline, splits that fill
  // whole waves, merged by the last split in the same launch); mma_split_kv, rung 03 (the same
  // with a combine kernel after it); split_kv, rung 02 (CUDA cores). kc-engine-bench
  // --decode-attention compares them.
  stage3::PagedDecodeAttention::Rung decode_attention = stage3::PagedDecodeAttention::Rung::early_pages;
  // With fuse_kernels and decode_attention early_pages, a step of decodes only (one token a
  // sequence: every graph step) rotates q and k and writes the new K/V rows inside the attention —
  // stage 3's attention_decode_paged_rope op (PagedDecodeAttention::run_rope, the rung
  // decode_rope_rung below) on the projections' output — instead of in rope_write_kv: one kernel
  // a layer fewer. Steps with a prefill chunk keep rope_write_kv (the prefill attention reads the
  // rotated q and the cache). kc-engine-bench --rope-in-attention compares both.
  bool rope_in_attention = true;
  // Which rung of stage 3's attention_decode_paged_rope op those steps run
  // (PagedDecodeAttention::RopeRung): heads_handed_over, decode rung 11 (rung 10 started on each kv
  // head once the fused q|k|v projection has counted that head's columns written, instead of
  // after the whole projection: the projection counts them only then, in fused steps on the bf16
  // weights, and the step zeroes the counts first); release_acquire_merge, decode rung 10 (rung 08 with the
  // splits' hand-over to the merge by one release/acquire count a CTA instead of every thread's
  // fences); workers_first, rung 09; page_walk, rung 08 (rung 07 with each thread's page
  // addresses worked out once a CTA); pages_before_wait, rung 07 (rung 06 with the cached rows of
  // its first tiles copied into shared memory before it waits for the kernel ahead: the engine's
  // steps hold its contract, rung 08's too — each step starts once the last has finished, and
  // within a step only this kernel writes cache rows, the new tokens'); rope_in, rung 06.
  // kc-engine-bench --decode-rope-rung compares them.
  stage3::PagedDecodeAttention::RopeRung decode_rope_rung =
      stage3::PagedDecodeAttention::RopeRung::release_acquire_merge;
  // With fuse_kernels, a step where the MLP's two projections both take stage 3's rung 12 (at most
  // 8 tokens) runs them as one launch (kc::stage3::Gemm::run_rmsnorm_mlp: gate | up with the norm,
  // a grid-wide barrier, then down with SwiGLU and the residual add) instead of two — one kernel a
  // layer fewer, the same bits. kc-engine-bench --one-launch-mlp compares both.
  bool one_launch_mlp = false;
  // > 0: in a fused step of decodes only on an sm_90 GPU with programmatic launches, each layer's
  // attention follows a warming link (kc/engine/engine_kernels.hpp, warm_l2) that asks the L2 for
  // this many bytes of the links after it — the o projection's bf16 weight, then gate | up's —
  // while the attention keeps DRAM idle. 0: no warming link. Off by default: slower at every
  // budget measured (the link's own place in the chain costs more than the warmed bytes buy;
  // stage4-inference/README.md, "The L2 warmed before the attention"). kc-engine-bench
  // --l2-warm-mib compares budgets.
  std::size_t l2_warm_bytes = 0;
  // Native quantized decode steps. Projections that come with their GGUF blocks (a file loaded with
  // WeightLoadOptions::keep_quantized_blocks; random weights drawn as blocks) get the blocks in the
  // pool, prepared at load by kc::stage3::quantized_gemv_prepare ("layer 3 q (q4_1 blocks)" ...; gate
  // and up as one [gate | up] piece when both have blocks of one type), and a step of at most 16
  // tokens (kc::stage3::kGgufGemvMaxRows: decode batches, short prompts) runs each such projection,
  // the output projection included, through kc::stage3::quantized_gemv (stage3/gemv_gguf/06_bulk_stream
  // on a Hopper GPU, 05_weights_as_a elsewhere) on the blocks instead of the bf16 GEMM on the copy. Longer steps (prefill) run the bf16 copy, which stays in the pool too:
  // both copies are kept in this first version. With fuse_kernels, a native step whose rows fit
  // rung 07 (kc::stage3::quantized_gemv_link, stage3/gemv_gguf/07_x_resident: x in its shared
  // memory; a Hopper GPU; batch 1 on every shape the engine benchmarks) runs fused like a bf16 step:
  // q, k and v as one launch with the RMSNorm inside, o and down adding into the residual stream
  // (beta = 1), gate | up with the norm inside, down with SwiGLU inside, the output projection
  // with the final norm inside — each a programmatic dependent whose weights start before the
  // kernel ahead ends. Otherwise (no fuse_kernels, or rows that do not fit) the RMSNorms, SwiGLU
  // and residual adds run as stage 2 kernels, as the unfused step runs them, and the GEMV through
  // kc::stage3::quantized_gemv. A checkpoint's 4-bit groups take the same two paths through
  // kc::stage3::int4_gemv_link (stage3/gemv_int4/04_x_resident, the same frame on the groups) and
  // kc::stage3::int4_gemv. RoPE and the cache write stay in the decode attention or one kernel
  // with fuse_kernels. The decode graphs capture it (no host sync, no
  // allocation). Off by default; it becomes the default once it has run on the H200 against the
  // dequantized path (ModelRunner.NativeQuantized* in tests/model_runner_gpu_test.cpp).
  bool native_quantized = false;
  // The link rung a fused native step runs 4-bit groups on: 0, stage 3's choice
  // (kc::stage3::int4_gemv_link_kernel, rung 04); 4 or 5, that rung on every link
  // (stage3/gemv_int4/04_x_resident or 05_x_f16), for measuring one against the other.
  int int4_link_rung = 0;
  // The link rung a fused native step runs GGUF blocks on: 0, stage 3's choice
  // (kc::stage3::quantized_gemv_link_kernel: rung 07 or 08); 7, 8, 11 or 12, that rung on every
  // link (stage3/gemv_gguf/07_x_resident, 08_x_f16, or 11_x_in_step or 12_x_cluster_staged, which
  // stage 3 does not choose), for measuring one against another (kc-engine-bench --gguf-link-rung).
  int gguf_link_rung = 0;
  // A native step's link of no more CTAs than SMs (GGUF blocks or 4-bit groups) asks for one CTA an
  // SM (stage 3's GgufGemvLinkArgs::spread_over_sms): launched while the kernel ahead drains, its
  // CTAs would otherwise pack two to an SM on the SMs that kernel frees first. On by default; the
  // measurements, and the shapes where it loses, are in the README ("One CTA an SM for a small
  // link"). kc-engine-bench --spread-links on|off.
  bool spread_small_links = true;
  // > 0: the layer projections of a weight table that come without blocks or groups (a bf16, f16
  // or f32 checkpoint, or a GGUF file's tensors that are not kept as blocks) are quantized on the
  // GPU at load into 4-bit groups of this size (kc::stage3::quantize_int4_groups: GPTQ's min-max
  // rule rounded to nearest, no error feedback), and their bf16 copy becomes the groups'
  // dequantization — the model is then the one a GPTQ checkpoint of those groups would give, with
  // or without native_quantized, which runs the decode steps on the groups. The output projection
  // (and a tied embedding) stays as it is. kc::Error at construction for a size that does not
  // divide every projection's K (32, 64 or a multiple of 128). 0: off. Random models take their
  // group size from the constructor instead.
  int quantize_int4_group_size = 0;
  // Called after every piece of the weight upload (64 MiB at most) with the bytes sent and
  // the bytes in all: kc-generate draws a progress bar with it. Not called for random weights.
  std::function<void(std::uint64_t done_bytes, std::uint64_t total_bytes)> upload_progress;
};

inline constexpr std::int64_t kDefaultMaxModelLen = 8192;

class ModelRunner final : public ModelExecutor {
 public:
  // Uploads `weights` (the q/k/v/o, [gate | up] and down projections, norms, embedding and
  // output projection) into the pool and sizes the cache. `rope_freq_factors`: a GGUF file's
  // rope_freqs.weight, or empty (kc/engine/rope_table.hpp). Throws kc::Error for options out of
  // range or a model the kernels cannot run (head_dim other than 64 or 128), kc::CudaError
  // without a GPU or without the memory.
  ModelRunner(const ModelWeights& weights, const RunnerOptions& options,
              const std::vector<float>& rope_freq_factors = {});
  // A model of `config`'s shape with random weights drawn on the GPU from `seed` (projections
  // uniform with variance 1 / fan-in, the embedding uniform in [-1, 1), norm weights 1): for
  // benchmarks, which measure time, not text. Nothing is read from disk or held on the host.
  // `projection_type` q4_0, q4_1 or q8_0: the projections and the output projection (the
  // embedding, when tied) are drawn as random blocks of that type instead (kc/engine/
  // gguf_blocks.hpp), their bf16 copy the blocks' dequantization, as a quantized file would load;
  // the blocks stay in the pool with options.native_quantized. bf16: as above. `int4_group_size`
  // > 0 (projection_type bf16): the projections and the output projection are drawn as bf16 and
  // quantized on the GPU into 4-bit groups of that size (kc::stage3::quantize_int4_groups), their
  // bf16 copy the groups' dequantization (kc/engine/int4_groups_gpu.hpp), as a GPTQ/AWQ
  // checkpoint would load; the groups stay in the pool with options.native_quantized. kc::Error
  // for a size that does not divide every projection's K (check_int4_group_shape).
  ModelRunner(const ModelConfig& config, const RunnerOptions& options, std::uint64_t seed,
              GgmlType projection_type = GgmlType::bf16, int int4_group_size = 0);
  ~ModelRunner() override;
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  const ModelConfig& config() const;
  // The scheduler settings that match this runner's cache and limits.
  SchedulerConfig scheduler_config() const;
  // The pieces of the device pool (name, bytes), and its total.
  const DevicePool& pool() const;
  // The weights in the pool, in bytes: the bf16 copy of every weight (embedding, norms,
  // projections); the quantized blocks kept beside it (RunnerOptions::native_quantized), and
  // their type ("q4_1", "int4 g128"; empty without blocks); what a decode step of one token reads of them: every
  // weight once, the embedding only where it is also the output projection (a step reads one row
  // of it otherwise), a projection's blocks instead of its bf16 copy where a step of one token
  // runs it on its blocks.
  struct WeightBytes {
    std::uint64_t bf16 = 0, blocks = 0, read_per_token = 0;
    std::string block_type;
  };
  const WeightBytes& weight_bytes() const;

  // Runs the step and returns one token per sequence that samples (greedy on the GPU, else the
  // reference sampler). Throws kc::Error for a batch this runner cannot take (more tokens or
  // sequences than its limits, a token id outside the vocabulary, a position past
  // max_model_len, a table wider than max_model_len) before anything is launched.
  std::vector<TokenId> execute(const StepBatch& batch) override;

  // The same forward pass, returning the logits of every token of the batch instead of sampling:
  // [batch.num_tokens, vocab] floats (bf16 values), tokens in the batch's order. Teacher forcing
  // for the parity tests.
  std::vector<float> execute_all_logits(const StepBatch& batch);

  // What ran, by role ("attention (decode)", "projection q", ...): the kernel names the stage 2/3
  // entries returned, cuBLAS fallbacks with their reason. Filled by the steps run so far.
  const std::map<std::string, std::string, std::less<>>& kernels_used() const;
  // Decode steps that ran as a replayed CUDA graph so far.
  std::int64_t graph_replays() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kc::engine
