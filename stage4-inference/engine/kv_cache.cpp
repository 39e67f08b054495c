// The paged KV cache's block bookkeeping (kc/engine/kv_cache.hpp).
#include "kc/engine/kv_cache.hpp"

#include <algorithm>
#include <limits>

#include "kc/common/error.hpp"

namespace kc::engine {

KvBlockManager::KvBlockManager(std::int32_t num_blocks, std::int32_t block_size)
    : block_size_(block_size) {
  require(block_size == 16 || block_size == 32 || block_size == 64,
          "KV cache block size {} is not supported: use 16, 32 or 64 tokens per block (the sizes "
          "the paged-attention kernels are built for)",
          block_size);
  require(num_blocks > 0, "a KV cache needs at least one block, got {}", num_blocks);
  ref_counts_.assign(static_cast<std::size_t>(num_blocks), 0);
  // Taken from the back: block 0 first, and a freed block is the next one reused.
  free_list_.reserve(static_cast<std::size_t>(num_blocks));
  for (BlockId block = num_blocks - 1; block >= 0; --block) free_list_.push_back(block);
}

std::int32_t KvBlockManager::blocks_for(std::int64_t tokens) const {
  require(tokens >= 0, "a negative token count ({}) has no blocks", tokens);
  const std::int64_t blocks = (tokens + block_size_ - 1) / block_size_;
  return blocks > std::numeric_limits<std::int32_t>::max()
             ? std::numeric_limits<std::int32_t>::max()
             : static_cast<std::int32_t>(blocks);
}

const KvBlockManager::Sequence& KvBlockManager::find(SequenceId id, const char* operation) const {
  const auto it = sequences_.find(id);
  require(it != sequences_.end(),
          "KV cache: {} of sequence {}, which the cache does not hold (never added, or already "
          "freed)",
          operation, id);
  return it->second;
}

KvBlockManager::Sequence& KvBlockManager::find(SequenceId id, const char* operation) {
  return const_cast<Sequence&>(static_cast<const KvBlockManager&>(*this).find(id, operation));
}

void KvBlockManager::add_sequence(SequenceId id) {
  require(sequences_.count(id) == 0,
          "KV cache: sequence {} is already in the cache; free it before adding it again", id);
  sequences_.emplace(id, Sequence{});
}

std::int64_t KvBlockManager::length(SequenceId id) const { return find(id, "length").length; }

const std::vector<BlockId>& KvBlockManager::block_table(SequenceId id) const {
  return find(id, "block table").blocks;
}

std::int32_t KvBlockManager::blocks_needed_to_append(SequenceId id, std::int64_t count) const {
  require(count >= 0, "KV cache: cannot append {} tokens to sequence {}", count, id);
  const Sequence& sequence = find(id, "append");
  const bool last_block_partial = sequence.length % block_size_ != 0;
  const bool copy_on_write =
      count > 0 && last_block_partial && ref_counts_[sequence.blocks.back()] > 1;
  return blocks_for(sequence.length + count) - blocks_for(sequence.length) +
         (copy_on_write ? 1 : 0);
}

std::int64_t KvBlockManager::appendable_tokens(SequenceId id) const {
  const Sequence& sequence = find(id, "append");
  const std::int64_t slack = (block_size_ - sequence.length % block_size_) % block_size_;
  const bool copy_on_write = slack > 0 && ref_counts_[sequence.blocks.back()] > 1;
  if (copy_on_write && free_blocks() == 0) return 0;
  return slack + std::int64_t{free_blocks() - (copy_on_write ? 1 : 0)} * block_size_;
}

BlockId KvBlockManager::take_block() {
  const BlockId block = free_list_.back();
  free_list_.pop_back();
  ref_counts_[block] = 1;
  return block;
}

void KvBlockManager::release_block(BlockId block) {
  if (--ref_counts_[block] == 0) free_list_.push_back(block);
}

std::optional<BlockCopy> KvBlockManager::append(SequenceId id, std::int64_t count) {
  const std::int32_t needed = blocks_needed_to_append(id, count);
  require(needed <= free_blocks(),
          "KV cache: appending {} tokens to sequence {} needs {} free blocks, {} are free; check "
          "can_append() and free (or preempt) a sequence first",
          count, id, needed, free_blocks());
  Sequence& sequence = find(id, "append");
  std::optional<BlockCopy> copy;
  if (count > 0 && sequence.length % block_size_ != 0 &&
      ref_counts_[sequence.blocks.back()] > 1) {
    const BlockId shared = sequence.blocks.back();
    const BlockId private_copy = take_block();
    release_block(shared);  // still referenced by the other sequences
    sequence.blocks.back() = private_copy;
    copy = BlockCopy{shared, private_copy};
  }
  sequence.length += count;
  while (static_cast<std::int64_t>(sequence.blocks.size()) < blocks_for(sequence.length))
    sequence.blocks.push_back(take_block());
  return copy;
}

void KvBlockManager::fork(SequenceId parent, SequenceId child,
                          std::optional<std::int64_t> prefix_tokens) {
  const Sequence& source = find(parent, "fork");
  const std::int64_t tokens = prefix_tokens.value_or(source.length);
  require(tokens >= 0 && tokens <= source.length,
          "KV cache: cannot fork {} tokens of sequence {}, which holds {}", tokens, parent,
          source.length);
  require(sequences_.count(child) == 0,
          "KV cache: cannot fork into sequence {}, which is already in the cache", child);
  Sequence copy;
  copy.length = tokens;
  copy.blocks.assign(source.blocks.begin(), source.blocks.begin() + blocks_for(tokens));
  for (const BlockId block : copy.blocks) ++ref_counts_[block];
  sequences_.emplace(child, std::move(copy));
}

void KvBlockManager::free_sequence(SequenceId id) {
  const Sequence& sequence = find(id, "free");
  for (const BlockId block : sequence.blocks) release_block(block);
  sequences_.erase(id);
}

std::int32_t KvBlockManager::ref_count(BlockId block) const {
  require(block >= 0 && block < num_blocks(), "KV cache: block {} is outside the cache's {} blocks",
          block, num_blocks());
  return ref_counts_[block];
}

KvCacheStats KvBlockManager::stats() const {
  KvCacheStats stats;
  stats.num_blocks = num_blocks();
  stats.free_blocks = free_blocks();
  stats.used_blocks = num_blocks() - free_blocks();
  stats.shared_blocks = static_cast<std::int32_t>(
      std::count_if(ref_counts_.begin(), ref_counts_.end(), [](std::int32_t n) { return n > 1; }));
  stats.num_sequences = static_cast<std::int32_t>(sequences_.size());
  return stats;
}

PackedBlockTables pack_block_tables(const KvBlockManager& manager,
                                    const std::vector<SequenceId>& sequences,
                                    std::int32_t max_blocks_per_seq, std::int32_t rows) {
  const auto num_sequences = static_cast<std::int32_t>(sequences.size());
  std::int32_t widest = 0;
  for (const SequenceId id : sequences)
    widest = std::max(widest, static_cast<std::int32_t>(manager.block_table(id).size()));
  require(max_blocks_per_seq >= 0 && rows >= 0,
          "block tables: the stride ({}) and row count ({}) cannot be negative",
          max_blocks_per_seq, rows);
  require(max_blocks_per_seq == 0 || widest <= max_blocks_per_seq,
          "block tables: a sequence of the batch has {} blocks, more than the stride of {} "
          "(size the stride for the longest context the engine allows)",
          widest, max_blocks_per_seq);
  require(rows == 0 || rows >= num_sequences,
          "block tables: {} rows cannot hold the batch's {} sequences", rows, num_sequences);

  PackedBlockTables packed;
  packed.rows = rows == 0 ? num_sequences : rows;
  packed.max_blocks_per_seq = max_blocks_per_seq == 0 ? widest : max_blocks_per_seq;
  packed.table.assign(static_cast<std::size_t>(packed.rows) * packed.max_blocks_per_seq,
                      kPaddingBlock);
  packed.lengths.assign(static_cast<std::size_t>(packed.rows), 0);
  for (std::int32_t row = 0; row < num_sequences; ++row) {
    const std::vector<BlockId>& blocks = manager.block_table(sequences[row]);
    std::copy(blocks.begin(), blocks.end(),
              packed.table.begin() + static_cast<std::ptrdiff_t>(row) * packed.max_blocks_per_seq);
    const std::int64_t length = manager.length(sequences[row]);
    require(length <= std::numeric_limits<std::int32_t>::max(),
            "block tables: sequence {} holds {} tokens, more than an int32 length can say",
            sequences[row], length);
    packed.lengths[row] = static_cast<std::int32_t>(length);
  }
  return packed;
}

std::int64_t kv_block_bytes(std::int64_t num_layers, std::int64_t num_kv_heads,
                            std::int64_t head_dim, std::int32_t block_size,
                            std::int32_t element_bytes) {
  require(num_layers > 0 && num_kv_heads > 0 && head_dim > 0 && block_size > 0 &&
              element_bytes > 0,
          "KV block size: layers ({}), KV heads ({}), head_dim ({}), block size ({}) and element "
          "bytes ({}) must all be positive",
          num_layers, num_kv_heads, head_dim, block_size, element_bytes);
  return 2 * num_layers * num_kv_heads * head_dim * block_size * element_bytes;
}

std::int32_t kv_blocks_that_fit(std::int64_t pool_bytes, std::int64_t block_bytes) {
  require(block_bytes > 0, "KV cache: a block of {} bytes is not a block", block_bytes);
  const std::int64_t blocks = std::max<std::int64_t>(pool_bytes, 0) / block_bytes;
  return static_cast<std::int32_t>(
      std::min<std::int64_t>(blocks, std::numeric_limits<std::int32_t>::max()));
}

}  // namespace kc::engine
