// kc/stage3/gemv_int4_args.hpp — the arguments of the weight-only GEMV on 4-bit weights with
// group-wise scales and zero points (the form GPTQ and AWQ checkpoints carry), the prepared
// layout its rungs read, and one launch per rung. An argument header: the rung files include it
// and nothing of the harness (kc/stage3/gemv_int4.hpp defines the op).
//
// y[m][n] = sum_k x[m][k] * w[n][k] for the M <= 64 rows of one or several decode steps (rungs 01
// and 02 take up to 16, rung 03 up to 64): x [M, K] and y [M, N] bf16, FP32 accumulation; w [N, K] in groups of G consecutive weights along K, each group with a
// scale s (IEEE half) and a zero point z (an integer 0..15):
//
//   w[n][k] = s[n][k / G] * (q[n][k] - z[n][k / G]),  q[n][k] in 0..15
//
// As a checkpoint holds it (the "stored" form, unpacked from its int32 words):
//   qweight [N, K / 2] bytes   weight k of row n in byte k / 2: the LOW nibble for even k, the
//                              HIGH nibble for odd k (GPTQ's order inside an int32 word: nibble i
//                              at bits 4i is k = 8 word + i; AWQ interleaves its nibbles and must
//                              be reordered to this first)
//   scales  [N, K / G] half
//   zeros   [N, K / G] bytes   0..15 (a symmetric quantizer writes 8 everywhere)
// G is 32, 64, or a multiple of 128 (128 is the common choice; G = K is one scale a row), and K a
// multiple of G: a group never straddles the end of a row.
//
// Compared with GGUF's q4_1 (a half scale and a half minimum a 32-weight block: 5 bits a weight),
// G = 128 costs 4.25 bits a weight in the prepared form below (4 bytes of s and z a group): 15%
// fewer bytes to stream per decode step, and one scale step a group instead of one a block.
//
// The prepared layout (prepare_int4_groups, on the host or on the GPU), which rung 01 reads: the
// weights as mma.sync's A operand in tiles of 16 rows x 128 k (a "chunk", 4 blocks of 32), N padded
// to a multiple of 16 and K to one of 128 with zeros (quants 0, scale entries 0); tiles go chunk
// fastest: tile-chunk index T x chunks + C, chunks = ceil(K / 128).
//
//   quants: per tile-chunk 32 lanes x 32 bytes; lane l = 4g + t holds, for block j (0..3) and half
//           h (row 16T + g + 8h), the weights k = 128C + 32j + 8t ... + 7 of that row in word
//           2j + h, nibble position i (bits 4i..4i+3) = weight 8t + 2i for i < 4 and
//           8t + 2(i - 4) + 1 for i >= 4 — byte for byte the q4 words of the GGUF GEMV's layout=3
//           (kc/stage3/gemv_gguf_args.hpp), so the same nibble decode feeds the tensor cores.
//   scales: per tile-chunk 8 row groups g x E entries of 4 bytes, E = 2 x (groups of the chunk):
//           entry (g, 2u + h) = half2 (s, z) — z as a half, exact — of row 16T + g + 8h and the
//           chunk's group u. A chunk holds 128 / G groups for G <= 128 (E = 8, 4, 2) and lies
//           inside one group for G > 128 (E = 2; a group of 256 repeats its entry in each of its
//           two chunks). Row group g's E entries are contiguous: 8 or 16 bytes, one or two loads.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kc/stage3/gemv_gguf_args.hpp"

