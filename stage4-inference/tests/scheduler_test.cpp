// The continuous-batching scheduler (kc/engine/scheduler.hpp) with fake model steps.
//
// FakeModel stands in for the GPU model step and checks the batch as a paged-attention kernel
// would use it: it writes each scheduled token into a fake KV cache at the slot the packed block
// table gives (making the copy-on-write copies first), then reads the whole context back through
// the table and turns it into logits, which the reference sampler samples with the request's seed
// and the token's output index. A wrong block table, a block freed while in use, a chunk at the
// wrong position or a recompute that skips a token changes the context it reads and therefore the
// tokens, which the tests compare with a run of each request alone in a large cache.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "kc/common/error.hpp"
#include "kc/common/splitmix.hpp"
#include "kc/engine/scheduler.hpp"
#include "support/test_files.hpp"

#ifndef KC_TOKENIZER_TEST_DATA
#error "KC_TOKENIZER_TEST_DATA must name the tokenizer test data folder"
#endif

namespace kc::engine {
namespace {

using test_support::contains_all;
using test_support::error_of;

constexpr std::int32_t kVocab = 64;


class FakeModel : public ModelExecutor {
 public:
  FakeModel(std::int32_t num_blocks, std::int32_t block_size)
      : block_size_(block_size), slots_(static_cast<std::size_t>(num_blocks) * block_size, -1) {}

  std::vector<TokenId> execute(const StepBatch& batch) override {
    ++steps_;
    for (const BlockCopy& copy : batch.block_copies)
      std::copy_n(slots_.begin() + std::int64_t{copy.source} * block_size_, block_size_,
                  slots_.begin() + std::int64_t{copy.destination} * block_size_);
    const PackedBlockTables& tables = batch.block_tables;
    EXPECT_EQ(tables.rows, static_cast<std::int32_t>(batch.sequences.size()));
    std::set<std::int64_t> written;
    for (std::int32_t row = 0; row < tables.rows; ++row) {
      const ScheduledSequence& sequence = batch.sequences[row];
      EXPECT_EQ(tables.lengths[row],
                sequence.start_position + static_cast<std::int64_t>(sequence.tokens.size()));
      for (std::size_t i = 0; i < sequence.tokens.size(); ++i) {
        const std::int64_t slot = slot_of(tables, row, sequence.start_position + i);
        EXPECT_TRUE(written.insert(slot).second) << "two tokens of one step share slot " << slot;
        slots_[slot] = sequence.tokens[i];
      }
    }
    std::vector<TokenId> sampled;
    for (std::int32_t row = 0; row < tables.rows; ++row) {
      const ScheduledSequence& sequence = batch.sequences[row];
      if (!sequence.samples) continue;
      std::uint64_t hash = 0;
      for (std::int64_t position = 0; position < tables.lengths[row]; ++position)
        hash = splitmix64(hash ^ static_cast<std::uint64_t>(slots_[slot_of(tables, row, position)]));
      std::vector<float> logits(kVocab);
      for (std::int32_t token = 0; token < kVocab; ++token)
        logits[token] = static_cast<float>(splitmix64(hash + token) >> 40) / 4194304.0f;  // [0, 4)
      sampled.push_back(sample_token(logits, sequence.sampling,
                                     static_cast<std::uint64_t>(sequence.output_index)));
    }
    return sampled;
  }

  std::int64_t steps() const { return steps_; }

 private:
  std::int64_t slot_of(const PackedBlockTables& tables, std::int32_t row, std::int64_t position) {
    const std::int32_t block = tables.at(row, static_cast<std::int32_t>(position / block_size_));
    EXPECT_NE(block, kPaddingBlock) << "position " << position << " of row " << row;
    return std::int64_t{block} * block_size_ + position % block_size_;
  }

  std::int32_t block_size_;
  std::vector<TokenId> slots_;
  std::int64_t steps_ = 0;
};

// Runs a FakeModel and checks each batch against the scheduler's rules.
class CheckingExecutor : public ModelExecutor {
 public:
  explicit CheckingExecutor(const SchedulerConfig& config)
      : config_(config), model_(config.num_blocks, config.block_size) {}

