// kc/engine/graph_buckets.hpp — which captured CUDA graph runs a decode step.
//
// A CUDA graph replays kernels with the shapes it was captured with, so the engine captures the
// decode step once per batch-size bucket (1, 2, 4, ... 256 sequences) and runs a batch of n
// decoding sequences with the smallest bucket that holds n, the rows past n being padding (length
// 0, never read by attention; their sampled tokens are dropped). A batch larger than every bucket
// runs without a graph.
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

}  // namespace kc::engine
