// The greedy choice (kc/engine/engine_kernels.hpp): argmax_rows_block_per_row and, on Hopper,
// argmax_rows_cluster (8 CTAs a row, each an eighth of it) against a host argmax — the larger
// value, the lower index on a tie, -1 for a NaN anywhere in the row — on rows built to catch what
// a split row gets wrong: the winner in the last eighth, equal maxima in two different eighths
// (the lower must win), a NaN only in the last eighth, rows of -inf, rows not a multiple of 8
// logits (the element path), and random rows of the engines' vocabularies. argmax_rows, the
// engine's entry, must give the same answers. Skips without a GPU; the cluster half skips where
// clusters are not available (compute capability below 9.0, or no sm_90 code in the build).
//   ctest --test-dir build/ci -R Argmax
#include <gtest/gtest.h>

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kc/common/buffer.hpp"
#include "kc/engine/engine_kernels.hpp"
#include "support/gpu_test.hpp"

namespace kc::engine {
namespace {

using Rows = std::vector<std::vector<float>>;

std::int32_t host_argmax(const std::vector<float>& row) {
  std::int32_t best = 0;
  for (std::size_t c = 0; c < row.size(); ++c) {
    if (std::isnan(row[c])) return -1;
    if (row[c] > row[static_cast<std::size_t>(best)]) best = static_cast<std::int32_t>(c);
  }
  return best;
}

// Rows of `cols` logits, bf16-exact, each a case a split row can get wrong.
Rows crafted_rows(int cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.f, 2.f);
  const auto random_row = [&] {
    std::vector<float> row(static_cast<std::size_t>(cols));
    for (float& v : row) v = __bfloat162float(__float2bfloat16(normal(rng)));
    return row;
  };
  const std::size_t last = static_cast<std::size_t>(cols) - 1;
  const std::size_t eighth = static_cast<std::size_t>(cols) / 8;
  const auto at = [last](std::size_t i) { return i < last ? i : last; };  // short rows: clamped
  Rows rows;
  rows.push_back(random_row());
  rows.back()[last] = 64.f;  // the winner is the row's last logit
  rows.push_back(random_row());
  rows.back()[at(5 * eighth + 3)] = 64.f;  // equal maxima in the 4th and 6th eighths: the lower wins
  rows.back()[at(3 * eighth + 1)] = 64.f;
  rows.push_back(random_row());
  rows.back()[at(1)] = 64.f;  // ... and in the first and last
  rows.back()[last] = 64.f;
  rows.push_back(random_row());
  rows.back()[last] = NAN;  // a NaN only in the last eighth
  rows.push_back(std::vector<float>(static_cast<std::size_t>(cols), -INFINITY));  // no winner: 0
  for (int r = 0; r < 3; ++r) rows.push_back(random_row());
  return rows;
}

std::vector<std::int32_t> run(void (*argmax)(const bf16*, int, int, std::int32_t*, cudaStream_t), const Rows& rows,
                              int cols) {
  std::vector<bf16> host;
  for (const auto& row : rows)
    for (const float v : row) host.push_back(__float2bfloat16(v));
  DeviceBuffer<bf16> logits(host.size());
  logits.copy_from_host(host);
  DeviceBuffer<std::int32_t> out(rows.size());
  const std::vector<std::int32_t> poison(rows.size(), -7);
  out.copy_from_host(poison);
  argmax(logits.data(), static_cast<int>(rows.size()), cols, out.data(), nullptr);
  KC_CUDA_CHECK(cudaGetLastError());
  return out.to_host();
}

void expect_host_answers(void (*argmax)(const bf16*, int, int, std::int32_t*, cudaStream_t), const char* name) {
  std::mt19937 rng(2026);
  for (const int cols : {1, 7, 9, 1000, 4097, 49152, 128256}) {
    const Rows rows = crafted_rows(cols, rng);
    const std::vector<std::int32_t> got = run(argmax, rows, cols);
    for (std::size_t r = 0; r < rows.size(); ++r)
      EXPECT_EQ(got[r], host_argmax(rows[r])) << name << ": row " << r << " of " << cols << " logits";
  }
}

TEST(Argmax, BlockPerRowGivesTheHostAnswers) {
  KC_SKIP_WITHOUT_GPU();
  expect_host_answers(argmax_rows_block_per_row, "argmax_rows_block_per_row");
  expect_host_answers(argmax_rows, "argmax_rows");
}

TEST(Argmax, ClusterPerRowGivesTheHostAnswers) {
  KC_SKIP_WITHOUT_GPU();
  if (!argmax_rows_cluster_available())
    GTEST_SKIP() << "thread block clusters need compute capability 9.0 and sm_90 code in the build";
  expect_host_answers(argmax_rows_cluster, "argmax_rows_cluster");
}

TEST(Argmax, BadArgumentsAreRefused) {
  KC_SKIP_WITHOUT_GPU();
  DeviceBuffer<std::int32_t> out(1);
  EXPECT_THROW(argmax_rows(nullptr, 1, 10, out.data(), nullptr), Error);
  EXPECT_THROW(argmax_rows_cluster(nullptr, 1, 10, out.data(), nullptr), Error);
  EXPECT_THROW(argmax_rows_block_per_row(nullptr, 0, 10, out.data(), nullptr), Error);
}

}  // namespace
}  // namespace kc::engine