namespace kc::stage3 {

inline constexpr int kInt4ChunkWeights = 128;  // k of a tile-chunk (4 mma blocks of 32)
inline constexpr int kInt4TileRows = 16;       // output columns (rows of w) of a tile
inline constexpr int kInt4ChunkQuantBytes = 32 * 32;  // a tile-chunk's quants: 32 lanes x 32 bytes
// The most rows of x rungs 01 and 02 take: a decode step (the GGUF GEMV's kGgufGemvMaxRows).
inline constexpr int kInt4GemvMaxRows = 16;

// 32, 64 or a positive multiple of 128.
constexpr bool int4_group_size_supported(int group_size) {
  return group_size == 32 || group_size == 64 || (group_size >= 128 && group_size % 128 == 0);
}
// The 32-weight blocks one scale entry covers inside a chunk: 1, 2 or 4.
constexpr int int4_blocks_per_scale(int group_size) { return group_size >= 128 ? 4 : group_size / 32; }
// Scale entries a row has in each chunk: 4, 2 or 1.
constexpr int int4_groups_per_chunk(int group_size) { return 4 / int4_blocks_per_scale(group_size); }

constexpr std::size_t int4_tile_chunks(int n, int k) {
  return static_cast<std::size_t>((n + kInt4TileRows - 1) / kInt4TileRows) *
         static_cast<std::size_t>((k + kInt4ChunkWeights - 1) / kInt4ChunkWeights);
}
constexpr std::size_t int4_prepared_quant_bytes(int n, int k) { return int4_tile_chunks(n, k) * kInt4ChunkQuantBytes; }
constexpr std::size_t int4_prepared_scale_bytes(int n, int k, int group_size) {
  return int4_tile_chunks(n, k) * kInt4TileRows * static_cast<std::size_t>(int4_groups_per_chunk(group_size)) * 4;
}

// The IEEE half bits of a small non-negative integer (0..2047), exact: z's half in a scale entry.
__host__ __device__ constexpr std::uint16_t int4_half_of_integer(int value) {
  if (value == 0) return 0;
  int exponent = 0;
  while ((value >> (exponent + 1)) != 0) ++exponent;
  return static_cast<std::uint16_t>(((15 + exponent) << 10) | ((value << (10 - exponent)) & 0x3ff));
}
static_assert(int4_half_of_integer(1) == 0x3c00 && int4_half_of_integer(8) == 0x4800 &&
                  int4_half_of_integer(15) == 0x4b80,
              "1.0, 8.0 and 15.0 as IEEE halves");

// The stored form of one N x K weight (host or device pointers, as the caller has them).
struct Int4GroupWeights {
  const std::uint8_t* qweight = nullptr;  // [N, K / 2]
  const std::uint16_t* scales = nullptr;  // [N, K / G] IEEE half bits
  const std::uint8_t* zeros = nullptr;    // [N, K / G], 0..15
  int n = 0, k = 0, group_size = 128;
};

// Throws kc::Error naming `who` unless `rows` (N) and K are >= 1 and the group size is one the
// prepared layout takes (int4_group_size_supported) and divides K. No CUDA call.
void check_int4_group_shape(long long rows, long long k, int group_size, const char* who);
// The same for a weight, and its arrays non-null: what the prepare and the rungs take.
void check_int4_group_weights(const Int4GroupWeights& w, const char* who);

// Writes lane `lane` (0..31) of tile-chunk `tile_chunk` of the prepared layout: its 32 bytes of
// quants at quants + (tile_chunk x 32 + lane) x 32 and, for lane < 8 (row group g = lane), its E
// scale entries at scales + (tile_chunk x 8 + lane) x E — every byte, zeros for padding rows and
// k. The host and GPU prepares both call it, lane by lane.
__host__ __device__ inline void prepare_int4_group_lane(const Int4GroupWeights& w, std::size_t tile_chunk, int lane,
                                                        std::uint8_t* quants, std::uint32_t* scales) {
  const int chunks = (w.k + kInt4ChunkWeights - 1) / kInt4ChunkWeights;
  const int chunk = static_cast<int>(tile_chunk % static_cast<std::size_t>(chunks));
  const int tile = static_cast<int>(tile_chunk / static_cast<std::size_t>(chunks));
  const int g = lane >> 2, t = lane & 3;
  const std::size_t row_bytes = static_cast<std::size_t>(w.k / 2);
  std::uint8_t* lane_quants = quants + (tile_chunk * 32 + static_cast<std::size_t>(lane)) * 32;
  for (int j = 0; j < 4; ++j)
    for (int h = 0; h < 2; ++h) {
      const int row = kInt4TileRows * tile + g + 8 * h;
      std::uint32_t bits = 0;
      for (int e = 0; e < 8; ++e) {
        const int k = kInt4ChunkWeights * chunk + 32 * j + 8 * t + e;
        if (row >= w.n || k >= w.k) continue;
        const std::uint8_t byte = w.qweight[static_cast<std::size_t>(row) * row_bytes + static_cast<std::size_t>(k / 2)];
        const std::uint32_t q = k % 2 == 0 ? byte & 15u : static_cast<std::uint32_t>(byte >> 4);
        // Weight 8t + 2i to nibble position i, 8t + 2i + 1 to position i + 4.
        bits |= q << (4 * (e % 2 == 0 ? e / 2 : e / 2 + 4));
      }
      std::uint8_t* word = lane_quants + 4 * (2 * j + h);
      for (int b = 0; b < 4; ++b) word[b] = static_cast<std::uint8_t>(bits >> (8 * b));
    }
  if (lane >= 8) return;
  const int groups_per_chunk = int4_groups_per_chunk(w.group_size);
  const int entries = 2 * groups_per_chunk;
  const int row_groups = w.k / w.group_size;
  std::uint32_t* lane_scales = scales + (tile_chunk * 8 + static_cast<std::size_t>(lane)) * static_cast<std::size_t>(entries);
  for (int u = 0; u < groups_per_chunk; ++u)
    for (int h = 0; h < 2; ++h) {
      const int row = kInt4TileRows * tile + lane + 8 * h;
      const int first_k = kInt4ChunkWeights * chunk + u * 32 * int4_blocks_per_scale(w.group_size);
      std::uint32_t entry = 0;
      if (row < w.n && first_k < w.k) {
        const std::size_t index = static_cast<std::size_t>(row) * static_cast<std::size_t>(row_groups) +
                                  static_cast<std::size_t>(first_k / w.group_size);
        entry = static_cast<std::uint32_t>(w.scales[index]) |
                (static_cast<std::uint32_t>(int4_half_of_integer(w.zeros[index] & 15)) << 16);
      }
      lane_scales[2 * u + h] = entry;
    }
}

// What the rungs read: x [M, K] and y [M, N] bf16, and the weight prepared as above.
struct Int4GemvArgs {
  int m = 0, n = 0, k = 0;
  int group_size = 128;
  const __nv_bfloat16* x = nullptr;    // [M, K], 16-byte aligned
  const std::uint8_t* quants = nullptr;  // int4_prepared_quant_bytes(n, k), 16-byte aligned
  const std::uint32_t* scales = nullptr;  // int4_prepared_scale_bytes(n, k, group_size), 16-byte aligned
  __nv_bfloat16* y = nullptr;          // [M, N]
};

// Rung 01 (quant/int4/01_group_scales.cu): the GGUF GEMV's rung 05 frame (the weights as mma.sync's
// A operand, the rows of x as B, a chunk loaded ahead in registers, 8 warps splitting K) with the
// scale step taken once a group instead of once a block: the tensor cores sum the group's blocks,
// the FFMAs of the scale and the zero point follow once.
void gemv_int4_01_group_scales(const Int4GemvArgs& args, cudaStream_t stream);

// Rung 02 (quant/int4/02_bulk_stream.cu): rung 01's arithmetic and chunk order, the weights,
// scale entries and x slices streamed into a 4-stage shared-memory ring by the copy engine
// (cp.async.bulk) from a producer warp; the same bits as rung 01. Hopper only (sm_90a code and
// compute capability 9.0, as gemv_gguf_06_runs_here() says): kc::Error before any launch elsewhere.
void gemv_int4_02_bulk_stream(const Int4GemvArgs& args, cudaStream_t stream);

// Rung 04 (quant/int4/04_x_resident.cu): a link of the decode chain, the GGUF GEMV's rung 07 frame
// (quant/gemv_x_resident_frame.cuh) on 4-bit groups: x kept in shared memory with the RMSNorm or
// SwiGLU before the projection applied on the way in (GgufGemvPrologue), the weights and scale
// entries streamed by the copy engine into a ring before the kernel ahead ends (a programmatic
// dependent), persistent CTAs, up to kGgufGemvLinkMaxWeights weights sharing x and K (q, k and v)
// in one launch, y = x . w^T + beta y. Each chunk's arithmetic is rungs 01 and 02's
// (gemv_int4_groups.cuh), in the same order: without a prologue and with beta = 0 it writes their
// bits. Hopper only, as rung 02; M x K limited by shared memory (gemv_int4_04_fits).
struct Int4GemvLinkWeight {
  const std::uint8_t* quants = nullptr;   // as prepare_int4_groups writes them, 16-byte aligned
  const std::uint32_t* scales = nullptr;  // the same, 16-byte aligned
  __nv_bfloat16* y = nullptr;             // [M, n]
  int n = 0;
};

struct Int4GemvLinkArgs {
  int m = 0, k = 0;
  int group_size = 128;                 // every weight's
  const __nv_bfloat16* x = nullptr;     // [M, K], or [M, 2K] with the SwiGLU prologue; 16-byte aligned
  GgufGemvPrologue prologue = GgufGemvPrologue::none;
  const __nv_bfloat16* norm_weight = nullptr;  // [K], the RMSNorm prologue's; 16-byte aligned
  float norm_eps = 0.f;
  float beta = 0.f;  // y = x . w^T + beta y (0: y is not read)
  bool spread_over_sms = false;  // as GgufGemvLinkArgs::spread_over_sms
  int weights = 1;
  Int4GemvLinkWeight weight[kGgufGemvLinkMaxWeights];
};

// Weight w of a link as the plain GEMV's arguments (x, M, K and the group size shared; no prologue).
inline Int4GemvArgs gemv_int4_link_weight_args(const Int4GemvLinkArgs& link, int w) {
  Int4GemvArgs args;
  args.m = link.m;
  args.n = link.weight[w].n;
  args.k = link.k;
  args.group_size = link.group_size;
  args.x = link.x;
  args.quants = link.weight[w].quants;
  args.scales = link.weight[w].scales;
  args.y = link.weight[w].y;
  return args;
}

void gemv_int4_04_link(const Int4GemvLinkArgs& args, cudaStream_t stream);
// The op's form (one weight, no prologue, beta = 0): what kc-bench and the conformance tests run.
void gemv_int4_04_x_resident(const Int4GemvArgs& args, cudaStream_t stream);
// For the negative control only: rung 04 with the two nibbles of each pair exchanged.
void gemv_int4_04_swapped_nibbles(const Int4GemvArgs& args, cudaStream_t stream);
// Whether M rows of x of K fit next to rung 04's ring for groups of `group_size`. No CUDA call.
bool gemv_int4_04_fits(int m, int k, int group_size);

// Rung 05 (quant/int4/05_x_f16.cu): rung 04 with x in shared memory as fp16, scaled per row by a
// power of two, and each block's sums of x formed once (the GGUF rung 08's staging): the nibbles
// decode to fp16 q and no products against ones are needed. The same arguments, prologues and
// links as rung 04; its sums take M x K / 32 x 16 bytes more shared memory (gemv_int4_05_fits).
void gemv_int4_05_link(const Int4GemvLinkArgs& args, cudaStream_t stream);
void gemv_int4_05_x_f16(const Int4GemvArgs& args, cudaStream_t stream);
// For the negative control only: rung 05 with the two nibbles of each pair exchanged.
void gemv_int4_05_swapped_nibbles(const Int4GemvArgs& args, cudaStream_t stream);
bool gemv_int4_05_fits(int m, int k, int group_size);

// Rung 03 (quant/int4/03_batch.cu): M up to kInt4BatchMaxRows on the same layout, in the GGUF
// GEMV's rung 09 frame (quant/gemv_batch_frame.cuh: 128 output columns and a split of K a CTA, a
// cp.async ring, split-K partials added by the last CTA) with each block's nibbles centred once to
// the exact integers q - z (one HSUB2 a pair) and multiplied with every token tile, the products
// of a group chained in FP32 and scaled once a group. `plan` from plan_gguf_batch with
// gemv_int4_03_ctas_per_sm; a workspace where it splits K (one stream at a time on it).
inline constexpr int kInt4BatchMaxRows = 64;
void gemv_int4_03_batch(const Int4GemvArgs& args, const GgufBatchPlan& plan, const GgufBatchWorkspace& workspace,
                        cudaStream_t stream);
// The CTAs of rung 03's instance for the group size and M that fit an SM of the current GPU.
int gemv_int4_03_ctas_per_sm(int group_size, int m);
// For the negative control only: rung 03 centring each row's pairs on the zero point of the row 8
// apart in its tile (G >= 128 only; kc::Error otherwise). The check must fail it.
void gemv_int4_03_swapped_zero_points(const Int4GemvArgs& args, const GgufBatchPlan& plan,
                                      const GgufBatchWorkspace& workspace, cudaStream_t stream);

// The negative controls' instances of rung 01, each with one mistake (tests/negative_controls/
// gemv_int4_controls.cpp): the two nibbles of each pair exchanged; each group given the scale
// entry of the next group of its chunk (G of 32 or 64 only: at larger G a chunk has one group);
// the zero point read as 8 whatever the entry says; the scale multiplied in twice.
enum class Int4Flaw { none, swapped_nibbles, next_group_scales, zero_point_ignored, scale_applied_twice };
void gemv_int4_01_flawed(const Int4GemvArgs& args, Int4Flaw flaw, cudaStream_t stream);

// The prepare on the GPU, once at load time: `weights` in device memory; `quants` and `scales`
// device buffers of int4_prepared_quant_bytes / int4_prepared_scale_bytes, 16-byte aligned.
// Asynchronous on `stream`; kc::Error before any launch for a group size or K it cannot take.
void prepare_int4_groups_on_device(const Int4GroupWeights& weights, std::uint8_t* quants, std::uint32_t* scales,
                                   cudaStream_t stream);

}  // namespace kc::stage3
