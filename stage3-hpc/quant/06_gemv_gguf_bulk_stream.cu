// Rung 06 of the GGUF GEMV — the weights streamed into shared memory by the copy engine: bytes in
// flight that hold no registers.
//
// Idea: rung 05 does few instructions a weight, yet profiled on the H200 (ncu; the stage-3 README
// has the figures) its schedulers issue on about a third of the cycles and its warps spend most of
// their time waiting for loads (long scoreboard on L1TEX). Each warp keeps one chunk of its tile in
// flight (the next chunk's quants and scales, in registers), and it reads its 16 bytes of x inside
// the block loop, right before the product that needs them. A decode GEMV has nothing but the
// stream of weights to hide the DRAM latency behind, so what sets its speed is how many bytes are
// on their way at any moment (Little's law: about the bandwidth times the loaded latency, tens of
// kilobytes an SM), and every byte a register holds in flight is a byte that limits how many
// warps fit.
//
// What changed from rung 05: the loads. Each CTA (one tile of 16 output columns, as in rung 05)
// gets a ninth warp, the producer: one of its lanes asks the copy engine (cp.async.bulk, no tensor
// map: the tile's chunks are already contiguous in layout=3) for a stage at a time — the next 8
// chunks of quants, their scales, and the x slice they meet (1024 k of each of the M rows) — into
// a ring of 4 stages in shared memory, each completing on an mbarrier (full); the 8 consumer warps
// read their chunk of a stage with LDS.128 and release the stage on a second mbarrier (empty) when
// done. Up to 4 stages (about 12 KB each for q4_1 at M = 1) are in flight per CTA and cost no
// registers; x and the scales come from shared memory too, so nothing in the block loop waits on
// global memory. The arithmetic is rung 05's (gemv_gguf_mma.cuh: the nibbles to bf16 pairs, the
// products with x and with ones, the scales in FP32), and each consumer warp takes the chunks rung
// 05's warp of the same index takes, in the same order, and the warps' sums meet in the same order:
// rung 06 writes the same bits as rung 05 (a GPU test holds it to that). At M = 1 both rungs run an
// instance that leaves out the FFMAs of the x rows a decode step of one token does not have (half
// of them: gemv_gguf_mma.cuh's kOneRow).
//
// Expected limiter: the DRAM stream on projections of megabytes; the launch, the ring's first fill
// and the drain on small ones. A grid of more tiles than fit at once keeps its bytes in flight in
// the tail too, since a CTA's ring does not depend on how many warps are resident. The x slices
// grow with M (2 KB a row a stage): at 16 rows a stage is about 42 KB and one CTA fills an SM's
// shared memory, so kc::stage3::quantized_gemv runs rung 05 above M = 8.
//
// SASS to look for (sm_90a): UBLKCP.S.G (the bulk copies) and SYNCS.* (the mbarriers) in the
// producer; LDS.128 for quants, scales and x and HMMA.16816.F32.BF16 in the consumers' loop; no
// LDG at all, no LDL/STL. The copy engine is Hopper's: the sm_80 pass compiles an empty kernel, the
// launch refuses a build without sm_90a code, and kc::stage3::quantized_gemv runs rung 05 there.
//
// The kernel is quant/gemv_bulk_stream_frame.cuh's, which the int4 GEMV's rung 02 shares with its
// own chunks; this file holds the Format of the GGUF blocks and the rung's entry points.
//
// Run just this rung: kc-bench --filter stage3/gemv_gguf/0[56] --param layout=3 --param ggml_type=3
#include <cuda_bf16.h>

#include <cstdint>

#include "arch/sm90/sm90a.hpp"
#include "kc/common/device.hpp"
#include "kc/common/error.hpp"
#include "kc/stage3/gemm.hpp"
#include "kc/stage3/gemv_gguf_args.hpp"
#include "quant/gemv_bulk_stream_frame.cuh"

namespace kc::stage3 {
namespace {

// The frame's Format for GGUF blocks of kType: rung 05's chunk (gemv_gguf_mma.cuh) read from the
// stage and multiplied as rung 05 multiplies it.
template <GgufBlockType kType>
struct GgufStageChunks {
  static constexpr int kQuants = gguf_mma::ChunkBytes<kType>::kQuants;
  static constexpr int kScales = gguf_mma::ChunkBytes<kType>::kScales;
  static __host__ __device__ constexpr int chunks(int k_len) { return (k_len / kGgufBlockWeights + 3) / 4; }
#if KC_STAGE3_SM90A
  template <int kRowGroups, bool kOneRow, bool kSwapped, class LoadX>
  static __device__ __forceinline__ void multiply_stage(const std::uint8_t* stage, int warp, int lane, int, int chunk,
                                                        int k_blocks, const bool (&row_valid)[kRowGroups],
                                                        LoadX load_x, float (&acc)[kRowGroups][4]) {
    gguf_mma::weights_as_a_stage_chunk<kType, kRowGroups, kOneRow, kSwapped, kConsumerWarps>(
        stage, warp, lane, chunk, k_blocks, row_valid, load_x, acc);
  }
#endif
};

template <GgufBlockType kType, int kRowGroups, bool kOneRow, bool kSwapped>
void launch_instance(const GgufGemvArgs& a, cudaStream_t stream) {
  require(gemv_gguf_06_runs_here(),
          "gemv_gguf rung 06 (bulk stream) needs sm_90a code (the copy engine's cp.async.bulk) and a Hopper GPU; "
          "this build or GPU has none: run rung 05, as kc::stage3::quantized_gemv does");
  launch_bulk_stream<GgufStageChunks<kType>, kRowGroups, kOneRow, kSwapped>(a.m, a.n, a.k, a.x, a.quants, a.scales,
                                                                           a.y, stream);
}

template <bool kSwapped>
void launch(const GgufGemvArgs& a, cudaStream_t stream) {
  gguf_mma::launch_weights_as_a_rung(a, "bulk stream", [&](auto type, auto row_groups, auto one_row) {
    launch_instance<decltype(type)::value, decltype(row_groups)::value, decltype(one_row)::value, kSwapped>(a, stream);
  });
}

}  // namespace

void gemv_gguf_06_bulk_stream(const GgufGemvArgs& args, cudaStream_t stream) { launch<false>(args, stream); }

void gemv_gguf_06_swapped_nibbles(const GgufGemvArgs& args, cudaStream_t stream) { launch<true>(args, stream); }

// The rule the Hopper attention and GEMM entries use: compute capability 9.0 and a build with
// sm_90a code (on any other GPU, or in an sm_80-only build, the kernel is empty).
bool gemv_gguf_06_runs_here() {
  static const bool runs = has_gpu() && [] {
    int device = 0;
    KC_CUDA_CHECK(cudaGetDevice(&device));
    return runs_hopper_rungs(device);
  }();
  return runs;
}

}  // namespace kc::stage3
