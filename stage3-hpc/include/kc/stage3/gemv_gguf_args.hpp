// kc/stage3/gemv_gguf_args.hpp — the arguments of the weight-only quantized GEMV that reads
// llama.cpp's GGUF block formats as they are stored, and one launch per rung. An argument header:
// the rung files include it and nothing of the harness (kc/stage3/gemv_gguf.hpp defines the op).
//
// y[m][n] = sum_k x[m][k] * w[n][k], for the M <= 64 rows of one or several decode steps
// (rungs 01-08 take up to 16, rung 09 up to 64): x [M, K] and y [M, N] bf16, FP32 accumulation;
// w [N, K] stored as ggml blocks of 32 weights along K, row after row
// (N rows of K / 32 blocks, as a GGUF file holds a [K, N] weight — ggml lists the inner
// dimension first), packed with no padding, little-endian, d and m IEEE half:
//
//   type   ggml id  bytes  layout                        weight i (0..31) of the block
//   q4_0   2        18     f16 d, uint8 qs[16]           d * (nibble(i) - 8)
//   q4_1   3        20     f16 d, f16 m, uint8 qs[16]    d * nibble(i) + m
//   q8_0   8        34     f16 d, int8 q[32]             d * q[i]
//
// nibble(i): the LOW nibble of qs[i] for i < 16, the HIGH nibble of qs[i - 16] for i >= 16 (the
// two halves of the block share bytes; neighbours do not).
//
// The op's parameter `layout` says how w reaches the kernel. layout=0: the blocks above, as the
// file stores them (rung 01). layout=1: the same blocks repacked once at load time by
// repack_gguf_blocks() (kc/stage3/gemv_gguf.hpp) into two arrays, so that each block's quants
// start on a 16-byte boundary and one LDG.128 fetches them (rung 02):
//
//   quants [N, K/32 x Q]   Q = 16 bytes a block (q4_0, q4_1: qs as stored) or 32 (q8_0: q)
//
//     row n   | block 0: Q bytes | block 1: Q bytes | ... | block K/32-1: Q bytes |
//             ^ 16-byte aligned, and so is every block after it (Q is 16 or 32)
//
//   scales [N, K/32]       S = 2 bytes a block: half d (q4_0, q8_0)
//                              4 bytes a block: half2 (d, m), d first (q4_1): one 32-bit load
//
//     row n   | d0 | d1 | ... |                or    | d0 m0 | d1 m1 | ... |
//
// Rows follow each other with no padding, in both arrays, so block b of row n is entry
// n x K/32 + b of each. The nibble order inside the 16 bytes of qs is the block's own (above):
// weight j < 16 in the low nibble of byte j, weight j >= 16 in the high nibble of byte j - 16.
// Q + S is the block's size (16 + 2 = 18, 16 + 4 = 20, 32 + 2 = 34): the repack moves no more
// bytes than the blocks, it only separates them.
//
// layout=2: the blocks repacked for the tensor cores' fragments by repack_gguf_blocks_for_mma()
// (host) or repack_gguf_blocks_for_mma_on_device() (rung 03). w is cut into tiles of 8 rows
// (output columns) by 4 blocks (128 k); N is padded to a multiple of 8 rows and K to a multiple
// of 128 with zero blocks (quants 0, scales 0). Tile (T, C) = rows 8T..8T+7, blocks 4C..4C+3;
// tiles go C fastest: tile index T x chunks + C, chunks = ceil(K / 128).
//
//   quants: per tile 32 lanes x L bytes, lane l = 4g + t (g = l / 4: row 8T + g; t = l % 4) holds,
//           for each of the 4 blocks j, the block's weights k = 8t ... 8t+7 of its row:
//             q4_0, q4_1 (L = 16): word j (4 bytes) = 8 nibbles, nibble position i (bits 4i..4i+3)
//                                  = weight 8t + 2i for i < 4, weight 8t + 2(i - 4) + 1 for i >= 4
//             q8_0 (L = 32):       bytes 8j ... 8j+7 = the int8 weights 8t ... 8t+7
//   scales: per tile 4 x 8 entries of S bytes (half d, or half2 (d, m) for q4_1): entry (t, e),
//           e = 2j + p, is the scale of row 8T + 2t + p, block 4C + j — lane t's 16 or 32 bytes
//
// That is the mma.sync m16n8k16 fragment order with the block's k permuted (the same permutation
// for x, so the products pair up): lane (g, t) finds its B fragments of both k16 halves of a block
// in one word, and its 8 values of x for the block in one 16-byte piece of row g.
//
// layout=3: the same idea with the roles of the operands swapped (rung 05): w is mma.sync's A
// operand (16 rows: 16 output columns a product) and x its B operand (8 columns: the M <= 8 rows
// of x; 16 rows take two). Tiles of 16 rows x 4 blocks; N pads to a multiple of 16, K to 128.
//
//   quants: per tile 32 lanes x L bytes, lane l = 4g + t holds, for each block j and half h (row
//           16T + g + 8h), the block's weights k = 8t ... 8t+7 of that row:
//             q4_0, q4_1 (L = 32): word 2j + h = 8 nibbles in layout=2's order
//             q8_0 (L = 64):       bytes 8 (2j + h) ... + 7 = the int8 weights 8t ... 8t+7
//   scales: per tile 8 x 8 entries of S bytes: entry (g, e), e = 2j + h, is the scale of row
//           16T + g + 8h, block 4C + j — the 16 or 32 bytes the 4 lanes of row group g share
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstddef>

