// The attention_decode_paged op (kc/stage3/attention_decode.hpp): the sequences' lengths, the
// seeded block placement, the validation of block tables, the references (attention_fwd's, on
// each sequence's pages gathered), tolerance, FLOP and byte counts, and the shapes.
#include "kc/stage3/attention_decode.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "attention_decode_gather.hpp"
#include "kc/common/fill.hpp"
#include "kc/common/splitmix.hpp"
#include "kc/stage2/references.hpp"
#include "kc/stage3/attention.hpp"

namespace kc::stage3 {
namespace {

constexpr double kVMax = 1.0;  // V ~ uniform(-kVMax, kVMax), as attention_fwd's
// build_op seeds operand i of a run with seed `run * 16 + i` (op_builder.cpp): every operand's
// initializer recovers the run's seed from its own and draws the same block placement.
constexpr std::uint64_t kOperandSeedsPerRun = 16;
constexpr std::uint64_t kLayoutStream = 0x5eed'b10c'7ab1e000ull;  // keeps the placement apart from the fills

std::vector<ParamSpec> decode_params() {
  return {{"block_size", 16.0, "tokens per cache block: 16, 32 or 64"},
          {"lengths", 0.0, "0: every sequence Sk keys; 1: ragged (Sk, 1, bs-1, bs+1, 0, bs, hashed)"},
          {"scale", 0.0, "softmax scale; 0 means 1/sqrt(D)"}};
}


// Uniform in [0, n) from a counter (the bias of the modulo is below 2^-40 for the pool sizes here).
class Draws {
 public:
  explicit Draws(std::uint64_t seed) : state_(splitmix64(seed ^ kLayoutStream)) {}
  std::int64_t below(std::int64_t n) { return static_cast<std::int64_t>(splitmix64(state_++) % static_cast<std::uint64_t>(n)); }

