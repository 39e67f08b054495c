// Files the paged decode ladder (stage3-hpc/attention/decode_NN_*.cu) with the registry: each rung
// for bf16 and f16 and D = 64 or 128. Rungs 02 to 05 run through the public entry
// (kc/stage3/attention_ops.hpp's PagedDecodeAttention, set to the rung), which keeps their split
// workspace.
#include "register_attention_decode.hpp"

#include <fmt/format.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "kc/common/buffer.hpp"
#include "kc/stage3/attention.hpp"
#include "kc/stage3/attention_decode.hpp"
#include "kc/stage3/attention_ops.hpp"
#include "register_attention.hpp"

namespace kc::stage3 {
namespace {

constexpr const char* kDecodeConstraints = "D = 64 or 128";

KernelEntry decode_entry(const std::string& name, int rung, std::string idea) {
  KernelEntry entry = attention_kernel_entry(kAttentionDecodeOp, name, rung, std::move(idea));
  entry.constraints = kDecodeConstraints;
  entry.supports = &decode_rung_shape_error;
  entry.refuses = decode_rung_refusals();
  return entry;
}

template <typename T>
void launch_naive(const Problem& problem, Operands& operands, cudaStream_t stream) {
  attention_decode_01_naive(decode_args<T>(problem, operands), stream);
}

// Rungs 06 to 11 through the public entry (PagedDecodeAttention::run_rope, set to the rung),
// which keeps their workspace. Rung 11 alone has no projection ahead of it to hand heads over: its
// entry passes counters that say every kv head is written already (every byte 0xff, target 1), so
// that its CTAs take the path with counters — one acquire in place of the wait for the kernel ahead.
class RopeEntryRung {
 public:
  explicit RopeEntryRung(PagedDecodeAttention::RopeRung rung) : rung_(rung) { decode_.set_rope_rung(rung); }

  template <typename T>
  void run(const Problem& problem, Operands& operands, cudaStream_t stream) {
    DecodeRopeArgs<T> rope = decode_rope_args<T>(problem, operands);
    if (rung_ == PagedDecodeAttention::RopeRung::heads_handed_over) {
      const auto heads = static_cast<std::size_t>(decode_shape(problem).kv_heads);
      if (heads_written_.reserve(heads, stream))  // grown (and zeroed on `stream`): all written
        KC_CUDA_CHECK(cudaMemsetAsync(heads_written_.data(), 0xff, heads * sizeof(std::uint32_t), stream));
      rope.heads_written = heads_written_.data();
      rope.heads_written_target = 1;
    }
    decode_.run_rope(decode_args<T>(problem, operands), rope, stream);
  }

 private:
  PagedDecodeAttention::RopeRung rung_;
  PagedDecodeAttention decode_;
  DeviceCounters heads_written_;  // rung 11's
};

// What rungs 02-05 keep between launches (the SM count and, for rungs 03-05, the CTAs an SM
// holds, which their split rules read; the FP32 workspace of partial O and LSE and rungs 04-05's arrival
// counters, grown on the first launch, kc-bench's untimed warm-up, and kept): the public entry's,
// set to the rung.
class EntryRung {
 public:
  explicit EntryRung(PagedDecodeAttention::Rung rung) { decode_.set_rung(rung); }

  template <typename T>
  void run(const Problem& problem, Operands& operands, cudaStream_t stream) {
    decode_.run(decode_args<T>(problem, operands), stream);
  }