namespace kc::stage3 {

enum class GgufBlockType : int { q4_0 = 2, q4_1 = 3, q8_0 = 8 };

inline constexpr int kGgufBlockWeights = 32;
// The most rows of x the decode rungs (01-08) take in one launch (a decode step).
inline constexpr int kGgufGemvMaxRows = 16;
// The most rows of x the op takes, and rung 09 (a batch of decode steps, or a short prefill chunk);
// rungs 01-08 refuse M > kGgufGemvMaxRows.
inline constexpr int kGgufBatchMaxRows = 64;

constexpr int gguf_block_bytes(GgufBlockType type) {
  return type == GgufBlockType::q4_0 ? 18 : type == GgufBlockType::q4_1 ? 20 : 34;
}

// The repacked layout (layout=1): Q, the bytes of quants a block, and S, the bytes of its scales.
constexpr int gguf_quant_bytes(GgufBlockType type) { return type == GgufBlockType::q8_0 ? 32 : 16; }
constexpr int gguf_scale_bytes(GgufBlockType type) { return type == GgufBlockType::q4_1 ? 4 : 2; }
static_assert(gguf_quant_bytes(GgufBlockType::q4_0) + gguf_scale_bytes(GgufBlockType::q4_0) ==
                      gguf_block_bytes(GgufBlockType::q4_0) &&
                  gguf_quant_bytes(GgufBlockType::q4_1) + gguf_scale_bytes(GgufBlockType::q4_1) ==
                      gguf_block_bytes(GgufBlockType::q4_1) &&
                  gguf_quant_bytes(GgufBlockType::q8_0) + gguf_scale_bytes(GgufBlockType::q8_0) ==
                      gguf_block_bytes(GgufBlockType::q8_0),
              "the repack separates a block's bytes, it adds none");

// The two fragment layouts (2 and 3) as data: a tile is `tile_rows` rows by 4 blocks; lane (g, t)
// holds, for block j and half h < `halves`, the block's weights 8t ... 8t+7 of row
// tile_rows x T + g + 8h in word (q8_0: 8 bytes) j x halves + h; scale entry (o, 2j + p), o <
// `scale_owners`, is the scale of row tile_rows x T + 2o + p (layout 2: owners t) or o + 8p (layout
// 3: owners g), block 4C + j.
struct GgufFragmentLayout {
  int tile_rows;       // 8 (layout 2) or 16 (layout 3)
  int halves;          // rows a lane holds: 1 or 2
  int scale_owners;    // 4 (the lanes t) or 8 (the row groups g)
  bool pairs_of_rows;  // scale rows 2o + p (layout 2) rather than o + 8p (layout 3)
};
inline constexpr GgufFragmentLayout kGgufLayoutMma{8, 1, 4, true};
inline constexpr GgufFragmentLayout kGgufLayoutMmaWeightsA{16, 2, 8, false};

// Writes lane `lane` of tile-chunk `tile_chunk` of `layout`: its quants at quants + (tile_chunk x
// 32 + lane) x L (L = halves x 16, x 2 for q8_0) and, when lane < scale_owners, the 8 scale entries
// it owns — every byte, zeros for the padding rows and blocks. `blocks` holds the N rows of K / 32
// blocks as a file stores them. The host repacks (repack_gguf_blocks_for_mma, _mma16) and the GPU
// ones (..._on_device) both call it, lane by lane.
__host__ __device__ inline void repack_gguf_fragment_lane(GgufBlockType type, const GgufFragmentLayout& layout,
                                                         const std::uint8_t* blocks, int n, int k,
                                                         std::size_t tile_chunk, int lane, std::uint8_t* quants,
                                                         std::uint8_t* scales) {
  const bool q8 = type == GgufBlockType::q8_0;
  const int block_bytes = gguf_block_bytes(type), scale_bytes = gguf_scale_bytes(type);
  const int k_blocks = k / kGgufBlockWeights, chunks = (k_blocks + 3) / 4;
  const int chunk = static_cast<int>(tile_chunk % static_cast<std::size_t>(chunks));
  const int tile = static_cast<int>(tile_chunk / static_cast<std::size_t>(chunks));
  const int g = lane >> 2, t = lane & 3;
  const int word_bytes = q8 ? 8 : 4;
  std::uint8_t* lane_quants = quants + (tile_chunk * 32 + static_cast<std::size_t>(lane)) *
                                           static_cast<std::size_t>(4 * layout.halves * word_bytes);
  // The block of `row`, or null for a padding row or block.
  auto source = [&](int row, int block) -> const std::uint8_t* {
    if (row >= n || block >= k_blocks) return nullptr;
    return blocks + (static_cast<std::size_t>(row) * k_blocks + block) * block_bytes;
  };
  for (int j = 0; j < 4; ++j)
    for (int h = 0; h < layout.halves; ++h) {
      const std::uint8_t* src = source(layout.tile_rows * tile + g + 8 * h, 4 * chunk + j);
      std::uint8_t* word = lane_quants + (j * layout.halves + h) * word_bytes;
      const std::uint8_t* qs = src == nullptr ? nullptr : src + scale_bytes;
      if (q8) {
        for (int e = 0; e < 8; ++e) word[e] = qs == nullptr ? 0 : qs[8 * t + e];
        continue;
      }
      // Weight w (0..31) of a block: the low nibble of qs[w] (w < 16), the high one of qs[w - 16];
      // weight 8t + 2i goes to nibble position i, 8t + 2i + 1 to position i + 4.
      std::uint32_t bits = 0;
      for (int e = 0; qs != nullptr && e < 8; ++e) {
        const int w = 8 * t + e;
        const std::uint32_t q = w < 16 ? qs[w] & 15u : static_cast<std::uint32_t>(qs[w - 16] >> 4);
        bits |= q << (4 * (e % 2 == 0 ? e / 2 : e / 2 + 4));
      }
      for (int b = 0; b < 4; ++b) word[b] = static_cast<std::uint8_t>(bits >> (8 * b));
    }
  if (lane >= layout.scale_owners) return;
  for (int j = 0; j < 4; ++j)
    for (int p = 0; p < 2; ++p) {
      const int row = layout.tile_rows * tile + (layout.pairs_of_rows ? 2 * lane + p : lane + 8 * p);
      const std::uint8_t* src = source(row, 4 * chunk + j);
      std::uint8_t* entry =
          scales + ((tile_chunk * static_cast<std::size_t>(layout.scale_owners) + static_cast<std::size_t>(lane)) * 8 +
                    static_cast<std::size_t>(2 * j + p)) *
                       static_cast<std::size_t>(scale_bytes);
      for (int e = 0; e < scale_bytes; ++e) entry[e] = src == nullptr ? 0 : src[e];
    }
}

// The values of the op's parameter `layout`.
enum class GgufLayout : int { blocks = 0, repacked = 1, mma = 2, mma_weights_a = 3 };

// A fragment layout's tile-chunks (tiles of tile_rows rows x 4 blocks) of an N x K weight, and the
// bytes of quants and of scales it writes for them (padding included): per tile-chunk 32 lanes of
// halves x 16 bytes of quants (twice that for q8_0), and scale_owners lanes of 8 scale entries.
constexpr std::size_t gguf_fragment_tiles(const GgufFragmentLayout& layout, int n, int k) {
  return static_cast<std::size_t>((n + layout.tile_rows - 1) / layout.tile_rows) *
         static_cast<std::size_t>((k / kGgufBlockWeights + 3) / 4);
}
constexpr std::size_t gguf_fragment_quant_bytes(GgufBlockType type, const GgufFragmentLayout& layout, int n, int k) {
  return gguf_fragment_tiles(layout, n, k) * 32 * static_cast<std::size_t>(layout.halves) *
         (type == GgufBlockType::q8_0 ? 32 : 16);
}
constexpr std::size_t gguf_fragment_scale_bytes(GgufBlockType type, const GgufFragmentLayout& layout, int n, int k) {
  return gguf_fragment_tiles(layout, n, k) * static_cast<std::size_t>(layout.scale_owners) * 8 *
         static_cast<std::size_t>(gguf_scale_bytes(type));
}
// layout=2 and layout=3 by name.
constexpr std::size_t gguf_mma_tiles(int n, int k) { return gguf_fragment_tiles(kGgufLayoutMma, n, k); }
constexpr std::size_t gguf_mma_quant_bytes(GgufBlockType type, int n, int k) {
  return gguf_fragment_quant_bytes(type, kGgufLayoutMma, n, k);
}
constexpr std::size_t gguf_mma_scale_bytes(GgufBlockType type, int n, int k) {
  return gguf_fragment_scale_bytes(type, kGgufLayoutMma, n, k);
}
constexpr std::size_t gguf_mma16_tiles(int n, int k) { return gguf_fragment_tiles(kGgufLayoutMmaWeightsA, n, k); }
constexpr std::size_t gguf_mma16_quant_bytes(GgufBlockType type, int n, int k) {
  return gguf_fragment_quant_bytes(type, kGgufLayoutMmaWeightsA, n, k);
}
constexpr std::size_t gguf_mma16_scale_bytes(GgufBlockType type, int n, int k) {
  return gguf_fragment_scale_bytes(type, kGgufLayoutMmaWeightsA, n, k);
}

struct GgufGemvArgs {
  int m = 0, n = 0, k = 0;  // k a multiple of 32
  GgufBlockType type = GgufBlockType::q4_0;
  const __nv_bfloat16* x = nullptr;  // [m, k]
  const std::uint8_t* w = nullptr;   // [n, k / 32] blocks of `type` (layout=0)
  // layout=1 or 2 (null otherwise): the same blocks repacked, see above.
  const std::uint8_t* quants = nullptr;  // layout=1: [n, k / 32 x gguf_quant_bytes(type)]; 2: tiles; 16-byte aligned
  const void* scales = nullptr;          // layout=1: [n, k / 32] half, or half2 (d, m) for q4_1; 2: tiles
  __nv_bfloat16* y = nullptr;            // [m, n]
};

// Rung 01: a warp per output column; its lanes take the column's blocks in turn, decode each into
// 32 FP32 weights and multiply them with the M rows of x; a warp reduction per row.
void gemv_gguf_01_warp_per_column(const GgufGemvArgs& args, cudaStream_t stream);

// For the negative control only: rung 01 decoding each byte's nibbles in the wrong order
// (weight i in the high nibble). The check must fail it.
void gemv_gguf_01_swapped_nibbles(const GgufGemvArgs& args, cudaStream_t stream);

// Rung 02: rung 01's warp per column on the repacked layout (layout=1): per block a lane issues one
// 16-byte load of quants (two for q8_0), one 2- or 4-byte load of scales and 16-byte loads of x.
void gemv_gguf_02_repacked(const GgufGemvArgs& args, cudaStream_t stream);

// For the negative control only: rung 02 decoding each byte's nibbles in the wrong order. The
// check must fail it.
void gemv_gguf_02_swapped_nibbles(const GgufGemvArgs& args, cudaStream_t stream);

// Rung 03: the fragment layout (layout=2) on mma.sync: per block two m16n8k16 products of the
// nibbles as bf16 (128 + q) and one of x with ones (the block's sum of x), the scales applied in
// FP32 once a block; a CTA of 8 warps per 1 or 2 tiles of 8 columns, the warps splitting K.
void gemv_gguf_03_mma(const GgufGemvArgs& args, cudaStream_t stream);
// For the negative control only: rung 03 with the two nibbles of each pair exchanged.
void gemv_gguf_03_swapped_nibbles(const GgufGemvArgs& args, cudaStream_t stream);

// Rung 04: rung 03's arithmetic on the same layout, the quants and scales streamed through a
// 4-stage cp.async pipeline in shared memory per warp (more bytes in flight, no more registers).
void gemv_gguf_04_cp_async(const GgufGemvArgs& args, cudaStream_t stream);
// For the negative control only: rung 04 with the two nibbles of each pair exchanged.
void gemv_gguf_04_swapped_nibbles(const GgufGemvArgs& args, cudaStream_t stream);

// Rung 05: the operands swapped (layout=3): w the A operand, 16 output columns a product, x the B
// operand (its M <= 8 rows fill the 8 columns exactly; 9..16 rows take a second product); per block
// two products and one against ones (the sums of x), the scales once a block in FP32.
void gemv_gguf_05_weights_as_a(const GgufGemvArgs& args, cudaStream_t stream);
// For the negative control only: rung 05 with the two nibbles of each pair exchanged.
void gemv_gguf_05_swapped_nibbles(const GgufGemvArgs& args, cudaStream_t stream);

// Rung 06: rung 05's arithmetic on the same layout (layout=3), the weights streamed into a
// 4-stage shared-memory ring by the copy engine (cp.async.bulk on mbarriers) from a producer warp,
// with the x slices and the scales: bytes in flight that hold no registers. Writes the same bits as
// rung 05. Hopper only (sm_90a code): kc::Error before any launch elsewhere.
void gemv_gguf_06_bulk_stream(const GgufGemvArgs& args, cudaStream_t stream);
// For the negative control only: rung 06 with the two nibbles of each pair exchanged.
void gemv_gguf_06_swapped_nibbles(const GgufGemvArgs& args, cudaStream_t stream);
// Whether rung 06 can run on the current GPU with this build (a Hopper GPU and sm_90a code);
// false without a GPU. Asked once.
bool gemv_gguf_06_runs_here();

// Rung 07: a link of the decode chain (layout=3). x, with an optional prologue applied, is kept in
// shared memory for the whole kernel; the ring carries only the weights, and as a programmatic
// dependent (kc/core/dependent_launch.hpp) the weights start before the kernel ahead ends;
// persistent CTAs; up to kGgufGemvLinkMaxWeights weights sharing x and K (q, k and v) in one
// launch; y = x . w^T + beta y. Without a prologue and with beta = 0 it writes rung 06's bits.
// Hopper only, as rung 06; M x K limited by shared memory (gemv_gguf_07_fits).
inline constexpr int kGgufGemvLinkMaxWeights = 3;
// The most dynamic shared memory rung 07 asks for: the ring (4 stages of 8 chunks) and x's rows.
inline constexpr std::size_t kGgufGemv07MaxDynamicSmem = 200 * 1024;

enum class GgufGemvPrologue : int {
  none,     // x as given, [M, K]
  rmsnorm,  // x [M, K] through RMSNorm: x . norm_weight / sqrt(mean(x^2) + norm_eps) (the 1 / RMS
            // applied to the finished sums, x . norm_weight rounded to bf16)
  swiglu,   // x [M, 2K] = [gate | up], the product with silu(gate) . up (stage 2's swiglu, bf16)
};

struct GgufGemvLinkWeight {
  const std::uint8_t* quants = nullptr;  // layout=3, as for rung 06
  const void* scales = nullptr;
  __nv_bfloat16* y = nullptr;  // [M, n]
  int n = 0;
};

struct GgufGemvLinkArgs {
  int m = 0, k = 0;
  GgufBlockType type = GgufBlockType::q4_0;  // every weight's
  const __nv_bfloat16* x = nullptr;          // [M, K], or [M, 2K] with the SwiGLU prologue; 16-byte aligned
  GgufGemvPrologue prologue = GgufGemvPrologue::none;
  const __nv_bfloat16* norm_weight = nullptr;  // [K], the RMSNorm prologue's; 16-byte aligned
  float norm_eps = 0.f;
  float beta = 0.f;  // y = x . w^T + beta y (0: y is not read)
  // A link of no more CTAs than SMs (one tile each) launches with the shared memory of one CTA an
  // SM, so that its CTAs take an SM each; false: as many an SM as fit. As a programmatic dependent
  // such a grid otherwise packs two CTAs onto each SM the kernel ahead frees first, leaving other
  // SMs' bandwidth unused (stage 3 README, "One CTA an SM for a small link's grid").
  bool spread_over_sms = false;
  int weights = 1;
  GgufGemvLinkWeight weight[kGgufGemvLinkMaxWeights];
};

// Weight w of a link as the plain GEMV's arguments (x, M, K and the type shared; no prologue).
inline GgufGemvArgs gemv_gguf_link_weight_args(const GgufGemvLinkArgs& link, int w) {
  GgufGemvArgs args;
  args.m = link.m;
  args.n = link.weight[w].n;
  args.k = link.k;
  args.type = link.type;
  args.x = link.x;
  args.quants = link.weight[w].quants;
  args.scales = link.weight[w].scales;
  args.y = link.weight[w].y;
  return args;
}

void gemv_gguf_07_link(const GgufGemvLinkArgs& args, cudaStream_t stream);
// The op's form (one weight, no prologue, beta = 0): what kc-bench and the conformance tests run.
void gemv_gguf_07_x_resident(const GgufGemvArgs& args, cudaStream_t stream);
// For the negative control only: rung 07 with the two nibbles of each pair exchanged.
void gemv_gguf_07_swapped_nibbles(const GgufGemvArgs& args, cudaStream_t stream);
// Whether M rows of x of K fit next to rung 07's ring for blocks of `type`. No CUDA call.
bool gemv_gguf_07_fits(GgufBlockType type, int m, int k);

// Rung 08 (quant/08_gemv_gguf_x_f16.cu): rung 07 with x in shared memory as fp16, scaled per row by
// a power of two, and the block sums of x formed once (its header). The same arguments, prologues
// and links as rung 07; its sums take M x K / 32 x 8 bytes more shared memory (gemv_gguf_08_fits).
void gemv_gguf_08_link(const GgufGemvLinkArgs& args, cudaStream_t stream);
void gemv_gguf_08_x_f16(const GgufGemvArgs& args, cudaStream_t stream);
// For the negative control only: rung 08 with the two nibbles of each pair exchanged.
void gemv_gguf_08_swapped_nibbles(const GgufGemvArgs& args, cudaStream_t stream);

// Rung 11 (quant/11_gemv_gguf_x_in_step.cu): rung 07 with x staged during the CTA's first tile,
// each consumer warp the slices of its own chunks, a stage ahead of its products (its header). The
// same arguments, prologues, links and shared memory as rung 07; with no prologue and with SwiGLU
// rung 07's bits.
void gemv_gguf_11_link(const GgufGemvLinkArgs& args, cudaStream_t stream);
void gemv_gguf_11_x_in_step(const GgufGemvArgs& args, cudaStream_t stream);
// For the negative control only: rung 11 with the two nibbles of each pair exchanged.
void gemv_gguf_11_swapped_nibbles(const GgufGemvArgs& args, cudaStream_t stream);
// Whether M rows of x of K fit next to rung 11's ring (rung 07's rule). No CUDA call.
bool gemv_gguf_11_fits(GgufBlockType type, int m, int k);

// Rung 12 (quant/12_gemv_gguf_x_cluster_staged.cu): rung 07 launched in clusters of 4 CTAs, each
// CTA staging a quarter of x (with the prologue) into the shared memory of all four (its header).
// The same arguments, prologues, links and shared memory as rung 07; with no prologue and with
// SwiGLU rung 07's bits.
void gemv_gguf_12_link(const GgufGemvLinkArgs& args, cudaStream_t stream);
void gemv_gguf_12_x_cluster_staged(const GgufGemvArgs& args, cudaStream_t stream);
// For the negative control only: rung 12 with the two nibbles of each pair exchanged.
void gemv_gguf_12_swapped_nibbles(const GgufGemvArgs& args, cudaStream_t stream);
// Whether M rows of x of K fit next to rung 12's ring (rung 07's rule). No CUDA call.
bool gemv_gguf_12_fits(GgufBlockType type, int m, int k);
bool gemv_gguf_08_fits(GgufBlockType type, int m, int k);
// Whether this link has more tiles of 16 columns than rung 08 runs CTAs at once on the current GPU
// (the instance it would launch: its registers and shared memory), so that some CTA takes several
// tiles. Checks the link as gemv_gguf_08_link does; no launch.
bool gemv_gguf_08_ctas_take_several_tiles(const GgufGemvLinkArgs& args);

// Rung 09 (quant/09_gemv_gguf_batch.cu): M up to kGgufBatchMaxRows on layout=3, stage 3's hgemm
// rung 14 frame (a CTA owns 128 output columns and a split of K, a cp.async ring of K steps shared
// by its warps, split-K partials added by the last CTA of each column block in the same launch)
// with each block's weights decoded once into bf16 (q - 8, q or the signed byte, exact) and
// multiplied with every token tile of x. The plan: a CTA owns kGgufBatchColumns columns (8 tiles
// of 16) and a split of the K chunks (128 k each); as many splits as give `ctas_per_sm` CTAs an SM
// and no split shorter than kGgufBatchMinChunksPerSplit chunks.
inline constexpr int kGgufBatchColumns = 128;
inline constexpr int kGgufBatchMinChunksPerSplit = 8;

// Rung 09's CTA: token groups of 4 warps (each warp 2 tiles of 16 columns), each group
// multiplying its share of the token tiles with all 128 columns: one group up to
// kGgufBatchTwoGroupsFrom - 1 token tiles, two from there (twice the warps an SM, each with half
// the accumulators, each block decoded by both groups).
inline constexpr int kGgufBatchTwoGroupsFrom = 3;
constexpr int gguf_batch_token_groups(int token_tiles) { return token_tiles >= kGgufBatchTwoGroupsFrom ? 2 : 1; }
constexpr int gguf_batch_threads(int token_tiles) { return 128 * gguf_batch_token_groups(token_tiles); }

struct GgufBatchPlan {
  int token_tiles = 0;    // n8 tiles of x's rows: ceil(M / 8), 1..8
  int column_blocks = 0;  // ceil(N / 128): the grid's x
  int chunks = 0;         // ceil(K / 128)
  int splits = 0;         // CTAs per column block along K: the grid's y

