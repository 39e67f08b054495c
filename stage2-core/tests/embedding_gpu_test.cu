// Embedding ids out of range: a clear kc::Error naming the first bad position, the id and the
// valid range; no read outside the table (the bad rows are zero-filled, the good ones exact); and
// the error record of both rungs holds the first bad position, or -1 when every id is valid.
#include <gtest/gtest.h>

#include <climits>
#include <string>
#include <vector>

#include "device_data.hpp"
#include "kc/common/buffer.hpp"
#include "kc/stage2/embedding.hpp"
#include "support/gpu_test.hpp"

namespace kc::stage2 {
namespace {

using kc::testing::shared_context;

constexpr int kVocab = 1000;
constexpr int kHidden = 4096;
constexpr int kTokens = 12;

struct Gather {
  DeviceBuffer<int> ids{kTokens};
  DeviceBuffer<__nv_bfloat16> table{static_cast<std::size_t>(kVocab) * kHidden};
  DeviceBuffer<__nv_bfloat16> out{static_cast<std::size_t>(kTokens) * kHidden};
  DeviceBuffer<int> error{1};
  std::vector<int> host_ids;

  explicit Gather(std::vector<int> token_ids) : host_ids(std::move(token_ids)) {
    ids.copy_from_host(host_ids);
    fill_random(table, 3);
    fill_random(out, 4);  // not zeros: a skipped row must be written as zeros, not left alone
    error.copy_from_host(std::vector<int>{kNoBadToken});
  }
  EmbeddingArgs<__nv_bfloat16> args() {
    EmbeddingArgs<__nv_bfloat16> a;
    a.tokens = kTokens;
    a.vocab = kVocab;
    a.hidden = kHidden;
    a.ids = ids.data();
    a.table = table.data();
    a.out = out.data();
    a.error_record = error.data();
    return a;
  }
  // Every row of a valid id equals its table row; every row of a bad id is zero.
  void expect_rows() const {
    const auto t = table.to_host();
    const auto o = out.to_host();
    for (int token = 0; token < kTokens; ++token) {
      const int id = host_ids[static_cast<std::size_t>(token)];
      const bool valid = id >= 0 && id < kVocab;
      for (int h = 0; h < kHidden; h += 97) {
        const float got = __bfloat162float(o[static_cast<std::size_t>(token) * kHidden + h]);
        const float want = valid ? __bfloat162float(t[static_cast<std::size_t>(id) * kHidden + h]) : 0.f;
        ASSERT_EQ(got, want) << "token " << token << " (id " << id << "), column " << h;
      }
    }
  }
};

std::vector<int> ids_with(std::initializer_list<std::pair<int, int>> bad) {
  std::vector<int> ids(kTokens);
  for (int t = 0; t < kTokens; ++t) ids[static_cast<std::size_t>(t)] = (t * 389) % kVocab;
  for (const auto& [position, id] : bad) ids[static_cast<std::size_t>(position)] = id;
  return ids;
}

TEST(Embedding, CheckedLookupPassesValidIds) {
  KC_SKIP_WITHOUT_GPU();
  Gather gather(ids_with({{3, kVocab - 1}, {4, 0}}));
  EXPECT_NO_THROW(embedding_lookup_checked(gather.args(), shared_context().stream()));
  gather.expect_rows();
}

TEST(Embedding, OutOfRangeIdsAreAClearErrorAndNeverRead) {
  KC_SKIP_WITHOUT_GPU();
  Gather gather(ids_with({{9, -3}, {5, kVocab}, {11, INT_MAX}}));
  try {
    embedding_lookup_checked(gather.args(), shared_context().stream());
    FAIL() << "ids outside the vocabulary must throw";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("token id 1000 at position 5"), std::string::npos) << message;
    EXPECT_NE(message.find("[0, 1000)"), std::string::npos) << message;
  }
  // The context is intact (no illegal address) and the rows are right.
  KC_CUDA_CHECK(cudaDeviceSynchronize());
  gather.expect_rows();
}

TEST(Embedding, EveryRungRecordsTheFirstBadPosition) {
  KC_SKIP_WITHOUT_GPU();
  using Rung = void (*)(const EmbeddingArgs<__nv_bfloat16>&, cudaStream_t);
  for (Rung rung : {Rung{&embedding_01_naive<__nv_bfloat16>}, Rung{&embedding_02_vectorized<__nv_bfloat16>}}) {
    Gather bad(ids_with({{7, -1}, {2, 5000}}));
    rung(bad.args(), shared_context().stream());
    KC_CHECK_LAUNCH();
    EXPECT_EQ(bad.error.to_host(shared_context().stream())[0], 2);
    bad.expect_rows();

    Gather good(ids_with({}));
    rung(good.args(), shared_context().stream());
    EXPECT_EQ(good.error.to_host(shared_context().stream())[0], kNoBadToken) << "valid ids leave the record alone";
    good.expect_rows();
  }
}

}  // namespace
}  // namespace kc::stage2
