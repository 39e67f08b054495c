// kc/engine/graph_buckets.hpp — which captured CUDA graph runs a decode step.
//
// A CUDA graph replays kernels with the shapes it was captured with, so the engine captures the
// decode step once per batch-size bucket (1, 2, 4, ... 256 sequences) and runs a batch of n
// decoding sequences with the smallest bucket that holds n, the rows past n being padding (length
// 0, never read by attention; their sampled tokens are dropped). A batch larger than every bucket
// runs without a graph.
//
// It also captures each bucket at a few table widths (block-table slots a row). The paged decode
// attention cuts the table's width into splits, a CTA each, whatever the sequences' lengths (the
// lengths live on the GPU, the grid is fixed at capture): at the full width of a long
// max_model_len a step of short sequences launches dozens of CTAs a kv head that start and exit
// at once. A step runs at the narrowest captured width that holds its longest sequence.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace kc::engine {

struct GraphBucketChoice {
  std::int32_t bucket = 0;   // the captured batch size that runs the step
  std::int32_t padding = 0;  // bucket - batch: padding rows
};

// Powers of two from 1 up to and including max_batch (max_batch itself added last if it is not a
// power of two), e.g. 256 -> 1, 2, 4, ..., 256.
std::vector<std::int32_t> default_graph_buckets(std::int32_t max_batch);

// The smallest bucket >= decode_batch, or none when decode_batch exceeds the largest (run the step
// without a graph). Buckets must be positive and strictly increasing; decode_batch positive.
// Throws kc::Error otherwise.
std::optional<GraphBucketChoice> choose_graph_bucket(const std::vector<std::int32_t>& buckets,
                                                     std::int32_t decode_batch);

// The table widths the decode graphs are captured at, for rows of max_blocks_per_seq slots: a
// sixteenth, a quarter and all of it, rounded up, without repeats (528 -> 33, 132, 528: 528, 2112
// and 8448 keys in blocks of 16). max_blocks_per_seq positive, else kc::Error.
std::vector<std::int32_t> default_graph_widths(std::int32_t max_blocks_per_seq);

// The narrowest width >= needed_blocks (the batch's longest sequence, in blocks). Widths positive
// and strictly increasing; needed_blocks in [0, the last width] (the last is the table's full
// width, which holds every sequence), else kc::Error.
std::int32_t choose_graph_width(const std::vector<std::int32_t>& widths, std::int32_t needed_blocks);

}  // namespace kc::engine
