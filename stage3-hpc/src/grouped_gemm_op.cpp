// The grouped_gemm op (kc/stage3/grouped_gemm.hpp): the routing rule, operands, references,
// problems, and the cuBLAS baseline and peer.
#include "kc/stage3/grouped_gemm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <tuple>
#include <utility>

#include "kc/common/blas_grouped.hpp"
#include "kc/common/error.hpp"
#include "kc/common/fill.hpp"
#include "kc/common/splitmix.hpp"
#include "kc/common/gemm.hpp"
#include "kc/common/op_builder.hpp"
#include "kc/common/timing.hpp"

namespace kc::stage3 {
namespace {

constexpr int kKMultiple = 8;  // 16 bytes of bf16
constexpr double kLargestSeed = 9007199254740992.0;  // 2^53: every whole number below is a double


std::int64_t tokens_of(const Problem& p) { return static_cast<std::int64_t>(p.param("tokens")); }
std::int64_t experts_of(const Problem& p) { return p.dims[0]; }
std::int64_t n_of(const Problem& p) { return p.dims[1]; }
std::int64_t k_of(const Problem& p) { return p.dims[2]; }

bool is_whole(double value) { return std::isfinite(value) && std::floor(value) == value; }

HostTensors host_reference(const Problem& p, const HostTensors& in) {
  const std::int64_t n = n_of(p), k = k_of(p);
  const std::vector<std::int64_t> counts = grouped_gemm_counts(p);
  const std::vector<int> starts = group_row_starts(counts);
  const std::vector<double>& a = in.at("A");
  const std::vector<double>& b = in.at("B");
  std::vector<double> c(static_cast<std::size_t>(tokens_of(p) * n));
  for (std::size_t g = 0; g < counts.size(); ++g) {
    if (counts[g] == 0) continue;
    const auto row = static_cast<std::size_t>(starts[g]);
    gemm_reference({counts[g], n, k}, 1.0, a.data() + row * k, b.data() + g * n * k, BLayout::n_by_k, 0.0,
                   nullptr, c.data() + row * n);
  }
  return HostTensors{{"C", std::move(c)}};
}

// cuBLAS DGEMM per expert on the GPU, for problems too large for the CPU.
References device_reference(const Problem& p, const Operands& o, Context& context) {
  const std::int64_t n = n_of(p), k = k_of(p);
  const std::vector<std::int64_t> counts = grouped_gemm_counts(p);
  const std::vector<int> starts = group_row_starts(counts);
  const Tensor& a = o["A"];
  const Tensor& b = o["B"];
  const cudaStream_t stream = context.stream();
  DeviceBuffer<double> a64(a.count()), b64(b.count()), c64(o["C"].count());
  convert_to_double(a.raw(), a.dtype, a.count(), a64.data(), stream);
  convert_to_double(b.raw(), b.dtype, b.count(), b64.data(), stream);
  for (std::size_t g = 0; g < counts.size(); ++g) {
    if (counts[g] == 0) continue;
    const auto row = static_cast<std::size_t>(starts[g]);
    cublas_dgemm(context.cublas(), stream, {counts[g], n, k}, 1.0, a64.data() + row * k, b64.data() + g * n * k,
                 BLayout::n_by_k, 0.0, c64.data() + row * n);
  }
  References references;
  references.emplace("C", std::move(c64));
  return references;
}

// The device arrays of operand pointers cublasGemmGroupedBatchedEx reads, per operand set and
// problem: made on first use (in the untimed warm-up launches) and kept, so a timed call copies
// nothing to the device. An engine whose routing changes every step would upload them every step.
class GroupedPointerArrays {
 public:
  struct Call {
    std::vector<GemmShape> shapes;  // the experts that have rows
    DeviceBuffer<const void*> pointers;  // their A's, then B's, then C's
  };

