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
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstddef>
#include <cstdint>

#include "kc/common/error.hpp"
#include "kc/stage3/fp8_gemm_args.hpp"

namespace kc::stage3 {
namespace {

constexpr int kQuantizeLanesPerPiece = 16;
constexpr int kQuantizeValuesPerLane = kFp8ScaleBlock / kQuantizeLanesPerPiece;  // 8 bf16: 16 bytes

// Where this lane's 8 values of piece `piece` (row-major over [M, ceil(K / 128)]; fewer than 2^31
// pieces, check_fp8_quantize_args) lie, and its 16 bytes of x, loaded (zeros where the lane lies past
// K: K % 16 == 0, so a lane's 8 values are all inside or all out).
struct PieceLane {
  int row, kb;
  bool inside;
  std::size_t offset;  // of the lane's first value in x and q
  uint4 raw;
};

__device__ __forceinline__ PieceLane load_piece_lane(const Fp8QuantizeArgs& args, int piece, int k_blocks,
                                                     int lane_in_piece) {
  PieceLane lane;
  lane.row = static_cast<int>(piece / k_blocks);
  lane.kb = static_cast<int>(piece % k_blocks);
  const int col = lane.kb * kFp8ScaleBlock + lane_in_piece * kQuantizeValuesPerLane;
  lane.inside = col < args.k;
  lane.offset = static_cast<std::size_t>(lane.row) * args.k + col;
  lane.raw = lane.inside ? __ldg(reinterpret_cast<const uint4*>(args.x + lane.offset)) : make_uint4(0, 0, 0, 0);
  return lane;
}

// The rest of the piece, once its bytes are in: the max |x| of the 16 lanes (four shuffles inside
// the half-warp `half_mask`), the scale, the 8 values converted in pairs (F2FP) and stored as one
// 8-byte store, and the scale written by lane 0 of the half.
__device__ __forceinline__ void quantize_piece_lane(const Fp8QuantizeArgs& args, const PieceLane& lane,
                                                    int lane_in_piece, unsigned half_mask) {
  float v[kQuantizeValuesPerLane];
  const auto* pairs = reinterpret_cast<const __nv_bfloat162*>(&lane.raw);
#pragma unroll
  for (int i = 0; i < kQuantizeValuesPerLane / 2; ++i) {
    const float2 f = __bfloat1622float2(pairs[i]);
    v[2 * i] = f.x;
    v[2 * i + 1] = f.y;
  }
  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < kQuantizeValuesPerLane; ++i) amax = fmaxf(amax, fabsf(v[i]));
#pragma unroll
  for (int offset_lanes = kQuantizeLanesPerPiece / 2; offset_lanes > 0; offset_lanes /= 2)
    amax = fmaxf(amax, __shfl_xor_sync(half_mask, amax, offset_lanes));
  // fmaxf drops NaN: a piece holding a NaN gets the scale of its other values, and the NaN
  // itself converts to e4m3's NaN below.
  const float scale = amax > 0.f ? amax / kE4m3Max : 1.f;
  // A piece whose largest |x| is below 448 x 2^-126 has a subnormal scale, whose reciprocal
  // overflows FP32 (every value would saturate to +-448): there the values and the scale are first
  // multiplied by 2^64, exactly (powers of two, and a subnormal times 2^64 is normal), so that
  // x / s = (2^64 x) (1 / (2^64 s)). The same for every lane of the piece; other pieces as before.
  float inverse;
  if (scale < 0x1p-126f) {
#pragma unroll
    for (int i = 0; i < kQuantizeValuesPerLane; ++i) v[i] *= 0x1p64f;
    inverse = 1.f / (scale * 0x1p64f);
  } else {
    inverse = 1.f / scale;
  }
  if (lane.inside) {
    std::uint16_t packed[kQuantizeValuesPerLane / 2];
#pragma unroll
    for (int i = 0; i < kQuantizeValuesPerLane / 2; ++i)
      packed[i] = __nv_cvt_float2_to_fp8x2(make_float2(v[2 * i] * inverse, v[2 * i + 1] * inverse), __NV_SATFINITE,
                                           __NV_E4M3);
    uint2 out;
    out.x = packed[0] | (static_cast<std::uint32_t>(packed[1]) << 16);
    out.y = packed[2] | (static_cast<std::uint32_t>(packed[3]) << 16);
    *reinterpret_cast<uint2*>(reinterpret_cast<std::uint8_t*>(args.q) + lane.offset) = out;
  }
  if (lane_in_piece == 0) args.scales[static_cast<std::size_t>(lane.kb) * args.m + lane.row] = scale;
}

// A thread's walk over the pieces: its half-warp's first piece and the stride of the grid (both in
// pieces: 16 lanes a piece), its lane in the piece, and the mask of its half-warp's 16 lanes (the
// two halves of a warp hold different pieces and may run different numbers of trips: each
// shuffles only within its own 16 lanes).
struct PieceWalk {
  int k_blocks, pieces;
  int first, step;
  int lane_in_piece;
  unsigned half_mask;
};

__device__ __forceinline__ PieceWalk piece_walk(const Fp8QuantizeArgs& args) {
  PieceWalk walk;
  walk.k_blocks = fp8_k_blocks(args.k);
  walk.pieces = args.m * walk.k_blocks;
  walk.first = static_cast<int>((blockIdx.x * blockDim.x + threadIdx.x) / kQuantizeLanesPerPiece);
  walk.step = static_cast<int>(gridDim.x * blockDim.x / kQuantizeLanesPerPiece);
  walk.lane_in_piece = static_cast<int>(threadIdx.x) % kQuantizeLanesPerPiece;
  walk.half_mask = 0xffffu << (static_cast<int>(threadIdx.x) % 32 / kQuantizeLanesPerPiece * kQuantizeLanesPerPiece);
  return walk;
}

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
  check_fp8_quantize_args(args);
  const long long pieces = static_cast<long long>(args.m) * fp8_k_blocks(args.k);
  const long long blocks = (pieces * kQuantizeLanesPerPiece + kThreads - 1) / kThreads;
  constexpr long long kMaxBlocks = 8192;  // enough to fill any GPU; the loop takes the rest
  const int grid = static_cast<int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
  fp8_quantize_kernel<<<grid, kThreads, 0, stream>>>(args);
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kc::stage3
