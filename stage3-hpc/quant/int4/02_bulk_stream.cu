// Rung 02 of the int4 GEMV — rung 01's arithmetic with the weights streamed into shared memory by
// the copy engine (Hopper).
//
// Idea: the GGUF GEMV learned it at its rung 06 (quant/06_gemv_gguf_bulk_stream.cu, whose header
// has the argument): a decode GEMV has nothing but the weight stream to hide DRAM latency behind,
// so what sets its speed is how many bytes are on their way at any moment, and a byte in flight
// that a register holds limits how many warps fit. Rung 01 keeps one chunk a warp in flight, in
// registers. Here a ninth warp, the producer, has one lane ask the copy engine (cp.async.bulk: the
// prepared layout is already contiguous per tile, no tensor map needed) for a stage at a time —
// the next 8 chunks of quants, their scale entries, and the slice of x they meet (1024 k of each of
// the M rows) — into a ring of 4 stages, each completing on an mbarrier (full); the 8 consumer
// warps read their chunk with LDS.128 (LDS.64 for the scale entries at G >= 128) and release the
// stage on a second mbarrier (empty).
//
// What changed from rung 01: the loads only. Consumer warp w takes the chunks rung 01's warp w
// takes, in the same order, through the same arithmetic (gemv_int4_groups.cuh), and the warps'
// sums meet in the same order, so rung 02 writes rung 01's bits (a GPU test holds it to that).
// A stage is 8 x (1024 + 8 E x 4) bytes of weights (E scale entries a row group: 2 at G >= 128,
// so 10.5 KB) plus M x 2 KB of x.
//
// Expected limiter: the DRAM stream on projections of megabytes; the launch, the ring's first fill
// and the drain on small ones.
//
// SASS to look for (sm_90a): UBLKCP.S.G and SYNCS.* in the producer; LDS.128 and
// HMMA.16816.F32.BF16 in the consumers' loop; no LDG, no LDL/STL. The sm_80 pass compiles an empty
// kernel and the launch refuses to run it.
//
// The kernel is quant/gemv_bulk_stream_frame.cuh's (the GGUF rung 06's, with this rung's chunks as
// its Format).
//
// Run just this rung: kc-bench --filter stage3/gemv_int4/02_bulk_stream
#include <cuda_bf16.h>

#include <cstdint>

#include "arch/sm90/sm90a.hpp"
#include "kc/common/error.hpp"
#include "kc/stage3/gemv_gguf_args.hpp"
#include "kc/stage3/gemv_int4_args.hpp"
#include "quant/gemv_bulk_stream_frame.cuh"
#include "quant/int4/gemv_int4_groups.cuh"

namespace kc::stage3 {
namespace {

// The frame's Format for 4-bit groups of kBlocksPerScale blocks: a chunk is 32 lanes x 32 bytes of
// quants and 8 row groups x E scale entries of 4 bytes, multiplied as rung 01 multiplies it (rows
// past M reading zeros of x).
template <int kBlocksPerScale>
struct Int4StageChunks {
  static constexpr int kQuants = kInt4ChunkQuantBytes;
  static constexpr int kScales = int4_groups::kChunkScaleBytes<kBlocksPerScale>;
  static __host__ __device__ constexpr int chunks(int k_len) {
    return (k_len + kInt4ChunkWeights - 1) / kInt4ChunkWeights;
  }
#if KC_STAGE3_SM90A
  template <int kRowGroups, bool kOneRow, bool, class LoadX>
  static __device__ __forceinline__ void multiply_stage(const std::uint8_t* stage, int warp, int lane, int group,
                                                        int chunk, int k_blocks, const bool (&row_valid)[kRowGroups],
                                                        LoadX load_x, float (&acc)[kRowGroups][4]) {
    const auto lane_chunk = int4_groups::read_stage_chunk<kBlocksPerScale, kConsumerWarps>(stage, warp, lane, group);
    int4_groups::chunk_product<kBlocksPerScale, kRowGroups, kOneRow, Int4Flaw::none>(
        lane_chunk.words, lane_chunk.entries, chunk, k_blocks,
        [&](int r, int j, int block) { return row_valid[r] ? load_x(r, j, block) : make_uint4(0, 0, 0, 0); }, acc);
  }
#endif
};

template <int kBlocksPerScale, int kRowGroups, bool kOneRow>
void launch_instance(const Int4GemvArgs& a, cudaStream_t stream) {
  launch_bulk_stream<Int4StageChunks<kBlocksPerScale>, kRowGroups, kOneRow, false>(a.m, a.n, a.k, a.x, a.quants,
                                                                                   a.scales, a.y, stream);
}


}  // namespace

void gemv_int4_02_bulk_stream(const Int4GemvArgs& a, cudaStream_t stream) {
  int4_groups::check_args(a, "rung 02");
  require(gemv_gguf_06_runs_here(),
          "int4 GEMV rung 02 (bulk stream) needs sm_90a code (the copy engine's cp.async.bulk) and a Hopper GPU; "
          "this build or GPU has none: run rung 01");
  // The instance for M as rung 01 chooses it (they must match to write the same bits).
  int4_groups::dispatch_blocks_per_scale(a.group_size, [&](auto blocks_per_scale) {
    gguf_mma::dispatch_row_groups(a.m, [&](auto row_groups, auto one_row) {
      launch_instance<decltype(blocks_per_scale)::value, decltype(row_groups)::value, decltype(one_row)::value>(
          a, stream);
    });
  });
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kc::stage3