  std::vector<TokenId> execute(const StepBatch& batch) override {
    EXPECT_LE(batch.num_tokens, config_.max_batched_tokens);
    EXPECT_LE(static_cast<std::int32_t>(batch.sequences.size()), config_.max_running);
    std::int32_t tokens = 0;
    std::set<RequestId> seen;
    for (std::size_t i = 0; i < batch.sequences.size(); ++i) {
      const ScheduledSequence& sequence = batch.sequences[i];
      EXPECT_TRUE(seen.insert(sequence.request).second) << "request twice in one batch";
      EXPECT_FALSE(sequence.tokens.empty());
      tokens += static_cast<std::int32_t>(sequence.tokens.size());
      if (static_cast<std::int32_t>(i) < batch.num_decodes) {
        EXPECT_EQ(sequence.tokens.size(), 1u);
        EXPECT_TRUE(sequence.samples);
      }
      if (first_step_.count(sequence.request) == 0) {
        first_step_[sequence.request] = model_.steps();
        admission_order_.push_back(sequence.request);
      }
      chunk_sizes_[sequence.request].push_back(static_cast<std::int32_t>(sequence.tokens.size()));
    }
    EXPECT_EQ(tokens, batch.num_tokens);
    max_batch_tokens_ = std::max(max_batch_tokens_, batch.num_tokens);
    return model_.execute(batch);
  }

  const std::vector<RequestId>& admission_order() const { return admission_order_; }
  const std::vector<std::int32_t>& chunk_sizes(RequestId id) { return chunk_sizes_[id]; }
  std::int32_t max_batch_tokens() const { return max_batch_tokens_; }
  std::int64_t steps() const { return model_.steps(); }

