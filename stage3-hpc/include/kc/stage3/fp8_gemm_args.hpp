// kc/stage3/fp8_gemm_args.hpp — the arguments of the FP8 GEMM, the layout of its scales, and one
// launch per rung. An argument header: the rung files include it and nothing of the harness
// (kc/stage3/fp8_gemm.hpp defines the op).
//
// C = (A . s_A) (B . s_B)^T: A [M, K] and B [N, K] FP8 e4m3 (both K-contiguous: B is stored N x K,
// the layout of an nn.Linear weight and the only one FP8 tensor cores read), C [M, N] bf16,
// FP32 accumulation. The scales say what each stored FP8 value is worth:
//
//   per_tensor  one FP32 scale for all of A and one for all of B: C = s_A s_B (A . B^T).
//   block       (DeepSeek-V3's recipe) one FP32 scale per 1 x 128 piece of each row of A (an
//               activation row, per 128 values of K) and per 128 x 128 block of B (a weight
//               block): element (m, n) sums, over the K blocks kb,
//               s_A[kb][m] s_B[n / 128][kb] (A[m, kb-th 128] . B[n, kb-th 128]).
//               s_A is stored [ceil(K / 128), M] (M contiguous: the scales of one K block of a
//               tile's rows lie together), s_B [ceil(N / 128), ceil(K / 128)] (K blocks
//               contiguous). A last K block shorter than 128 has its own scale like the others.
//
// A scale may be any finite or infinite FP32 value; 0 makes its block contribute nothing (0 times a
// finite product), Inf and NaN propagate as IEEE arithmetic says.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

