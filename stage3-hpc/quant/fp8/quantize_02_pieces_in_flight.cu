// FP8 quantize rung 02 — rung 01 with four pieces in flight per half-warp: all their loads issued
// before the first piece is reduced (sm_80 and newer).
//
// Idea: a memory-bound kernel runs at the bandwidth roof only if enough bytes are in flight to cover
// the latency of DRAM: by Little's law, bandwidth x latency — several megabytes across an H200,
// tens of kilobytes per SM. Rung 01 gives each thread one 16-byte load per trip and then waits for
// it: the max, the shuffles, the conversions and the stores all depend on it, so a full SM of 2048
// threads has at most 32 KiB of x on the way, and a thread's next load starts only after its
// stores. Issuing the loads of four pieces first (four independent LDG.E.128 a thread, 64 KiB an SM
// in flight) and then finishing the pieces one by one keeps four times the bytes on the way, with
// the same arithmetic per value. (Halving the arithmetic per value instead did not help rung 01:
// stage-3 README.)
//
// What changed from rung 01: the trip of a half-warp covers four pieces, `step` apart as rung 01's
// consecutive trips were — loads first (load_piece_lane, quant/fp8/quantize_piece.cuh), then the
// four pieces' max, scale, conversions and stores (quantize_piece_lane); a piece past the last is
// skipped by the whole half-warp. The grid is a quarter of rung 01's for the same pieces.
//
// What to look for: four LDG.E.128 before the first SHFL.BFLY of a trip, then rung 01's sequence
// (SHFL.BFLY, F2FP.SATFINITE.E4M3 on sm_90, STG.E.64) four times; no shared memory, no barrier.
// Expected limiter: DRAM bandwidth, as rung 01's.
//
// Run just this rung:  kc-bench --filter stage3/fp8_quantize/02
#include "kc/common/error.hpp"
#include "kc/stage3/fp8_gemm_args.hpp"
#include "quantize_piece.cuh"

namespace kc::stage3 {
namespace {

constexpr int kThreads = 256;

template <int kPiecesInFlight>
__global__ void __launch_bounds__(kThreads) fp8_quantize_in_flight_kernel(Fp8QuantizeArgs args) {
  const PieceWalk walk = piece_walk(args);
  const int step = walk.step;
  // Every lane of a half-warp runs the same trips and skips the same pieces: the shuffles need
  // all 16.
  for (int base = walk.first; base < walk.pieces; base += kPiecesInFlight * step) {
    PieceLane lanes[kPiecesInFlight];
#pragma unroll
    for (int j = 0; j < kPiecesInFlight; ++j)
      if (base + j * step < walk.pieces)
        lanes[j] = load_piece_lane(args, base + j * step, walk.k_blocks, walk.lane_in_piece);
#pragma unroll
    for (int j = 0; j < kPiecesInFlight; ++j)
      if (base + j * step < walk.pieces) quantize_piece_lane(args, lanes[j], walk.lane_in_piece, walk.half_mask);
  }
}

template <int kPiecesInFlight>
void launch_in_flight(const Fp8QuantizeArgs& args, cudaStream_t stream) {
  check_quantize_args(args);
  const long long pieces = static_cast<long long>(args.m) * fp8_k_blocks(args.k);
  const long long threads = (pieces + kPiecesInFlight - 1) / kPiecesInFlight * kQuantizeLanesPerPiece;
  const long long blocks = (threads + kThreads - 1) / kThreads;
  constexpr long long kMaxBlocks = 8192;  // enough to fill any GPU; the loop takes the rest
  const int grid = static_cast<int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
  fp8_quantize_in_flight_kernel<kPiecesInFlight><<<grid, kThreads, 0, stream>>>(args);
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void fp8_quantize_02_pieces_in_flight(const Fp8QuantizeArgs& args, cudaStream_t stream) {
  launch_in_flight<4>(args, stream);
}

}  // namespace kc::stage3
