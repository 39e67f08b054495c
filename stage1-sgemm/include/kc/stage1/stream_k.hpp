// kc/stage1/stream_k.hpp — how rung 11 shares out the work of C: whole tiles for the full waves,
// a stream of k tiles for what is left over.
//
// C has T tiles and the GPU holds S blocks at once (occupancy x SMs). Tiles run in waves of S, and
// when T % S != 0 the last wave leaves S - T % S block slots idle for a whole tile's time. Rung 11
// keeps the first T - T % S tiles (in the grouped raster order of grouped_tile) as they are: one
// block each of rung 10's kernel, the data-parallel part. The T % S tail tiles are cut into their k tiles, which are
// numbered tile-major (tail tile 0's k tiles 0 .. k_tiles - 1, then tail tile 1's, ...), and that
// iteration space is split into contiguous, as-even-as-possible ranges over the stream-K blocks.
// A block of the stream-K kernel walks its range tile by tile and adds its partial sums into C
// atomically.
//
// Like sgemm_tiling.hpp, plain constexpr C++: the kernel calls these functions on the device and
// the CPU tests call the same functions to prove that every (tail tile, k tile) is covered exactly
// once.
#pragma once

#include <cstdint>

#include "kc/stage1/sgemm_tiling.hpp"

namespace kc::stage1 {

// Each stream-K block gets at least this many k tiles. Every segment a block works on pays a
// fixed cost — the pipeline fill (stages - 1 k tiles of load latency before the first FMA) and a
// whole tile's worth of atomic adds into C at the end — which is worth about one to two k tiles
// of FMA work; with eight or more k tiles per block that overhead stays small. At the shapes the
// rung is for (4096^3: 232 tail tiles x 256 k tiles) every resident block is used anyway.
inline constexpr int kMinIterationsPerStreamKBlock = 8;

struct StreamKPlan {
  int tiles = 0;                // T: tiles of C
  int resident_blocks = 0;      // S: blocks the GPU runs at once
  int k_tiles = 0;              // k tiles per tile of C
  int data_parallel_tiles = 0;  // tiles computed whole, one block each of rung 10's kernel (all T
                                // without stream-K)
  int tail_tiles = 0;           // T - data_parallel_tiles, computed by the stream-K blocks
  int stream_k_blocks = 0;      // blocks of the stream-K kernel; 0: no stream-K, the launch is rung 10's
  int iterations_per_block = 0; // k tiles of every stream-K block ...
  int longer_blocks = 0;        // ... plus one for the first `longer_blocks` of them

