// kc/stage3/grouped_gemm.hpp — the grouped_gemm op: the expert GEMMs of a mixture-of-experts
// layer, tokens sorted by expert (layout: kc/stage3/grouped_gemm_args.hpp).
//
// Problem dimensions G, N, K ("8x14336x4096": Mixtral's 8 experts of 4096 -> 14336) and three
// parameters that say how many rows each expert gets:
//   tokens        rows of A and C, the routed tokens (a token sent to two experts counts twice);
//                 no default: a problem must name it (tokens=2048);
//   skew          the expert of rank r (0, 1, ...) gets a share proportional to (r + 1)^-skew:
//                 0 is uniform, 1 is Zipf's law, and at high skew the last ranks round to no
//                 rows at all (empty experts);
//   routing_seed  0: expert g has rank g (expert 0 gets the largest share); any other value
//                 shuffles which expert has which rank, with a fixed generator (splitmix64), so
//                 the empty experts move into the middle.
// The counts are the shares times tokens rounded by largest remainder (they sum to tokens), a
// pure function of the problem: the same on every machine and in every run, so the reference,
// the baseline and the kernels all see the same routing without reading anything back.
//
// Operands: A [tokens, K] and B [G, N, K] bf16 ~ uniform(-1, 1), C [tokens, N] bf16 (poisoned).
// Reference: each expert's product in double (on the host for small problems, cuBLAS DGEMM per
// expert on the GPU for large ones). FLOPs: 2 tokens N K. Bytes: A, the weights of the experts
// that have rows (an expert with none need not be read), and C, once each.
// Baseline: the faster on the problem of cublasGemmGroupedBatchedEx (one call for every expert that
// has rows) and cublasGemmEx once per such expert, chosen at the problem's first call by timing the
// two in alternation; timed beside it, as peers: each of the two.
#pragma once

#ifdef KC_KERNEL_SOURCE
#error "a kernel (rung) file includes kc/stage3/grouped_gemm.hpp, the op's harness side: kernels include grouped_gemm_args.hpp"
#endif

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kc/common/registry.hpp"
#include "kc/stage3/grouped_gemm_args.hpp"

namespace kc::stage3 {

inline constexpr const char* kGroupedGemmOp = "grouped_gemm";
inline constexpr const char* kGroupedGemmReport = "stage3-grouped-gemm";

// Rows per expert for `experts` experts and `tokens` rows (the rule above). Throws kc::Error for
// experts < 1, tokens < 0, a negative or non-finite skew.
std::vector<std::int64_t> expert_token_counts(std::int64_t experts, std::int64_t tokens, double skew,
                                              std::uint64_t routing_seed);

// The counts of a grouped_gemm problem (its G, tokens, skew and routing_seed).
std::vector<std::int64_t> grouped_gemm_counts(const Problem& problem);

// G + 1 prefix sums of `counts`: the first row of each expert, then the total.
std::vector<int> group_row_starts(const std::vector<std::int64_t>& counts);

// G + 1 prefix sums of the output tiles of tile_rows x tile_cols each expert needs for N columns:
// ceil(count / tile_rows) x ceil(N / tile_cols), none for an expert without rows.
std::vector<int> group_tile_starts(const std::vector<std::int64_t>& counts, std::int64_t n, int tile_rows,
                                   int tile_cols);

// The counts and row starts of the last problem asked for, recomputed only when the problem
// changes: what a launch keeps between calls, so a timed call does no routing arithmetic.
class GroupedRouting {
 public:
  GroupedRouting() = default;
  explicit GroupedRouting(const Problem& problem);
  void update(const Problem& problem);

  std::vector<std::int64_t> counts;  // rows per expert
  std::vector<int> row_starts;       // group_row_starts(counts)

 private:
  std::string label_;
};

// "" when the op defines `problem` (tokens a whole number >= 1, skew finite and >= 0,
// routing_seed a whole number >= 0, every matrix within 2^31 - 1 elements), otherwise why not.
std::string grouped_gemm_shape_error(const Problem& problem);

// Rung 02 also needs K % 8 == 0 (rows of A and B are copied in 16-byte pieces); "" or why not,
// and the conformance problems it refuses.
std::string grouped_gemm_tiles_shape_error(const Problem& problem);
const std::vector<std::string>& grouped_gemm_tiles_refusals();

OpSpec make_grouped_gemm_op();

// Adds the op, its baseline and its ladder (stage3/grouped_gemm/01_loop_of_gemms ...
// stage3/grouped_gemm/07_half_a_tiles).
void register_grouped_gemm_kernels(Registry& registry);

// Rung 07's launch with its kernel's one flaw (grouped_gemm_07_half_a_tiles_adds_a_piece_twice):
// the same tile table, plan and workspace, for the negative control that must fail wherever a tile
// is split along K (tests/negative_controls/grouped_gemm_controls.cpp). Compute capability 9.0.
LaunchFn grouped_gemm_07_launch_adding_a_piece_twice();

// A launch that calls `run(problem, operands, stream)` on one Rung object, made with the launch
// and kept between launches (what the rung caches: the GEMM entry, the tile table).
template <class Rung>
LaunchFn launch_of_rung() {
  auto rung = std::make_shared<Rung>();
  return [rung](const Problem& problem, Operands& operands, cudaStream_t stream) {
    rung->run(problem, operands, stream);
  };
}

// The launch of rung 01 (gemm/grouped/01_loop_of_gemms.cpp): one call of stage 3's public GEMM
// entry per expert that has rows.
LaunchFn grouped_gemm_01_loop_of_gemms();

}  // namespace kc::stage3
