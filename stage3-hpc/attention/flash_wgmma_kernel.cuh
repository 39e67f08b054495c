// flash_wgmma_kernel.cuh — the kernel of the Hopper attention rungs 06 and 07: TMA fills a ring of
// K/V tiles, a producer warp issues the copies, two consumer warpgroups run S = Q K^T and
// O += P V on WGMMA with the online softmax in between. Rung 06 runs each consumer's steps one
// after the other (FlashWgmmaConsumer::run_serial), rung 07 overlaps them (run_overlapped), rung 08
// runs rung 07's steps in persistent CTAs (flash_wgmma_persistent_kernel). See the header
// comments of 06_tma_wgmma.cu, 07_fa3_overlap.cu and 08_persistent.cu.
//
// A CTA owns 128 query rows of one (batch, query head): consumer warpgroup c (warpgroups 1 and 2)
// the 64 rows 64c .. 64c + 63, warpgroup 0 the copies (one thread). Rung 09 runs the same kernel
// with three consumer warpgroups at D = 64 (192 query rows a CTA; FlashWgmmaShape's kConsumers). Shared memory, every tile
// 1024-byte aligned and written by TMA with the 128-byte swizzle, in boxes of 64 columns of D
// (128 bytes a row), D/64 boxes side by side:
//   Q          128 rows x D, loaded once
//   K[stage]   128 keys x D, kStages of them
//   V[stage]   128 keys x D
//   barriers   q_full; k_full[stage], v_full[stage] (the producer's arrive.expect_tx + the TMA
//              bytes); empty[stage] (one arrival per consumer warp once its WGMMAs have read
//              the stage); q_empty (rung 08: one arrival per consumer warp once it is done with
//              the Q tile)
// K and V of a stage have separate full barriers so that S = Q K^T can start before V lands.
#pragma once

#include <cuda.h>  // CUtensorMap
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "arch/sm90/mbarrier.cuh"
#include "arch/sm90/sm90a.hpp"
#include "arch/sm90/tma.cuh"
#include "arch/sm90/tma_descriptor.hpp"
#include "arch/sm90/warpgroup.cuh"
#include "arch/sm90/wgmma.cuh"
#include "arch/sm90/wgmma_narrow.cuh"
#include "arch/util.hpp"
#include "attention/fa2_mma.cuh"
#include "attention/flash_common.cuh"
#include "attention/flash_work_order.hpp"
#include "kc/stage3/attention_args.hpp"

namespace kc::stage3 {

// How a consumer walks its K/V tiles: rung 06 one step after the other (serial); rung 07
// FlashAttention-3's two overlaps, ping-pong between the consumers and S of the next tile under the
// softmax and P V of the previous (overlapped); rung 10 the ping-pong alone (ping_pong), which
// never holds S of one tile and P of another at once.
enum class FlashLoop { serial, overlapped, ping_pong };

template <int kHeadDim_, int kConsumers_ = 2, int kBlockKeys_ = 128>
struct FlashWgmmaShape {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kConsumers = kConsumers_;  // consumer warpgroups
  static constexpr int kWarpgroupRows = 64;   // query rows of a consumer (the M of one WGMMA)
  static constexpr int kBlockRows = kConsumers * kWarpgroupRows;
  static_assert(kBlockRows <= kFlashMaxBlockRows, "attention_forward checks Sq against kFlashMaxBlockRows");
  static constexpr int kBlockKeys = kBlockKeys_;  // keys of a K/V tile (the N of S's WGMMA)
  static_assert(kBlockKeys == 128 || (kBlockKeys == 256 && kHeadDim == 64 && kConsumers_ == 2) ||
                    (kBlockKeys == 176 && kHeadDim == 128 && kConsumers_ == 2),
                "256-key tiles only at D = 64 with two consumers (rung 10), 176-key tiles only at D = 128 with "
                "two (rung 17)");
  static constexpr int kThreads = (kConsumers + 1) * 128;
  static constexpr int kBoxCols = 64;         // 128 bytes: a swizzled TMA box row
  static constexpr int kBoxes = kHeadDim / kBoxCols;
  static constexpr int kBoxRowBytes = 128;
  static constexpr int kQBoxBytes = kBlockRows * kBoxRowBytes;
  static constexpr int kKvBoxBytes = kBlockKeys * kBoxRowBytes;
  static constexpr int kQBytes = kBoxes * kQBoxBytes;
  static constexpr int kKvTileBytes = kBoxes * kKvBoxBytes;  // one K or one V tile
  // Stages of the ring: 3 at D = 128 (224 KiB of tiles), 4 at D = 64 with 128-key tiles, 3 with
  // 256-key tiles (208 KiB), 2 with 176-key tiles at D = 128 (208 KiB: three would not fit).
  static constexpr int kStages = kBlockKeys == 176 ? 2 : kHeadDim == 64 && kBlockKeys == 128 ? 4 : 3;
  static constexpr int kBarriers = 2 + 3 * kStages;  // q_full, k_full, v_full, empty, q_empty
  static constexpr int kSmemBytes = kSmemAlignment + kQBytes + 2 * kStages * kKvTileBytes + 8 * kBarriers;
  static constexpr int kKeyBlocks = kBlockKeys / 8;   // n8 blocks of S per warp row tile
  static constexpr int kKeySlices = kBlockKeys / 16;  // k16 steps of P V
  static constexpr int kDimBlocks = kHeadDim / 8;     // n8 blocks of O
  static constexpr int kDimSteps = kHeadDim / 16;     // k16 steps of Q K^T
  // The register file split between the warpgroups, 128 threads each: 24 + 2 x 240 = 504 or
  // 24 + 3 x 160 = 504 registers a thread, x 128 = 64512 <= 65536.
  static constexpr int kProducerRegisters = 24;
  static constexpr int kConsumerRegisters = kConsumers == 2 ? 240 : 160;
  static_assert(kHeadDim == 64 || kHeadDim == 128, "rung 06 is compiled for D = 64 and 128");
  // Three consumers hold S, P and O of 64 rows in 160 registers a thread only at D = 64.
  static_assert(kConsumers == 2 || (kConsumers == 3 && kHeadDim == 64), "3 consumer warpgroups only at D = 64");
};

// The kernel's parameters: the three tensor maps (Q, K, V as [D, S, H, B]) and the problem.
template <typename T>
struct FlashWgmmaParams {
  CUtensorMap q_map;
  CUtensorMap k_map;
  CUtensorMap v_map;
  AttentionParams<T> args;
};

// Rung 25's parameters: rung 20's and the launch's two work counters (HopperLaunchCache::
// work_counters, one pair per stream: [0] the items handed out past the first one of each CTA, [1]
// the CTAs that have taken their last item; both zero before a launch, and the kernel leaves them
// zero). A type of its own, so that the other persistent rungs keep their parameters (and their
// SASS).
template <typename T>
struct FlashWgmmaDynamicParams : FlashWgmmaParams<T> {
  unsigned* counters = nullptr;
};

#if KC_STAGE3_SM90A

// Where the stages of one CTA live and how a stage's barrier phase follows from a tile index.
template <class Shape>
struct FlashWgmmaSmem {
  std::uint8_t* base;
  __device__ std::uint8_t* q_tile() const { return base; }
  __device__ std::uint8_t* k_tile(int stage) const { return base + Shape::kQBytes + stage * Shape::kKvTileBytes; }
  __device__ std::uint8_t* v_tile(int stage) const {
    return base + Shape::kQBytes + (Shape::kStages + stage) * Shape::kKvTileBytes;
  }
  __device__ std::uint64_t* q_full() const {
    return reinterpret_cast<std::uint64_t*>(base + Shape::kQBytes + 2 * Shape::kStages * Shape::kKvTileBytes);
  }
  __device__ std::uint64_t* k_full(int stage) const { return q_full() + 1 + stage; }
  __device__ std::uint64_t* v_full(int stage) const { return q_full() + 1 + Shape::kStages + stage; }
  __device__ std::uint64_t* empty(int stage) const { return q_full() + 1 + 2 * Shape::kStages + stage; }
  // Rung 08 only: the consumers are done reading the Q tile (one arrival per consumer warp).
  __device__ std::uint64_t* q_empty() const { return q_full() + 1 + 3 * Shape::kStages; }
  static __device__ int stage_of(int tile) { return tile % Shape::kStages; }