  const Call& get(const Problem& p, Operands& o, cudaStream_t stream) {
    const auto key = std::make_tuple(o["A"].raw(), o["B"].raw(), o["C"].raw(), p.label());
    auto found = calls_.find(key);
    if (found != calls_.end()) return found->second;
    if (calls_.size() >= kMaxCalls) {  // operand sets of earlier problems: none is in use any more
      KC_CUDA_CHECK(cudaStreamSynchronize(stream));
      calls_.clear();
    }
    const GroupedRouting routing(p);
    const std::int64_t n = n_of(p), k = k_of(p);
    Call call;
    std::vector<const void*> a, b, c;
    for (std::size_t g = 0; g < routing.counts.size(); ++g) {
      if (routing.counts[g] == 0) continue;
      const auto row = static_cast<std::size_t>(routing.row_starts[g]);
      call.shapes.push_back({routing.counts[g], n, k});
      a.push_back(o["A"].data<bf16>() + row * k);
      b.push_back(o["B"].data<bf16>() + g * n * k);
      c.push_back(o["C"].data<bf16>() + row * n);
    }
    std::vector<const void*> all = a;
    all.insert(all.end(), b.begin(), b.end());
    all.insert(all.end(), c.begin(), c.end());
    call.pointers = DeviceBuffer<const void*>(all.size());
    call.pointers.copy_from_host(all, stream);
    return calls_.emplace(key, std::move(call)).first->second;
  }

 private:
  static constexpr std::size_t kMaxCalls = 64;
  std::map<std::tuple<const void*, const void*, const void*, std::string>, Call> calls_;
};

void run_grouped_baseline(GroupedPointerArrays& arrays, const Problem& p, Operands& o, Context& context) {
  const GroupedPointerArrays::Call& call = arrays.get(p, o, context.stream());
  const auto count = static_cast<int>(call.shapes.size());
  const void* const* pointers = call.pointers.data();
  cublas_gemm_grouped_ex(context.cublas(), context.stream(), call.shapes.data(), count, DType::bf16, DType::bf16,
                         1.f, pointers, pointers + count, BLayout::n_by_k, 0.f,
                         const_cast<void* const*>(pointers + 2 * count));
}

// The peer: cublasGemmEx once per expert that has rows, as a loop over experts calls it.
void run_gemm_ex_per_expert(GroupedRouting& routing, const Problem& p, Operands& o, Context& context) {
  routing.update(p);
  const std::int64_t n = n_of(p), k = k_of(p);
  for (std::size_t g = 0; g < routing.counts.size(); ++g) {
    if (routing.counts[g] == 0) continue;
    const auto row = static_cast<std::size_t>(routing.row_starts[g]);
    cublas_gemm_ex(context.cublas(), context.stream(), {routing.counts[g], n, k}, DType::bf16, DType::bf16, 1.f,
                   o["A"].data<bf16>() + row * k, o["B"].data<bf16>() + g * n * k, BLayout::n_by_k, 0.f,
                   o["C"].data<bf16>() + row * n);
  }
}

// The baseline: whichever of the two cuBLAS paths is faster on the problem — the grouped call on
// many small experts, the loop of GemmEx calls on a few large ones (the stage-3 README quotes the
// measured gap). The choice is made once per problem, at
// its first call (an untimed warm-up launch), by timing the two in alternation after L2 scrubs
// as kc-bench times kernels (a short run: kChoiceSamples samples each), and kept: every later call
// runs the path chosen, so the baseline's own timing is one path's.
class FasterCublasPath {
 public:
  FasterCublasPath(std::shared_ptr<GroupedPointerArrays> arrays, std::shared_ptr<GroupedRouting> routing)
      : arrays_(std::move(arrays)), routing_(std::move(routing)) {}

  void run(const Problem& p, Operands& o, Context& context) {
    const std::string label = p.label();
    auto chosen = loop_.find(label);
    if (chosen == loop_.end()) chosen = loop_.emplace(label, loop_is_faster(p, o, context)).first;
    if (chosen->second)
      run_gemm_ex_per_expert(*routing_, p, o, context);
    else
      run_grouped_baseline(*arrays_, p, o, context);
  }

 private:
  static constexpr int kChoiceSamples = 7;

  bool loop_is_faster(const Problem& p, Operands& o, Context& context) {
    if (!scrubber_) scrubber_ = std::make_unique<L2Scrubber>(static_cast<std::size_t>(context.device().l2_bytes));
    TimingConfig config;
    config.warmup_launches = 1;
    config.min_samples = kChoiceSamples;
    config.max_samples = kChoiceSamples;
    const PairedTimingStats stats = time_launches_paired(
        [&](cudaStream_t) { run_grouped_baseline(*arrays_, p, o, context); }, "baseline choice/grouped",
        [&](cudaStream_t) { run_gemm_ex_per_expert(*routing_, p, o, context); }, "baseline choice/loop",
        context.stream(), scrubber_.get(), config);
    return stats.second.median_ms < stats.first.median_ms;
  }

