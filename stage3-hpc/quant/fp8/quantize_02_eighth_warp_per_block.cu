// FP8 quantize rung 02 — bf16 activations to e4m3 with one scale per 1 x 128 piece of a row, an
// eighth of a warp per piece and no integer division (sm_80 and newer).
//
// Idea: rung 01 is judged against a copy and issues more instructions per value than the copy's
// pace leaves time for. Its SASS (cuobjdump -sass) shows where they go, per lane and 8 values:
// the piece index split into row and K block (a 64-bit division, or its 32-bit fast path: ~25
// instructions), the half-warp shuffles' divergence checks (a mask of 16 lanes makes the compiler
// test which lanes take part), the scale's IEEE division and its reciprocal, computed again by
// each of the 16 lanes of the piece — all for 8 values. This rung spends them on twice the values
// and removes the division:
//   - eight lanes per piece, 16 values a lane (two 16-byte loads): the per-piece work (three
//     shuffles, the divisions, the scale's store) is spread over twice the values;
//   - a CTA walks whole rows (row = blockIdx.x, += gridDim.x) and, in a row, the warp's four
//     pieces a trip (K block = 32 per trip apart): the indices are additions, never divisions;
//   - every lane of a warp runs the same trips (a group past the row's last piece computes on
//     zeros and stores nothing), so the shuffles use the full mask and need no divergence checks.
// The numbers are rung 01's: s = max |x| / 448 (1 for a piece of zeros), q = e4m3(x x (1 / s))
// with saturation, the scales [ceil(K / 128), M].
//
// What to look for: two LDG.E.128 a lane, FMNMX, SHFL.BFLY (three), eight
// F2FP.SATFINITE.E4M3.F32.PACK_AB_MERGE_C on sm_90, one STG.E.128 of Q a lane; no integer
// division sequence (no I2F.U32.RP / MUFU.RCP pair for an index), no shared memory or barrier.
// Expected limiter: DRAM bandwidth (3 bytes a value, plus 4 per 128 values for the scales).
//
// Run just this rung:  kc-bench --filter stage3/fp8_quantize/02
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "kc/common/device.hpp"
#include "kc/common/error.hpp"
#include "kc/core/vector_io.hpp"
#include "kc/stage3/fp8_gemm_args.hpp"

namespace kc::stage3 {
namespace {

constexpr int kLanesPerPiece = 8;
constexpr int kValuesPerLane = kFp8ScaleBlock / kLanesPerPiece;  // 16 bf16: two 16-byte loads
constexpr int kValuesPerLoad = core::kVectorBytes / 2;  // 8 bf16
constexpr int kThreads = 256;
constexpr int kPiecesPerTrip = kThreads / kLanesPerPiece;  // 32 pieces of a row a CTA trip
constexpr int kPiecesPerWarp = 32 / kLanesPerPiece;
constexpr unsigned kFullWarp = 0xffffffffu;

__global__ void __launch_bounds__(kThreads) fp8_quantize_kernel(Fp8QuantizeArgs args) {
  const int k_blocks = fp8_k_blocks(args.k);
  const int lane_in_piece = static_cast<int>(threadIdx.x) % kLanesPerPiece;
  const int slot = static_cast<int>(threadIdx.x) / kLanesPerPiece;  // this group's piece of a trip
  const int warp_first_slot = slot / kPiecesPerWarp * kPiecesPerWarp;
  for (int row = static_cast<int>(blockIdx.x); row < args.m; row += static_cast<int>(gridDim.x)) {
    const bf16* x_row = args.x + static_cast<std::size_t>(row) * args.k;
    std::uint8_t* q_row = reinterpret_cast<std::uint8_t*>(args.q) + static_cast<std::size_t>(row) * args.k;
    // The warp's trips: while its first piece is in the row (the same count for all 32 lanes).
    for (int warp_kb = warp_first_slot; warp_kb < k_blocks; warp_kb += kPiecesPerTrip) {
      const int kb = warp_kb + slot - warp_first_slot;
      const int col = kb * kFp8ScaleBlock + lane_in_piece * kValuesPerLane;
      // K % 16 == 0 and col % 16 == 0: a lane's 16 values are all inside the row or all out.
      const bool inside = kb < k_blocks && col < args.k;
      float v[kValuesPerLane] = {};
      if (inside) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float part[kValuesPerLoad];
          core::load_floats(x_row + col + h * kValuesPerLoad, part);
#pragma unroll
          for (int i = 0; i < kValuesPerLoad; ++i) v[h * kValuesPerLoad + i] = part[i];
        }
      }
      float amax[2] = {0.f, 0.f};  // two chains
#pragma unroll
      for (int i = 0; i < kValuesPerLane; ++i) amax[i % 2] = fmaxf(amax[i % 2], fabsf(v[i]));
      float piece_max = fmaxf(amax[0], amax[1]);
#pragma unroll
      for (int offset = kLanesPerPiece / 2; offset > 0; offset /= 2)
        piece_max = fmaxf(piece_max, __shfl_xor_sync(kFullWarp, piece_max, offset));
      // fmaxf drops NaN: a piece holding a NaN gets the scale of its other values, and the NaN
      // itself converts to e4m3's NaN below (as in rung 01).
      const float scale = piece_max > 0.f ? piece_max / kE4m3Max : 1.f;
      const float inverse = 1.f / scale;
      if (inside) {  // no shuffle follows: idle lanes may skip the rest
        std::uint32_t words[kValuesPerLane / 4];
#pragma unroll
        for (int w = 0; w < kValuesPerLane / 4; ++w) {
          const float* f = v + 4 * w;
          const std::uint32_t low =
              __nv_cvt_float2_to_fp8x2(make_float2(f[0] * inverse, f[1] * inverse), __NV_SATFINITE, __NV_E4M3);
          const std::uint32_t high =
              __nv_cvt_float2_to_fp8x2(make_float2(f[2] * inverse, f[3] * inverse), __NV_SATFINITE, __NV_E4M3);
          words[w] = low | (high << 16);
        }
        *reinterpret_cast<uint4*>(q_row + col) = make_uint4(words[0], words[1], words[2], words[3]);
      }
      if (kb < k_blocks && lane_in_piece == 0) args.scales[static_cast<std::size_t>(kb) * args.m + row] = scale;
    }
  }
}

}  // namespace

void fp8_quantize_02_eighth_warp_per_block(const Fp8QuantizeArgs& args, cudaStream_t stream) {
  require(args.k % kFp8KMultiple == 0, "FP8 quantize: K must be a multiple of {} (got {}): 16-byte loads of x",
          kFp8KMultiple, args.k);
  // Rows across the CTAs; eight CTAs an SM fill it (256 threads each), the loop takes the rest.
  const long long most = 8LL * current_device_sm_count();
  const int grid = static_cast<int>(args.m < most ? args.m : most);
  if (grid == 0) return;
  fp8_quantize_kernel<<<grid, kThreads, 0, stream>>>(args);
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kc::stage3