  constexpr bool uses_stream_k() const { return stream_k_blocks > 0; }
  // The tail's iteration space: tail_tiles x k_tiles.
  constexpr int tail_iterations() const { return tail_tiles * k_tiles; }
  // The most k tiles one stream-K block works on.
  constexpr int longest_range() const { return iterations_per_block + (longer_blocks > 0 ? 1 : 0); }
};

// Plans the launch of `tiles` tiles of `k_tiles` k tiles each on a GPU that holds
// `resident_blocks` blocks at once. No stream-K (rung 10's launch) when:
//   * split-K is in use (splits > 1): the shape class already reshapes the work;
//   * T <= S: everything runs in one wave, there is no tail behind full waves;
//   * T % S == 0: the waves are full;
//   * cutting the tail would not give a block less than a whole tile's work: with
//     iterations / kMinIterationsPerStreamKBlock <= tail tiles (few k tiles per tile), every
//     stream-K block would do at least what a data-parallel block does, plus atomics;
//   * the tail's iteration count does not fit an int (the kernel counts iterations in 32 bits).
// Otherwise stream_k_blocks = min(S, iterations / kMinIterationsPerStreamKBlock), which is more
// than the tail tiles: every block's range is shorter than one tile, so the stream-K wave ends
// sooner than a data-parallel wave would, and a range touches at most two tiles.
constexpr StreamKPlan plan_stream_k(int tiles, int resident_blocks, int k_tiles, int splits) {
  StreamKPlan plan;
  plan.tiles = tiles;
  plan.resident_blocks = resident_blocks;
  plan.k_tiles = k_tiles;
  plan.data_parallel_tiles = tiles;
  if (splits > 1 || resident_blocks < 1 || k_tiles < 1 || tiles <= resident_blocks) return plan;
  const int tail = tiles % resident_blocks;
  if (tail == 0) return plan;
  const std::int64_t iterations = static_cast<std::int64_t>(tail) * k_tiles;
  if (iterations > INT32_MAX) return plan;
  const std::int64_t wanted_blocks = iterations / kMinIterationsPerStreamKBlock;
  if (wanted_blocks <= tail) return plan;
  const int blocks = wanted_blocks < resident_blocks ? static_cast<int>(wanted_blocks) : resident_blocks;
  plan.data_parallel_tiles = tiles - tail;
  plan.tail_tiles = tail;
  plan.stream_k_blocks = blocks;
  plan.iterations_per_block = static_cast<int>(iterations / blocks);
  plan.longer_blocks = static_cast<int>(iterations % blocks);
  return plan;
}

// The plan for an M x N x K problem in tiles of `config`.
constexpr StreamKPlan plan_stream_k_for(const WarpTileConfig& config, int m, int n, int k, int resident_blocks,
                                        int splits) {
  return plan_stream_k(ceil_div(m, config.bm) * ceil_div(n, config.bn), resident_blocks, ceil_div(k, config.bk),
                       splits);
}

// A half-open range of the tail's iteration space: iterations begin .. end - 1.
struct IterationRange {
  int begin = 0;
  int end = 0;
};

// The range of stream-K block `block` (0 .. stream_k_blocks - 1): the ranges are contiguous, in
// block order, and their lengths differ by at most one.
constexpr IterationRange stream_k_range(const StreamKPlan& plan, int block) {
  const int longer_before = block < plan.longer_blocks ? block : plan.longer_blocks;
  IterationRange range;
  range.begin = block * plan.iterations_per_block + longer_before;
  range.end = range.begin + plan.iterations_per_block + (block < plan.longer_blocks ? 1 : 0);
  return range;
}

// The part of a range that lies in one tile: tail tile `tail_tile` (0-based; its tile index in
// the grouped raster is data_parallel_tiles + tail_tile), k tiles k_tile_begin .. k_tile_end - 1.
struct StreamKSegment {
  int tail_tile = 0;
  int k_tile_begin = 0;
  int k_tile_end = 0;
};

// A range is at most k_tiles long (plan_stream_k makes more stream-K blocks than tail tiles), so
// it lies in one tile, or in the end of one tile and the start of the next.
constexpr bool spans_two_tiles(const StreamKPlan& plan, const IterationRange& range) {
  return range.end > (range.begin / plan.k_tiles + 1) * plan.k_tiles;
}

// The range's part in its first tile: from range.begin to the end of the range or of the tile.
constexpr StreamKSegment first_segment(const StreamKPlan& plan, const IterationRange& range) {
  StreamKSegment segment;
  segment.tail_tile = range.begin / plan.k_tiles;
  const int tile_begin = segment.tail_tile * plan.k_tiles;
  segment.k_tile_begin = range.begin - tile_begin;
  segment.k_tile_end = spans_two_tiles(plan, range) ? plan.k_tiles : range.end - tile_begin;
  return segment;
}

// When spans_two_tiles: the range's part in the next tile, from that tile's first k tile to the
// end of the range. Computed from range.end alone, so a kernel need not keep range.begin alive
// while it works on the first segment.
constexpr StreamKSegment second_segment(const StreamKPlan& plan, const IterationRange& range) {
  StreamKSegment segment;
  segment.tail_tile = (range.end - 1) / plan.k_tiles;
  segment.k_tile_begin = 0;
  segment.k_tile_end = range.end - segment.tail_tile * plan.k_tiles;
  return segment;
}

}  // namespace kc::stage1