  std::shared_ptr<GroupedPointerArrays> arrays_;
  std::shared_ptr<GroupedRouting> routing_;
  std::unique_ptr<L2Scrubber> scrubber_;
  std::map<std::string, bool> loop_;  // problem label -> the GemmEx loop is the faster path
};

}  // namespace

std::vector<std::int64_t> expert_token_counts(std::int64_t experts, std::int64_t tokens, double skew,
                                              std::uint64_t routing_seed) {
  require(experts >= 1, "a grouped GEMM needs at least one expert (got {})", experts);
  require(tokens >= 0, "tokens must be >= 0 (got {})", tokens);
  require(std::isfinite(skew) && skew >= 0.0, "skew must be finite and >= 0 (got {})", skew);
  const auto size = static_cast<std::size_t>(experts);
  // Shares by rank, then the rounding: each rank gets the floor of its exact count, and the
  // tokens left over go one each to the ranks with the largest fractions (ties: lower rank first).
  std::vector<double> exact(size);
  for (std::size_t r = 0; r < size; ++r) exact[r] = std::pow(static_cast<double>(r + 1), -skew);
  const double total_share = std::accumulate(exact.begin(), exact.end(), 0.0);
  std::vector<std::int64_t> by_rank(size);
  std::int64_t assigned = 0;
  for (std::size_t r = 0; r < size; ++r) {
    exact[r] *= static_cast<double>(tokens) / total_share;
    by_rank[r] = std::min<std::int64_t>(static_cast<std::int64_t>(std::floor(exact[r])), tokens - assigned);
    assigned += by_rank[r];
  }
  std::vector<std::size_t> order(size);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    return exact[x] - std::floor(exact[x]) > exact[y] - std::floor(exact[y]);
  });
  for (std::size_t i = 0; assigned < tokens; i = (i + 1) % size, ++assigned) ++by_rank[order[i]];

  // Rank -> expert: the identity for seed 0, else a Fisher-Yates shuffle.
  std::vector<std::size_t> expert_of_rank(size);
  std::iota(expert_of_rank.begin(), expert_of_rank.end(), std::size_t{0});
  if (routing_seed != 0) {
    std::uint64_t state = routing_seed;
    for (std::size_t i = size - 1; i > 0; --i) std::swap(expert_of_rank[i], expert_of_rank[splitmix64_next(state) % (i + 1)]);
  }
  std::vector<std::int64_t> counts(size);
  for (std::size_t r = 0; r < size; ++r) counts[expert_of_rank[r]] = by_rank[r];
  return counts;
}

std::vector<std::int64_t> grouped_gemm_counts(const Problem& problem) {
  if (std::string error = grouped_gemm_shape_error(problem); !error.empty()) throw Error("grouped_gemm: " + error);
  return expert_token_counts(experts_of(problem), tokens_of(problem), problem.param("skew"),
                             static_cast<std::uint64_t>(problem.param("routing_seed")));
}

std::vector<int> group_row_starts(const std::vector<std::int64_t>& counts) {
  std::vector<int> starts(counts.size() + 1, 0);
  std::int64_t row = 0;
  for (std::size_t g = 0; g < counts.size(); ++g) {
    row += counts[g];
    require(row <= INT32_MAX, "grouped GEMM: more than 2^31 - 1 rows in all");
    starts[g + 1] = static_cast<int>(row);
  }
  return starts;
}

std::vector<int> group_tile_starts(const std::vector<std::int64_t>& counts, std::int64_t n, int tile_rows,
                                   int tile_cols) {
  require(tile_rows >= 1 && tile_cols >= 1 && n >= 1, "grouped GEMM tiles: N and the tile sides must be >= 1");
  std::vector<int> starts(counts.size() + 1, 0);
  const std::int64_t tiles_n = (n + tile_cols - 1) / tile_cols;
  std::int64_t tile = 0;
  for (std::size_t g = 0; g < counts.size(); ++g) {
    tile += (counts[g] + tile_rows - 1) / tile_rows * tiles_n;
    require(tile <= INT32_MAX, "grouped GEMM: more than 2^31 - 1 output tiles, more than one grid holds");
    starts[g + 1] = static_cast<int>(tile);
  }
  return starts;
}