namespace kc::stage3 {

using bf16 = __nv_bfloat16;
using fp8e4m3 = __nv_fp8_e4m3;

enum class Fp8Scaling : int { per_tensor = 0, block = 1 };

inline constexpr int kFp8ScaleBlock = 128;  // K elements per scale of A; K and N per scale of B
inline constexpr int kFp8KMultiple = 16;    // rows of A and B are moved by TMA in 16-byte pieces

struct Fp8GemmArgs {
  int m = 0, n = 0, k = 0;
  const fp8e4m3* a = nullptr;  // [M, K]
  const fp8e4m3* b = nullptr;  // [N, K]
  bf16* c = nullptr;           // [M, N]
  Fp8Scaling scaling = Fp8Scaling::per_tensor;
  const float* scale_a = nullptr;  // per_tensor: 1 value; block: [ceil(K / 128), M]
  const float* scale_b = nullptr;  // per_tensor: 1 value; block: [ceil(N / 128), ceil(K / 128)]
};

// Scales per operand under each scaling (the op's operand shapes).
__host__ __device__ constexpr int fp8_k_blocks(int k) { return (k + kFp8ScaleBlock - 1) / kFp8ScaleBlock; }
__host__ __device__ constexpr int fp8_n_blocks(int n) { return (n + kFp8ScaleBlock - 1) / kFp8ScaleBlock; }

// Where the scale of element (row, col) of A or B lies in its scale array, for the references and
// the tests (the kernel indexes the same places directly): index row / row_block * row_stride +
// col / 128 * col_stride.
struct Fp8ScaleMap {
  long long row_block = 1, row_stride = 0, col_stride = 0;
  __host__ __device__ constexpr long long operator()(long long row, long long col) const {
    return row / row_block * row_stride + col / kFp8ScaleBlock * col_stride;
  }
};
// A [M, K]: per tensor, index 0; block, s_A[kb][m] = index kb M + m.
__host__ __device__ constexpr Fp8ScaleMap fp8_scale_map_a(Fp8Scaling scaling, int m) {
  return scaling == Fp8Scaling::block ? Fp8ScaleMap{1, 1, m} : Fp8ScaleMap{1, 0, 0};
}
// Whether s_A's rows, M floats each, are whole 16-byte pieces (M % 4 == 0): what TMA needs to read
// them, beside s_A itself starting 16-byte aligned (the rungs that load them so: 09-12).
constexpr bool fp8_scale_a_rows_fit_tma(int m) { return m % 4 == 0; }
// B [N, K]: per tensor, index 0; block, s_B[n / 128][kb] = index (n / 128) ceil(K / 128) + kb.
__host__ __device__ constexpr Fp8ScaleMap fp8_scale_map_b(Fp8Scaling scaling, int k) {
  return scaling == Fp8Scaling::block ? Fp8ScaleMap{kFp8ScaleBlock, fp8_k_blocks(k), 1} : Fp8ScaleMap{1, 0, 0};
}

// What every rung's launch checks before any CUDA call (src/fp8_gemm_op.cpp): a non-empty problem,
// K % 16 == 0, A, B and C present and 16-byte aligned (A
// and B are read by TMA, which needs 16-byte aligned rows; C is written by TMA stores or in bf16
// pairs), both scales present. Throws kc::Error naming the rule.
void check_fp8_gemm_args(const Fp8GemmArgs& args);

class HopperLaunchCache;  // the tensor maps and launch facts of the Hopper kernels (arch/sm90)
struct GroupedSplitWorkspace;  // rung 12's split workspace (kc/stage3/grouped_gemm_args.hpp)

// Rung 01: TMA + WGMMA m64n128k32, a producer warp and two consumer warpgroups, persistent CTAs;
// each 128-deep K step's products summed by the tensor cores, then added into FP32 registers
// (promotion) with the step's scales. sm_90a (compute capability 9.0); K % 16 == 0.
void fp8_gemm_01_tma_wgmma(const Fp8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache);

// Rung 02: rung 01 with 128 x 192 tiles (wgmma m64n192k32): B read once for 1.5 times the columns.
void fp8_gemm_02_wide_tiles(const Fp8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache);

// Rung 03: rung 02 with the epilogue through shared memory and TMA stores (four stages).
void fp8_gemm_03_tma_store(const Fp8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache);

// Rung 04: rung 03 with one promotion every four K steps when there is one scale per tensor (block
// scales: every step, as rung 03).
void fp8_gemm_04_promotion_window(const Fp8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache);

// Rung 05: rung 04 on 128 x 192 or 128 x 128 tiles, whichever the launch estimates faster for the
// shape (the waves of tiles each width takes on the GPU's SMs).
void fp8_gemm_05_tile_per_shape(const Fp8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache);

// Rung 06: rung 05 with block scales loaded two K steps ahead of their promotion, along the CTA's
// walk of tiles, and multiplied at the promotion (one scale per tensor: rung 05).
void fp8_gemm_06_scales_ahead(const Fp8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache);

// Rung 07: rung 06 with two partial sets, each K step promoted while the next one's WGMMAs run
// (block scales; one scale per tensor: rung 05).
void fp8_gemm_07_promote_behind(const Fp8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache);

// Rung 08: rung 06 in clusters of two CTAs (tiles m and m + 1 of a column) that share each B tile,
// each loading half of it by TMA multicast (block scales; one scale per tensor: rung 05).
void fp8_gemm_08_cluster_pairs(const Fp8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache);

// Rung 09: rung 07 with each K step's scales brought into the stage by the producer (A's by TMA, B's
// by its thread), read by the consumers from shared memory (block scales with M % 4 == 0 and s_A
// 16-byte aligned; anything else: rung 07).
void fp8_gemm_09_scales_in_stage(const Fp8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache);

// Rung 10: rung 09's scales in the stage on 128 x 192 tiles with the step-by-step walk (one partial
// set) (block scales with M % 4 == 0 and s_A 16-byte aligned; anything else: rung 09).
void fp8_gemm_10_wide_scales_in_stage(const Fp8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache);

// Rung 11: rung 09's kernel or rung 10's, whichever tile width the launch estimates fills the
// persistent waves better (rung 05's count) (block scales as rung 09 takes them; anything else: rung 09).
void fp8_gemm_11_scales_in_stage_per_shape(const Fp8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache);

// Rung 12: rung 11 with the last wave's wide tiles split along K where that wave would leave half
// the grid or more idle (the grouped GEMM's plan_grouped_split_last_wave). `workspace`: the grouped
// GEMM's kind of split workspace (grouped_gemm_args.hpp), grouped_split_workspace_vectors(sm_count)
// float4 slots and grouped_split_workspace_counters(sm_count) counters, zero before the first launch
// (every launch leaves them at zero); one launch at a time per workspace.
void fp8_gemm_12_split_last_wave(const Fp8GemmArgs& args, const GroupedSplitWorkspace& workspace,
                                 cudaStream_t stream, HopperLaunchCache& cache);

// The activations' side of block scaling: X [M, K] bf16 -> Q [M, K] e4m3 and s_A [ceil(K/128), M]
// (the layout above), per 1 x 128 piece of a row: s = max |x| / 448 (the largest finite e4m3), or
// 1 for a piece of zeros, and Q = x / s rounded to nearest e4m3. Memory-bound; K % 16 == 0.
struct Fp8QuantizeArgs {
  int m = 0, k = 0;
  const bf16* x = nullptr;  // [M, K]
  fp8e4m3* q = nullptr;     // [M, K]
  float* scales = nullptr;  // [ceil(K / 128), M]
};
inline constexpr float kE4m3Max = 448.f;

// What the quantize's launch checks before any CUDA call (src/fp8_gemm_op.cpp): M, K >= 1,
// K % 16 == 0 (16-byte loads of x), at most 2^31 - 1 values (32-bit indexing), x, Q and the scales
// present, x 16-byte and Q 8-byte aligned (its loads and stores), the scales 4-byte. kc::Error
// naming the rule.
void check_fp8_quantize_args(const Fp8QuantizeArgs& args);

// Rung 01: half a warp per 1 x 128 piece, 16-byte loads of x, a max over 16 lanes by shuffles,
// 8-byte stores of Q (sm_80 and newer).
void fp8_quantize_01_half_warp_per_block(const Fp8QuantizeArgs& args, cudaStream_t stream);

// What the negative controls get wrong on purpose (tests/negative_controls): the same kernel with
// one flaw each. Not a rung.
enum class Fp8Flaw {
  none,
  no_promotion,       // the tensor cores sum all of K: no FP32 promotion per K step
  scale_twice,        // block scaling: the A scale applied twice
  wrong_scale_block,  // block scaling: K block kb uses the scales of block kb + 1 (the last its own)
  window_not_restarted,  // rung 04, one scale per tensor: each promotion window's sum starts from the
                         // last window's instead of zero, so earlier windows are promoted again
  split_piece_added_twice,  // rung 12's kernel, block scaling: the consumer half that adds a split
                            // tile's K pieces adds piece 0 twice (needs `workspace`, rung 12's)
  neighbours_weight_scales,  // the FP8 grouped GEMM (fp8_grouped_gemm_args.hpp): expert g's products
                             // take expert g + 1's scales of B (the last expert its own)
};
void fp8_gemm_01_with_flaw(const Fp8GemmArgs& args, Fp8Flaw flaw, cudaStream_t stream, HopperLaunchCache& cache,
                           const GroupedSplitWorkspace* workspace = nullptr);

}  // namespace kc::stage3
