// kc/engine/kv_cache.hpp — the bookkeeping of a paged KV cache, on the host.
//
// The keys and values of every sequence live in fixed-size blocks of `block_size` token slots
// taken from one pool of `num_blocks` blocks (the device memory pool holds the blocks; this class
// only decides which block holds what). A sequence owns a block table: its logical block i (token
// positions [i*block_size, (i+1)*block_size)) is stored in physical block table[i]. A block is
// taken from the free list when a sequence's last block fills, and goes back when no sequence
// refers to it any more.
//
// Prefix sharing: fork() lets a new sequence start with the blocks of another's first tokens, each
// shared block's reference count raised instead of its contents copied. Full shared blocks are
// read-only and stay shared. When a sequence appends into a partially filled last block that is
// shared, the block must be copied first (copy-on-write): append() takes a fresh block, points the
// sequence at it and returns the (source, destination) pair — the caller copies the block's keys
// and values on the device before the step writes into it.
//
// What a paged-attention kernel reads is pack_block_tables(): an int32 [rows, max_blocks_per_seq]
// table (row r = the r-th sequence of the batch) and an int32 length per row. The token at
// position p of row r lives in slot (table[r][p / block_size] * block_size + p % block_size) of
// the cache; entries past a row's last block are kPaddingBlock, which a correct kernel never reads.
//
// Misuse (an unknown or duplicate sequence, appending past the free blocks, freeing twice) is a
// kc::Error that names the sequence.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

namespace kc::engine {

using SequenceId = std::int64_t;
using BlockId = std::int32_t;

// A block table entry past the end of a sequence (a kernel that reads one has a bug).
inline constexpr BlockId kPaddingBlock = -1;

// A copy the caller must make before the step writes: physical block `source` into `destination`.
struct BlockCopy {
  BlockId source = 0;
  BlockId destination = 0;
};

struct KvCacheStats {
  std::int32_t num_blocks = 0;
  std::int32_t free_blocks = 0;
  std::int32_t used_blocks = 0;    // referenced by at least one sequence
  std::int32_t shared_blocks = 0;  // referenced by more than one sequence
  std::int32_t num_sequences = 0;
};

class KvBlockManager {
 public:
  // block_size: 16, 32 or 64 token slots (the sizes the paged-attention kernels are built for).
  KvBlockManager(std::int32_t num_blocks, std::int32_t block_size);

  std::int32_t block_size() const { return block_size_; }
  std::int32_t num_blocks() const { return static_cast<std::int32_t>(ref_counts_.size()); }
  std::int32_t free_blocks() const { return static_cast<std::int32_t>(free_list_.size()); }
  // Blocks that hold `tokens` token slots.
  std::int32_t blocks_for(std::int64_t tokens) const;

  // Registers an empty sequence (no blocks yet).
  void add_sequence(SequenceId id);
  bool has_sequence(SequenceId id) const { return sequences_.count(id) != 0; }
  // Tokens stored for the sequence.
  std::int64_t length(SequenceId id) const;
  const std::vector<BlockId>& block_table(SequenceId id) const;

  // New blocks that appending `count` tokens needs (including a copy-on-write block).
  std::int32_t blocks_needed_to_append(SequenceId id, std::int64_t count) const;
  bool can_append(SequenceId id, std::int64_t count) const {
    return blocks_needed_to_append(id, count) <= free_blocks();
  }
  // The most tokens the sequence can append with the blocks free now.
  std::int64_t appendable_tokens(SequenceId id) const;
  // Reserves slots for `count` more tokens, taking blocks from the free list as blocks fill. If
  // the last block was partially filled and shared, it is replaced by a private copy first and the
  // copy to make is returned. Throws kc::Error (and changes nothing) if the free blocks do not
  // suffice: check can_append() first.
  std::optional<BlockCopy> append(SequenceId id, std::int64_t count);

  // Starts sequence `child` with the first `prefix_tokens` tokens of `parent` (all of them when
  // omitted), sharing the blocks that hold them. Takes no block from the free list.
  void fork(SequenceId parent, SequenceId child, std::optional<std::int64_t> prefix_tokens = {});

  // Releases the sequence's blocks (a shared block returns to the free list when its last
  // sequence is freed) and forgets the sequence.
  void free_sequence(SequenceId id);

  std::int32_t ref_count(BlockId block) const;
  KvCacheStats stats() const;

 private:
  struct Sequence {
    std::vector<BlockId> blocks;
    std::int64_t length = 0;
  };
  const Sequence& find(SequenceId id, const char* operation) const;
  Sequence& find(SequenceId id, const char* operation);
  BlockId take_block();
  void release_block(BlockId block);

  std::int32_t block_size_;
  std::vector<std::int32_t> ref_counts_;  // per physical block
  std::vector<BlockId> free_list_;        // taken from the back
  std::unordered_map<SequenceId, Sequence> sequences_;
};

// The block tables of a batch as a paged-attention kernel reads them (row-major, int32).
struct PackedBlockTables {
  std::int32_t rows = 0;                // sequences, plus padding rows (length 0)
  std::int32_t max_blocks_per_seq = 0;  // the row stride
  std::vector<std::int32_t> table;      // rows * max_blocks_per_seq, kPaddingBlock past the end
  std::vector<std::int32_t> lengths;    // rows: tokens of each sequence, 0 for padding rows

  std::int32_t at(std::int32_t row, std::int32_t logical_block) const {
    return table[static_cast<std::size_t>(row) * max_blocks_per_seq + logical_block];
  }
};

// Packs the tables of `sequences`, in that order. max_blocks_per_seq: the row stride (0 = the
// longest table; a CUDA graph wants a fixed stride, such as blocks_for(max context)). rows: at
// least sequences.size() (0 = exactly that); the rows past the sequences are padding rows, for a
// batch padded up to a captured graph's size. Throws kc::Error if a table is wider than the
// stride or a sequence is unknown.
PackedBlockTables pack_block_tables(const KvBlockManager& manager,
                                    const std::vector<SequenceId>& sequences,
                                    std::int32_t max_blocks_per_seq = 0, std::int32_t rows = 0);

// Bytes one block takes in the device pool: keys and values of every layer,
// 2 * num_layers * num_kv_heads * head_dim * block_size elements of `element_bytes`.
std::int64_t kv_block_bytes(std::int64_t num_layers, std::int64_t num_kv_heads,
                            std::int64_t head_dim, std::int32_t block_size,
                            std::int32_t element_bytes);
// Blocks that fit in `pool_bytes` (the part of the memory pool left for the cache).
std::int32_t kv_blocks_that_fit(std::int64_t pool_bytes, std::int64_t block_bytes);

}  // namespace kc::engine
