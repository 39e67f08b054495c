// The paged KV cache's block bookkeeping and block-table packing (kc/engine/kv_cache.hpp), and
// the choice of a captured decode graph by batch size (kc/engine/graph_buckets.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "kc/common/error.hpp"
#include "kc/engine/graph_buckets.hpp"
#include "kc/engine/kv_cache.hpp"
#include "support/test_files.hpp"

namespace kc::engine {
namespace {

using test_support::contains_all;
using test_support::error_of;

TEST(KvBlockManager, AllocatesABlockEachTimeOneFills) {
  KvBlockManager cache(8, 16);
  cache.add_sequence(7);
  EXPECT_EQ(cache.block_table(7).size(), 0u);
  EXPECT_FALSE(cache.append(7, 1).has_value());
  EXPECT_EQ(cache.block_table(7), std::vector<BlockId>({0}));
  cache.append(7, 15);  // fills block 0 exactly
  EXPECT_EQ(cache.block_table(7).size(), 1u);
  EXPECT_EQ(cache.length(7), 16);
  cache.append(7, 1);
  EXPECT_EQ(cache.block_table(7), std::vector<BlockId>({0, 1}));
  cache.append(7, 40);  // 57 tokens: 4 blocks
  EXPECT_EQ(cache.block_table(7).size(), 4u);
  EXPECT_EQ(cache.free_blocks(), 4);
  EXPECT_EQ(cache.blocks_for(57), 4);
  EXPECT_EQ(cache.appendable_tokens(7), 7 + 4 * 16);
}

TEST(KvBlockManager, ExhaustionIsRefusedWithoutChangingAnything) {
  KvBlockManager cache(3, 16);
  cache.add_sequence(1);
  cache.append(1, 40);  // 3 blocks
  EXPECT_EQ(cache.free_blocks(), 0);
  EXPECT_TRUE(cache.can_append(1, 8));  // the last block has 8 free slots
  EXPECT_FALSE(cache.can_append(1, 9));
  EXPECT_EQ(cache.blocks_needed_to_append(1, 9), 1);
  EXPECT_TRUE(
      contains_all(error_of([&] { cache.append(1, 9); }), {"needs 1 free blocks, 0 are free"}));
  EXPECT_EQ(cache.length(1), 40);
  EXPECT_EQ(cache.block_table(1).size(), 3u);
  cache.add_sequence(2);
  EXPECT_FALSE(cache.can_append(2, 1));
  EXPECT_EQ(cache.appendable_tokens(2), 0);
}

TEST(KvBlockManager, FreedBlocksAreReused) {
  KvBlockManager cache(4, 32);
  cache.add_sequence(1);
  cache.add_sequence(2);
  cache.append(1, 64);  // blocks 0, 1
  cache.append(2, 64);  // blocks 2, 3
  EXPECT_EQ(cache.free_blocks(), 0);
  const std::vector<BlockId> freed = cache.block_table(1);
  cache.free_sequence(1);
  EXPECT_EQ(cache.free_blocks(), 2);
  cache.add_sequence(3);
  cache.append(3, 64);
  std::vector<BlockId> reused = cache.block_table(3);
  std::sort(reused.begin(), reused.end());
  EXPECT_EQ(reused, freed);
  EXPECT_EQ(cache.stats().used_blocks, 4);
}

TEST(KvBlockManager, MisuseIsAClearError) {
  EXPECT_TRUE(contains_all(error_of([] { KvBlockManager(8, 24); }), {"use 16, 32 or 64"}));
  EXPECT_TRUE(contains_all(error_of([] { KvBlockManager(0, 16); }), {"at least one block"}));
  KvBlockManager cache(4, 16);
  cache.add_sequence(5);
  EXPECT_TRUE(contains_all(error_of([&] { cache.add_sequence(5); }),
                           {"sequence 5 is already in the cache"}));
  EXPECT_TRUE(contains_all(error_of([&] { cache.append(6, 1); }), {"append of sequence 6"}));
  EXPECT_TRUE(
      contains_all(error_of([&] { cache.block_table(6); }), {"which the cache does not hold"}));
  EXPECT_TRUE(contains_all(error_of([&] { cache.append(5, -1); }), {"cannot append -1 tokens"}));
  cache.free_sequence(5);
  EXPECT_TRUE(contains_all(error_of([&] { cache.free_sequence(5); }), {"free of sequence 5"}));
  EXPECT_TRUE(
      contains_all(error_of([&] { cache.ref_count(4); }), {"outside the cache's 4 blocks"}));
  EXPECT_TRUE(contains_all(error_of([&] { cache.fork(5, 6); }), {"fork of sequence 5"}));
}

TEST(KvBlockManager, ForkSharesBlocksByReferenceCount) {
  KvBlockManager cache(8, 16);
  cache.add_sequence(1);
  cache.append(1, 40);  // blocks 0 1 2, the last one half full
  cache.fork(1, 2);
  EXPECT_EQ(cache.block_table(2), cache.block_table(1));
  EXPECT_EQ(cache.length(2), 40);
  EXPECT_EQ(cache.free_blocks(), 5);  // forking takes no block
  for (const BlockId block : cache.block_table(1)) EXPECT_EQ(cache.ref_count(block), 2);
  KvCacheStats stats = cache.stats();
  EXPECT_EQ(stats.used_blocks, 3);
  EXPECT_EQ(stats.shared_blocks, 3);
  EXPECT_EQ(stats.num_sequences, 2);

  // Freeing one sharer keeps the blocks; freeing the last returns them.
  cache.free_sequence(1);
  EXPECT_EQ(cache.free_blocks(), 5);
  for (const BlockId block : cache.block_table(2)) EXPECT_EQ(cache.ref_count(block), 1);
  EXPECT_EQ(cache.stats().shared_blocks, 0);
  cache.free_sequence(2);
  EXPECT_EQ(cache.free_blocks(), 8);
}

TEST(KvBlockManager, AppendingToASharedPartialBlockCopiesIt) {
  KvBlockManager cache(8, 16);
  cache.add_sequence(1);
  cache.append(1, 20);  // blocks 0 (full) and 1 (4 of 16)
  cache.fork(1, 2);
  EXPECT_EQ(cache.blocks_needed_to_append(2, 1), 1);  // the copy
  const std::optional<BlockCopy> copy = cache.append(2, 1);
  ASSERT_TRUE(copy.has_value());
  EXPECT_EQ(copy->source, 1);
  EXPECT_NE(copy->destination, 1);
  EXPECT_EQ(cache.block_table(2), std::vector<BlockId>({0, copy->destination}));
  EXPECT_EQ(cache.block_table(1), std::vector<BlockId>({0, 1}));
  EXPECT_EQ(cache.ref_count(0), 2);  // the full block stays shared
  EXPECT_EQ(cache.ref_count(1), 1);
  EXPECT_EQ(cache.ref_count(copy->destination), 1);
  // The other sharer now owns block 1 alone: no copy.
  EXPECT_FALSE(cache.append(1, 1).has_value());
  EXPECT_EQ(cache.block_table(1), std::vector<BlockId>({0, 1}));
}

TEST(KvBlockManager, AppendingAfterASharedFullBlockNeedsNoCopy) {
  KvBlockManager cache(8, 16);
  cache.add_sequence(1);
  cache.append(1, 32);
  cache.fork(1, 2);
  EXPECT_EQ(cache.blocks_needed_to_append(2, 1), 1);  // a new block, not a copy
  EXPECT_FALSE(cache.append(2, 1).has_value());
  EXPECT_EQ(cache.block_table(2).size(), 3u);
  EXPECT_EQ(cache.ref_count(cache.block_table(2)[2]), 1);
}

TEST(KvBlockManager, ForkOfAPrefixSharesOnlyItsBlocks) {
  KvBlockManager cache(8, 16);
  cache.add_sequence(1);
  cache.append(1, 50);   // 4 blocks
  cache.fork(1, 2, 17);  // the first block and one token of the second
  EXPECT_EQ(cache.length(2), 17);
  EXPECT_EQ(cache.block_table(2), std::vector<BlockId>({0, 1}));
  EXPECT_EQ(cache.ref_count(2), 1);
  const std::optional<BlockCopy> copy = cache.append(2, 3);
  ASSERT_TRUE(copy.has_value());
  EXPECT_EQ(copy->source, 1);
  EXPECT_TRUE(contains_all(error_of([&] { cache.fork(1, 3, 51); }), {"cannot fork 51 tokens"}));
}

TEST(KvBlockManager, CopyOnWriteWithNoFreeBlockIsRefused) {
  KvBlockManager cache(2, 16);
  cache.add_sequence(1);
  cache.append(1, 20);  // both blocks
  cache.fork(1, 2);
  EXPECT_EQ(cache.appendable_tokens(2), 0);
  EXPECT_FALSE(cache.can_append(2, 1));
  EXPECT_TRUE(contains_all(error_of([&] { cache.append(2, 1); }), {"free blocks"}));
  EXPECT_EQ(cache.ref_count(1), 2);
}

// Random appends, forks and frees against a count of references kept by the test: every block
// is free or referenced as often as the tables say, and nothing leaks at the end.
TEST(KvBlockManager, RandomOperationsKeepTheBooksBalanced) {
  KvBlockManager cache(64, 16);
  std::mt19937 rng(20240611);
  std::set<SequenceId> live;
  SequenceId next = 0;
  for (int op = 0; op < 5000; ++op) {
    const int choice = static_cast<int>(rng() % 10);
    if (choice < 2 || live.empty()) {
      cache.add_sequence(next);
      live.insert(next++);
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      const SequenceId id = *it;
      if (choice < 7) {
        const std::int64_t count = 1 + rng() % 40;
        if (cache.can_append(id, count)) {
          cache.append(id, count);
        } else {
          EXPECT_THROW(cache.append(id, count), kc::Error);
        }
      } else if (choice < 8) {
        cache.fork(id, next, static_cast<std::int64_t>(rng() % (cache.length(id) + 1)));
        live.insert(next++);
      } else {
        cache.free_sequence(id);
        live.erase(id);
      }
    }
    std::vector<std::int32_t> references(64, 0);
    for (const SequenceId id : live) {
      ASSERT_EQ(static_cast<std::int64_t>(cache.block_table(id).size()),
                cache.blocks_for(cache.length(id)));
      for (const BlockId block : cache.block_table(id)) ++references[block];
    }
    std::int32_t used = 0;
    for (BlockId block = 0; block < 64; ++block) {
      ASSERT_EQ(cache.ref_count(block), references[block]) << "block " << block;
      used += references[block] > 0;
    }
    ASSERT_EQ(cache.stats().used_blocks, used);
    ASSERT_EQ(cache.free_blocks() + used, 64);
  }
  for (const SequenceId id : live) cache.free_sequence(id);
  EXPECT_EQ(cache.free_blocks(), 64);
  EXPECT_EQ(cache.stats().num_sequences, 0);
}

TEST(BlockTables, PackIntoARowMajorInt32TableWithLengths) {
  KvBlockManager cache(16, 16);
  cache.add_sequence(10);
  cache.add_sequence(20);
  cache.add_sequence(30);
  cache.append(10, 33);  // 3 blocks
  cache.append(20, 5);   // 1 block
  cache.append(30, 64);  // 4 blocks
  const PackedBlockTables packed = pack_block_tables(cache, {20, 30, 10});
  EXPECT_EQ(packed.rows, 3);
  EXPECT_EQ(packed.max_blocks_per_seq, 4);
  ASSERT_EQ(packed.table.size(), 12u);
  EXPECT_EQ(packed.lengths, std::vector<std::int32_t>({5, 64, 33}));
  const std::vector<std::int32_t> expected = {
      3,
      kPaddingBlock,
      kPaddingBlock,
      kPaddingBlock,  // sequence 20
      4,
      5,
      6,
      7,  // sequence 30
      0,
      1,
      2,
      kPaddingBlock,  // sequence 10
  };
  EXPECT_EQ(packed.table, expected);
  EXPECT_EQ(packed.at(1, 2), 6);
}

TEST(BlockTables, FixedStrideAndPaddingRows) {
  KvBlockManager cache(16, 32);
  cache.add_sequence(1);
  cache.append(1, 40);
  const PackedBlockTables packed = pack_block_tables(cache, {1}, 8, 4);
  EXPECT_EQ(packed.rows, 4);
  EXPECT_EQ(packed.max_blocks_per_seq, 8);
  EXPECT_EQ(packed.lengths, std::vector<std::int32_t>({40, 0, 0, 0}));
  EXPECT_EQ(packed.at(0, 0), 0);
  EXPECT_EQ(packed.at(0, 1), 1);
  for (std::int32_t row = 0; row < 4; ++row)
    for (std::int32_t column = row == 0 ? 2 : 0; column < 8; ++column)
      EXPECT_EQ(packed.at(row, column), kPaddingBlock);
  // Every token's slot, read back through the table, is distinct and inside the cache.
  std::set<std::int64_t> slots;
  for (std::int32_t position = 0; position < 40; ++position)
    slots.insert(std::int64_t{packed.at(0, position / 32)} * 32 + position % 32);
  EXPECT_EQ(slots.size(), 40u);
  EXPECT_LT(*slots.rbegin(), 16 * 32);

  EXPECT_TRUE(contains_all(error_of([&] { pack_block_tables(cache, {1}, 1); }),
                           {"more than the stride of 1"}));
  EXPECT_TRUE(contains_all(error_of([&] {
                             pack_block_tables(cache, {1, 1}, 8, 1);
                           }),
                           {"1 rows cannot hold"}));
  EXPECT_TRUE(contains_all(error_of([&] { pack_block_tables(cache, {2}); }), {"sequence 2"}));
  const PackedBlockTables empty = pack_block_tables(cache, {}, 8, 2);
  EXPECT_EQ(empty.rows, 2);
  EXPECT_EQ(empty.lengths, std::vector<std::int32_t>({0, 0}));
}

TEST(KvCacheSizing, BlocksFromThePoolBytes) {
  // A SmolLM2-135M-shaped model: 30 layers, 3 KV heads of 64, bf16, blocks of 16 tokens.
  const std::int64_t block_bytes = kv_block_bytes(30, 3, 64, 16, 2);
  EXPECT_EQ(block_bytes, 2 * 30 * 3 * 64 * 16 * 2);
  EXPECT_EQ(kv_blocks_that_fit(block_bytes * 100 + block_bytes - 1, block_bytes), 100);
  EXPECT_EQ(kv_blocks_that_fit(-5, block_bytes), 0);
  EXPECT_TRUE(
      contains_all(error_of([] { kv_block_bytes(30, 0, 64, 16, 2); }), {"must all be positive"}));
}

TEST(GraphBuckets, DefaultBucketsArePowersOfTwoUpToTheMaximum) {
  EXPECT_EQ(default_graph_buckets(256),
            std::vector<std::int32_t>({1, 2, 4, 8, 16, 32, 64, 128, 256}));
  EXPECT_EQ(default_graph_buckets(1), std::vector<std::int32_t>({1}));
  EXPECT_EQ(default_graph_buckets(48), std::vector<std::int32_t>({1, 2, 4, 8, 16, 32, 48}));
  EXPECT_THROW(default_graph_buckets(0), kc::Error);
}

TEST(GraphBuckets, SmallestBucketThatHoldsTheBatch) {
  const std::vector<std::int32_t> buckets = default_graph_buckets(256);
  for (std::int32_t batch = 1; batch <= 256; ++batch) {
    const std::optional<GraphBucketChoice> choice = choose_graph_bucket(buckets, batch);
    ASSERT_TRUE(choice.has_value());
    // Checked against a plain scan: the first bucket >= batch.
    const std::int32_t expected = *std::find_if(buckets.begin(), buckets.end(),
                                                [batch](std::int32_t b) { return b >= batch; });
    EXPECT_EQ(choice->bucket, expected) << "batch " << batch;
    EXPECT_EQ(choice->padding, expected - batch);
  }
  EXPECT_EQ(choose_graph_bucket(buckets, 1)->padding, 0);
  EXPECT_EQ(choose_graph_bucket(buckets, 3)->bucket, 4);
  EXPECT_EQ(choose_graph_bucket(buckets, 129)->padding, 127);
  EXPECT_FALSE(choose_graph_bucket(buckets, 257).has_value());  // runs without a graph
  EXPECT_EQ(choose_graph_bucket({3, 5, 40}, 6)->bucket, 40);
}

TEST(GraphBuckets, BadBucketsAndBatchesAreRefused) {
  EXPECT_TRUE(contains_all(error_of([] { choose_graph_bucket({}, 1); }), {"no bucket"}));
  EXPECT_TRUE(contains_all(error_of([] { choose_graph_bucket({0, 1}, 1); }), {"positive"}));
  EXPECT_TRUE(contains_all(error_of([] {
                             choose_graph_bucket({1, 4, 2}, 1);
                           }),
                           {"strictly increasing"}));
  EXPECT_TRUE(contains_all(error_of([] {
                             choose_graph_bucket({1, 2, 2}, 1);
                           }),
                           {"strictly increasing"}));
  EXPECT_TRUE(contains_all(error_of([] {
                             choose_graph_bucket({1, 2}, 0);
                           }),
                           {"decode batch of 0"}));
}

}  // namespace
}  // namespace kc::engine