  // By one thread, before the CTA's first barrier; q_empty only where rung 08 uses it. A stage is
  // empty once every warp of the `consumers` that read it has arrived (rung 14: only those with
  // query rows; every consumer otherwise).
  template <bool kWithQEmpty>
  __device__ void init_barriers(int consumers = Shape::kConsumers) const {
    sm90::mbarrier_init(q_full(), 1);
    if constexpr (kWithQEmpty) sm90::mbarrier_init(q_empty(), Shape::kConsumers * 4);
    for (int stage = 0; stage < Shape::kStages; ++stage) {
      sm90::mbarrier_init(k_full(stage), 1);
      sm90::mbarrier_init(v_full(stage), 1);
      sm90::mbarrier_init(empty(stage), consumers * 4);
    }
    sm90::fence_barrier_init();
  }

  // The producer's copies (one thread): the Q tile of rows row0.. of (head, batch), and the K and
  // V tiles of keys key0.. of (kv_head, batch) into `stage`, each announced on its full barrier.
  template <typename Params>
  __device__ void load_q(const Params& params, int row0, int head, int batch) const {
    sm90::mbarrier_arrive_expect_tx(q_full(), Shape::kQBytes);
    for (int box = 0; box < Shape::kBoxes; ++box)
      sm90::tma_load_4d(q_tile() + box * Shape::kQBoxBytes, &params.q_map, q_full(), box * Shape::kBoxCols, row0,
                        head, batch);
  }
  template <typename Params>
  __device__ void load_kv(const Params& params, int stage, int key0, int kv_head, int batch) const {
    sm90::mbarrier_arrive_expect_tx(k_full(stage), Shape::kKvTileBytes);
    for (int box = 0; box < Shape::kBoxes; ++box)
      sm90::tma_load_4d(k_tile(stage) + box * Shape::kKvBoxBytes, &params.k_map, k_full(stage),
                        box * Shape::kBoxCols, key0, kv_head, batch);
    sm90::mbarrier_arrive_expect_tx(v_full(stage), Shape::kKvTileBytes);
    for (int box = 0; box < Shape::kBoxes; ++box)
      sm90::tma_load_4d(v_tile(stage) + box * Shape::kKvBoxBytes, &params.v_map, v_full(stage),
                        box * Shape::kBoxCols, key0, kv_head, batch);
  }
  static __device__ std::uint32_t phase_of(int tile) { return static_cast<std::uint32_t>(tile / Shape::kStages) % 2; }
};

// One consumer warpgroup: 64 query rows, their O accumulators and softmax state, and the steps
// of a K/V tile (issue S, softmax, issue P V, release the stage). kDescriptorsAdded (rung 12):
// the WGMMA descriptors of Q, of stage 0's K and of stage 0's V are made once, here, and every
// WGMMA's descriptors are those moved by the operand's offset (sm90::advance_descriptor) instead of
// being built again from its address. kScaleInExponent (rung 13): the softmax folds the scale into
// the exponent's FFMA (softmax_probabilities; the launch passes it only for a positive scale).
// kRowlessConsumersLeave (rung 14): only the first `working` consumers (those with query rows)
// take turns; the others have left the kernel. kLazyRescale (rung 15): a row's exponent base moves
// only when its maximum rises by more than kLazyRescaleLog2 (softmax_probabilities), and a warp
// whose rows all kept theirs skips O's rescale.
template <typename T, class Shape, bool kDescriptorsAdded = false, bool kScaleInExponent = false,
          bool kRowlessConsumersLeave = false, bool kLazyRescale = false, int kFmaExpEvery = 0>
struct FlashWgmmaConsumer {
  FlashWgmmaSmem<Shape> smem;
  const AttentionParams<T>& args;
  int consumer;                 // 0 .. kConsumers - 1: warpgroup 1 + consumer
  int working;                  // kRowlessConsumersLeave only: the consumers with rows (set by the kernel)
  int tiles;                    // K/V tiles of the CTA
  int warp_row0;                // this warp's first query row
  int unmasked_end;             // keys below it are seen by every row of the CTA
  float scale_log2;
  std::uint32_t q_rows;         // this consumer's 64 rows of the Q tile
  int row_ends[2];              // visible ends of this thread's rows lane/4 and lane/4 + 8
  float o[Shape::kDimBlocks][4] = {};
  float s[Shape::kKeyBlocks][4] = {};    // S, then P in FP32 (each tile's first WGMMA overwrites it)
  std::uint32_t p[Shape::kKeySlices][4];  // P rounded to T: the A fragments of P V
  RowState rows[2];
  std::uint64_t q_descriptor0 = 0, k_descriptor0 = 0, v_descriptor0 = 0;  // kDescriptorsAdded only

