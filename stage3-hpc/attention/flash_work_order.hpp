// flash_work_order.hpp — the order in which the persistent attention rungs (08, 18, 19, 20) deal
// out their work items, one (query tile, head, batch) each: CTA b takes items b, b + gridDim.x, ...
// One definition for the device and the host, so that a CPU test
// (tests/attention_work_order_test.cpp) can check that every order deals each item exactly once
// and keeps the heaviest-first and grouping promises below.
#pragma once

#include "kc/common/host_device.hpp"
#include "kc/stage3/attention_args.hpp"

namespace kc::stage3 {

// Rung 08's order of work: item i is query tile `query_tiles - 1 - i / pairs` of the
// (batch, head) pair i % pairs, so the items run heaviest first (under the causal mask the last
// query tiles see the most keys) and a CTA that takes items blockIdx.x, + gridDim.x, ... gets
// about as much work as any other.
struct FlashWorkItem {
  int query_tile, head, batch;
};
// kPairTilesTogether (rung 19): without the mask, where every item is as heavy as any other, the
// items put the query tile fastest instead — item i is query tile `query_tiles - 1 - i %
// query_tiles` of pair i / query_tiles — so the CTAs that run at once share the K and V of a few
// (batch, head) pairs, as rung 07's grid does; with the mask, the order above.
// kCausalPairGroups (rung 20): with the mask, the pairs are taken in groups whose K and V fit in
// kFlashPairGroupBytes of L2, and inside a group the items run heaviest first with the pair
// fastest: the CTAs that run at once share a few pairs' K and V, and each still gets a mix of
// heavy and light items.
constexpr long long kFlashPairGroupBytes = 16ll << 20;
template <bool kPairTilesTogether = false, bool kCausalPairGroups = false, typename T>
KC_HOST_DEVICE inline FlashWorkItem flash_work_item(const AttentionParams<T>& args, long long item, int query_tiles) {
  if constexpr (kPairTilesTogether)
    if (!args.causal) {
      const int pair = static_cast<int>(item / query_tiles);
      return {query_tiles - 1 - static_cast<int>(item % query_tiles), pair % args.q_heads, pair / args.q_heads};
    }
  const long long pairs = static_cast<long long>(args.q_heads) * args.batch;
  if constexpr (kCausalPairGroups) {
    // K and V of one pair: 2 x Sk x D elements (pairs of one kv head share theirs; counted apart).
    const long long pair_bytes = 2ll * args.kv_len * args.head_dim * static_cast<long long>(sizeof(T));
    const long long fit = pair_bytes > 0 ? kFlashPairGroupBytes / pair_bytes : pairs;  // no keys: one group
    const long long per_group = fit < 1 ? 1 : fit;
    const long long group_items = per_group * query_tiles;
    const long long group = item / group_items;
    const long long in_group = item % group_items;
    const long long first_pair = group * per_group;
    const long long group_pairs = pairs - first_pair < per_group ? pairs - first_pair : per_group;
    const int pair = static_cast<int>(first_pair + in_group % group_pairs);
    return {query_tiles - 1 - static_cast<int>(in_group / group_pairs), pair % args.q_heads, pair / args.q_heads};
  }
  const int pair = static_cast<int>(item % pairs);
  return {query_tiles - 1 - static_cast<int>(item / pairs), pair % args.q_heads, pair / args.q_heads};
}

}  // namespace kc::stage3
