// The orders in which the persistent attention rungs deal out their work items
// (attention/flash_work_order.hpp), checked on the CPU by enumeration: every order must deal each
// (query tile, head, batch) exactly once, the causal orders must run the heaviest query tiles
// first (within each group of pairs for rung 20), and rung 20's groups must hold the pairs whose
// K and V fit the budget. A deliberately wrong order (rung 20's last group taken as full) must fail.
// And a model of how the CTAs share the work under the mask: dealt a fixed stride apart (rungs 08
// and 18-20) or taken when a CTA is ready (rung 25).
#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <queue>
#include <utility>
#include <string>
#include <vector>

#include "attention/flash_work_order.hpp"

namespace kc::stage3 {
namespace {

using bf16 = __nv_bfloat16;
using Order = std::function<FlashWorkItem(const AttentionParams<bf16>&, long long, int)>;

AttentionParams<bf16> params(int batch, int q_heads, int kv_len, int head_dim, bool causal) {
  AttentionParams<bf16> p;
  p.batch = batch;
  p.q_heads = q_heads;
  p.kv_heads = 1;
  p.kv_len = kv_len;
  p.head_dim = head_dim;
  p.causal = causal;
  return p;
}

// Pairs of rung 20's groups: as many whose K and V (2 Sk D elements) fit kFlashPairGroupBytes, at
// least one; with no keys, all of them.
long long pairs_per_group(const AttentionParams<bf16>& p) {
  const long long pairs = static_cast<long long>(p.batch) * p.q_heads;
  const long long pair_bytes = 2ll * p.kv_len * p.head_dim * static_cast<long long>(sizeof(bf16));
  if (pair_bytes == 0) return pairs;
  return std::max(1ll, kFlashPairGroupBytes / pair_bytes);
}

// "" if `order` deals every item of the problem exactly once, with the query tile non-increasing
// along each group's items when `heaviest_first` (groups of `group_pairs` pairs, in item order:
// all the pairs for rung 08's order); otherwise what is wrong.
std::string check_order(const Order& order, const AttentionParams<bf16>& p, int query_tiles, bool heaviest_first,
                        long long group_pairs) {
  const long long pairs = static_cast<long long>(p.batch) * p.q_heads;
  const long long items = pairs * query_tiles;
  std::vector<int> dealt(static_cast<std::size_t>(items), 0);
  int previous_tile = query_tiles;
  long long group_end = 0;  // first item past the current group
  for (long long item = 0; item < items; ++item) {
    const FlashWorkItem w = order(p, item, query_tiles);
    if (w.query_tile < 0 || w.query_tile >= query_tiles || w.head < 0 || w.head >= p.q_heads || w.batch < 0 ||
        w.batch >= p.batch)
      return "item " + std::to_string(item) + " is out of range";
    const long long pair = static_cast<long long>(w.batch) * p.q_heads + w.head;
    if (++dealt[static_cast<std::size_t>(pair * query_tiles + w.query_tile)] > 1)
      return "item " + std::to_string(item) + " deals query tile " + std::to_string(w.query_tile) + " of pair " +
             std::to_string(pair) + " a second time";
    if (heaviest_first) {
      if (item == group_end) {  // a new group starts with its heaviest tiles
        const long long first_pair = item / query_tiles;
        group_end = item + std::min(group_pairs, pairs - first_pair) * query_tiles;
        previous_tile = query_tiles;
        if (pair < first_pair || pair >= first_pair + group_pairs)
          return "item " + std::to_string(item) + " opens a group with pair " + std::to_string(pair);
      }
      if (w.query_tile > previous_tile)
        return "item " + std::to_string(item) + " runs query tile " + std::to_string(w.query_tile) + " after " +
               std::to_string(previous_tile);
      const long long group_first_pair = (group_end - 1) / query_tiles / group_pairs * group_pairs;
      if (pair < group_first_pair || pair >= group_first_pair + group_pairs)
        return "item " + std::to_string(item) + " takes pair " + std::to_string(pair) + " outside its group";
      previous_tile = w.query_tile;
    }
  }
  return "";
}

struct Case {
  int query_tiles, batch, q_heads, kv_len, head_dim;
};

std::vector<Case> cases() {
  std::vector<Case> all;
  for (const int tiles : {1, 2, 3, 5, 8, 17, 86})
    for (const auto& [batch, heads] : std::vector<std::pair<int, int>>{{1, 1}, {1, 7}, {2, 16}, {16, 16}, {1, 257}})
      for (const int kv_len : {0, 1, 1000, 4096, 16384})
        for (const int d : {64, 128}) all.push_back({tiles, batch, heads, kv_len, d});
  return all;
}

TEST(AttentionWorkOrder, EveryRungsOrderDealsEachItemOnceHeaviestFirstUnderTheMask) {
  const Order rung08 = [](const AttentionParams<bf16>& p, long long i, int t) { return flash_work_item(p, i, t); };
  const Order rung19 = [](const AttentionParams<bf16>& p, long long i, int t) {
    return flash_work_item<true>(p, i, t);
  };
  const Order rung20 = [](const AttentionParams<bf16>& p, long long i, int t) {
    return flash_work_item<true, true>(p, i, t);
  };
  int checked = 0;
  for (const Case& c : cases())
    for (const bool causal : {false, true}) {
      const AttentionParams<bf16> p = params(c.batch, c.q_heads, c.kv_len, c.head_dim, causal);
      const long long pairs = static_cast<long long>(c.batch) * c.q_heads;
      const std::string where = "tiles " + std::to_string(c.query_tiles) + ", pairs " + std::to_string(pairs) +
                                ", Sk " + std::to_string(c.kv_len) + ", D " + std::to_string(c.head_dim) +
                                (causal ? ", causal" : "");
      // Rung 08 (and 18): heaviest first, the pair fastest, with or without the mask.
      EXPECT_EQ(check_order(rung08, p, c.query_tiles, true, pairs), "") << "rung 08, " << where;
      // Rung 19: without the mask a pair's tiles together (each pair a group of one); with it rung 08's.
      EXPECT_EQ(check_order(rung19, p, c.query_tiles, true, causal ? pairs : 1), "") << "rung 19, " << where;
      // Rung 20: with the mask, groups of the pairs that fit the budget; without it rung 19's.
      EXPECT_EQ(check_order(rung20, p, c.query_tiles, true, causal ? pairs_per_group(p) : 1), "")
          << "rung 20, " << where;
      checked += 3;
    }
  EXPECT_EQ(checked, 3 * 2 * static_cast<int>(cases().size()));
}

TEST(AttentionWorkOrder, ALastGroupTakenAsFullIsCaught) {
  // The flaw: rung 20's order with every group taken as full, so the last (partial) group's
  // items wrap onto pairs past the last one or deal a pair's tile twice.
  const Order flawed = [](const AttentionParams<bf16>& p, long long item, int query_tiles) {
    const long long pairs = static_cast<long long>(p.q_heads) * p.batch;
    const long long per_group = pairs_per_group(p);
    const long long group = item / (per_group * query_tiles);
    const long long in_group = item % (per_group * query_tiles);
    const long long pair = (group * per_group + in_group % per_group) % pairs;
    return FlashWorkItem{query_tiles - 1 - static_cast<int>(in_group / per_group), static_cast<int>(pair % p.q_heads),
                         static_cast<int>(pair / p.q_heads)};
  };
  // 16 x 16 pairs of Sk = 16384 at D = 128: 8 MiB of K and V a pair, groups of 2; 257 pairs of
  // Sk = 16384 at D = 64 (4 MiB a pair, groups of 4) leave a last group of one pair.
  const AttentionParams<bf16> p = params(1, 257, 16384, 64, true);
  ASSERT_EQ(pairs_per_group(p), 4);
  EXPECT_NE(check_order(flawed, p, 5, true, pairs_per_group(p)), "");
  // The same order is right where the groups come out whole: the check is not failing everything.
  const AttentionParams<bf16> whole = params(16, 16, 16384, 128, true);
  ASSERT_EQ(pairs_per_group(whole), 2);
  EXPECT_EQ(check_order(flawed, whole, 5, true, pairs_per_group(whole)), "");
}

// The CTAs' work under the causal mask (Sq = Sk, 128-row query tiles and 128-key K/V tiles: query
// tile t costs t + 1 K/V tiles), as the busiest CTA's share over the mean, for `ctas` persistent
// CTAs walking `order`. Dealt (rungs 08, 18-20): CTA b runs items b, b + ctas, ...
// Taken when ready (rung 25): CTA b starts on item b and takes the next item not yet taken as it
// finishes one (its producer takes it a few tiles earlier, once it has issued the current item's
// copies; the model leaves that out).
struct Balance {
  double dealt, taken;
};
Balance causal_balance(const Order& order, const AttentionParams<bf16>& p, int query_tiles, int ctas) {
  const long long items = static_cast<long long>(p.batch) * p.q_heads * query_tiles;
  const auto work = [&](long long item) { return order(p, item, query_tiles).query_tile + 1.0; };
  std::vector<double> dealt(static_cast<std::size_t>(ctas), 0.0);
  double total = 0;
  for (long long item = 0; item < items; ++item) {
    dealt[static_cast<std::size_t>(item % ctas)] += work(item);
    total += work(item);
  }
  // (time the CTA finishes its current item, CTA): the first to finish takes the next item.
  using Finish = std::pair<double, int>;
  std::priority_queue<Finish, std::vector<Finish>, std::greater<Finish>> finishes;
  for (int b = 0; b < ctas && b < items; ++b) finishes.push({work(b), b});
  double last = 0;
  for (long long item = ctas; item < items; ++item) {
    const Finish f = finishes.top();
    finishes.pop();
    finishes.push({f.first + work(item), f.second});
  }
  for (; !finishes.empty(); finishes.pop()) last = std::max(last, finishes.top().first);
  const double mean = total / ctas;
  return {*std::max_element(dealt.begin(), dealt.end()) / mean, last / mean};
}

TEST(AttentionWorkOrder, TakenWhenReadyRung20sCausalItemsEvenOutTheCtasWork) {
  const Order rung08 = [](const AttentionParams<bf16>& p, long long i, int t) { return flash_work_item(p, i, t); };
  const Order rung20 = [](const AttentionParams<bf16>& p, long long i, int t) {
    return flash_work_item<true, true>(p, i, t);
  };
  // The papers' D = 128 shapes (batch x seqlen = 16k, 16 heads) on 132 CTAs (an H100's or H200's SMs).
  for (const auto& [batch, seqlen] : std::vector<std::pair<int, int>>{{16, 1024}, {8, 2048}, {4, 4096}, {1, 16384}}) {
    const AttentionParams<bf16> p = params(batch, 16, seqlen, 128, true);
    const Balance b = causal_balance(rung20, p, seqlen / 128, 132);
    // Dealt a fixed stride apart, rung 20's groups (heavy to light every 16 MiB of K and V) load
    // the busiest CTA with a fifth or more above the mean ...
    EXPECT_GT(b.dealt, 1.2) << "seqlen " << seqlen;
    // ... taken when ready, within a few percent of it.
    EXPECT_LT(b.taken, 1.03) << "seqlen " << seqlen;
  }
  // Rung 08's order (every pair's heaviest tile first, no groups) was already close when dealt.
  EXPECT_LT(causal_balance(rung08, params(8, 16, 2048, 128, true), 16, 132).dealt, 1.07);
}

}  // namespace
}  // namespace kc::stage3
