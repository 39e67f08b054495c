// The GPU sampler (kc/engine/gpu_sampler.hpp) against the CPU reference (kc/engine/sampling.hpp):
// the same uniform draws bit for bit, and the same tokens for temperature, top-k and top-p over
// random logits, except where the draw falls within FP32 rounding of a boundary between two
// neighbours in the order. Skips without a GPU.
//   ctest --test-dir build/ci -R GpuSampler
#include <gtest/gtest.h>

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kc/common/buffer.hpp"
#include "kc/engine/dequantize.hpp"
#include "kc/engine/gpu_sampler.hpp"
#include "kc/engine/model_weights.hpp"
#include "kc/engine/sampling.hpp"
#include "support/gpu_test.hpp"

namespace kc::engine {
namespace {

TEST(GpuSampler, UniformDrawsAreTheReferencesBits) {
  KC_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(3);
  std::vector<std::uint64_t> seeds(4096), indices(4096);
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    seeds[i] = i < 4 ? std::uint64_t{0xffffffffffffffffull} >> i : rng();
    indices[i] = i % 3 == 0 ? i : rng();
  }
  DeviceBuffer<std::uint64_t> s(seeds.size()), x(indices.size());
  DeviceBuffer<float> out(seeds.size());
  s.copy_from_host(seeds);
  x.copy_from_host(indices);
  gpu_sampling_uniforms(s.data(), x.data(), static_cast<int>(seeds.size()), out.data(), nullptr);
  const std::vector<float> got = out.to_host();
  for (std::size_t i = 0; i < seeds.size(); ++i)
    ASSERT_EQ(got[i], sampling_uniform(seeds[i], indices[i])) << "seed " << seeds[i] << ", index " << indices[i];
}

struct Row {
  std::vector<float> logits;  // bf16 values
  GpuSamplingRow params;
};

// `value` rounded to bf16, as a float.
float bf16_value(float value) { return bfloat16_to_float(float_to_bfloat16(value)); }

// The rows' tokens on the GPU.
std::vector<std::int32_t> sample_on_gpu(const std::vector<Row>& rows, int vocab, int rows_per_pass,
                                        GpuSortMethod method = GpuSortMethod::one_sort) {
  std::vector<std::uint16_t> bits;
  std::vector<GpuSamplingRow> params;
  for (const Row& row : rows) {
    for (float v : row.logits) bits.push_back(float_to_bfloat16(v));
    params.push_back(row.params);
  }
  DeviceBuffer<std::uint16_t> logits(bits.size());
  logits.copy_from_host(bits);
  DeviceBuffer<GpuSamplingRow> p(params.size());
  p.copy_from_host(params);
  DeviceBuffer<std::int32_t> tokens(rows.size());
  GpuSampler sampler(vocab, rows_per_pass, method);
  EXPECT_EQ(sampler.method(), method);
  sampler.sample(reinterpret_cast<const __nv_bfloat16*>(logits.data()), static_cast<int>(rows.size()), p.data(),
                 tokens.data(), nullptr);
  return tokens.to_host();
}

SamplingParams reference_params(const GpuSamplingRow& p) {
  SamplingParams params;
  params.temperature = p.temperature;
  params.top_k = p.top_k;
  params.top_p = p.top_p;
  params.seed = p.seed;
  return params;
}

// Whether `got` may stand for `expected` (sampling.hpp's rule for an FP32 sampler).
bool boundary_neighbours(const Row& row, std::int32_t expected, std::int32_t got) {
  return sampling_boundary_neighbours(row.logits, reference_params(row.params), row.params.index, expected, got);
}

TEST(GpuSampler, TokensMatchTheReferenceSampler) {
  KC_SKIP_WITHOUT_GPU();
  for (int vocab : {1000, 49152}) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(vocab));
    std::normal_distribution<float> normal(0.f, 3.f);
    std::vector<Row> rows;
    const float temperatures[] = {0.f, 0.3f, 0.7f, 1.f, 1.5f};
    const int top_ks[] = {0, 1, 5, 50};
    const float top_ps[] = {1.f, 0.9f, 0.5f, 0.05f};
    for (float t : temperatures)
      for (int k : top_ks)
        for (float p : top_ps)
          for (int repeat = 0; repeat < 2; ++repeat) {
            Row row;
            row.logits.resize(static_cast<std::size_t>(vocab));
            for (float& v : row.logits) v = bf16_value(normal(rng));
            if (repeat == 1)  // ties: a block of equal logits at the top
              for (int i = 0; i < 8; ++i) row.logits[static_cast<std::size_t>(i * 7)] = 12.f;
            row.params.temperature = t;
            row.params.top_k = k;
            row.params.top_p = p;
            row.params.seed = rng();
            row.params.index = rng() % 1000;
            rows.push_back(row);
          }
    const std::vector<std::int32_t> got = sample_on_gpu(rows, vocab, 7);
    // The two sorts give the same order, so the same tokens, bit for bit.
    EXPECT_EQ(sample_on_gpu(rows, vocab, 7, GpuSortMethod::segmented_per_row), got) << "vocab " << vocab;
    EXPECT_EQ(sample_on_gpu(rows, vocab, 1), got) << "vocab " << vocab << ", one row a pass";
    int exact = 0, boundary = 0;
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const std::int32_t expected =
          sample_token(rows[r].logits, reference_params(rows[r].params), rows[r].params.index);
      if (got[r] == expected) {
        ++exact;
        continue;
      }
      EXPECT_TRUE(boundary_neighbours(rows[r], expected, got[r]))
          << "vocab " << vocab << ", row " << r << ": GPU " << got[r] << ", reference " << expected;
      ++boundary;
    }
    EXPECT_LE(boundary, 2) << "more boundary cases than rounding explains";
    std::printf("vocab %d: %d of %zu rows equal to the reference, %d at a rounding boundary\n", vocab, exact,
                rows.size(), boundary);
  }
}