std::string grouped_gemm_shape_error(const Problem& p) {
  const double tokens = p.param("tokens"), skew = p.param("skew"), seed = p.param("routing_seed");
  if (!is_whole(tokens) || tokens < 1 || tokens > INT32_MAX)
    return fmt::format("tokens must be a whole number from 1 to 2^31 - 1 (got {:g}): name the rows of A, e.g. "
                       "--param tokens=2048",
                       tokens);
  if (!std::isfinite(skew) || skew < 0) return fmt::format("skew must be finite and >= 0 (got {:g})", skew);
  if (!is_whole(seed) || seed < 0 || seed >= kLargestSeed)
    return fmt::format("routing_seed must be a whole number from 0 to 2^53 - 1 (got {:g})", seed);
  // A [tokens, K], C [tokens, N] and one expert's B [N, K].
  return gemm_index_limit_error({tokens_of(p), n_of(p), k_of(p)}, fmt::format("{} tokens={}", p.shape(), tokens_of(p)));
}

std::string grouped_gemm_tiles_shape_error(const Problem& p) {
  if (std::string error = grouped_gemm_shape_error(p); !error.empty()) return error;
  if (k_of(p) % kKMultiple != 0)
    return fmt::format(
        "K must be a multiple of {} (got {}): rows of A and B are copied in 16-byte pieces (cp.async), "
        "which must start 16-byte aligned",
        kKMultiple, k_of(p));
  return {};
}

const std::vector<std::string>& grouped_gemm_tiles_refusals() {
  static const std::vector<std::string> refusals = {"4x100x17 bf16 tokens=50 skew=1",
                                                    "2x33x1031 bf16 tokens=129",
                                                    "3x40x1 bf16 tokens=7 skew=1"};
  return refusals;
}

GroupedRouting::GroupedRouting(const Problem& problem) { update(problem); }

void GroupedRouting::update(const Problem& problem) {
  std::string label = problem.label();
  if (label == label_) return;
  counts = grouped_gemm_counts(problem);
  row_starts = group_row_starts(counts);
  label_ = std::move(label);
}