  __device__ FlashWgmmaConsumer(FlashWgmmaSmem<Shape> smem_, const AttentionParams<T>& args_, int consumer_,
                                int tiles_, int block_row0)
      : smem(smem_), args(args_), consumer(consumer_), tiles(tiles_) {
    const int lane = static_cast<int>(threadIdx.x) % 32;
    warp_row0 = block_row0 + consumer * Shape::kWarpgroupRows + 16 * ((static_cast<int>(threadIdx.x) / 32) % 4);
    for (int h = 0; h < 2; ++h) {
      const int query = warp_row0 + lane / 4 + 8 * h;
      row_ends[h] = query < args.q_len ? visible_key_end(args, query) : 0;
    }
    unmasked_end = visible_key_end(args, block_row0);
    scale_log2 = args.scale * kLog2e;
    q_rows = smem_u32(smem.q_tile()) + consumer * Shape::kWarpgroupRows * Shape::kBoxRowBytes;
    if constexpr (kDescriptorsAdded) {
      // The consumer index read through a shuffle from lane 0: the compiler then knows it is the
      // same in every lane, and keeps Q's descriptor in uniform registers, where WGMMA reads it,
      // instead of moving it there (R2UR) before every WGMMA.
      const int uniform_consumer = __shfl_sync(0xffffffffu, consumer, 0);
      q_descriptor0 = sm90::smem_descriptor_sw128(smem_u32(smem.q_tile()) +
                                                  uniform_consumer * Shape::kWarpgroupRows * Shape::kBoxRowBytes);
      k_descriptor0 = sm90::smem_descriptor_sw128(smem_u32(smem.k_tile(0)));
      v_descriptor0 = sm90::smem_descriptor_sw128_mn_major(smem_u32(smem.v_tile(0)), Shape::kKvBoxBytes);
    }
  }

  __device__ float (&s_flat())[Shape::kKeyBlocks * 4] { return reinterpret_cast<float(&)[Shape::kKeyBlocks * 4]>(s); }
  __device__ float (&o_flat())[Shape::kDimBlocks * 4] { return reinterpret_cast<float(&)[Shape::kDimBlocks * 4]>(o); }
  __device__ std::uint32_t (&p_flat())[Shape::kKeySlices * 4] {
    return reinterpret_cast<std::uint32_t(&)[Shape::kKeySlices * 4]>(p);
  }

  // S = Q K^T for the tile in `stage`, issued and committed (not waited for): D/16 WGMMAs, each 16
  // columns of D further along the swizzled 128-byte box rows (32 bytes a step; the next box
  // after 4 steps); N = 128 keys, or 256 (rung 10), or 176 (rung 17).
  __device__ void issue_scores(int stage) {
    const std::uint32_t keys = smem_u32(smem.k_tile(stage));
    const std::uint64_t k_stage_descriptor =
        sm90::advance_descriptor(k_descriptor0, static_cast<std::uint32_t>(stage) * Shape::kKvTileBytes);
    sm90::wgmma_fence();
#pragma unroll
    for (int step = 0; step < Shape::kDimSteps; ++step) {
      const std::uint32_t q_offset = (step / 4) * Shape::kQBoxBytes + (step % 4) * 32;
      const std::uint32_t k_offset = (step / 4) * Shape::kKvBoxBytes + (step % 4) * 32;
      std::uint64_t q_descriptor, k_descriptor;
      if constexpr (kDescriptorsAdded) {
        q_descriptor = sm90::advance_descriptor(q_descriptor0, q_offset);
        k_descriptor = sm90::advance_descriptor(k_stage_descriptor, k_offset);
      } else {
        q_descriptor = sm90::smem_descriptor_sw128(q_rows + q_offset);
        k_descriptor = sm90::smem_descriptor_sw128(keys + k_offset);
      }
      if constexpr (Shape::kBlockKeys == 256)
        sm90::wgmma_m64n256k16_ss<T>(s_flat(), q_descriptor, k_descriptor, step > 0 ? 1u : 0u);
      else if constexpr (Shape::kBlockKeys == 176)
        sm90::wgmma_m64n176k16_ss<T>(s_flat(), q_descriptor, k_descriptor, step > 0 ? 1u : 0u);
      else
        sm90::wgmma_m64n128k16_ss<T>(s_flat(), q_descriptor, k_descriptor, step > 0 ? 1u : 0u);
    }
    sm90::wgmma_commit_group();
    sm90::fence_accumulators(s_flat());
  }

  // O += P V for the tile in `stage`, issued and committed: P (registers) is the A operand, 16
  // keys a step; V's rows of 16 keys are 2048 bytes apart, its second 64 columns (D = 128) the
  // next box.
  __device__ void issue_pv(int stage) {
    const std::uint32_t values = smem_u32(smem.v_tile(stage));
    const std::uint64_t v_stage_descriptor =
        sm90::advance_descriptor(v_descriptor0, static_cast<std::uint32_t>(stage) * Shape::kKvTileBytes);
    sm90::wgmma_fence();
#pragma unroll
    for (int slice = 0; slice < Shape::kKeySlices; ++slice) {
      const std::uint32_t v_offset = slice * 16 * Shape::kBoxRowBytes;
      const std::uint64_t v_descriptor =
          kDescriptorsAdded ? sm90::advance_descriptor(v_stage_descriptor, v_offset)
                            : sm90::smem_descriptor_sw128_mn_major(values + v_offset, Shape::kKvBoxBytes);
      sm90::wgmma_m64nNk16_rs_transposed_b<T, Shape::kHeadDim>(o_flat(), p[slice], v_descriptor);
    }
    sm90::wgmma_commit_group();
    sm90::fence_accumulators(o_flat());
    sm90::fence_operands(p_flat());
  }

  // The online softmax of the tile's S (the WGMMA accumulator layout is mma.sync's, per warp):
  // S becomes P in FP32; `rescale` the factors O must still be multiplied by.
  __device__ void softmax(int tile, float (&rescale)[2]) {
    const int key0 = tile * Shape::kBlockKeys;
    if (key0 + Shape::kBlockKeys > unmasked_end)
      softmax_probabilities<true, kScaleInExponent, Shape::kKeyBlocks, kLazyRescale, false, kFmaExpEvery>(
          s, rows, row_ends, scale_log2, key0, rescale);
    else
      softmax_probabilities<false, kScaleInExponent, Shape::kKeyBlocks, kLazyRescale, false, kFmaExpEvery>(
          s, rows, row_ends, scale_log2, key0, rescale);
  }

  // O times the rows' rescale factors. Rung 15: not at all where every factor of the warp is 1 (a
  // warp-uniform branch over the multiplies: one for each of O's accumulators, as many as the
  // thread's scores at D = 128).
  __device__ void rescale_o(const float (&rescale)[2]) {
    if constexpr (kLazyRescale)
      rescale_rows_unless_all_one(o, rescale);
    else
      rescale_rows(o, rescale);
  }

