// kc/engine/engine_kernels.hpp — the engine's own small kernels: moving keys and values in and out
// of the paged KV cache, picking rows, the greedy choice, and warming the L2 (an option, off).
// Everything else a model step runs comes from stage 2 (kc/stage2/ops.hpp) and stage 3
// (kc/stage3/gemm.hpp, kc/stage3/attention_ops.hpp).
//
// The cache of one layer is two pools, K and V, each [num_blocks, kv_heads, block_size, head_dim]
// in bf16 (kc/stage3/attention_decode.hpp, the layout the decode kernel reads). A token's slot is
// block * block_size + row: the token at position p of a sequence lives in block
// table[p / block_size], row p % block_size.
//
// Each entry checks its arguments (kc::Error before any launch) and launches asynchronously on
// `stream`. head_dim must be a multiple of 8 (rows move in 16-byte pieces), and every pointer
// 16-byte aligned.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kc::engine {

using bf16 = __nv_bfloat16;

// For each of `tokens` tokens t: K_cache[slot] = k[t], V_cache[slot] = v[t] for every kv head,
// slot = slots[t] (device, int32; slot / block_size is the block, slot % block_size the row).
// k, v: [tokens, kv_heads, head_dim]. A negative slot skips its token (a padding row).
void write_kv_cache(const bf16* k, const bf16* v, const std::int32_t* slots, int tokens, int kv_heads,
                    int head_dim, int block_size, bf16* k_cache, bf16* v_cache, cudaStream_t stream);

// RoPE and the cache write of a step in one kernel (the fused decode step; what stage 2's rope()
// followed by write_kv_cache does): q rotated in place; k rotated and written to K_cache[slot];
// v written to V_cache[slot]; the rotate-half layout (pairs i and i + head_dim / 2 of each head),
// angle of position p from cos_sin [max_position, head_dim] (cos of pair i at [p][i], sin at
// [p][head_dim / 2 + i], as stage 2's rope reads it). q: [tokens, q_heads, head_dim]; k, v:
// [tokens, kv_heads, head_dim]; positions and slots: device, int32, one a token (a negative slot
// skips the token's cache writes: a padding row). head_dim must be a multiple of 16, and every
// position below max_position.
void rope_write_kv(bf16* q, const bf16* k, const bf16* v, const int* positions, const std::int32_t* slots,
                   const float* cos_sin, int max_position, int tokens, int q_heads, int kv_heads, int head_dim,
                   int block_size, bf16* k_cache, bf16* v_cache, cudaStream_t stream);

// The first `length` keys and values of one sequence, gathered from its pages into contiguous
// [kv_heads, length, head_dim] tensors (the K and V attention_forward reads). block_table: the
// sequence's row of the table (device, int32, at least ceil(length / block_size) ids).
void gather_kv_pages(const bf16* k_cache, const bf16* v_cache, const std::int32_t* block_table, int length,
                     int kv_heads, int head_dim, int block_size, bf16* k_out, bf16* v_out, cudaStream_t stream);

// out[i] = x[rows[i]] for i < count: rows of `cols` elements (rows: device, int32).
void gather_rows(const bf16* x, const std::int32_t* rows, int count, int cols, bf16* out, cudaStream_t stream);

// out[r] = the index of the largest of the `cols` logits of row r, ties to the lower index (as
// torch.argmax and the CPU sampler choose); -1 when the row holds a NaN. logits: [rows, cols];
// out: device memory, or pinned host memory through its device pointer (the engine's greedy step
// writes the tokens to the host that way, without a copy).
// Runs argmax_rows_cluster for at most kArgmaxClusterMaxRows rows where it can
// (argmax_rows_cluster_available()), argmax_rows_block_per_row otherwise.
void argmax_rows(const bf16* logits, int rows, int cols, std::int32_t* out, cudaStream_t stream);

// The same answer, one block of 1024 threads a row (kc-bench: stage4/argmax_rows/01_block_per_row).
void argmax_rows_block_per_row(const bf16* logits, int rows, int cols, std::int32_t* out, cudaStream_t stream);

// The same answer, a cluster of 8 CTAs a row, each reducing an eighth of it, merged through
// distributed shared memory (stage4/argmax_rows/02_cluster_per_row): a decode step of a few
// sequences reads its logits through 8 SMs instead of one. kc::Error where clusters are not
// available (argmax_rows_cluster_available(): compute capability 9.0 and sm_90 code in the build).
void argmax_rows_cluster(const bf16* logits, int rows, int cols, std::int32_t* out, cudaStream_t stream);
bool argmax_rows_cluster_available();
// Up to this many rows argmax_rows takes the cluster kernel (8 CTAs a row): a batch of a few
// sequences, whose rows alone would leave most SMs idle.
inline constexpr int kArgmaxClusterMaxRows = 16;

// Warming the L2 for the links after the decode attention (RunnerOptions::l2_warm_bytes).
//
// At batch 1 a layer's links stream weights from DRAM, all but one: the attention reads a few
// kilobytes of Q and of the cache at a short context and takes microseconds of latency, and DRAM
// idles while it runs. The weights of the links after it — the o projection, then gate | up — are
// written by no kernel, so they can be asked into the L2 then. warm_l2() is a link of its own in
// the step's chain, placed just before the attention: as a programmatic dependent it waits for the
// kernel ahead (the q|k|v projection, whose DRAM traffic the prefetches would otherwise slow
// down), asks the L2 for its ranges in chunks of kL2WarmChunkBytes with cp.async.bulk.prefetch.L2
// (nothing waits for them, nothing is written), and ends; the attention, its dependent, waits for
// it, so the chain's order is what it was. On sm_80 the prefetch compiles to nothing (the runner
// does not launch it there). Measured slower than no link at every budget tried (the link's own
// place in the chain costs more than the warmed bytes buy): stage4-inference/README.md, "The L2
// warmed before the attention".
struct L2Range {
  const void* begin = nullptr;
  std::size_t bytes = 0;
};
inline constexpr std::size_t kL2WarmChunkBytes = std::size_t{8} << 10;
inline constexpr int kL2WarmMaxRanges = 4;

// The ranges to warm after a layer's attention: `budget` bytes from the start of the o
// projection's weight, then (what the budget leaves) from the start of gate | up's. Each range is
// cut to a multiple of 16 bytes; empty ranges are left out. Host code (a CPU test holds it).
std::vector<L2Range> l2_warm_after_attention(const void* o, std::size_t o_bytes, const void* gate_up,
                                             std::size_t gate_up_bytes, std::size_t budget);

// Launches the warming link for 1 to kL2WarmMaxRanges ranges (each 16-byte aligned, its bytes a
// multiple of 16). kc::Error on anything else, before any launch.
void warm_l2(const std::vector<L2Range>& ranges, cudaStream_t stream);

// Whether a warm_l2() from this thread, now, would do its work: a programmatic dependent (inside a
// core::ProgrammaticLaunchScope) on a GPU of compute capability 9.0 or newer. Elsewhere its wait
// would not time the prefetches, and on sm_80 they compile to nothing, so the runner leaves it out.
bool warm_l2_takes_effect();

}  // namespace kc::engine