OpSpec make_grouped_gemm_op() {
  OpConfig op;
  op.name = kGroupedGemmOp;
  op.description =
      "C_g = A_g.B_g^T for each expert g: A [tokens, K] with each expert's rows together (tokens sorted by "
      "expert), B [G, N, K], C [tokens, N], bf16, FP32 accumulation; rows per expert from tokens, skew and "
      "routing_seed";
  op.dim_names = {"G", "N", "K"};
  op.dtypes = {DType::bf16};
  op.params = {{"tokens", 0.0, "rows of A and C, the routed tokens (required: a token sent to two experts counts twice)"},
               {"skew", 0.0, "expert of rank r gets a share ~ (r + 1)^-skew: 0 uniform, 1 Zipf; high skew leaves experts empty"},
               {"routing_seed", 0.0, "0: expert 0 gets the largest share, then 1, 2, ...; others shuffle the ranks"}};
  op.bound = Bound::compute;
  op.math = MathUnit::fp16_tensor;
  op.operands = {input("A", [](const Problem& p) { return Shape{tokens_of(p), k_of(p)}; }),
                 input("B", dims_at({0, 1, 2})),
                 output("C", [](const Problem& p) { return Shape{tokens_of(p), n_of(p)}; })};
  op.host_reference = &host_reference;
  op.device_reference = &device_reference;
  // As hgemm with beta = 0: K products summed in FP32, one rounding to bf16.
  set_gemm_accounting(op, [](const Problem& p) { return GemmShape{tokens_of(p), n_of(p), k_of(p)}; });
  op.bytes = [](const Problem& p) {
    if (!grouped_gemm_shape_error(p).empty()) return 0.0;
    const std::vector<std::int64_t> counts = grouped_gemm_counts(p);
    const auto experts_with_rows = std::count_if(counts.begin(), counts.end(), [](std::int64_t c) { return c > 0; });
    const double elements = static_cast<double>(tokens_of(p)) * static_cast<double>(k_of(p) + n_of(p)) +
                            static_cast<double>(experts_with_rows) * static_cast<double>(n_of(p) * k_of(p));
    return 2.0 * elements;
  };
  op.supports = &grouped_gemm_shape_error;

  using P = ParamValues;
  // A Mixtral-8x7B-like layer (8 experts of 4096 -> 14336) and a DeepSeek-MoE-like one (64 experts
  // of 2048 -> 1408), each with its tokens spread evenly (skew 0) and by Zipf's law (skew 1).
  for (const double skew : {0.0, 1.0}) {
    for (const double tokens : {256.0, 2048.0, 8192.0})
      op.bench.push_back({{8, 14336, 4096}, std::nullopt, P{{"tokens", tokens}, {"skew", skew}}});
    for (const double tokens : {1024.0, 8192.0})
      op.bench.push_back({{64, 1408, 2048}, std::nullopt, P{{"tokens", tokens}, {"skew", skew}}});
  }
  // One expert; experts with 0 and 1 row, in the middle too (routing_seed); N odd, N = 1; K not a
  // multiple of the 64-element K step; groups across several tile rows and columns, and whole
  // tiles (the unchecked copies of rung 02's interior tiles); three with K % 8 != 0 (rung 02 refuses), K = 1 among them.
  op.conformance = {
      {{1, 257, 72}, std::nullopt, P{{"tokens", 300}}},
      {{4, 129, 136}, std::nullopt, P{{"tokens", 3}}},  // 1, 1, 1, 0 rows
      {{8, 77, 64}, std::nullopt, P{{"tokens", 13}, {"skew", 2}, {"routing_seed", 5}}},  // 9, 1, 0, 1, 0, 0, 0, 2
      {{1, 1, 8}, std::nullopt, P{{"tokens", 1}}},
      {{3, 1, 24}, std::nullopt, P{{"tokens", 5}, {"skew", 1}}},
      {{5, 300, 520}, std::nullopt, P{{"tokens", 700}, {"skew", 1}, {"routing_seed", 3}}},
      {{2, 512, 128}, std::nullopt, P{{"tokens", 512}}},  // two experts of 256 rows: whole tiles
      {{16, 264, 256}, std::nullopt, P{{"tokens", 4096}, {"skew", 1.5}, {"routing_seed", 7}}},
      {{3, 1000, 1032}, std::nullopt, P{{"tokens", 1000}, {"skew", 0.5}, {"routing_seed", 1}}},
      {{6, 2049, 264}, std::nullopt, P{{"tokens", 150}, {"skew", 3}, {"routing_seed", 2}}},  // 5, 1, 126, 2, 0, 16
      {{4, 100, 17}, std::nullopt, P{{"tokens", 50}, {"skew", 1}}},
      {{2, 33, 1031}, std::nullopt, P{{"tokens", 129}}},
      {{3, 40, 1}, std::nullopt, P{{"tokens", 7}, {"skew", 1}}},  // K = 1: one product a row (rungs 02+ refuse)
      // Two experts of 65 rows: each second 64-row half straddles the expert's end (the first
      // expert's into the second's rows, stored directly; the last's past the last token, which
      // TMA clips); of 64 rows: each second half lies wholly past its expert (rung 05 skips it).
      {{2, 264, 72}, std::nullopt, P{{"tokens", 130}}},
      {{2, 264, 72}, std::nullopt, P{{"tokens", 128}}},
      // Rungs 06-07 on 132 SMs: 144 tiles (two experts of 1088 rows, 9 x 8 tiles each), a whole wave
      // and 12 tiles split along K in 2 pieces; 36 tiles in 2 pieces with a K tail; 8 tiles of small
      // experts (second halves empty) in 4 pieces.
      {{2, 2048, 2048}, std::nullopt, P{{"tokens", 2176}}},
      {{3, 1000, 2056}, std::nullopt, P{{"tokens", 1000}, {"skew", 0.5}, {"routing_seed", 1}}},
      {{4, 264, 4104}, std::nullopt, P{{"tokens", 130}}},
  };

  auto arrays = std::make_shared<GroupedPointerArrays>();
  auto routing = std::make_shared<GroupedRouting>();
  auto faster = std::make_shared<FasterCublasPath>(arrays, routing);
  op.baseline_name =
      "cuBLAS, the faster per problem of GemmGroupedBatchedEx and GemmEx per expert (bf16, FP32 accumulation; "
      "chosen at the problem's first call)";
  op.baseline = [faster](const Problem& p, Operands& o, Context& context) { faster->run(p, o, context); };
  op.peers.push_back({"cuBLAS GemmGroupedBatchedEx (one call, a group per expert with rows)",
                      [arrays](const Problem& p, Operands& o, Context& context) {
                        run_grouped_baseline(*arrays, p, o, context);
                      }});
  op.peers.push_back({"cuBLAS GemmEx per expert (one call per expert with rows)",
                      [routing](const Problem& p, Operands& o, Context& context) {
                        run_gemm_ex_per_expert(*routing, p, o, context);
                      }});
  return build_op(std::move(op));
}

}  // namespace kc::stage3