  __device__ void round_p() {
#pragma unroll
    for (int slice = 0; slice < Shape::kKeySlices; ++slice) p_fragment<T>(s, slice, p[slice]);
  }

  // This warp is done with the stage (its WGMMAs reading it have completed).
  __device__ void release(int stage) const {
    if (threadIdx.x % 32 == 0) sm90::mbarrier_arrive(smem.empty(stage));
  }

  // The ping-pong's turns (rungs 07-11): a consumer issues its WGMMAs only when the one before it
  // has issued its own (named barrier 1 + c: "consumer c may issue"); with three consumers (rung
  // 09) the turn goes round 0, 1, 2. Consumer 0 goes first: the last consumer arrives once up front
  // (open_turns). Each issue phase waits for the consumer's own turn (wait_turn) and then passes it
  // on (pass_turn), except the last consumer's last pass, which nobody would wait for.
  // Rung 14: the turn goes round the `working` consumers only, and a consumer working alone takes
  // no turns at all.
  static constexpr int kPingPongThreads = 2 * 128;  // the consumer whose turn it is + the one before it
  static constexpr int kLastConsumer = Shape::kConsumers - 1;
  __device__ void open_turns() const {
    if constexpr (kRowlessConsumersLeave) {
      if (working > 1 && consumer == working - 1) sm90::named_barrier_arrive(1, kPingPongThreads);
    } else {
      if (consumer == kLastConsumer) sm90::named_barrier_arrive(1, kPingPongThreads);
    }
  }
  __device__ void wait_turn() const {
    if constexpr (kRowlessConsumersLeave)
      if (working == 1) return;  // working alone: no turns to take
    sm90::named_barrier_sync(1 + consumer, kPingPongThreads);
  }
  __device__ int next_turn() const {  // the next consumer's barrier
    if constexpr (kRowlessConsumersLeave) return consumer == working - 1 ? 1 : consumer + 2;
    if constexpr (Shape::kConsumers == 2) return 2 - consumer;
    return consumer == kLastConsumer ? 1 : consumer + 2;
  }
  __device__ void pass_turn(int next, bool last_phase) const {
    if constexpr (kRowlessConsumersLeave) {
      if (working > 1 && !(last_phase && consumer == working - 1)) sm90::named_barrier_arrive(next, kPingPongThreads);
    } else {
      if (!(last_phase && consumer == kLastConsumer)) sm90::named_barrier_arrive(next, kPingPongThreads);
    }
  }

  // Rung 06 (kPingPong false): each tile's steps one after the other — S, softmax, P V — with the
  // tensor cores idle during the softmax unless the other consumer happens to fill them.
  // Rung 10 (kPingPong true): the same steps with rung 07's turns between the consumers but not its
  // overlap inside the warpgroup. Each tile takes two turns, one to issue S and one to issue P V;
  // between them the consumer waits for its S and computes the softmax while the other consumer's
  // WGMMAs run. S is dead once P is rounded, and the next S is issued only after P V has
  // completed, so S of one tile and P of another are never live together (what lets a 256-key S
  // fit).
  template <bool kPingPong>
  __device__ void run_serial() {
    if (tiles > 0) {
      if constexpr (kPingPong) open_turns();
      sm90::mbarrier_wait(smem.q_full(), 0);
    }
    for (int tile = 0; tile < tiles; ++tile) {
      const int stage = FlashWgmmaSmem<Shape>::stage_of(tile);
      const std::uint32_t phase = FlashWgmmaSmem<Shape>::phase_of(tile);
      sm90::mbarrier_wait(smem.k_full(stage), phase);
      if constexpr (kPingPong) wait_turn();
      issue_scores(stage);
      if constexpr (kPingPong) pass_turn(next_turn(), false);
      sm90::wgmma_wait_group<0>();
      sm90::fence_accumulators(s_flat());
      float rescale[2];
      softmax(tile, rescale);
      rescale_o(rescale);  // rung 27: with kLazyRescale, skipped where the warp's factors are all 1
      round_p();
      sm90::mbarrier_wait(smem.v_full(stage), phase);
      if constexpr (kPingPong) wait_turn();
      issue_pv(stage);
      if constexpr (kPingPong) pass_turn(next_turn(), tile == tiles - 1);
      sm90::wgmma_wait_group<0>();
      sm90::fence_accumulators(o_flat());
      release(stage);
    }
  }

  // Rung 07: FlashAttention-3's two overlaps.
  //   Within the warpgroup: S of tile t is issued, then P V of tile t - 1 (its P rounded after the
  //   previous softmax); the softmax of tile t runs while that P V is still on the tensor cores.
  //   O's rescale by tile t's new row maxima waits for the next iteration: it is applied while
  //   S of tile t + 1 runs, just before P V of tile t is issued (O is then relative to tile t's
  //   maxima, as P of tile t is).
  //   Between the warpgroups (ping-pong, the turns above): one's GEMMs run while the other
  //   computes its softmax; each consumer has tiles + 1 issue phases.
  __device__ void run_overlapped() { run_overlapped_from<false>(0, 0); }