 private:
  SchedulerConfig config_;
  FakeModel model_;
  std::map<RequestId, std::int64_t> first_step_;
  std::vector<RequestId> admission_order_;
  std::map<RequestId, std::vector<std::int32_t>> chunk_sizes_;
  std::int32_t max_batch_tokens_ = 0;
};

SchedulerConfig config(std::int32_t num_blocks, std::int32_t max_batched_tokens,
                       std::int64_t max_model_len = 4096, std::int32_t max_running = 256) {
  SchedulerConfig c;
  c.num_blocks = num_blocks;
  c.block_size = 16;
  c.max_model_len = max_model_len;
  c.max_batched_tokens = max_batched_tokens;
  c.max_running = max_running;
  return c;
}

GenerationRequest make_request(std::int32_t prompt_length, std::int32_t max_tokens,
                               std::uint32_t seed, float temperature = 0.0f) {
  GenerationRequest request;
  std::mt19937 rng(seed);
  for (std::int32_t i = 0; i < prompt_length; ++i)
    request.prompt.push_back(static_cast<TokenId>(rng() % kVocab));
  request.max_tokens = max_tokens;
  request.sampling.temperature = temperature;
  request.sampling.top_k = temperature > 0.0f ? 20 : 0;
  request.sampling.top_p = temperature > 0.0f ? 0.95f : 1.0f;
  request.sampling.seed = seed * 7919ull;
  return request;
}

// The request's output when it runs alone in a cache large enough never to preempt.
RequestOutput run_alone(const GenerationRequest& request) {
  const SchedulerConfig big = config(256, 512);
  Scheduler scheduler(big);
  FakeModel model(big.num_blocks, big.block_size);
  const RequestId id = scheduler.submit(request);
  scheduler.run_to_completion(model);
  return *scheduler.take_output(id);
}

TEST(Scheduler, ChunkedPrefillRespectsTheTokenBudget) {
  const SchedulerConfig c = config(64, 16);
  Scheduler scheduler(c);
  CheckingExecutor executor(c);
  const RequestId first = scheduler.submit(make_request(40, 8, 1));
  const RequestId second = scheduler.submit(make_request(5, 8, 2));
  scheduler.run_to_completion(executor);
  // 40 prompt tokens in chunks of 16, 16 and 8; the second request's prompt shares the third
  // step's budget with the first one's last chunk.
  const std::vector<std::int32_t> expected_first = {16, 16, 8, 1, 1, 1, 1, 1, 1, 1};
  EXPECT_EQ(executor.chunk_sizes(first), expected_first);
  EXPECT_EQ(executor.chunk_sizes(second).front(), 5);
  EXPECT_EQ(executor.max_batch_tokens(), 16);
  EXPECT_EQ(scheduler.take_output(first)->tokens, run_alone(make_request(40, 8, 1)).tokens);
  EXPECT_EQ(scheduler.take_output(second)->tokens, run_alone(make_request(5, 8, 2)).tokens);
  EXPECT_EQ(scheduler.kv_cache().free_blocks(), 64);
}

TEST(Scheduler, DecodesComeFirstAndPrefillFillsTheRest) {
  const SchedulerConfig c = config(64, 10);
  Scheduler scheduler(c);
  for (std::uint32_t i = 0; i < 3; ++i) scheduler.submit(make_request(3, 20, 10 + i));
  StepBatch batch = scheduler.schedule();  // three prompts of 3
  EXPECT_EQ(batch.num_decodes, 0);
  EXPECT_EQ(batch.num_tokens, 9);
  FakeModel model(c.num_blocks, c.block_size);
  scheduler.complete(batch, model.execute(batch));
  const RequestId late = scheduler.submit(make_request(30, 4, 20));
  batch = scheduler.schedule();
  EXPECT_EQ(batch.num_decodes, 3);
  ASSERT_EQ(batch.sequences.size(), 4u);
  EXPECT_EQ(batch.sequences[3].request, late);
  EXPECT_EQ(batch.sequences[3].tokens.size(), 7u);  // 10 - 3 decodes
  EXPECT_FALSE(batch.sequences[3].samples);
  EXPECT_EQ(batch.num_tokens, 10);
  EXPECT_TRUE(contains_all(error_of([&] { scheduler.schedule(); }), {"before complete()"}));
  EXPECT_TRUE(contains_all(error_of([&] {
                             scheduler.complete(batch, {1, 2});
                           }),
                           {"returned 2 tokens"}));
  scheduler.complete(batch, model.execute(batch));
  EXPECT_TRUE(contains_all(error_of([&] { scheduler.complete(batch, {1, 2, 3}); }), {"only once"}));
}

TEST(Scheduler, PreemptedRequestsFinishWithTheSameTokens) {
  for (const float temperature : {0.0f, 0.8f}) {
    // 6 blocks of 16 tokens; four requests that together need far more.
    const SchedulerConfig c = config(6, 64);
    Scheduler scheduler(c);
    CheckingExecutor executor(c);
    std::vector<GenerationRequest> requests;
    std::vector<RequestId> ids;
    for (std::uint32_t i = 0; i < 4; ++i) {
      requests.push_back(
          make_request(18 + 3 * static_cast<std::int32_t>(i), 40, 100 + i, temperature));
      ids.push_back(scheduler.submit(requests.back()));
    }
    scheduler.run_to_completion(executor);
    EXPECT_GT(scheduler.stats().preemptions, 0);
    std::int32_t preempted = 0;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const std::optional<RequestOutput> output = scheduler.take_output(ids[i]);
      ASSERT_TRUE(output.has_value());
      preempted += output->preemptions > 0;
      const RequestOutput alone = run_alone(requests[i]);
      EXPECT_EQ(alone.preemptions, 0);
      EXPECT_EQ(output->tokens, alone.tokens) << "request " << i << ", T " << temperature;
      EXPECT_EQ(output->finish, FinishReason::max_tokens);
      EXPECT_EQ(output->tokens.size(), 40u);
    }
    EXPECT_GT(preempted, 0);
    EXPECT_EQ(scheduler.kv_cache().free_blocks(), c.num_blocks);
    EXPECT_TRUE(scheduler.idle());
  }
}

TEST(Scheduler, PreemptionTakesTheNewestAndRequeuesItFirst) {
  // Two requests of 16-token prompts fill 2 of 3 blocks; the first to need a block preempts the
  // newer one, which returns to the front of the waiting queue, before a third request.
  const SchedulerConfig c = config(3, 64);
  Scheduler scheduler(c);
  FakeModel model(c.num_blocks, c.block_size);
  const RequestId older = scheduler.submit(make_request(16, 20, 1));
  const RequestId newer = scheduler.submit(make_request(16, 20, 2));
  StepBatch batch = scheduler.schedule();
  ASSERT_EQ(batch.sequences.size(), 2u);
  scheduler.complete(batch, model.execute(batch));
  const RequestId third = scheduler.submit(make_request(4, 4, 3));
  // Step 2: both decode and each needs a second block: 3 blocks hold only one of them.
  batch = scheduler.schedule();
  ASSERT_EQ(batch.preempted, std::vector<RequestId>({newer}));
  ASSERT_EQ(batch.sequences.size(), 1u);
  EXPECT_EQ(batch.sequences[0].request, older);
  EXPECT_EQ(scheduler.num_waiting(), 2u);
  scheduler.complete(batch, model.execute(batch));
  scheduler.run_to_completion(model);
  const RequestOutput newer_output = *scheduler.take_output(newer);
  EXPECT_GE(newer_output.preemptions, 1);
  EXPECT_EQ(newer_output.tokens, run_alone(make_request(16, 20, 2)).tokens);
  EXPECT_EQ(scheduler.take_output(older)->tokens, run_alone(make_request(16, 20, 1)).tokens);
  EXPECT_EQ(scheduler.take_output(third)->tokens, run_alone(make_request(4, 4, 3)).tokens);
}

TEST(Scheduler, AdmissionIsFirstInFirstOut) {
  // A tight cache and budget: requests must wait, and none overtakes an earlier one.
  const SchedulerConfig c = config(8, 24, 4096, 3);
  Scheduler scheduler(c);
  CheckingExecutor executor(c);
  std::vector<RequestId> ids;
  for (std::uint32_t i = 0; i < 12; ++i)
    ids.push_back(scheduler.submit(make_request(i % 3 == 0 ? 40 : 3, 6, 200 + i)));
  scheduler.run_to_completion(executor);
  EXPECT_EQ(executor.admission_order(), ids);
  for (const RequestId id : ids) EXPECT_TRUE(scheduler.take_output(id).has_value());
}

TEST(Scheduler, CancelFreesBlocksAndDropsTheRequest) {
  const SchedulerConfig c = config(8, 24, 4096, 3);
  Scheduler scheduler(c);
  CheckingExecutor executor(c);
  const std::int32_t all_free = scheduler.kv_cache().free_blocks();
  const RequestId running = scheduler.submit(make_request(20, 50, 1));
  const RequestId kept = scheduler.submit(make_request(5, 4, 2));
  ASSERT_TRUE(scheduler.step(executor));
  ASSERT_TRUE(scheduler.step(executor));
  EXPECT_LT(scheduler.kv_cache().free_blocks(), all_free);
  const RequestId waiting = scheduler.submit(make_request(5, 4, 3));
  EXPECT_TRUE(scheduler.cancel(running));
  EXPECT_TRUE(scheduler.cancel(waiting));
  EXPECT_FALSE(scheduler.cancel(running)) << "a second cancel finds nothing";
  EXPECT_FALSE(scheduler.cancel(12345));
  scheduler.run_to_completion(executor);
  EXPECT_EQ(scheduler.kv_cache().free_blocks(), all_free);
  EXPECT_FALSE(scheduler.take_output(running).has_value());
  EXPECT_FALSE(scheduler.take_output(waiting).has_value());
  EXPECT_TRUE(scheduler.take_output(kept).has_value());
  EXPECT_FALSE(scheduler.cancel(kept)) << "a finished request cannot be cancelled";
}

// A step whose model run failed: the batch's requests are dropped, their blocks freed, and a
// request outside the batch runs on as if nothing had happened.
TEST(Scheduler, AbandonedStepDropsItsRequestsOnly) {
  const SchedulerConfig c = config(8, 64, 4096, 1);
  Scheduler scheduler(c);
  CheckingExecutor executor(c);
  const std::int32_t all_free = scheduler.kv_cache().free_blocks();
  const GenerationRequest later = make_request(6, 5, 2);
  const RequestId failed = scheduler.submit(make_request(20, 50, 1));
  const RequestId kept = scheduler.submit(later);
  ASSERT_TRUE(scheduler.step(executor));
  const StepBatch batch = scheduler.schedule();  // max_running 1: `kept` waits, not in the batch
  ASSERT_EQ(batch.sequences.size(), 1u);
  EXPECT_EQ(scheduler.abandon_step(batch), std::vector<RequestId>{failed});
  EXPECT_EQ(scheduler.kv_cache().free_blocks(), all_free);
  EXPECT_EQ(scheduler.num_running(), 0u);
  EXPECT_NE(error_of([&] { scheduler.abandon_step(batch); }).find("abandon_step"),
            std::string::npos)
      << "a batch is abandoned once";
  scheduler.run_to_completion(executor);
  EXPECT_FALSE(scheduler.take_output(failed).has_value());
  EXPECT_EQ(scheduler.take_output(kept)->tokens, run_alone(later).tokens);
  EXPECT_EQ(scheduler.kv_cache().free_blocks(), all_free);
}

TEST(Scheduler, RandomWorkloadLeaksNothingAndMatchesSoloRuns) {
  std::mt19937 rng(7);
  const SchedulerConfig c = config(12, 48, 160, 8);
  Scheduler scheduler(c);
  CheckingExecutor executor(c);
  std::map<RequestId, GenerationRequest> submitted;
  std::int32_t submitted_count = 0;
  while (submitted_count < 150 || !scheduler.idle()) {
    for (std::uint32_t arrivals = rng() % 3; arrivals > 0 && submitted_count < 150; --arrivals) {
      GenerationRequest request =
          make_request(1 + static_cast<std::int32_t>(rng() % 70),
                       1 + static_cast<std::int32_t>(rng() % 60), rng(), (rng() % 2) ? 0.9f : 0.0f);
      if (rng() % 4 == 0) request.stop_token_ids = {static_cast<TokenId>(rng() % kVocab)};
      const RequestId id = scheduler.submit(request);
      submitted.emplace(id, std::move(request));
      ++submitted_count;
    }
    scheduler.step(executor);
    const KvCacheStats stats = scheduler.kv_cache().stats();
    ASSERT_EQ(stats.num_sequences, static_cast<std::int32_t>(scheduler.num_running()));
    ASSERT_EQ(stats.used_blocks + stats.free_blocks, c.num_blocks);
  }
  EXPECT_GT(scheduler.stats().preemptions, 0);
  EXPECT_EQ(scheduler.kv_cache().free_blocks(), c.num_blocks);
  EXPECT_EQ(scheduler.kv_cache().stats().num_sequences, 0);
  for (const auto& [id, request] : submitted) {
    const std::optional<RequestOutput> output = scheduler.take_output(id);
    ASSERT_TRUE(output.has_value()) << "request " << id;
    const RequestOutput alone = run_alone(request);
    EXPECT_EQ(output->tokens, alone.tokens) << "request " << id;
    EXPECT_EQ(output->finish, alone.finish) << "request " << id;
  }
}

TEST(Scheduler, RequestsThatCanNeverRunAreRefusedAtSubmission) {
  Scheduler scheduler(config(4, 64, 100));  // 64 cache tokens, a context of 100
  EXPECT_EQ(scheduler.max_sequence_tokens(), 64);
  EXPECT_TRUE(contains_all(error_of([&] { scheduler.submit(make_request(64, 1, 1)); }),
                           {"a prompt of 64 tokens can never run"}));
  scheduler.submit(make_request(63, 1, 1));  // fits, with one token to generate
  Scheduler long_cache(config(100, 64, 48));
  EXPECT_TRUE(contains_all(error_of([&] { long_cache.submit(make_request(48, 1, 1)); }),
                           {"the model's context is 48"}));
  EXPECT_TRUE(contains_all(error_of([&] { scheduler.submit(make_request(0, 1, 1)); }),
                           {"at least one token"}));
  EXPECT_TRUE(
      contains_all(error_of([&] { scheduler.submit(make_request(4, 0, 1)); }), {"max_tokens"}));
  GenerationRequest with_stop = make_request(4, 4, 1);
  with_stop.stop_strings = {"x"};
  EXPECT_TRUE(contains_all(error_of([&] { scheduler.submit(with_stop); }), {"need a detokenizer"}));
  GenerationRequest bad_sampling = make_request(4, 4, 1);
  bad_sampling.sampling.top_p = 0.0f;
  EXPECT_TRUE(contains_all(error_of([&] { scheduler.submit(bad_sampling); }), {"top_p"}));
  GenerationRequest negative = make_request(4, 4, 1);
  negative.prompt[2] = -3;
  EXPECT_TRUE(contains_all(error_of([&] { scheduler.submit(negative); }), {"negative token id"}));
  EXPECT_TRUE(contains_all(error_of([] { Scheduler(config(4, 0)); }), {"max_batched_tokens"}));
  EXPECT_TRUE(contains_all(error_of([] { Scheduler(config(4, 8, 1)); }), {"max_model_len"}));
}

TEST(Scheduler, GenerationStopsAtTheContextLimit) {
  Scheduler scheduler(config(8, 64, 20));
  FakeModel model(8, 16);
  const RequestId id = scheduler.submit(make_request(15, 100, 1));
  scheduler.run_to_completion(model);
  const RequestOutput output = *scheduler.take_output(id);
  EXPECT_EQ(output.tokens.size(), 5u);
  EXPECT_EQ(output.finish, FinishReason::context_limit);
}

// Stop conditions with scripted tokens and a detokenizer over a small made-up vocabulary.
const std::vector<std::string> kWords = {"Hel", "lo", " wor", "ld", "!", "\n", "<eos>", "lo!"};
constexpr TokenId kEos = 6;

class WordDetokenizer : public Detokenizer {
 public:
  std::string push(TokenId token) override { return kWords.at(static_cast<std::size_t>(token)); }
  std::string finish() override { return {}; }
};

class ScriptedExecutor : public ModelExecutor {
 public:
  explicit ScriptedExecutor(std::vector<TokenId> script) : script_(std::move(script)) {}
  std::vector<TokenId> execute(const StepBatch& batch) override {
    std::vector<TokenId> sampled;
    for (const ScheduledSequence& sequence : batch.sequences)
      if (sequence.samples) sampled.push_back(script_.at(sequence.output_index));
    return sampled;
  }

