// The attention_decode_paged op on the GPU: the operands hold the layout decode_layout() draws for
// their seed (table, lengths, NaN exactly in the unused rows of last blocks), the FP64 device
// reference (pages gathered on the GPU, attention_fwd's FP64 path) agrees with the host one, and a
// block id outside the pool in the operands stops the reference with kc::Error before it reads.
// Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kc/common/fill.hpp"
#include "kc/stage3/attention_decode.hpp"
#include "attention_test_support.hpp"
#include "stage3_test_registry.hpp"
#include "support/gpu_test.hpp"

namespace kc::stage3 {
namespace {

using testing_support::download;

const OpSpec& decode_op() { return stage3_test_registry().op(kAttentionDecodeOp); }

TEST(AttentionDecodeGpu, OperandsHoldTheSeededLayoutWithNaNPastEachSequence) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const OpSpec& op = decode_op();
  const Problem problem = op.problem({7, 8, 2, 4, 100, 64}, DType::bf16, {{"lengths", 1.0}});
  const DecodeShape s = decode_shape(problem);
  for (const std::uint64_t seed : {3u, 4u}) {
    const Operands operands = op.make_operands(problem, seed, context);
    const PagedKvLayout layout = decode_layout(problem, seed);
    std::vector<std::int32_t> table, lengths;
    for (double id : download(operands["block_table"], context.stream())) table.push_back(static_cast<std::int32_t>(id));
    for (double n : download(operands["seq_lens"], context.stream())) lengths.push_back(static_cast<std::int32_t>(n));
    EXPECT_EQ(table, layout.block_table);
    EXPECT_EQ(lengths, layout.seq_lens);
    // Which pool rows belong to a sequence: NaN everywhere else in a used block, nowhere inside.
    std::vector<bool> holds_key(static_cast<std::size_t>(layout.num_blocks * s.block_size), false);
    for (std::int64_t b = 0; b < s.batch; ++b)
      for (std::int64_t j = 0; j < layout.seq_lens[static_cast<std::size_t>(b)]; ++j)
        holds_key[static_cast<std::size_t>(layout.block(b, j / s.block_size) * s.block_size + j % s.block_size)] = true;
    for (const char* name : {"K_cache", "V_cache"}) {
      const std::vector<double> pool = download(operands[name], context.stream());
      std::int64_t wrong = 0;
      for (std::int64_t block = 0; block < layout.num_blocks; ++block)
        for (std::int64_t h = 0; h < s.kv_heads; ++h)
          for (std::int64_t row = 0; row < s.block_size; ++row) {
            const double x = pool[static_cast<std::size_t>(((block * s.kv_heads + h) * s.block_size + row) * s.head_dim)];
            if (std::isnan(x) == holds_key[static_cast<std::size_t>(block * s.block_size + row)]) ++wrong;
          }
      EXPECT_EQ(wrong, 0) << name << " seed " << seed << ": rows whose NaN does not match the layout";
    }
  }
}

TEST(AttentionDecodeGpu, DeviceReferenceAgreesWithTheHostReference) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const OpSpec& op = decode_op();
  const std::vector<Problem> problems = {
      op.problem({7, 32, 8, 4, 257, 128}, DType::bf16, {{"lengths", 1.0}}),
      op.problem({9, 8, 1, 1, 1000, 64}, DType::f16, {{"lengths", 1.0}, {"block_size", 64.0}}),
      op.problem({2, 16, 2, 8, 129, 128}, DType::bf16, {{"block_size", 32.0}, {"scale", 0.5}})};
  for (const Problem& problem : problems) {
    const Operands operands = op.make_operands(problem, 7, context);
    const std::map<std::string, std::vector<double>> host =
        testing_support::expect_references_agree(op, problem, operands, context);
    if (decode_shape(problem).lengths == DecodeLengths::ragged) {
      const std::vector<double>& lse = host.at("LSE");
      const auto minus_infinity =
          std::count_if(lse.begin(), lse.end(), [](double x) { return std::isinf(x) && x < 0; });
      EXPECT_GT(minus_infinity, 0) << problem.label() << ": the empty sequence's rows";
    }
  }
}

TEST(AttentionDecodeGpu, ABlockIdOutsideThePoolStopsTheReference) {
  KC_SKIP_WITHOUT_GPU();
  Context& context = testing::shared_context();
  const OpSpec& op = decode_op();
  const Problem problem = op.problem({3, 8, 2, 1, 40, 64}, DType::bf16);
  Operands operands = op.make_operands(problem, 1, context);
  const std::int32_t outside = static_cast<std::int32_t>(decode_num_blocks(problem));
  KC_CUDA_CHECK(cudaMemcpy(operands["block_table"].data<std::int32_t>() + 1, &outside, sizeof(outside),
                           cudaMemcpyHostToDevice));  // sequence 0, slot 1 (used: 40 keys fill 3 slots)
  for (const std::int64_t limit : {std::int64_t{1} << 40, std::int64_t{0}}) {  // host, then device
    const std::int64_t saved_limit = context.cpu_reference_limit;
    context.cpu_reference_limit = limit;
    EXPECT_THROW(op.reference(problem, operands, context), Error) << "limit " << limit;
    context.cpu_reference_limit = saved_limit;
  }
}

}  // namespace
}  // namespace kc::stage3