 private:
  PagedDecodeAttention decode_;
};

// The registry's launch of a rung that keeps state: rung->run<T> for the problem's dtype.
template <class Rung>
LaunchFn launch_for_dtype(std::shared_ptr<Rung> rung) {
  return [rung](const Problem& problem, Operands& operands, cudaStream_t stream) {
    if (problem.dtype == DType::bf16)
      rung->template run<__nv_bfloat16>(problem, operands, stream);
    else
      rung->template run<__half>(problem, operands, stream);
  };
}

}  // namespace

template <typename T>
DecodeArgs<T> decode_args(const Problem& problem, Operands& operands) {
  const DecodeShape shape = decode_shape(problem);
  DecodeArgs<T> args;
  args.q = operands["Q"].data<T>();
  args.k_cache = operands["K_cache"].data<T>();
  args.v_cache = operands["V_cache"].data<T>();
  args.block_table = operands["block_table"].data<std::int32_t>();
  args.seq_lens = operands["seq_lens"].data<std::int32_t>();
  args.o = operands["O"].data<T>();
  args.lse = operands["LSE"].data<float>();
  args.batch = static_cast<int>(shape.batch);
  args.q_heads = static_cast<int>(shape.q_heads);
  args.kv_heads = static_cast<int>(shape.kv_heads);
  args.q_len = static_cast<int>(shape.q_len);
  args.head_dim = static_cast<int>(shape.head_dim);
  args.block_size = static_cast<int>(shape.block_size);
  args.max_blocks = static_cast<int>(shape.max_blocks());
  args.scale = static_cast<float>(attention_scale(problem));
  return args;
}

template DecodeArgs<__nv_bfloat16> decode_args<__nv_bfloat16>(const Problem&, Operands&);
template DecodeArgs<__half> decode_args<__half>(const Problem&, Operands&);

template <typename T>
DecodeRopeArgs<T> decode_rope_args(const Problem& problem, Operands& operands) {
  DecodeRopeArgs<T> rope;
  rope.k_new = operands["K_new"].data<T>();
  rope.v_new = operands["V_new"].data<T>();
  rope.cos_sin = operands["cos_sin"].data<float>();
  rope.positions = static_cast<int>(decode_rope_positions(problem));
  rope.k_cache = operands["K_cache"].data<T>();
  rope.v_cache = operands["V_cache"].data<T>();
  return rope;
}

template DecodeRopeArgs<__nv_bfloat16> decode_rope_args<__nv_bfloat16>(const Problem&, Operands&);
template DecodeRopeArgs<__half> decode_rope_args<__half>(const Problem&, Operands&);

std::string decode_rung_shape_error(const Problem& problem) {
  const DecodeShape s = decode_shape(problem);
  if (s.head_dim != 64 && s.head_dim != 128)
    return fmt::format("head dimension D = {} is not compiled: the decode rungs are built for D = 64 and "
                       "D = 128 (D is a template parameter, so that the loops over it unroll and O's "
                       "accumulators stay in registers)",
                       s.head_dim);
  const std::int64_t row_chunks = (s.group() * s.q_len + kDecodeMaxRowsPerCta - 1) / kDecodeMaxRowsPerCta;
  if (s.batch > 65535 || s.kv_heads * row_chunks > 65535 || s.max_len > INT32_MAX - kDecodeSplitKeyMultiple)
    return fmt::format("B = {} and Hkv x ceil(Hq / Hkv x Sq / {}) = {} must be at most 65535 (grid dimensions) "
                       "and Sk = {} below 2^31 - 64 (32-bit key indices)",
                       s.batch, kDecodeMaxRowsPerCta, s.kv_heads * row_chunks, s.max_len);
  return {};
}

const std::vector<std::string>& decode_rung_refusals() {
  static const std::vector<std::string> refusals = {"6x8x2x2x45x80 bf16 block_size=32 lengths=1",
                                                    "6x8x2x2x45x80 f16 block_size=32 lengths=1"};
  return refusals;
}

void register_attention_decode_kernels(Registry& registry) {
  KernelEntry naive = decode_entry(
      "01_naive", 1, "one warp per query row walks its pages: online softmax in FP32, 16-byte K/V row loads");
  naive.launch = [](const Problem& problem, Operands& operands, cudaStream_t stream) {
    if (problem.dtype == DType::bf16)
      launch_naive<__nv_bfloat16>(problem, operands, stream);
    else
      launch_naive<__half>(problem, operands, stream);
  };
  registry.add_kernel(std::move(naive));

  // Rungs 02-05: the public entry set to the rung.
  const auto add_entry_rung = [&registry](const char* name, int rung, const char* idea, PagedDecodeAttention::Rung which) {
    KernelEntry entry = decode_entry(name, rung, idea);
    entry.launch = launch_for_dtype(std::make_shared<EntryRung>(which));
    registry.add_kernel(std::move(entry));
  };
  add_entry_rung("02_split_kv", 2,
                 "flash-decoding: context split over CTAs, each page read once per group (cp.async), FP32 partials "
                 "combined",
                 PagedDecodeAttention::Rung::split_kv);
  add_entry_rung("03_mma_split_kv", 3,
                 "rung 02 on tensor cores: the group's rows as an m16 tile, QK^T and PV on mma.sync, 64-key pages "
                 "in a 3-4 stage cp.async pipeline",
                 PagedDecodeAttention::Rung::mma_split_kv);
  add_entry_rung("04_fused_combine", 4,
                 "rung 03 in one launch: the split that finishes last merges its group's partials (from L2), a "
                 "sequence one split holds is written directly",
                 PagedDecodeAttention::Rung::fused_combine);
  add_entry_rung("05_early_pages", 5,
                 "rung 04 with the split's length, table and first pages asked into L2 before it waits for the "
                 "kernel ahead (programmatic launches)",
                 PagedDecodeAttention::Rung::early_pages);
}

void register_attention_decode_rope_kernels(Registry& registry) {
  // The rung's name and number are PagedDecodeAttention's (rope_rung_id, rope_rung_number), so the
  // registry's id is the one run_rope() returns.
  const auto add_rope_rung = [&registry](PagedDecodeAttention::RopeRung which, const char* idea) {
    const std::string_view id = PagedDecodeAttention::rope_rung_id(which);
    const std::string name(id.substr(id.rfind('/') + 1));
    KernelEntry entry =
        attention_kernel_entry(kAttentionDecodeRopeOp, name, PagedDecodeAttention::rope_rung_number(which), idea);
    entry.constraints = kDecodeConstraints;
    entry.supports = &decode_rung_shape_error;
    entry.refuses = decode_rung_refusals();
    entry.launch = launch_for_dtype(std::make_shared<RopeEntryRung>(which));
    registry.add_kernel(std::move(entry));
  };
  add_rope_rung(PagedDecodeAttention::RopeRung::rope_in,
                "rung 05 with the new tokens' RoPE and cache write inside: Q rotated into its tile, the new K/V rows "
                "rotated into the last tile from registers and stored to their page");
  add_rope_rung(PagedDecodeAttention::RopeRung::pages_before_wait,
                "rung 06 with every stage of its ring filled with cached rows before it waits for the kernel ahead: "
                "after the wait only Q and the new rows are read, in one round trip");
  add_rope_rung(PagedDecodeAttention::RopeRung::page_walk,
                "rung 07 with each thread's page addresses worked out once a CTA (its first row, the block's bytes, "
                "a row offset a copy) instead of from the key for every row it copies");
  add_rope_rung(PagedDecodeAttention::RopeRung::workers_first,
                "rung 08 in a grid turned round (groups x splits: the CTAs that hold keys start first), and a CTA "
                "whose split holds no key leaving before the wait for the kernel ahead");
  add_rope_rung(PagedDecodeAttention::RopeRung::release_acquire_merge,
                "rung 08 with the splits' hand-over to the merge ordered by one release/acquire count a CTA (thread "
                "0's, after a barrier) instead of a sequentially consistent fence in every thread, twice in the last");
  add_rope_rung(PagedDecodeAttention::RopeRung::heads_handed_over,
                "rung 10 that starts on a kv head once the q|k|v projection ahead has counted its rows written "
                "(thread 0 acquires the head's count) instead of waiting for the whole projection; alone, its "
                "counters say every head is written");
}

}  // namespace kc::stage3