 private:
  std::vector<TokenId> script_;
};

struct StopRun {
  RequestOutput output;
  std::vector<StreamEvent> events;
};

StopRun run_script(const std::vector<TokenId>& script, std::int32_t max_tokens,
                   std::vector<std::string> stop_strings, std::vector<TokenId> stop_ids = {kEos}) {
  Scheduler scheduler(config(8, 64), [] { return std::make_unique<WordDetokenizer>(); });
  ScriptedExecutor executor(script);
  StopRun run;
  GenerationRequest request = make_request(3, max_tokens, 1);
  request.stop_strings = std::move(stop_strings);
  request.stop_token_ids = std::move(stop_ids);
  request.on_output = [&run](const StreamEvent& event) { run.events.push_back(event); };
  const RequestId id = scheduler.submit(std::move(request));
  scheduler.run_to_completion(executor);
  run.output = *scheduler.take_output(id);
  // One event per token, the last one finishing; the streamed text is the output text.
  EXPECT_EQ(run.events.size(), run.output.tokens.size());
  std::string streamed;
  for (std::size_t i = 0; i < run.events.size(); ++i) {
    EXPECT_EQ(run.events[i].request, id);
    EXPECT_EQ(run.events[i].token, run.output.tokens[i]);
    EXPECT_EQ(run.events[i].finish == FinishReason::none, i + 1 < run.events.size());
    streamed += run.events[i].text;
  }
  EXPECT_EQ(streamed, run.output.text);
  EXPECT_EQ(scheduler.kv_cache().free_blocks(), 8);
  return run;
}

TEST(Scheduler, StopsOnAStopToken) {
  const StopRun run = run_script({0, 1, kEos, 3, 4}, 10, {});
  EXPECT_EQ(run.output.tokens, std::vector<TokenId>({0, 1, kEos}));
  EXPECT_EQ(run.output.finish, FinishReason::stop_token);
  EXPECT_EQ(run.output.text, "Hello");  // the stop token adds no text
  EXPECT_EQ(run.events.back().text, "");
}

TEST(Scheduler, StopsAtMaxTokens) {
  const StopRun run = run_script({0, 1, 2, 3, 4}, 3, {});
  EXPECT_EQ(run.output.tokens, std::vector<TokenId>({0, 1, 2}));
  EXPECT_EQ(run.output.finish, FinishReason::max_tokens);
  EXPECT_EQ(run.output.text, "Hello wor");
  // Without stop strings every token's text is sent at once.
  EXPECT_EQ(run.events[1].text, "lo");
}

TEST(Scheduler, StopsOnAStopStringAcrossTokens) {
  const StopRun run = run_script({0, 1, 2, 3, 4}, 10, {"o wo", "zzz"});
  EXPECT_EQ(run.output.tokens, std::vector<TokenId>({0, 1, 2}));
  EXPECT_EQ(run.output.finish, FinishReason::stop_string);
  EXPECT_EQ(run.output.text, "Hell");
  ASSERT_EQ(run.events.size(), 3u);
  EXPECT_EQ(run.events[0].text, "Hel");
  EXPECT_EQ(run.events[1].text, "l");  // "o" held back: it may start "o wo"
  EXPECT_EQ(run.events[2].text, "");
}

TEST(Scheduler, HeldBackTextIsSentWhenTheStopStringDoesNotComplete) {
  const StopRun run = run_script({0, 1, 2, 3}, 4, {"lo!"});
  EXPECT_EQ(run.output.finish, FinishReason::max_tokens);
  EXPECT_EQ(run.output.text, "Hello world");
  EXPECT_EQ(run.events[1].text, "l");  // "Hello": "lo" may start "lo!"
  EXPECT_EQ(run.events[2].text, "lo wor");
  // The earliest of several stop strings wins, even inside one token.
  const StopRun inside = run_script({0, 7, 2}, 10, {" wor", "o!"});
  EXPECT_EQ(inside.output.text, "Hell");
  EXPECT_EQ(inside.output.finish, FinishReason::stop_string);
}

TEST(Scheduler, StopStringsWithTheStreamingDecoder) {
  const Tokenizer tokenizer = Tokenizer::from_tokenizer_json(std::string(KC_TOKENIZER_TEST_DATA) +
                                                             "/gpt2-synthetic.tokenizer.json");
  const std::vector<TokenId> script = tokenizer.encode("Hello world. Goodbye world.", false);
  ASSERT_GE(script.size(), 4u);
  Scheduler scheduler(config(8, 64), streaming_detokenizer(tokenizer));
  ScriptedExecutor executor(script);
  GenerationRequest request;
  request.prompt = {script[0]};
  request.max_tokens = static_cast<std::int32_t>(script.size());
  request.stop_strings = {". G"};
  std::string streamed;
  request.on_output = [&streamed](const StreamEvent& event) { streamed += event.text; };
  const RequestId id = scheduler.submit(request);
  scheduler.run_to_completion(executor);
  const RequestOutput output = *scheduler.take_output(id);
  EXPECT_EQ(output.text, "Hello world");
  EXPECT_EQ(streamed, "Hello world");
  EXPECT_EQ(output.finish, FinishReason::stop_string);
  EXPECT_LT(output.tokens.size(), script.size());
  EXPECT_EQ(tokenizer.decode(output.tokens).rfind("Hello world. G", 0), 0u);
}

// A request whose prompt is `prefix` followed by `tail_length` tokens of its own (seeded by `seed`).
GenerationRequest with_prefix(const std::vector<TokenId>& prefix, std::int32_t tail_length, std::int32_t max_tokens,
                              std::uint32_t seed, float temperature = 0.0f) {
  GenerationRequest request = make_request(tail_length, max_tokens, seed, temperature);
  request.prompt.insert(request.prompt.begin(), prefix.begin(), prefix.end());
  return request;
}

// A request admitted while another runs with the same first 40 prompt tokens starts on its first
// two blocks (32 tokens: whole blocks only), computes from position 32 on, and generates what it
// generates alone — the fake model reads the shared blocks' slots, so a block shared before its
// tokens were written, or one written again, would change its tokens.
TEST(Scheduler, AdmissionsShareTheComputedWholeBlocksOfARunningPrompt) {
  const SchedulerConfig c = config(64, 256);
  Scheduler scheduler(c);
  CheckingExecutor executor(c);
  const std::vector<TokenId> prefix = make_request(40, 1, 77).prompt;
  const GenerationRequest first = with_prefix(prefix, 9, 12, 1);
  const GenerationRequest second = with_prefix(prefix, 5, 12, 2, 0.8f);
  const RequestId a = scheduler.submit(first);
  ASSERT_TRUE(scheduler.step(executor));  // a's whole prompt computed, its first token sampled
  const RequestId b = scheduler.submit(second);
  StepBatch batch = scheduler.schedule();
  ASSERT_EQ(batch.sequences.size(), 2u);  // a's decode, then b's prefill
  EXPECT_EQ(batch.sequences[1].request, b);
  EXPECT_EQ(batch.sequences[1].start_position, 32);
  EXPECT_EQ(batch.sequences[1].tokens.size(), 45u - 32u);
  EXPECT_EQ(scheduler.stats().shared_admissions, 1);
  EXPECT_EQ(scheduler.stats().shared_prefix_tokens, 32);
  EXPECT_EQ(scheduler.kv_cache().stats().shared_blocks, 2);
  for (std::int32_t slot = 0; slot < 2; ++slot)
    EXPECT_EQ(batch.block_tables.at(1, slot), scheduler.kv_cache().block_table(a)[static_cast<std::size_t>(slot)]);
  EXPECT_TRUE(batch.block_copies.empty());
  scheduler.complete(batch, executor.execute(batch));
  scheduler.run_to_completion(executor);
  EXPECT_EQ(scheduler.take_output(a)->tokens, run_alone(first).tokens);
  EXPECT_EQ(scheduler.take_output(b)->tokens, run_alone(second).tokens);
  EXPECT_EQ(scheduler.stats().prefill_tokens, 49 + 13);  // b's 32 shared tokens were not computed
  EXPECT_EQ(scheduler.kv_cache().free_blocks(), c.num_blocks);
}

// What is not shared: tokens the step being built computes (two requests admitted together), the
// block of a prompt's last token (an identical prompt shares all but its last block), a partial
// block, and anything with share_prompt_prefixes off.
TEST(Scheduler, SharesOnlyBlocksComputedBeforeTheStepAndShortOfTheLastToken) {
  const std::vector<TokenId> prefix = make_request(48, 1, 78).prompt;
  {
    const SchedulerConfig c = config(64, 256);
    Scheduler scheduler(c);
    CheckingExecutor executor(c);
    scheduler.submit(with_prefix(prefix, 3, 4, 1));
    scheduler.submit(with_prefix(prefix, 4, 4, 2));  // admitted in the same step: nothing computed yet
    scheduler.run_to_completion(executor);
    EXPECT_EQ(scheduler.stats().shared_admissions, 0);
  }
  {
    const SchedulerConfig c = config(64, 256);
    Scheduler scheduler(c);
    CheckingExecutor executor(c);
    GenerationRequest same;
    same.prompt = prefix;  // 48 tokens: 3 whole blocks, the last one holding the last token
    same.max_tokens = 6;
    const GenerationRequest first = same;
    const RequestId a = scheduler.submit(first);
    ASSERT_TRUE(scheduler.step(executor));
    same.sampling.seed = 99;
    const RequestId b = scheduler.submit(same);
    const StepBatch batch = scheduler.schedule();
    ASSERT_EQ(batch.sequences.size(), 2u);
    EXPECT_EQ(batch.sequences[1].start_position, 32);
    EXPECT_EQ(batch.sequences[1].tokens.size(), 16u);
    scheduler.complete(batch, executor.execute(batch));
    scheduler.run_to_completion(executor);
    EXPECT_EQ(scheduler.take_output(a)->tokens, run_alone(first).tokens);
    EXPECT_EQ(scheduler.take_output(b)->tokens, run_alone(same).tokens);
  }
  // `second` submitted one step after `first`: where its first chunk starts.
  const auto second_start = [](const SchedulerConfig& c, const GenerationRequest& first,
                               const GenerationRequest& second) -> std::int64_t {
    Scheduler scheduler(c);
    CheckingExecutor executor(c);
    scheduler.submit(first);
    EXPECT_TRUE(scheduler.step(executor));
    scheduler.submit(second);
    const StepBatch batch = scheduler.schedule();
    EXPECT_EQ(batch.sequences.size(), 2u);
    return batch.sequences.size() == 2 ? batch.sequences[1].start_position : -1;
  };
  SchedulerConfig off = config(64, 256);
  off.share_prompt_prefixes = false;
  EXPECT_EQ(second_start(off, with_prefix(prefix, 3, 4, 1), with_prefix(prefix, 4, 4, 2)), 0);
  // A 20-token common prefix is one whole block and a partial one: one block shared.
  const std::vector<TokenId> short_prefix(prefix.begin(), prefix.begin() + 20);
  EXPECT_EQ(second_start(config(64, 256), with_prefix(short_prefix, 30, 4, 1), with_prefix(short_prefix, 30, 4, 2)),
            16);
}

// Many requests on one system prompt in a cache too small for them all: they share, are
// preempted and readmitted (sharing again), finish with the tokens they produce alone, and leave
// every block free.
TEST(Scheduler, SharedPrefixesSurvivePreemptionAndFreeEveryBlock) {
  for (const float temperature : {0.0f, 0.8f}) {
    const SchedulerConfig c = config(12, 64);
    Scheduler scheduler(c);
    CheckingExecutor executor(c);
    const std::vector<TokenId> system = make_request(33, 1, 79).prompt;
    std::vector<GenerationRequest> requests;
    std::vector<RequestId> ids;
    for (std::uint32_t i = 0; i < 6; ++i) {
      requests.push_back(with_prefix(system, 3 + static_cast<std::int32_t>(i), 30, 200 + i, temperature));
      ids.push_back(scheduler.submit(requests.back()));
      ASSERT_TRUE(scheduler.step(executor));  // one admission at a time: each can share
    }
    scheduler.run_to_completion(executor);
    EXPECT_GT(scheduler.stats().shared_admissions, 0);
    EXPECT_GT(scheduler.stats().preemptions, 0);
    for (std::size_t i = 0; i < ids.size(); ++i)
      EXPECT_EQ(scheduler.take_output(ids[i])->tokens, run_alone(requests[i]).tokens) << "request " << i << ", T "
                                                                                       << temperature;
    EXPECT_EQ(scheduler.kv_cache().free_blocks(), c.num_blocks);
    EXPECT_TRUE(scheduler.idle());
  }
}

}  // namespace
}  // namespace kc::engine