  constexpr bool needs_workspace() const { return splits > 1; }
  // Chunks [chunk_begin(s), chunk_begin(s + 1)) belong to split s.
  constexpr int chunk_begin(int split) const {
    return static_cast<int>(static_cast<long long>(split) * chunks / splits);
  }
  // The workspace: one FP32 partial tile per CTA (128 columns x 8 rows a token tile, the token tiles
  // rounded up to whole groups) and one arrival counter per column block (zeroed once; a launch
  // leaves them at zero); none with one split.
  constexpr long long partial_floats() const {
    const int groups = gguf_batch_token_groups(token_tiles);
    const int padded_tiles = (token_tiles + groups - 1) / groups * groups;
    return needs_workspace() ? static_cast<long long>(column_blocks) * splits * kGgufBatchColumns * 8 * padded_tiles
                             : 0;
  }
  constexpr int counters() const { return needs_workspace() ? column_blocks : 0; }
};

constexpr GgufBatchPlan plan_gguf_batch(int m, int n, int k, int sm_count, int ctas_per_sm) {
  GgufBatchPlan plan;
  plan.token_tiles = (m + 7) / 8;
  plan.column_blocks = (n + kGgufBatchColumns - 1) / kGgufBatchColumns;
  plan.chunks = (k / kGgufBlockWeights + 3) / 4;
  int splits = sm_count * ctas_per_sm / plan.column_blocks;
  const int longest = plan.chunks / kGgufBatchMinChunksPerSplit;
  if (splits > longest) splits = longest;
  plan.splits = splits < 1 ? 1 : splits;
  return plan;
}

struct GgufBatchWorkspace {
  float* partials = nullptr;           // plan.partial_floats() floats
  std::uint32_t* counters = nullptr;   // plan.counters() counters, zero before the first launch
};

// The plan's launch; `plan` must be plan_gguf_batch of the arguments (kc::Error otherwise), with
// ctas_per_sm from gemv_gguf_09_ctas_per_sm. One stream at a time on a workspace (the counters).
void gemv_gguf_09_batch(const GgufGemvArgs& args, const GgufBatchPlan& plan, const GgufBatchWorkspace& workspace,
                        cudaStream_t stream);
// For the negative control only: rung 09 with the two nibbles of each pair exchanged.
void gemv_gguf_09_swapped_nibbles(const GgufGemvArgs& args, const GgufBatchPlan& plan,
                                  const GgufBatchWorkspace& workspace, cudaStream_t stream);
// The CTAs of rung 09's instance for `type` and M that fit on an SM of the current GPU (its
// registers and shared memory, the occupancy calculator).
int gemv_gguf_09_ctas_per_sm(GgufBlockType type, int m);

// Rung 10 (quant/10_gemv_gguf_wgmma.cu): rung 09's plan, workspace and layout on WGMMA — a
// warpgroup's 64 columns of decoded weights as the A operand from registers, the M rows of x as B
// from shared memory (m64nNk16, N = 8 x token tiles), a block's products running while the warps
// decode the next. Writes the same sums as rung 09 in another order. Hopper only (sm_90a code):
// kc::Error before any launch elsewhere; `plan` from plan_gguf_batch with gemv_gguf_10_ctas_per_sm.
void gemv_gguf_10_wgmma(const GgufGemvArgs& args, const GgufBatchPlan& plan, const GgufBatchWorkspace& workspace,
                        cudaStream_t stream);
// For the negative control only: rung 10 with the two nibbles of each pair exchanged.
void gemv_gguf_10_swapped_nibbles(const GgufGemvArgs& args, const GgufBatchPlan& plan,
                                  const GgufBatchWorkspace& workspace, cudaStream_t stream);
int gemv_gguf_10_ctas_per_sm(GgufBlockType type, int m);
// Rung 10 runs where gemv_gguf_06_runs_here() (a Hopper GPU and sm_90a code).

// The argument checks of a batch rung's launch (09, 10), kc::Error naming `rung`: M in [1, 64], N
// >= 1, K a positive multiple of 32; x, quants, scales and y non-null; quants and scales 16-byte
// aligned and x `x_alignment`-byte aligned (the rung's copy sizes); `plan` one of plan_gguf_batch's
// for the shape, and a workspace where it splits K.
void check_gguf_batch_args(const GgufGemvArgs& args, const GgufBatchPlan& plan, const GgufBatchWorkspace& workspace,
                           const char* rung, int x_alignment);
// The plan and workspace part of those checks, for any weight format on plan_gguf_batch's plans
// (the int4 GEMV's rung 03 too): `plan` one of plan_gguf_batch's for M x N x K, and a workspace
// where it splits K; kc::Error "<op> (<rung>): ..." otherwise.
void check_gguf_batch_plan(const char* op, const char* rung, int m, int n, int k, const GgufBatchPlan& plan,
                           const GgufBatchWorkspace& workspace);

// The layout=3 repack on the GPU, as repack_gguf_blocks_for_mma_on_device for layout=2; buffers of
// gguf_mma16_quant_bytes / gguf_mma16_scale_bytes.
void repack_gguf_blocks_for_mma16_on_device(GgufBlockType type, const std::uint8_t* blocks, int n, int k,
                                            std::uint8_t* quants, void* scales, cudaStream_t stream);

// The layout=2 repack on the GPU, once at load time: `blocks` the N rows of K / 32 GGUF blocks of
// `type` (as a file stores them) in device memory; `quants` and `scales` device buffers of
// gguf_mma_quant_bytes / gguf_mma_scale_bytes, 16-byte aligned. Asynchronous on `stream`.
void repack_gguf_blocks_for_mma_on_device(GgufBlockType type, const std::uint8_t* blocks, int n, int k,
                                          std::uint8_t* quants, void* scales, cudaStream_t stream);

}  // namespace kc::stage3
