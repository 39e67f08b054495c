// FP8 quantize rung 01 — bf16 activations to e4m3 with one scale per 1 x 128 piece of a row, half a
// warp per piece (sm_80 and newer).
//
// Idea: before an FP8 GEMM with block scales (fp8_gemm, scaling=1) the activations must become e4m3
// values and their scales: per 128 values of a row, s = max |x| / 448 and q = x / s, so the piece's
// largest value lands on e4m3's largest finite value and nothing overflows. It reads 2 bytes and
// writes 1 per value: memory-bound, judged against a copy of the same bytes. A piece is 256 bytes of
// bf16, which 16 lanes read with one 16-byte load each; the max of the 16 partial maxima takes four
// shuffles (xor 8, 4, 2, 1, staying inside the half-warp), and each lane converts its 8 values with
// four paired conversions (__nv_cvt_float2_to_fp8x2, F2FP) and writes them with one 8-byte store.
// Lane 0 of the half writes the scale. A grid-stride loop walks the pieces, rows outermost.
//
// What to look for: LDG.E.128 (x), SHFL.BFLY (the max), four F2FP.SATFINITE.E4M3 on sm_90 (the
// conversions; sm_80 has no FP8 conversion instruction and emulates them), STG.E.64 (Q); no shared
// memory, no barrier.
// Expected limiter: DRAM bandwidth (3 bytes a value, plus 4 per 128 values for the scales).
//
// Run just this rung:  kc-bench --filter stage3/fp8_quantize/01
#include "kc/common/error.hpp"
#include "kc/stage3/fp8_gemm_args.hpp"
#include "quantize_piece.cuh"

namespace kc::stage3 {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) fp8_quantize_kernel(Fp8QuantizeArgs args) {
  const PieceWalk walk = piece_walk(args);
  // Every lane of a half-warp runs the same trips: the shuffles need all 16.
  for (int piece = walk.first; piece < walk.pieces; piece += walk.step)
    quantize_piece_lane(args, load_piece_lane(args, piece, walk.k_blocks, walk.lane_in_piece), walk.lane_in_piece,
                        walk.half_mask);
}

}  // namespace

void fp8_quantize_01_half_warp_per_block(const Fp8QuantizeArgs& args, cudaStream_t stream) {
  check_quantize_args(args);
  const long long pieces = static_cast<long long>(args.m) * fp8_k_blocks(args.k);
  const long long blocks = (pieces * kQuantizeLanesPerPiece + kThreads - 1) / kThreads;
  constexpr long long kMaxBlocks = 8192;  // enough to fill any GPU; the loop takes the rest
  const int grid = static_cast<int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
  fp8_quantize_kernel<<<grid, kThreads, 0, stream>>>(args);
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kc::stage3