// The comparison can fail: another seed for each row changes most sampled tokens.
TEST(GpuSampler, AWrongSeedIsCaught) {
  KC_SKIP_WITHOUT_GPU();
  const int vocab = 1000;
  std::mt19937_64 rng(9);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<Row> rows(64);
  for (Row& row : rows) {
    row.logits.resize(vocab);
    for (float& v : row.logits) v = bf16_value(normal(rng));
    row.params.temperature = 1.f;
    row.params.seed = rng();
  }
  std::vector<Row> reseeded = rows;
  for (Row& row : reseeded) row.params.seed += 1;
  const std::vector<std::int32_t> got = sample_on_gpu(reseeded, vocab, 32);
  int differ = 0;
  for (std::size_t r = 0; r < rows.size(); ++r)
    differ += got[r] != sample_token(rows[r].logits, reference_params(rows[r].params), 0) ? 1 : 0;
  EXPECT_GT(differ, 48);
}

TEST(GpuSampler, NanOrMaskedRowsGiveMinusOne) {
  KC_SKIP_WITHOUT_GPU();
  const int vocab = 300;
  std::vector<Row> rows(3);
  for (Row& row : rows) {
    row.logits.assign(vocab, 0.5f);
    row.params.temperature = 1.f;
  }
  rows[0].logits[17] = NAN;
  rows[1].logits.assign(vocab, -INFINITY);
  rows[2].logits[42] = 3.f;
  rows[2].params.temperature = 0.f;  // greedy: the argmax
  for (const GpuSortMethod method : {GpuSortMethod::one_sort, GpuSortMethod::segmented_per_row}) {
    const std::vector<std::int32_t> got = sample_on_gpu(rows, vocab, 2, method);
    EXPECT_EQ(got[0], -1);
    EXPECT_EQ(got[1], -1);
    EXPECT_EQ(got[2], 42);
  }
}

// one_sort's key puts the row above the logit: the bits it sorts by cover every row index.
TEST(GpuSamplerRowBits, CoverTheRowIndices) {
  EXPECT_EQ(gpu_sampler_row_bits(1), 0);
  EXPECT_EQ(gpu_sampler_row_bits(2), 1);
  EXPECT_EQ(gpu_sampler_row_bits(3), 2);
  EXPECT_EQ(gpu_sampler_row_bits(32), 5);
  EXPECT_EQ(gpu_sampler_row_bits(33), 6);
}

// Signed zeros, subnormals, infinities and ties in one row of 3 000 (one_sort past a sort's single
// tile): both sorts agree on every token, greedy and sampled, and a wrong order is seen (the rows
// themselves differ from row to row, so a key that lost its row bits would mix them).
TEST(GpuSampler, BothSortsAgreeOnSpecialValues) {
  KC_SKIP_WITHOUT_GPU();
  const int vocab = 3000;
  std::mt19937_64 rng(21);
  std::normal_distribution<float> normal(0.f, 2.f);
  std::vector<Row> rows(40);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    Row& row = rows[r];
    row.logits.resize(vocab);
    for (float& v : row.logits) v = bf16_value(normal(rng));
    row.logits[3] = -0.f;
    row.logits[4] = 0.f;
    row.logits[5] = bf16_value(1e-39f);  // subnormal in bf16 too
    row.logits[6] = -INFINITY;
    row.logits[7 + r % 50] = 20.f;  // the top differs from row to row (10 sigma above the rest)
    row.logits[100 + r % 50] = 20.f;
    row.params.temperature = r % 3 == 0 ? 0.f : 1.f;
    row.params.top_p = r % 2 == 0 ? 1.f : 0.7f;
    row.params.seed = rng();
  }
  const std::vector<std::int32_t> one = sample_on_gpu(rows, vocab, 32, GpuSortMethod::one_sort);
  const std::vector<std::int32_t> segmented = sample_on_gpu(rows, vocab, 32, GpuSortMethod::segmented_per_row);
  EXPECT_EQ(one, segmented);
  for (std::size_t r = 0; r < rows.size(); r += 3)  // greedy rows: the first of the tied maxima
    EXPECT_EQ(one[r], static_cast<std::int32_t>(7 + r % 50)) << "row " << r;
}

}  // namespace
}  // namespace kc::engine