 private:
  std::uint64_t state_;
};

Shape q_shape(const Problem& p) {
  const DecodeShape s = decode_shape(p);
  return {s.batch, s.q_heads, s.q_len, s.head_dim};
}
Shape cache_shape(const Problem& p) {
  const DecodeShape s = decode_shape(p);
  return {decode_num_blocks(p), s.kv_heads, s.block_size, s.head_dim};
}
Shape table_shape(const Problem& p) {
  const DecodeShape s = decode_shape(p);
  return {s.batch, s.max_blocks()};
}
Shape lens_shape(const Problem& p) { return {decode_shape(p).batch}; }
Shape lse_shape(const Problem& p) {
  const DecodeShape s = decode_shape(p);
  return {s.batch, s.q_heads, s.q_len};
}

// The (1, Hq, Hkv, Sq, L, D) attention_fwd problem one sequence of L keys is, with the causal mask.
AttentionShape sequence_shape(const DecodeShape& s, std::int64_t length) {
  AttentionShape one;
  one.batch = 1;
  one.q_heads = s.q_heads;
  one.kv_heads = s.kv_heads;
  one.q_len = s.q_len;
  one.kv_len = length;
  one.head_dim = s.head_dim;
  return one;
}

// Sequence b's first L rows of every kv head of a host pool, as a contiguous [Hkv, L, D] tensor.
std::vector<double> gather_sequence(const DecodeShape& s, const PagedKvLayout& layout, const double* pool,
                                    std::int64_t b) {
  const std::int64_t length = layout.seq_lens[static_cast<std::size_t>(b)];
  std::vector<double> out(static_cast<std::size_t>(s.kv_heads * length * s.head_dim));
  for (std::int64_t h = 0; h < s.kv_heads; ++h)
    for (std::int64_t j = 0; j < length; ++j) {
      const std::int64_t block = layout.block(b, j / s.block_size);
      const double* row = pool + ((block * s.kv_heads + h) * s.block_size + j % s.block_size) * s.head_dim;
      std::copy(row, row + s.head_dim, out.begin() + (h * length + j) * s.head_dim);
    }
  return out;
}

// A layout of `problem`'s sizes with no lengths or table yet.
PagedKvLayout sized_layout(const Problem& problem) {
  const DecodeShape s = decode_shape(problem);
  PagedKvLayout layout;
  layout.batch = s.batch;
  layout.max_blocks = s.max_blocks();
  layout.block_size = s.block_size;
  layout.num_blocks = decode_num_blocks(problem);
  return layout;
}

// The bookkeeping operands as the host reference receives them (doubles), back to a layout.
PagedKvLayout layout_from(const Problem& p, const HostTensors& in) {
  PagedKvLayout layout = sized_layout(p);
  for (double length : in.at("seq_lens")) layout.seq_lens.push_back(static_cast<std::int32_t>(length));
  for (double id : in.at("block_table")) layout.block_table.push_back(static_cast<std::int32_t>(id));
  return layout;
}

// The same from the device operands (a few bytes a sequence).
PagedKvLayout layout_from(const Problem& p, const Operands& operands, cudaStream_t stream) {
  const Tensor& lens = operands["seq_lens"];
  const Tensor& table = operands["block_table"];
  HostTensors bookkeeping;
  bookkeeping["seq_lens"] = to_host_double(lens.raw(), lens.dtype, lens.count(), stream);
  bookkeeping["block_table"] = to_host_double(table.raw(), table.dtype, table.count(), stream);
  return layout_from(p, bookkeeping);
}

// The rows of each sequence's last block past its length, in every kv head of `pool`, set to NaN:
// a kernel must never let them reach the output.
void poison_block_tails(const DecodeShape& s, const PagedKvLayout& layout, Tensor& pool, cudaStream_t stream) {
  for (std::int64_t b = 0; b < s.batch; ++b) {
    const std::int64_t length = layout.seq_lens[static_cast<std::size_t>(b)];
    const std::int64_t used_rows = length % s.block_size;
    if (used_rows == 0) continue;  // empty, or its last block is full
    const std::int64_t block = layout.block(b, length / s.block_size);
    for (std::int64_t h = 0; h < s.kv_heads; ++h) {
      const std::int64_t first = ((block * s.kv_heads + h) * s.block_size + used_rows) * s.head_dim;
      poison(static_cast<std::byte*>(pool.raw()) + dtype_bytes(pool.dtype, static_cast<std::size_t>(first)),
             pool.dtype, static_cast<std::size_t>((s.block_size - used_rows) * s.head_dim), stream);
    }
  }
}

// A pool of the problem's cache filled at random, the rows past each sequence's length poisoned;
// returns the run's layout (the placement every operand of the run draws).
PagedKvLayout fill_cache(const Problem& p, Tensor& tensor, std::uint64_t seed, FillSpec fill, cudaStream_t stream) {
  PagedKvLayout layout = decode_layout(p, seed / kOperandSeedsPerRun);
  fill_random(tensor.raw(), tensor.dtype, tensor.count(), seed, fill, stream);
  poison_block_tails(decode_shape(p), layout, tensor, stream);
  return layout;
}

OperandSpec cache_operand(const char* name, FillSpec fill) {
  OperandSpec cache = input(name, &cache_shape, fill);
  cache.initialize = [fill](const Problem& p, Tensor& tensor, std::uint64_t seed, cudaStream_t stream) {
    fill_cache(p, tensor, seed, fill, stream);
  };
  return cache;
}

OperandSpec bookkeeping_operand(const char* name, ShapeFn shape, bool is_table) {
  OperandSpec operand = input(name, std::move(shape), FillSpec{}, DType::i32);
  operand.initialize = [is_table](const Problem& p, Tensor& tensor, std::uint64_t seed, cudaStream_t stream) {
    const PagedKvLayout layout = decode_layout(p, seed / kOperandSeedsPerRun);
    const std::vector<std::int32_t>& values = is_table ? layout.block_table : layout.seq_lens;
    tensor.upload(values.data(), values.size() * sizeof(std::int32_t), stream);
  };
  return operand;
}

// The reference of problems too large for the CPU: per sequence, its pages gathered into FP64 on
// the GPU and attention_fwd's FP64 device reference with the causal mask; empty sequences keep
// O = 0 and LSE = -inf.
References attention_decode_device_reference(const Problem& problem, const Operands& operands, Context& context) {
  const DecodeShape s = decode_shape(problem);
  const cudaStream_t stream = context.stream();
  const PagedKvLayout layout = layout_from(problem, operands, stream);
  validate_paged_kv(table_view(layout));
  const Tensor& q = operands["Q"];
  DeviceBuffer<double> q64(q.count());
  convert_to_double(q.raw(), q.dtype, q.count(), q64.data(), stream);
  DeviceBuffer<double> o64(q.count());
  KC_CUDA_CHECK(cudaMemsetAsync(o64.data(), 0, o64.bytes(), stream));
  DeviceBuffer<double> lse64(static_cast<std::size_t>(s.batch * s.q_heads * s.q_len));
  lse64.copy_from_host(std::vector<double>(lse64.size(), -std::numeric_limits<double>::infinity()), stream);

  const std::int64_t longest = *std::max_element(layout.seq_lens.begin(), layout.seq_lens.end());
  DeviceBuffer<double> k64(static_cast<std::size_t>(s.kv_heads * longest * s.head_dim));
  DeviceBuffer<double> v64(k64.size());
  const std::int64_t rows_per_sequence = s.q_heads * s.q_len;
  for (std::int64_t b = 0; b < s.batch; ++b) {
    const std::int64_t length = layout.seq_lens[static_cast<std::size_t>(b)];
    if (length == 0) continue;
    PagedSequence sequence;
    sequence.dtype = problem.dtype;
    sequence.block_row = operands["block_table"].data<std::int32_t>() + b * s.max_blocks();
    sequence.length = length;
    sequence.kv_heads = s.kv_heads;
    sequence.block_size = s.block_size;
    sequence.head_dim = s.head_dim;
    sequence.pool = operands["K_cache"].raw();
    gather_pages_to_double(sequence, k64.data(), stream);
    sequence.pool = operands["V_cache"].raw();
    gather_pages_to_double(sequence, v64.data(), stream);
    const std::int64_t first_row = b * rows_per_sequence;
    attention_reference_on_device(sequence_shape(s, length), attention_scale(problem), true,
                                  q64.data() + first_row * s.head_dim, k64.data(), v64.data(),
                                  o64.data() + first_row * s.head_dim, lse64.data() + first_row,
                                  context.cublas(), stream);
  }
  References references;
  references.emplace("O", std::move(o64));
  references.emplace("LSE", std::move(lse64));
  return references;
}

// The K/V bytes the sequences hold (what a decode step must read), Q, O, LSE, the lengths and the
// used table slots: the minimum DRAM traffic.
double decode_bytes(const Problem& p) {
  const DecodeShape s = decode_shape(p);
  const auto element = static_cast<double>(dtype_bytes(p.dtype, 1));
  double keys = 0.0, used_slots = 0.0;
  for (const std::int32_t length : decode_seq_lens(s)) {
    keys += length;
    used_slots += static_cast<double>(blocks_for(length, s.block_size));
  }
  const auto rows = static_cast<double>(s.batch * s.q_heads * s.q_len);
  const auto d = static_cast<double>(s.head_dim);
  return keys * static_cast<double>(s.kv_heads) * d * 2.0 * element  // K and V rows
         + 2.0 * rows * d * element                                    // Q in, O out
         + rows * 4.0                                                  // LSE
         + static_cast<double>(s.batch) * 4.0 + used_slots * 4.0;      // seq_lens, block ids
}

std::vector<ProblemSpec> decode_bench_problems() {
  // Llama-3-8B's attention (32 query heads over 8 kv heads, D = 128) decoding one token per
  // sequence, batch 1 to 256 at contexts of 1k, 8k and 32k, in blocks of 16. The largest cache,
  // 256 x 32k tokens x 8 kv heads x 128 x 2 (K, V) x 2 bytes, is 32 GiB; kc-bench holds two
  // operand sets (kernel and baseline) and the copy baseline's 32 GiB pair: about 96 GiB of the
  // H200's 141 GB. Then a ragged batch, and four new tokens (speculative verification).
  std::vector<ProblemSpec> problems;
  for (const std::int64_t context : {1024, 8192, 32768})
    for (const std::int64_t batch : {1, 8, 64, 256})
      problems.push_back({{batch, 32, 8, 1, context, 128}, DType::bf16});
  problems.push_back({{64, 32, 8, 1, 8192, 128}, DType::bf16, {{"lengths", 1.0}}});
  problems.push_back({{64, 32, 8, 4, 8192, 128}, DType::bf16});
  return problems;
}

std::vector<ProblemSpec> decode_conformance_problems() {
  // Lengths 1, block_size - 1 and + 1, 0 (ragged sequence 4) and below Sq (rows that see no key);
  // Sq 1, 3, 4 and 8; grouped heads 1, 4 and 8; D 64 and 128 (and 80, which the decode rungs
  // refuse: their listed refusals); blocks of 16, 32 and 64; an explicit scale; bf16 and f16. The
  // last two are checked against the FP64 device reference.
  using P = ParamValues;
  const auto blocks = [](double size) { return P{{"block_size", size}}; };
  const auto ragged = [](double size) { return P{{"block_size", size}, {"lengths", 1.0}}; };
  return {
      {{1, 1, 1, 1, 1, 64}},
      {{1, 4, 1, 1, 15, 64}},
      {{1, 4, 1, 1, 17, 64}},
      {{3, 8, 2, 4, 33, 128}, std::nullopt, blocks(32)},
      {{7, 8, 8, 1, 100, 128}, std::nullopt, ragged(16)},
      {{7, 32, 8, 4, 257, 128}, std::nullopt, ragged(16)},
      {{9, 8, 1, 1, 1000, 64}, std::nullopt, ragged(64)},
      {{6, 8, 2, 3, 63, 64}, std::nullopt, ragged(64)},
      {{6, 8, 2, 2, 45, 80}, std::nullopt, ragged(32)},
      {{2, 16, 2, 8, 129, 128}, std::nullopt, blocks(64)},
      {{5, 32, 8, 1, 2049, 128}, std::nullopt, P{{"block_size", 32.0}, {"lengths", 1.0}, {"scale", 0.5}}},
      {{1, 32, 8, 4, 4095, 64}},
      {{16, 32, 8, 1, 8191, 128}, std::nullopt, ragged(16)},
  };
}

}  // namespace

DecodeShape decode_shape(const Problem& problem) {
  require(problem.dims.size() == 6,
          "attention_decode_paged takes 6 dimensions B x Hq x Hkv x Sq x Sk x D, got {}", problem.shape());
  DecodeShape s;
  s.batch = problem.dims[0];
  s.q_heads = problem.dims[1];
  s.kv_heads = problem.dims[2];
  s.q_len = problem.dims[3];
  s.max_len = problem.dims[4];
  s.head_dim = problem.dims[5];
  s.block_size = static_cast<std::int64_t>(problem.param("block_size"));
  require(s.block_size >= 1, "attention_decode_paged: block_size = {} tokens; the cache's blocks hold 16, 32 or 64",
          problem.param("block_size"));
  s.lengths = problem.param("lengths") == 1.0 ? DecodeLengths::ragged : DecodeLengths::full;
  return s;
}

std::int64_t blocks_for(std::int64_t length, std::int64_t block_size) {
  return (length + block_size - 1) / block_size;
}

std::vector<std::int32_t> decode_seq_lens(const DecodeShape& s) {
  std::vector<std::int32_t> lengths(static_cast<std::size_t>(s.batch), static_cast<std::int32_t>(s.max_len));
  if (s.lengths == DecodeLengths::full) return lengths;
  const std::int64_t edges[] = {s.max_len, 1, s.block_size - 1, s.block_size + 1, 0, s.block_size};
  constexpr std::int64_t kEdges = sizeof(edges) / sizeof(edges[0]);
  for (std::int64_t b = 0; b < s.batch; ++b) {
    const std::int64_t length =
        b < kEdges ? edges[b]
                   : 1 + static_cast<std::int64_t>(splitmix64(static_cast<std::uint64_t>(b) * 0x100000001b3ull ^
                                                       static_cast<std::uint64_t>(s.max_len)) %
                                                   static_cast<std::uint64_t>(s.max_len));
    lengths[static_cast<std::size_t>(b)] = static_cast<std::int32_t>(std::clamp<std::int64_t>(length, 0, s.max_len));
  }
  return lengths;
}

std::int64_t decode_visible_keys(std::int64_t length, std::int64_t q_len, std::int64_t query) {
  return std::clamp<std::int64_t>(length - (q_len - 1 - query), 0, length);
}

double decode_visible_pairs(const DecodeShape& s) {
  double pairs = 0.0;
  for (const std::int32_t length : decode_seq_lens(s))
    for (std::int64_t t = 0; t < s.q_len; ++t) pairs += static_cast<double>(decode_visible_keys(length, s.q_len, t));
  return pairs * static_cast<double>(s.q_heads);
}

std::int64_t decode_num_blocks(const Problem& problem) {
  const DecodeShape s = decode_shape(problem);
  std::int64_t blocks = 0;
  for (const std::int32_t length : decode_seq_lens(s)) blocks += blocks_for(length, s.block_size);
  return blocks;
}

PagedKvLayout decode_layout(const Problem& problem, std::uint64_t seed) {
  const DecodeShape s = decode_shape(problem);
  PagedKvLayout layout = sized_layout(problem);
  layout.seq_lens = decode_seq_lens(s);
  layout.block_table.assign(static_cast<std::size_t>(s.batch * layout.max_blocks), kNoBlock);

  // The used slots in order (sequence by sequence), each given a block of a shuffled pool.
  std::vector<std::size_t> used;
  std::vector<bool> follows_slot;  // whether used[i] has a logical predecessor (slot > 0)
  for (std::int64_t b = 0; b < s.batch; ++b)
    for (std::int64_t slot = 0; slot < blocks_for(layout.seq_lens[static_cast<std::size_t>(b)], s.block_size); ++slot) {
      used.push_back(static_cast<std::size_t>(b * layout.max_blocks + slot));
      follows_slot.push_back(slot > 0);
    }
  std::vector<std::int32_t> ids(used.size());
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>(i);
  Draws draws(seed);
  for (std::size_t i = ids.size(); i > 1; --i)  // Fisher-Yates
    std::swap(ids[i - 1], ids[static_cast<std::size_t>(draws.below(static_cast<std::int64_t>(i)))]);
  // No block may be its predecessor's id + 1 (a kernel reading the next physical block would
  // pass): swap such a block with a random other until none is left. Each pass removes most of
  // them; a pool with fewer than two blocks has no pairs at all.
  constexpr int kMaxPasses = 1000;
  const auto adjacent = [&](std::size_t i) { return follows_slot[i] && ids[i] == ids[i - 1] + 1; };
  for (int pass = 0;; ++pass) {
    bool clean = true;
    for (std::size_t i = 0; i < ids.size(); ++i)
      if (adjacent(i)) {
        clean = false;
        const auto other = static_cast<std::size_t>(draws.below(static_cast<std::int64_t>(ids.size()) - 1));
        std::swap(ids[i], ids[other < i ? other : other + 1]);
      }
    if (clean) break;
    require(pass < kMaxPasses, "decode_layout: no shuffled placement found for {} (a bug)", problem.label());
  }
  for (std::size_t i = 0; i < used.size(); ++i) layout.block_table[used[i]] = ids[i];
  return layout;
}

PagedKvTableView table_view(const PagedKvLayout& layout) {
  PagedKvTableView view;
  view.seq_lens = layout.seq_lens.data();
  view.block_table = layout.block_table.data();
  view.batch = layout.batch;
  view.max_blocks = layout.max_blocks;
  view.block_size = layout.block_size;
  view.num_blocks = layout.num_blocks;
  return view;
}

void validate_seq_lens(const PagedKvTableView& table) {
  require(table.block_size >= 1 && table.max_blocks >= 0 && table.batch >= 0,
          "attention_decode_paged: a block table needs block_size >= 1 (got {}), max_blocks >= 0 (got {}) and "
          "batch >= 0 (got {})",
          table.block_size, table.max_blocks, table.batch);
  require(table.batch == 0 || table.seq_lens != nullptr, "attention_decode_paged: seq_lens is null for a batch of {}",
          table.batch);
  const std::int64_t capacity = table.max_blocks * table.block_size;
  for (std::int64_t b = 0; b < table.batch; ++b) {
    const std::int64_t length = table.seq_lens[b];
    require(length >= 0,
            "attention_decode_paged: sequence {} has length {}; a length counts the keys in the cache (the new "
            "tokens included) and must be >= 0",
            b, length);
    require(length <= capacity,
            "attention_decode_paged: sequence {} has length {}, more keys than its block-table row holds ({} "
            "slots of {} = {} keys): give the table more slots per sequence",
            b, length, table.max_blocks, table.block_size, capacity);
  }
}

void validate_paged_kv(const PagedKvTableView& table) {
  validate_seq_lens(table);
  require(table.batch == 0 || table.max_blocks == 0 || table.block_table != nullptr,
          "attention_decode_paged: block_table is null for a batch of {}", table.batch);
  for (std::int64_t b = 0; b < table.batch; ++b) {
    const std::int64_t length = table.seq_lens[b];
    const std::int64_t used = blocks_for(length, table.block_size);
    for (std::int64_t slot = 0; slot < used; ++slot) {
      const std::int64_t id = table.block_table[b * table.max_blocks + slot];
      require(id >= 0 && id < table.num_blocks,
              "attention_decode_paged: sequence {}, block-table slot {} holds block id {}, outside the pool's "
              "[0, {}); the slot is read, since the sequence's {} keys fill its first {} slots of {} keys",
              b, slot, id, table.num_blocks, length, used, table.block_size);
    }
  }
}

std::string attention_decode_shape_error(const Problem& problem) {
  const double block_size = problem.param("block_size");
  if (block_size != 16.0 && block_size != 32.0 && block_size != 64.0)
    return fmt::format("block_size = {} tokens; the cache's blocks hold 16, 32 or 64", block_size);
  const DecodeShape s = decode_shape(problem);
  if (s.q_heads % s.kv_heads != 0)
    return fmt::format("{}: Hq = {} is not a multiple of Hkv = {}: each kv head serves the same number of "
                       "query heads (grouped-query attention)",
                       problem.shape(), s.q_heads, s.kv_heads);
  if (s.q_len > kMaxDecodeQueries)
    return fmt::format("{}: Sq = {} new tokens per sequence; decoding takes at most {} (more is a prefill: "
                       "attention_fwd)",
                       problem.shape(), s.q_len, kMaxDecodeQueries);
  const double lengths = problem.param("lengths");
  if (lengths != 0.0 && lengths != 1.0)
    return fmt::format("lengths = {}: 0 gives every sequence Sk keys, 1 ragged lengths", lengths);
  if (s.batch * s.max_blocks() > INT32_MAX)
    return fmt::format("{}: a block table of B x ceil(Sk / block_size) = {} slots; int32 block ids address at "
                       "most 2^31 - 1 blocks",
                       problem.shape(), s.batch * s.max_blocks());
  const std::vector<std::int32_t> lengths_of_problem = decode_seq_lens(s);
  PagedKvTableView view;
  view.seq_lens = lengths_of_problem.data();
  view.batch = s.batch;
  view.max_blocks = s.max_blocks();
  view.block_size = s.block_size;
  try {
    validate_seq_lens(view);
  } catch (const Error& error) {
    return error.what();
  }
  return {};
}

void attention_decode_reference(const DecodeShape& shape, double scale, const PagedKvLayout& layout,
                                const double* q, const double* k_cache, const double* v_cache, double* o,
                                double* lse) {
  validate_paged_kv(table_view(layout));
  const std::int64_t rows_per_sequence = shape.q_heads * shape.q_len;
  for (std::int64_t b = 0; b < shape.batch; ++b) {
    const std::vector<double> k = gather_sequence(shape, layout, k_cache, b);
    const std::vector<double> v = gather_sequence(shape, layout, v_cache, b);
    const std::int64_t first_row = b * rows_per_sequence;
    attention_reference(sequence_shape(shape, layout.seq_lens[static_cast<std::size_t>(b)]), scale, true,
                        q + first_row * shape.head_dim, k.data(), v.data(), o + first_row * shape.head_dim,
                        lse + first_row);
  }
}

namespace {

// What attention_decode_paged and attention_decode_paged_rope share: the dimensions, dtypes and
// parameters, the FLOPs of the attention, the shapes they define, the copy baseline (no library
// runs this cache layout as kc defines it; the op is memory-bound, so % of baseline is % of copy
// bandwidth).
OpConfig decode_op_config(const char* name, std::string description) {
  OpConfig op;
  op.name = name;
  op.description = std::move(description);
  op.dim_names = {"B", "Hq", "Hkv", "Sq", "Sk", "D"};
  op.dtypes = {DType::bf16, DType::f16};
  op.params = decode_params();
  op.bound = Bound::memory;
  op.math = MathUnit::fp16_tensor;
  op.flops = [](const Problem& p) {
    return 4.0 * static_cast<double>(decode_shape(p).head_dim) * decode_visible_pairs(decode_shape(p));
  };
  op.supports = &attention_decode_shape_error;
  op.copy_scratch = std::make_shared<CopyScratch>();
  return op;
}

// O's and LSE's tolerance. attention_fwd's reasoning: O sums up to Sk products in FP32 and is
// rounded once; P rounded to the input type before P.V costs up to u.max|V| absolutely
// (|V| <= 1). A split-KV kernel keeps its partial O and LSE in FP32, so its combine adds no
// rounding of its own. LSE: FP32 throughout.
Accuracy decode_accuracy(const Problem& p, const std::string& output, DType output_dtype) {
  Accuracy accuracy;
  accuracy.output = output_dtype;
  accuracy.terms = static_cast<double>(decode_shape(p).max_len);
  if (output == "O") accuracy.intermediate_error = unit_roundoff(p.dtype) * kVMax;
  return accuracy;
}

}  // namespace

OpSpec make_attention_decode_op() {
  OpConfig op = decode_op_config(
      kAttentionDecodeOp,
      "decode: O = softmax(scale.Q.K^T, causal among the Sq new tokens).V and its log-sum-exp over a paged "
      "cache; Q [B,Hq,Sq,D], K_cache and V_cache [blocks,Hkv,block_size,D], block_table [B,ceil(Sk/bs)] and "
      "seq_lens [B] int32, O [B,Hq,Sq,D], LSE [B,Hq,Sq] f32");
  op.operands = {input("Q", &q_shape, FillSpec::normal(0.0, 1.5)),
                 cache_operand("K_cache", FillSpec::normal(0.0, 1.5)),
                 cache_operand("V_cache", FillSpec::uniform(-kVMax, kVMax)),
                 bookkeeping_operand("block_table", &table_shape, true),
                 bookkeeping_operand("seq_lens", &lens_shape, false),
                 output("O", &q_shape),
                 output("LSE", &lse_shape, DType::f32)};
  op.host_reference = [](const Problem& p, const HostTensors& in) {
    const DecodeShape shape = decode_shape(p);
    std::vector<double> o(in.at("Q").size());
    std::vector<double> lse(static_cast<std::size_t>(shape.batch * shape.q_heads * shape.q_len));
    attention_decode_reference(shape, attention_scale(p), layout_from(p, in), in.at("Q").data(),
                               in.at("K_cache").data(), in.at("V_cache").data(), o.data(), lse.data());
    return HostTensors{{"O", std::move(o)}, {"LSE", std::move(lse)}};
  };
  op.device_reference = &attention_decode_device_reference;
  op.reference_work = [](const Problem& p) {
    return decode_visible_pairs(decode_shape(p)) * static_cast<double>(decode_shape(p).head_dim);
  };
  op.accuracy = &decode_accuracy;
  op.bytes = &decode_bytes;
  op.bench = decode_bench_problems();
  op.conformance = decode_conformance_problems();
  return build_op(std::move(op));
}

// ---- attention_decode_paged_rope: the decode step's attention with the new tokens' RoPE and cache
// write (decode rung 06) ---------------------------------------------------------------------------

namespace {

Shape new_rows_shape(const Problem& p) {
  const DecodeShape s = decode_shape(p);
  return {s.batch, s.q_len, s.kv_heads, s.head_dim};
}
Shape angles_shape(const Problem& p) {
  const DecodeShape s = decode_shape(p);
  return {decode_rope_positions(p), s.head_dim};
}

// Visits the new tokens of every sequence that have a position (p = L - Sq + t >= 0).
template <class Visit>
void for_each_new_token(const DecodeShape& s, const PagedKvLayout& layout, Visit&& visit) {
  for (std::int64_t b = 0; b < s.batch; ++b) {
    const std::int64_t length = layout.seq_lens[static_cast<std::size_t>(b)];
    for (std::int64_t t = 0; t < s.q_len; ++t) {
      const std::int64_t position = length - s.q_len + t;
      if (position >= 0) visit(b, t, position);
    }
  }
}

// Element d of kv head h of `position` of sequence b in a [blocks, Hkv, block_size, D] pool.
std::size_t pool_index(const DecodeShape& s, const PagedKvLayout& layout, std::int64_t b, std::int64_t position,
                       std::int64_t h, std::int64_t d) {
  const std::int64_t block = layout.block(b, position / s.block_size);
  return static_cast<std::size_t>(((block * s.kv_heads + h) * s.block_size + position % s.block_size) * s.head_dim + d);
}

// The caches with the new tokens' rows poisoned (NaN) before a launch: a kernel that reads them
// instead of the rows it builds, or leaves them unwritten, fails.
OperandSpec rope_cache_operand(const char* name, FillSpec fill) {
  OperandSpec cache = cache_operand(name, fill);
  cache.role = Role::input_output;
  cache.initialize = [fill](const Problem& p, Tensor& tensor, std::uint64_t seed, cudaStream_t stream) {
    const DecodeShape s = decode_shape(p);
    const PagedKvLayout layout = fill_cache(p, tensor, seed, fill, stream);
    for_each_new_token(s, layout, [&](std::int64_t b, std::int64_t, std::int64_t position) {
      for (std::int64_t h = 0; h < s.kv_heads; ++h)
        poison(static_cast<std::byte*>(tensor.raw()) +
                   dtype_bytes(tensor.dtype, pool_index(s, layout, b, position, h, 0)),
               tensor.dtype, static_cast<std::size_t>(s.head_dim), stream);
    });
  };
  return cache;
}

// x (D values) rotated in place by `position` (rotate_half pairs i, i + D/2; the table's angles).
void rotate_row(double* x, std::int64_t head_dim, const std::vector<double>& cos_sin, std::int64_t position) {
  const std::int64_t half = head_dim / 2;
  const double* angles = cos_sin.data() + position * head_dim;
  for (std::int64_t i = 0; i < half; ++i) {
    const double a = x[i], b = x[i + half];
    x[i] = a * angles[i] - b * angles[half + i];
    x[i + half] = b * angles[i] + a * angles[half + i];
  }
}

HostTensors decode_rope_reference(const Problem& p, const HostTensors& in) {
  const DecodeShape s = decode_shape(p);
  const PagedKvLayout layout = layout_from(p, in);
  validate_paged_kv(table_view(layout));
  const std::vector<double>& cos_sin = in.at("cos_sin");
  const std::int64_t d = s.head_dim;
  const auto round_row = [&](double* x) {
    for (std::int64_t i = 0; i < d; ++i) x[i] = round_to(p.dtype, x[i]);
  };
  // Q rotated and rounded to the dtype, as the unfused RoPE stores it; rows of tokens without a
  // position see no key (their O is 0 whatever Q holds).
  std::vector<double> q = in.at("Q");
  for (std::int64_t b = 0; b < s.batch; ++b)
    for (std::int64_t h = 0; h < s.q_heads; ++h)
      for (std::int64_t t = 0; t < s.q_len; ++t) {
        const std::int64_t position = layout.seq_lens[static_cast<std::size_t>(b)] - s.q_len + t;
        if (position < 0) continue;
        double* row = q.data() + ((b * s.q_heads + h) * s.q_len + t) * d;
        rotate_row(row, d, cos_sin, position);
        round_row(row);
      }
  // The caches with the new rows in place: the expected outputs unrounded (the kernel rounds once),
  // the attention's inputs rounded (the values the cache then holds).
  std::vector<double> k_out = in.at("K_cache"), v_out = in.at("V_cache");
  std::vector<double> k_read = k_out;
  for_each_new_token(s, layout, [&](std::int64_t b, std::int64_t t, std::int64_t position) {
    for (std::int64_t h = 0; h < s.kv_heads; ++h) {
      const std::size_t from = static_cast<std::size_t>(((b * s.q_len + t) * s.kv_heads + h) * d);
      std::vector<double> k(in.at("K_new").begin() + static_cast<std::ptrdiff_t>(from),
                            in.at("K_new").begin() + static_cast<std::ptrdiff_t>(from) + d);
      rotate_row(k.data(), d, cos_sin, position);
      const std::size_t to = pool_index(s, layout, b, position, h, 0);
      std::copy(k.begin(), k.end(), k_out.begin() + static_cast<std::ptrdiff_t>(to));
      round_row(k.data());
      std::copy(k.begin(), k.end(), k_read.begin() + static_cast<std::ptrdiff_t>(to));
      std::copy(in.at("V_new").begin() + static_cast<std::ptrdiff_t>(from),
                in.at("V_new").begin() + static_cast<std::ptrdiff_t>(from) + d,
                v_out.begin() + static_cast<std::ptrdiff_t>(to));
    }
  });
  std::vector<double> o(q.size());
  std::vector<double> lse(static_cast<std::size_t>(s.batch * s.q_heads * s.q_len));
  attention_decode_reference(s, attention_scale(p), layout, q.data(), k_read.data(), v_out.data(), o.data(),
                             lse.data());
  return HostTensors{{"O", std::move(o)}, {"LSE", std::move(lse)}, {"K_cache", std::move(k_out)},
                     {"V_cache", std::move(v_out)}};
}

std::vector<ProblemSpec> decode_rope_bench_problems() {
  // The engine's decode steps at batch 1 and 8 and short to long contexts: SmolLM2-135M's
  // attention (9 query heads over 3 kv heads, D = 64), Llama-3.2-1B's (32 / 8, D = 64),
  // Llama-3-8B's (32 / 8, D = 128). The reference runs on the host (the RoPE and the written rows
  // are part of it), which bounds the largest cache.
  std::vector<ProblemSpec> problems;
  for (const std::int64_t context : {128, 1024})
    for (const std::int64_t batch : {1, 8}) {
      problems.push_back({{batch, 9, 3, 1, context, 64}, DType::bf16});
      problems.push_back({{batch, 32, 8, 1, context, 64}, DType::bf16});
      problems.push_back({{batch, 32, 8, 1, context, 128}, DType::bf16});
    }
  problems.push_back({{8, 32, 8, 1, 8192, 128}, DType::bf16});
  return problems;
}

std::vector<ProblemSpec> decode_rope_conformance_problems() {
  // attention_decode_paged's, but for its largest (checked there against the device reference).
  std::vector<ProblemSpec> problems = decode_conformance_problems();
  problems.pop_back();
  return problems;
}

}  // namespace

std::int64_t decode_rope_positions(const Problem& problem) { return decode_shape(problem).max_len + 1; }

OpSpec make_attention_decode_rope_op() {
  OpConfig op = decode_op_config(
      kAttentionDecodeRopeOp,
      "decode with the new tokens' RoPE and cache write: Q and K_new rotated by their positions (L - Sq + t, "
      "rotate_half, cos_sin [Sk+1,D] f32), the rotated K and V_new [B,Sq,Hkv,D] written into K_cache and V_cache "
      "at those positions, then attention_decode_paged's O and LSE");
  OperandSpec angles = input("cos_sin", &angles_shape, FillSpec{}, DType::f32);
  angles.initialize = [](const Problem& p, Tensor& tensor, std::uint64_t, cudaStream_t stream) {
    const std::vector<float> table = stage2::rope_cos_sin_table(decode_rope_positions(p), decode_shape(p).head_dim,
                                                                kDecodeRopeBase);
    tensor.upload(table.data(), table.size() * sizeof(float), stream);
  };
  op.operands = {input("Q", &q_shape, FillSpec::normal(0.0, 1.5)),
                 input("K_new", &new_rows_shape, FillSpec::normal(0.0, 1.5)),
                 input("V_new", &new_rows_shape, FillSpec::uniform(-kVMax, kVMax)),
                 std::move(angles),
                 rope_cache_operand("K_cache", FillSpec::normal(0.0, 1.5)),
                 rope_cache_operand("V_cache", FillSpec::uniform(-kVMax, kVMax)),
                 bookkeeping_operand("block_table", &table_shape, true),
                 bookkeeping_operand("seq_lens", &lens_shape, false),
                 output("O", &q_shape),
                 output("LSE", &lse_shape, DType::f32)};
  op.host_reference = &decode_rope_reference;
  // A cache row is one rotation (two products summed) rounded once. O and LSE: decode_accuracy,
  // plus what the rounding of the rotated Q and K may add: the kernel rotates in
  // FP32 and rounds, the reference rotates exactly and rounds, and where a value lies within FP32's
  // error of a rounding boundary the two land one unit apart (2u relative). A score moves by
  // scale x 2u x |q_i k_i| per such element; LSE moves with the largest score. The allowance is
  // four such elements at |q_i k_i| = sigma^2 (Q, K ~ normal(0, 1.5)): an off-by-one position or a
  // missed rotation moves the scores by whole units (the negative control).
  op.accuracy = [](const Problem& p, const std::string& output, DType output_dtype) {
    if (output == "K_cache" || output == "V_cache") {
      Accuracy accuracy;
      accuracy.output = output_dtype;
      accuracy.terms = 2.0;
      return accuracy;
    }
    Accuracy accuracy = decode_accuracy(p, output, output_dtype);
    const double flipped_scores = 4.0 * attention_scale(p) * 2.0 * unit_roundoff(p.dtype) * 1.5 * 1.5;
    accuracy.intermediate_error += output == "O" ? flipped_scores * kVMax : flipped_scores;
    return accuracy;
  };
  // attention_decode_paged's bytes, plus the new rows read (K_new, V_new) and written to the cache.
  op.bytes = [](const Problem& p) {
    const DecodeShape s = decode_shape(p);
    const double new_elements = static_cast<double>(s.batch * s.q_len * s.kv_heads * s.head_dim);
    return decode_bytes(p) + 4.0 * new_elements * static_cast<double>(dtype_bytes(p.dtype, 1));
  };
  op.bench = decode_rope_bench_problems();
  op.conformance = decode_rope_conformance_problems();
  return build_op(std::move(op));
}

}  // namespace kc::stage3
