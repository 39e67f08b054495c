// Rung 11's stream-K path against the sgemm reference. On the shapes of the conformance suite a
// GPU holds every tile in one wave, so rung 11 runs rung 10's launch there; this test forces a
// small number of resident blocks (sgemm_stream_k_launch) so that small, odd shapes get full
// data-parallel waves and a stream-K tail: ranges inside one tile and across two, the partial last
// k tile inside a stream-K segment, unaligned rows (checked copies, scalar atomics), beta = 0 with
// C poisoned with NaN, beta = 1 (no beta pass) and other alpha/beta. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "kc/common/check.hpp"
#include "kc/common/context.hpp"
#include "kc/common/device.hpp"
#include "kc/common/gemm.hpp"
#include "kc/stage1/sgemm.hpp"
#include "kc/stage1/register.hpp"
#include "kc/stage1/sgemm_autotune.hpp"
#include "kc/stage1/stream_k.hpp"
#include "support/gpu_test.hpp"

namespace kc::stage1 {
namespace {

Context& context() { return ::kc::testing::shared_context(); }

// check_run for a launch function of the sgemm op, on fresh operands of `problem`.
CheckOutcome check_sgemm(const Problem& problem, std::uint64_t seed,
                         const std::function<void(const SgemmArgs&, cudaStream_t)>& launch) {
  const auto run = [&](const Problem& p, Operands& o, Context& c) {
    launch(gemm_args<float>(p, o, BLayout::k_by_n), c.stream());
  };
  return check_run(make_sgemm_op(), run, problem, seed, context());
}

std::set<int> stream_k_configs() {
  std::set<int> configs;
  for (const ShapeClass shape_class : {ShapeClass::large, ShapeClass::skinny})
    if (has_stream_k_kernel(class_choice(shape_class).config)) configs.insert(class_choice(shape_class).config);
  return configs;
}

TEST(StreamK, ForcedSmallWavesMatchTheReference) {
  KC_SKIP_WITHOUT_GPU();
  const std::vector<Problem> problems = {
      gemm_problem("sgemm", {300, 200, 777}, DType::f32, 1.0, 0.0),     // partial last k tile inside a stream-K segment
      gemm_problem("sgemm", {129, 131, 65}, DType::f32, -0.5, 0.25),    // odd everything, C read
      gemm_problem("sgemm", {1, 1, 1}, DType::f32, 1.0, 0.0),           // one tile: rung 10's launch
      gemm_problem("sgemm", {257, 513, 1031}, DType::f32, 1.5, 0.0),    // N odd: 4-byte copies of B, scalar atomics
      gemm_problem("sgemm", {257, 513, 1031}, DType::f32, 1.0, 1.0),    // beta = 1: no beta pass over the tail
      gemm_problem("sgemm", {1000, 1000, 300}, DType::f32, 0.75, -2.0), // aligned rows, edge tiles, ranges across tiles
      gemm_problem("sgemm", {512, 384, 512}, DType::f32, 1.0, 0.0),     // every tile full: unchecked copies from k_begin != 0
      gemm_problem("sgemm", {640, 640, 40}, DType::f32, 1.0, 0.5),      // 3 k tiles per tile: too few to cut, rung 10's launch
  };
  int stream_k_runs = 0;
  int two_tile_runs = 0;
  for (const int config : stream_k_configs()) {
    for (const int resident_blocks : {3, 4, 5, 7}) {
      for (const Problem& problem : problems) {
        const GemmShape s = gemm_shape(problem);
        const StreamKPlan plan =
            plan_stream_k_for(kSearchSpace[config], static_cast<int>(s.m), static_cast<int>(s.n),
                              static_cast<int>(s.k), resident_blocks, 1);
        if (plan.uses_stream_k()) ++stream_k_runs;
        for (int block = 0; block < plan.stream_k_blocks; ++block)
          if (spans_two_tiles(plan, stream_k_range(plan, block))) {
            ++two_tile_runs;
            break;
          }
        const CheckOutcome outcome = check_sgemm(problem, 23, [&](const SgemmArgs& args, cudaStream_t stream) {
          sgemm_stream_k_launch(config, resident_blocks, args, stream);
        });
        EXPECT_TRUE(outcome.passed()) << config_name(kSearchSpace[config]) << ", S = " << resident_blocks << ", "
                                      << problem.label() << (plan.uses_stream_k() ? " (stream-K)" : " (rung 10)")
                                      << ": " << outcome.detail;
      }
    }
  }
  // The shapes above must reach the stream-K path, in one tile and across two, or this test
  // proves little.
  EXPECT_GE(stream_k_runs, 8);
  EXPECT_GE(two_tile_runs, 4);
}

// The registered launch with the GPU's own occupancy: 2100^2 is in the `large` class and has
// 17 x 17 = 289 tiles of 128 x 128, more than one wave on most GPUs (264 resident blocks on an
// H200: 25 tail tiles of 16 k tiles over 50 stream-K blocks).
TEST(StreamK, RegisteredRungMatchesTheReferenceBeyondOneWave) {
  KC_SKIP_WITHOUT_GPU();
  for (const Problem& problem : {gemm_problem("sgemm", {2100, 2100, 256}, DType::f32, 1.0, 0.0),
                                 gemm_problem("sgemm", {2100, 2100, 257}, DType::f32, -1.0, 0.5)}) {
    const CheckOutcome outcome = check_sgemm(problem, 29, &sgemm_11_stream_k);
    EXPECT_TRUE(outcome.passed()) << problem.label() << ": " << outcome.detail;
  }
}

}  // namespace
}  // namespace kc::stage1