  // The same, for the work item whose first K/V tile is the CTA's kv_base-th (the ring's stages
  // and phases run on across a persistent CTA's items) and whose Q tile is the CTA's load with
  // phase parity q_parity. kReleaseQ (rung 08): each warp arrives on q_empty once its last S is
  // done, so that the producer can load the next item's Q while P V and the store finish.
  // kTurnsRunOn (rung 18): the ping-pong's turns run on from one of the CTA's items to the next —
  // the last consumer opens them before the CTA's first item only (first_item) and passes its last
  // phase's turn on except in the CTA's last item (last_item) — so the first consumer issues the
  // next item's first S while the others still run their last P V and store O.
  template <bool kReleaseQ, bool kTurnsRunOn = false>
  __device__ void run_overlapped_from(int kv_base, std::uint32_t q_parity, bool first_item = true,
                                      bool last_item = true) {
    if (tiles == 0) return;
    const auto stage_of = [&](int tile) { return FlashWgmmaSmem<Shape>::stage_of(kv_base + tile); };
    const auto phase_of = [&](int tile) { return FlashWgmmaSmem<Shape>::phase_of(kv_base + tile); };
    const auto release_q = [&] {
      if constexpr (kReleaseQ)
        if (threadIdx.x % 32 == 0) sm90::mbarrier_arrive(smem.q_empty());
    };
    const int next = next_turn();
    if (!kTurnsRunOn || first_item) open_turns();
    sm90::mbarrier_wait(smem.q_full(), q_parity);

    // Tile 0: S alone.
    sm90::mbarrier_wait(smem.k_full(stage_of(0)), phase_of(0));
    wait_turn();
    issue_scores(stage_of(0));
    pass_turn(next, false);
    sm90::wgmma_wait_group<0>();
    sm90::fence_accumulators(s_flat());
    if (tiles == 1) release_q();
    float rescale[2];
    softmax(0, rescale);  // O is still 0: the rescale below multiplies zeros
    round_p();

    for (int tile = 1; tile < tiles; ++tile) {
      const int stage = stage_of(tile);
      const int previous = stage_of(tile - 1);
      sm90::mbarrier_wait(smem.k_full(stage), phase_of(tile));
      wait_turn();
      issue_scores(stage);
      rescale_o(rescale);  // to the previous tile's maxima, under S's WGMMAs
      sm90::mbarrier_wait(smem.v_full(previous), phase_of(tile - 1));
      issue_pv(previous);
      pass_turn(next, false);
      sm90::wgmma_wait_group<1>();  // S of this tile is done; P V of the previous may still run
      sm90::fence_accumulators(s_flat());
      if (tile == tiles - 1) release_q();
      softmax(tile, rescale);
      sm90::wgmma_wait_group<0>();
      sm90::fence_accumulators(o_flat());
      release(previous);
      round_p();
    }

    // The last tile's P V.
    const int last = stage_of(tiles - 1);
    rescale_o(rescale);
    sm90::mbarrier_wait(smem.v_full(last), phase_of(tiles - 1));
    wait_turn();
    issue_pv(last);
    pass_turn(next, !kTurnsRunOn || last_item);
    sm90::wgmma_wait_group<0>();
    sm90::fence_accumulators(o_flat());
    release(last);
  }

