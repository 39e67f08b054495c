// Choosing a captured decode graph by batch size (kc/engine/graph_buckets.hpp).
#include "kc/engine/graph_buckets.hpp"

#include <algorithm>

#include "kc/common/error.hpp"

namespace kc::engine {

std::vector<std::int32_t> default_graph_buckets(std::int32_t max_batch) {
  require(max_batch > 0, "graph buckets: the largest decode batch must be positive, got {}",
          max_batch);
  std::vector<std::int32_t> buckets;
  for (std::int64_t size = 1; size <= max_batch; size *= 2)
    buckets.push_back(static_cast<std::int32_t>(size));
  if (buckets.back() != max_batch) buckets.push_back(max_batch);
  return buckets;
}

std::optional<GraphBucketChoice> choose_graph_bucket(const std::vector<std::int32_t>& buckets,
                                                     std::int32_t decode_batch) {
  require(!buckets.empty(), "graph buckets: no bucket was captured");
  require(buckets.front() > 0, "graph buckets: bucket sizes must be positive, the first is {}",
          buckets.front());
  require(std::adjacent_find(buckets.begin(), buckets.end(),
                             [](std::int32_t a, std::int32_t b) { return a >= b; }) ==
              buckets.end(),
          "graph buckets: sizes must be strictly increasing (sorted, no repeats)");
  require(decode_batch > 0, "graph buckets: a decode batch of {} sequences has no graph",
          decode_batch);
  const auto it = std::lower_bound(buckets.begin(), buckets.end(), decode_batch);
  if (it == buckets.end()) return std::nullopt;
  return GraphBucketChoice{*it, *it - decode_batch};
}

std::vector<std::int32_t> default_graph_widths(std::int32_t max_blocks_per_seq) {
  require(max_blocks_per_seq > 0, "graph widths: a table row must hold at least one block, got {}",
          max_blocks_per_seq);
  std::vector<std::int32_t> widths;
  for (const std::int32_t divisor : {16, 4, 1}) {
    const std::int32_t width = (max_blocks_per_seq + divisor - 1) / divisor;
    if (widths.empty() || widths.back() < width) widths.push_back(width);
  }
  return widths;
}

std::int32_t choose_graph_width(const std::vector<std::int32_t>& widths, std::int32_t needed_blocks) {
  require(!widths.empty() && widths.front() > 0, "graph widths: none captured, or a width below one block");
  require(std::adjacent_find(widths.begin(), widths.end(), [](std::int32_t a, std::int32_t b) { return a >= b; }) ==
              widths.end(),
          "graph widths: widths must be strictly increasing (sorted, no repeats)");
  require(needed_blocks >= 0 && needed_blocks <= widths.back(),
          "graph widths: a sequence of {} blocks does not fit the widest table row ({} blocks)", needed_blocks,
          widths.back());
  return *std::lower_bound(widths.begin(), widths.end(), needed_blocks);
}

}  // namespace kc::engine
