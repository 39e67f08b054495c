// Files every stage-1 rung with the registry: id, rung number, one-line idea, constraints and
// launch.
#include <utility>
#include <vector>

#include "kc/stage1/sgemm.hpp"
#include "kc/stage1/register.hpp"
#include "kc/common/gemm.hpp"

namespace kc::stage1 {
namespace {

using SgemmLaunch = void (*)(const SgemmArgs&, cudaStream_t);

// The conformance problems rungs 06 and 07 refuse: K or N not a multiple of 4. Listed, not
// computed, so that the conformance tests catch a constraint that widens or narrows.
const std::vector<std::string> kFloat4RowsRefusals = {
    "1x1x1 f32",        "1x17x127 f32",     "17x127x1 f32",     "127x1x17 f32",
    "17x1000x127 f32",  "1000x127x17 f32",  "127x17x1000 f32",  "4093x17x127 f32",
    "17x4093x1000 f32", "127x1000x4093 f32", "1000x4093x1 f32", "1x1000x4093 f32",
    "4093x1x1000 f32",  "129x65x257 f32",   "31x33x35 f32",     "127x129x131 f32 alpha=1.5",
    "127x129x131 f32 beta=1"};

// `constraints` and `supports` describe shapes the rung refuses (empty: any shape); `refuses`
// lists the conformance problems among them.
KernelEntry sgemm_entry(std::string name, int rung, std::string idea, SgemmLaunch launch,
                        std::string constraints = {}, SupportsFn supports = {},
                        std::vector<std::string> refuses = {}) {
  KernelEntry entry;
  entry.id = "stage1/sgemm/" + name;
  entry.op = "sgemm";
  entry.rung = rung;
  entry.idea = std::move(idea);
  entry.dtypes = {DType::f32};
  entry.min_compute_capability = 80;
  entry.constraints = std::move(constraints);
  entry.supports = std::move(supports);
  entry.refuses = std::move(refuses);
  entry.launch = [launch](const Problem& problem, Operands& operands, cudaStream_t stream) {
    launch(gemm_args<float>(problem, operands, BLayout::k_by_n), stream);
  };
  return entry;
}

}  // namespace

std::string float4_rows_constraint(const Problem& problem) {
  const GemmShape s = gemm_shape(problem);
  if (s.k % 4 == 0 && s.n % 4 == 0) return {};
  return fmt::format(
      "{}: this rung reads rows of A (K long) and B and C (N long) as float4, which needs K and N "
      "to be multiples of 4 (K % 4 = {}, N % 4 = {}); rungs 08-10 run any shape",
      problem.shape(), s.k % 4, s.n % 4);
}

OpSpec make_sgemm_op() {
  GemmOpConfig config;
  config.name = "sgemm";
  config.dtypes = {DType::f32};
  config.b_layout = BLayout::k_by_n;
  config.math = MathUnit::fp32_cuda_core;
  return make_gemm_op(config);
}

void register_kernels(Registry& registry) {
  if (!registry.has_op("sgemm")) registry.add_op(make_sgemm_op());
  const std::string float4_rows = "K and N multiples of 4 (float4 rows)";
  registry.add_kernel(sgemm_entry(
      "01_naive", 1, "one thread per C element, straight from global memory", &sgemm_01_naive,
      "N <= 2,097,120 (grid.y holds N/32 blocks, at most 65535)", [](const Problem& problem) {
        constexpr std::int64_t max_n = 65535 * 32;
        const GemmShape s = gemm_shape(problem);
        return s.n <= max_n ? std::string()
                            : fmt::format("{}: N = {} exceeds {}: the naive rung puts N/32 blocks "
                                          "on grid.y, which holds at most 65535",
                                          problem.shape(), s.n, max_n);
      }));
  registry.add_kernel(sgemm_entry("02_coalesced", 2,
                                  "consecutive threads take consecutive columns: coalesced loads and stores",
                                  &sgemm_02_coalesced));
  registry.add_kernel(sgemm_entry("03_smem_tiling", 3,
                                  "32 x 32 tiles of A and B staged in shared memory, reused 32 times",
                                  &sgemm_03_smem_tiling));
  registry.add_kernel(sgemm_entry("04_blocktile_1d", 4,
                                  "each thread computes a column of 8 outputs: one B load per 8 FMAs",
                                  &sgemm_04_blocktile_1d));
  registry.add_kernel(sgemm_entry("05_blocktile_2d", 5,
                                  "each thread computes an 8 x 8 register tile: outer products",
                                  &sgemm_05_blocktile_2d));
  registry.add_kernel(sgemm_entry("06_vectorized", 6,
                                  "float4 global loads, A transposed in shared memory, LDS.128",
                                  &sgemm_06_vectorized, float4_rows, &float4_rows_constraint,
                                  kFloat4RowsRefusals));
  registry.add_kernel(sgemm_entry("07_bank_conflict_free", 7,
                                  "padded A tile and spread thread tiles: no shared-memory bank conflicts",
                                  &sgemm_07_bank_conflict_free, float4_rows, &float4_rows_constraint,
                                  kFloat4RowsRefusals));
  registry.add_kernel(sgemm_entry("08_warptile", 8,
                                  "block, warp and thread tiles; any shape (scalar fallback when unaligned)",
                                  &sgemm_08_warptile));
  registry.add_kernel(sgemm_entry("09_cp_async", 9,
                                  "3-stage cp.async pipeline with zero-fill, grouped raster",
                                  &sgemm_09_cp_async));
  registry.add_kernel(sgemm_entry("10_autotuned", 10,
                                  "tile shape and split-K per shape class, from a searched space",
                                  &sgemm_10_autotuned));
  registry.add_kernel(sgemm_entry("11_stream_k", 11,
                                  "rung 10 plus stream-K: the last, partial wave's tiles split along K over every SM",
                                  &sgemm_11_stream_k));
}

}  // namespace kc::stage1