  __device__ void store() const { store_tile_rows(o, rows, row_ends, HeadView<T>(args), args, warp_row0); }
  __device__ void store(int batch, int head) const {
    store_tile_rows(o, rows, row_ends, HeadView<T>(args, batch, head), args, warp_row0);
  }
};

#endif  // KC_STAGE3_SM90A

namespace {

// kProducerSleeps (rung 11): the producer waits for a free stage asleep (sm90::mbarrier_wait_asleep)
// instead of polling, so its warp leaves the issue slots of its scheduler to the consumers' warps.
// kDescriptorsAdded (rung 12): the consumers move descriptors made once (FlashWgmmaConsumer).
// kScaleInExponent (rung 13): the softmax's scale inside the exponent's FFMA (positive scales).
// kRowlessConsumersLeave (rung 14): a consumer whose 64 rows all lie past Sq (in the last query
// tile of a length that is not a multiple of the CTA's rows) leaves at once; the stages' empty
// barriers count the other consumers' warps, and the turns go round the others.
// kLazyRescale (rung 15): the softmax's exponent base moves only past a rise of kLazyRescaleLog2,
// and O's rescale is skipped where a warp's factors are all 1.
// kFmaExpEvery (rung 26): every kFmaExpEvery-th block of 8 keys takes its exponentials on the FMA
// pipe (softmax_probabilities, exp2_on_fma).
template <typename T, int kHeadDim, FlashLoop kLoop, int kConsumers = 2, int kBlockKeys = 128,
          bool kProducerSleeps = false, bool kDescriptorsAdded = false, bool kScaleInExponent = false,
          bool kRowlessConsumersLeave = false, bool kLazyRescale = false, int kFmaExpEvery = 0>
__global__ void __launch_bounds__(FlashWgmmaShape<kHeadDim, kConsumers, kBlockKeys>::kThreads, 1)
    flash_wgmma_kernel(const __grid_constant__ FlashWgmmaParams<T> params) {
#if KC_STAGE3_SM90A
  using Shape = FlashWgmmaShape<kHeadDim, kConsumers, kBlockKeys>;
  using Smem = FlashWgmmaSmem<Shape>;
  const AttentionParams<T>& args = params.args;
  extern __shared__ std::uint8_t smem_raw[];
  const Smem smem{aligned_dynamic_smem(smem_raw)};

  const int batch = static_cast<int>(blockIdx.z);
  const int head = static_cast<int>(blockIdx.y);
  const int kv_head = head / (args.q_heads / args.kv_heads);
  const int query_tile = static_cast<int>(gridDim.x - 1 - blockIdx.x);  // heaviest first
  const int block_row0 = query_tile * Shape::kBlockRows;
  // Keys past key_end are seen by no row of the CTA: their tiles are not loaded.
  const int key_end = block_key_end(args, block_row0, Shape::kBlockRows);
  const int tiles = ceil_div(key_end, Shape::kBlockKeys);
  // The consumers with at least one query row: all of them but in the last query tile.
  int working = kConsumers;
  if constexpr (kRowlessConsumersLeave) {
    const int rows = args.q_len - block_row0;
    working = rows >= Shape::kBlockRows ? kConsumers : ceil_div(rows, Shape::kWarpgroupRows);
  }

  if (threadIdx.x == 0) smem.template init_barriers<false>(working);
  __syncthreads();

  const int warpgroup = static_cast<int>(threadIdx.x) / 128;
  if (warpgroup == 0) {
    // ---- producer: one thread issues every copy ----
    sm90::setmaxnreg_decrease<Shape::kProducerRegisters>();
    if (threadIdx.x == 0 && tiles > 0) {
      smem.load_q(params, block_row0, head, batch);
      for (int tile = 0; tile < tiles; ++tile) {
        const int stage = Smem::stage_of(tile);
        // The first pass finds every stage free.
        if constexpr (kProducerSleeps)
          sm90::mbarrier_wait_asleep(smem.empty(stage), Smem::phase_of(tile) ^ 1);
        else
          sm90::mbarrier_wait(smem.empty(stage), Smem::phase_of(tile) ^ 1);
        smem.load_kv(params, stage, tile * Shape::kBlockKeys, kv_head, batch);
      }
    }
    return;
  }

  // ---- consumers: 64 query rows each (kConsumers of them) ----
  if constexpr (kRowlessConsumersLeave)
    if (warpgroup - 1 >= working) return;  // no rows: nothing to compute or store
  sm90::setmaxnreg_increase<Shape::kConsumerRegisters>();
  FlashWgmmaConsumer<T, Shape, kDescriptorsAdded, kScaleInExponent, kRowlessConsumersLeave, kLazyRescale,
                     kFmaExpEvery>
      consumer(smem, args, warpgroup - 1, tiles, block_row0);
  if constexpr (kRowlessConsumersLeave) consumer.working = working;
  if constexpr (kLoop == FlashLoop::overlapped)
    consumer.run_overlapped();
  else
    consumer.template run_serial<kLoop == FlashLoop::ping_pong>();
  consumer.store();
#else
  (void)params;
#endif
}

// Rung 25's walk (flash_wgmma_persistent_kernel with kDynamicItems): rung 20's items in rung 20's
// order, each CTA taking its next one when its producer is ready for it. A CTA starts on item
// blockIdx.x; after that its producer takes item gridDim.x + atomicAdd(counters[0], 1) once it has
// issued the current item's last K/V copy — a few tiles before the consumers finish that item, so
// the atomic's round trip hides behind their work. Rung 20 dealt item b + k . gridDim.x to CTA b,
// which leaves one CTA with up to 1.3 times the mean work under the mask (its groups run heavy to
// light every few hundred items); taken this way, a CTA that finishes early takes more.
//
// The hand-over: the producer warp's lane 0 writes the item into a slot past the barriers and
// arrives on the slot's own mbarrier item_full (a release of its write); each consumer warp's lane
// 0 waits there, reads the slot, gives the item to its warp (__reduce_or_sync: the compiler then
// knows the item is the same across the warp and keeps the stages' arithmetic in uniform
// registers) and arrives on item_empty (a release of its read), where the producer waits before it
// writes the next item. The end is handed over the same way, as `items` (no item). Q and the K/V
// stages keep their mbarriers (an item whose rows see no key loads nothing, as in rung 18). The
// ping-pong's turns run on across the items as in rung 18 (an item without keys takes its turn
// like any other, with nothing to issue); the end closes them. The producer, done, counts its CTA
// in counters[1]; the CTA that counts last sets both counters back to zero for the next launch
// (every CTA's last atomicAdd on counters[0] is ordered before its count by __threadfence).
struct FlashDynamicHandOver {
  int item;
  int unused;                // 8 bytes, as the barriers around it
  std::uint64_t item_full;   // mbarrier: 1 arrival (the producer's lane 0, after its write)
  std::uint64_t item_empty;  // mbarrier: one arrival per consumer warp (its lane 0, after its read)
};
#if KC_STAGE3_SM90A
template <class Shape>
__device__ FlashDynamicHandOver* flash_hand_over(const FlashWgmmaSmem<Shape>& smem) {
  return reinterpret_cast<FlashDynamicHandOver*>(smem.q_empty() + 1);
}
template <typename T, class Shape, bool kLeanConsumers, typename Params, typename ItemOf, typename TilesOf,
          typename WaitFree>
__device__ void flash_persistent_dynamic(const Params& params, const FlashWgmmaSmem<Shape>& smem, int warpgroup,
                                         int items, const ItemOf& item_of, const TilesOf& tiles_of,
                                         const WaitFree& wait_free) {
  const AttentionParams<T>& args = params.args;
  FlashDynamicHandOver* hand_over = flash_hand_over(smem);
  const bool lane0 = threadIdx.x % 32 == 0;
  if (warpgroup == 0) {
    sm90::setmaxnreg_decrease<Shape::kProducerRegisters>();
    if (threadIdx.x < 32) {  // the producer warp: lane 0 issues
      int kv_count = 0, q_loads = 0;
      int item = static_cast<int>(blockIdx.x);  // the launch has at most as many CTAs as items
      for (int handed = 0;; ++handed) {
        if (handed > 0) wait_free(&hand_over->item_empty, static_cast<std::uint32_t>(handed - 1) % 2);
        if (lane0) {
          hand_over->item = item;
          sm90::mbarrier_arrive(&hand_over->item_full);
        }
        if (item >= items) break;  // the end, handed over
        const FlashWorkItem w = item_of(item);
        const int tiles = tiles_of(w);
        if (tiles > 0) {
          const int kv_head = w.head / (args.q_heads / args.kv_heads);
          // The previous item's Q is free once every consumer warp has done its last S with it.
          wait_free(smem.q_empty(), static_cast<std::uint32_t>(q_loads % 2) ^ 1);
          if (lane0) smem.load_q(params, w.query_tile * Shape::kBlockRows, w.head, w.batch);
          ++q_loads;
          for (int tile = 0; tile < tiles; ++tile, ++kv_count) {
            const int stage = FlashWgmmaSmem<Shape>::stage_of(kv_count);
            wait_free(smem.empty(stage), FlashWgmmaSmem<Shape>::phase_of(kv_count) ^ 1);
            if (lane0) smem.load_kv(params, stage, tile * Shape::kBlockKeys, kv_head, w.batch);
          }
        }
        unsigned taken = 0;
        if (lane0) taken = atomicAdd(params.counters, 1u);
        item = static_cast<int>(gridDim.x + __shfl_sync(0xffffffffu, taken, 0));
      }
      if (lane0) {
        __threadfence();  // this CTA's last atomicAdd on counters[0] before its count below
        if (atomicAdd(params.counters + 1, 1u) == gridDim.x - 1) {
          params.counters[0] = 0;  // every CTA has taken its last item: ready for the next launch
          params.counters[1] = 0;
        }
      }
    }
    return;
  }

  sm90::setmaxnreg_increase<Shape::kConsumerRegisters>();
  using Consumer = FlashWgmmaConsumer<T, Shape, kLeanConsumers, kLeanConsumers, false, kLeanConsumers>;
  int kv_count = 0, q_loads = 0;  // the producer's counts, as the consumers meet them
  for (int handed = 0;; ++handed) {
    unsigned read = 0;
    if (lane0) {
      sm90::mbarrier_wait(&hand_over->item_full, static_cast<std::uint32_t>(handed) % 2);
      read = static_cast<unsigned>(hand_over->item);
    }
    // The warp's item: lane 0's, the others holding 0. A warp reduction (REDUX) leaves it in a
    // uniform register, so the stages' and phases' arithmetic stays there as in rung 20.
    const int item = static_cast<int>(__reduce_or_sync(0xffffffffu, read));
    if (item >= items) {  // the end: close the turns the CTA's first item opened
      const Consumer closing(smem, args, warpgroup - 1, 0, 0);
      closing.wait_turn();
      closing.pass_turn(closing.next_turn(), true);
      break;
    }
    if (lane0) sm90::mbarrier_arrive(&hand_over->item_empty);  // read: the producer may write the next
    const FlashWorkItem w = item_of(item);
    const int tiles = tiles_of(w);
    Consumer consumer(smem, args, warpgroup - 1, tiles, w.query_tile * Shape::kBlockRows);
    if (tiles > 0) {
      consumer.template run_overlapped_from<true, true>(kv_count, static_cast<std::uint32_t>(q_loads % 2),
                                                        handed == 0, false);
      kv_count += tiles;
      ++q_loads;
    } else {
      if (handed == 0) consumer.open_turns();
      consumer.wait_turn();
      consumer.pass_turn(consumer.next_turn(), false);
    }
    consumer.store(w.batch, w.head);
  }
}
#endif  // KC_STAGE3_SM90A

// The items' order (FlashWorkItem, flash_work_item): attention/flash_work_order.hpp.

// Rung 08: rung 07's consumers and producer in persistent CTAs, as many as fit on the GPU at once,
// each walking the work items of flash_work_item (flash_work_order.hpp). The K/V ring's stages and phases run on from one item to
// the next (the producer fills the next item's first stages while the consumers finish the
// current one); the Q tile is reloaded per item once every consumer warp has done its last S
// with it (q_empty).
// Rung 18: kConsumers (three at D = 64, as rung 09), kLeanConsumers (rung 15's consumers and
// producer: the producer waits asleep, descriptors moved by addition, the scale inside the
// exponent, the lazy base; positive scales only) and kTurnsRunOn (the ping-pong's turns run on
// across the items, FlashWgmmaConsumer::run_overlapped_from). Rung 19: kPairTilesTogether (the
// items' order without the mask, flash_work_item). Rung 20: kCausalPairGroups (their order with it).
// Rung 25: kDynamicItems — the same order, but a CTA takes its next item when its producer is ready
// for one (an atomicAdd on params.counters[0]) instead of the item gridDim.x further on; the
// producer hands each item to the consumers, with the one after it, in FlashDynamicHandOver.
template <typename T, int kHeadDim, int kConsumers = 2, bool kLeanConsumers = false, bool kTurnsRunOn = false,
          bool kPairTilesTogether = false, bool kCausalPairGroups = false, bool kDynamicItems = false>
__global__ void __launch_bounds__(FlashWgmmaShape<kHeadDim, kConsumers>::kThreads, 1)
    flash_wgmma_persistent_kernel(
        const __grid_constant__ std::conditional_t<kDynamicItems, FlashWgmmaDynamicParams<T>, FlashWgmmaParams<T>>
            params) {
#if KC_STAGE3_SM90A
  using Shape = FlashWgmmaShape<kHeadDim, kConsumers>;
  using Smem = FlashWgmmaSmem<Shape>;
  const AttentionParams<T>& args = params.args;
  extern __shared__ std::uint8_t smem_raw[];
  const Smem smem{aligned_dynamic_smem(smem_raw)};
  const int query_tiles = ceil_div(args.q_len, Shape::kBlockRows);
  const long long items = static_cast<long long>(query_tiles) * args.q_heads * args.batch;
  const auto item_of = [&](long long item) {
    return flash_work_item<kPairTilesTogether, kCausalPairGroups>(args, item, query_tiles);
  };
  const auto tiles_of = [&](const FlashWorkItem& w) {
    return ceil_div(block_key_end(args, w.query_tile * Shape::kBlockRows, Shape::kBlockRows), Shape::kBlockKeys);
  };
  const auto wait_free = [](std::uint64_t* barrier, std::uint32_t parity) {
    if constexpr (kLeanConsumers)
      sm90::mbarrier_wait_asleep(barrier, parity);
    else
      sm90::mbarrier_wait(barrier, parity);
  };

  if (threadIdx.x == 0) {
    smem.template init_barriers<true>();
    if constexpr (kDynamicItems) {  // rung 25's hand-over
      sm90::mbarrier_init(&flash_hand_over(smem)->item_full, 1);
      sm90::mbarrier_init(&flash_hand_over(smem)->item_empty, Shape::kConsumers * 4);
      sm90::fence_barrier_init();
    }
  }
  __syncthreads();

  const int warpgroup = static_cast<int>(threadIdx.x) / 128;
  if constexpr (kDynamicItems) {
    flash_persistent_dynamic<T, Shape, kLeanConsumers>(params, smem, warpgroup, static_cast<int>(items), item_of,
                                                       tiles_of, wait_free);
    return;
  }
  if (warpgroup == 0) {
    sm90::setmaxnreg_decrease<Shape::kProducerRegisters>();
    if (threadIdx.x == 0) {
      int kv_count = 0, q_loads = 0;  // K/V tiles and Q tiles this CTA has loaded
      for (long long item = blockIdx.x; item < items; item += gridDim.x) {
        const FlashWorkItem w = item_of(item);
        const int tiles = tiles_of(w);
        if (tiles == 0) continue;  // rows that see no key: nothing to load
        const int kv_head = w.head / (args.q_heads / args.kv_heads);
        // The previous item's Q is free once every consumer warp has done its last S (a fresh
        // barrier lets the first load through).
        wait_free(smem.q_empty(), static_cast<std::uint32_t>(q_loads % 2) ^ 1);
        smem.load_q(params, w.query_tile * Shape::kBlockRows, w.head, w.batch);
        ++q_loads;
        for (int tile = 0; tile < tiles; ++tile, ++kv_count) {
          const int stage = Smem::stage_of(kv_count);
          wait_free(smem.empty(stage), Smem::phase_of(kv_count) ^ 1);
          smem.load_kv(params, stage, tile * Shape::kBlockKeys, kv_head, w.batch);
        }
      }
    }
    return;
  }

  sm90::setmaxnreg_increase<Shape::kConsumerRegisters>();
  int kv_count = 0, q_loads = 0;  // the same counts, as the consumers meet them
  for (long long item = blockIdx.x; item < items; item += gridDim.x) {
    const FlashWorkItem w = item_of(item);
    const int tiles = tiles_of(w);
    FlashWgmmaConsumer<T, Shape, kLeanConsumers, kLeanConsumers, false, kLeanConsumers> consumer(
        smem, args, warpgroup - 1, tiles, w.query_tile * Shape::kBlockRows);
    if constexpr (kTurnsRunOn) {
      // The CTA's last item with keys to see: no later item of this CTA has any.
      long long later = item + gridDim.x;
      while (later < items && tiles_of(item_of(later)) == 0) later += gridDim.x;
      consumer.template run_overlapped_from<true, true>(kv_count, static_cast<std::uint32_t>(q_loads % 2),
                                                        q_loads == 0, later >= items);
    } else {
      consumer.template run_overlapped_from<true>(kv_count, static_cast<std::uint32_t>(q_loads % 2));
    }
    if (tiles > 0) {
      kv_count += tiles;
      ++q_loads;
    }
    consumer.store(w.batch, w.head);
  }
#else
  (void)params;
#endif
}

}  // namespace

// The kernels' parameters: the three tensor maps, built (or found in `cache`), and the problem.
template <typename T, int kHeadDim, int kConsumers = 2, int kBlockKeys = 128>
FlashWgmmaParams<T> flash_wgmma_params(const AttentionArgs<T>& args, HopperLaunchCache& cache) {
  using Shape = FlashWgmmaShape<kHeadDim, kConsumers, kBlockKeys>;
  const auto tensor = [&](const T* base, int rows, int heads, std::int64_t row_stride, std::int64_t head_stride,
                          std::int64_t batch_stride, int box_rows) {
    TmaTensor4d t;
    t.base = base;
    t.dims[0] = static_cast<std::uint64_t>(kHeadDim);
    t.dims[1] = static_cast<std::uint64_t>(rows);
    t.dims[2] = static_cast<std::uint64_t>(heads);
    t.dims[3] = static_cast<std::uint64_t>(args.batch);
    t.strides_bytes[0] = static_cast<std::uint64_t>(row_stride) * sizeof(T);
    t.strides_bytes[1] = static_cast<std::uint64_t>(head_stride) * sizeof(T);
    t.strides_bytes[2] = static_cast<std::uint64_t>(batch_stride) * sizeof(T);
    t.box[0] = Shape::kBoxCols;
    t.box[1] = static_cast<std::uint32_t>(box_rows);
    t.box[2] = 1;
    t.box[3] = 1;
    return cache.tensor_map(t);
  };
  FlashWgmmaParams<T> params;
  params.q_map = tensor(args.q, args.q_len, args.q_heads, args.q_row_stride, args.q_head_stride, args.q_batch_stride,
                        Shape::kBlockRows);
  params.k_map = tensor(args.k, args.kv_len, args.kv_heads, args.kv_row_stride, args.kv_head_stride,
                        args.kv_batch_stride, Shape::kBlockKeys);
  params.v_map = tensor(args.v, args.kv_len, args.kv_heads, args.kv_row_stride, args.kv_head_stride,
                        args.kv_batch_stride, Shape::kBlockKeys);
  params.args = args;
  return params;
}

// Launches rung 06's (FlashLoop::serial) or rung 07's (overlapped) kernel for D: a CTA per 128
// query rows; with kConsumers = 3 (rung 09, D = 64) a CTA per 192; kBlockKeys = 256 with
// FlashLoop::ping_pong: rung 10's kernel (D = 64); kProducerSleeps: rung 11's producer;
// kDescriptorsAdded: rung 12's consumers; kScaleInExponent: rung 13's softmax (positive scales);
// kRowlessConsumersLeave: rung 14's consumers without query rows leave; kLazyRescale: rung 15's
// softmax base that moves only past a rise of kLazyRescaleLog2; kFmaExpEvery: rung 26's share of
// the exponentials on the FMA pipe.
template <typename T, int kHeadDim, FlashLoop kLoop, int kConsumers = 2, int kBlockKeys = 128,
          bool kProducerSleeps = false, bool kDescriptorsAdded = false, bool kScaleInExponent = false,
          bool kRowlessConsumersLeave = false, bool kLazyRescale = false, int kFmaExpEvery = 0>
void launch_flash_wgmma(const AttentionArgs<T>& args, cudaStream_t stream, HopperLaunchCache& cache) {
  using Shape = FlashWgmmaShape<kHeadDim, kConsumers, kBlockKeys>;
  const auto kernel = &flash_wgmma_kernel<T, kHeadDim, kLoop, kConsumers, kBlockKeys, kProducerSleeps,
                                          kDescriptorsAdded, kScaleInExponent, kRowlessConsumersLeave,
                                          kLazyRescale, kFmaExpEvery>;
  cache.prepare_kernel(reinterpret_cast<const void*>(kernel), Shape::kSmemBytes);
  const FlashWgmmaParams<T> params = flash_wgmma_params<T, kHeadDim, kConsumers, kBlockKeys>(args, cache);
  kernel<<<flash_grid(args, Shape::kBlockRows), Shape::kThreads, Shape::kSmemBytes, stream>>>(params);
  KC_CUDA_CHECK(cudaGetLastError());
}

// Launches rung 08's persistent kernel for D (with the knobs of rungs 18-20): as many CTAs as are
// resident at once (one an SM), never more than there are work items.
// kDynamicItems (rung 25): the items handed out through the cache's work counters, and 24 more
// bytes of shared memory for the hand-over (the slot and its two mbarriers).
template <typename T, int kHeadDim, int kConsumers = 2, bool kLeanConsumers = false, bool kTurnsRunOn = false,
          bool kPairTilesTogether = false, bool kCausalPairGroups = false, bool kDynamicItems = false>
void launch_flash_wgmma_persistent(const AttentionArgs<T>& args, cudaStream_t stream, HopperLaunchCache& cache) {
  using Shape = FlashWgmmaShape<kHeadDim, kConsumers>;
  constexpr int kSmemBytes = Shape::kSmemBytes + (kDynamicItems ? static_cast<int>(sizeof(FlashDynamicHandOver)) : 0);
  const auto kernel =
      &flash_wgmma_persistent_kernel<T, kHeadDim, kConsumers, kLeanConsumers, kTurnsRunOn, kPairTilesTogether,
                                     kCausalPairGroups, kDynamicItems>;
  const int resident = cache.resident_blocks(reinterpret_cast<const void*>(kernel), Shape::kThreads, kSmemBytes, 1);
  const long long items = static_cast<long long>(ceil_div(args.q_len, Shape::kBlockRows)) * args.q_heads * args.batch;
  const auto grid = static_cast<unsigned>(items < resident ? items : resident);
  if constexpr (kDynamicItems) {
    // The hand-over and the counters hold item numbers in 32 bits.
    require(items + grid < (1ll << 31), "attention rung 25: {} work items (query tiles x heads x batch); at most 2^31 - {}",
            items, grid + 1);
    FlashWgmmaDynamicParams<T> params;
    static_cast<FlashWgmmaParams<T>&>(params) = flash_wgmma_params<T, kHeadDim, kConsumers>(args, cache);
    params.counters = cache.work_counters(stream);
    kernel<<<grid, Shape::kThreads, kSmemBytes, stream>>>(params);
  } else {
    const FlashWgmmaParams<T> params = flash_wgmma_params<T, kHeadDim, kConsumers>(args, cache);
    kernel<<<grid, Shape::kThreads, kSmemBytes, stream>>>(params);
  }
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kc::stage3
