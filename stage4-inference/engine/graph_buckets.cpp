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

}  // namespace kc::engine
