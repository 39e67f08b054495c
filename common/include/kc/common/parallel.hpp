// kc/common/parallel.hpp — a parallel loop for the CPU references.
//
// kc-bench checks a 32768 x 8192 problem (268 M elements) before timing it, on the GPU host's
// CPU: references loop over rows on every core instead of one.
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace kc {

// Calls body(begin, end) on disjoint chunks covering [0, count), on up to 16 threads; small
// loops (`count * cost_per_item` under a million) run on the calling thread.
template <typename Body>
void parallel_for(std::int64_t count, std::int64_t cost_per_item, const Body& body) {
  constexpr std::int64_t kSerialWork = 1 << 20;
  const std::int64_t hardware = std::max(1u, std::thread::hardware_concurrency());
  const std::int64_t threads =
      std::min<std::int64_t>({hardware, 16, count,
                              std::max<std::int64_t>(1, count * cost_per_item / kSerialWork)});
  if (threads <= 1) {
    if (count > 0) body(std::int64_t{0}, count);
    return;
  }
  std::vector<std::thread> workers;
  const std::int64_t chunk = (count + threads - 1) / threads;
  for (std::int64_t begin = 0; begin < count; begin += chunk)
    workers.emplace_back([&body, begin, end = std::min(count, begin + chunk)] { body(begin, end); });
  for (std::thread& worker : workers) worker.join();
}

}  // namespace kc
