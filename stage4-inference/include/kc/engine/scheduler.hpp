// kc/engine/scheduler.hpp — continuous batching over the paged KV cache, on the host.
//
// Requests wait in arrival order; admitted requests run until they stop. Each step the scheduler
// builds one batch under a token budget (max_batched_tokens):
//
//   1. decodes: every running request whose tokens are all in the cache but the last one gets one
//      token, oldest admission first;
//   2. prefill chunks of running requests whose prompt is partly in the cache, as many tokens as
//      the budget and the free blocks allow;
//   3. admissions: the first waiting request is admitted when the free blocks hold its whole
//      prompt (and the next, and so on; a request that does not fit stops admission, so nobody
//      overtakes it) and gets a first chunk of its prompt.
//
// Prompt prefixes are shared (share_prompt_prefixes, on unless turned off): a request admitted
// while a running request already holds the keys and values of the same first tokens — a system
// prompt, a chat history, the same document asked twice — starts with that request's blocks
// (KvBlockManager::fork: reference counts, no copy) for as many whole blocks as the two agree on,
// and its prefill begins after them. Only blocks whose tokens earlier steps computed are shared,
// never the one holding the prompt's last token (whose logits the request samples), and never a
// partly filled one, so a shared block is never written again. A finished request's blocks are
// freed as before: only running requests share.
//
// When a running request needs a block and none is free, the most recently admitted running
// request that is not yet in this step's batch is preempted by recompute: its blocks are freed and
// it goes back to the front of the waiting queue, its generated tokens kept and treated as part of
// its prompt when it is admitted again (the model recomputes their keys and values). Sampling
// draws depend on the token's index in the request's output, not on the step, so a preempted
// request produces the tokens it would have produced without preemption.
//
// A request that could never run — its prompt fills the model's context or the whole cache — is
// refused at submit(); one that reaches the context (or the cache's capacity) while generating
// stops with FinishReason::context_limit. Every admitted request therefore fits the cache alone,
// and each step makes progress: the scheduler never deadlocks and never fails for lack of blocks.
//
// The model side is a ModelExecutor: given the step's batch it runs the model and returns one
// sampled token per sequence that samples. Tests plug in a fake one; the GPU model step plugs in
// the same way.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kc/engine/kv_cache.hpp"
#include "kc/engine/sampling.hpp"
#include "kc/engine/tokenizer.hpp"

namespace kc::engine {

using RequestId = std::int64_t;

enum class FinishReason {
  none,           // still running
  stop_token,     // sampled one of stop_token_ids (EOS)
  stop_string,    // the text contains one of stop_strings
  max_tokens,     // generated max_tokens tokens
  context_limit,  // the sequence filled the model's context or the whole KV cache
};
const char* finish_reason_name(FinishReason reason);

// What a request's output callback receives after each generated token.
struct StreamEvent {
  RequestId request = 0;
  TokenId token = 0;  // the token just generated
  // Text that became final with this token: empty while a character is incomplete or while the
  // end of the text could still grow into a stop string. A stop token adds no text; a stop string
  // and what follows it are never sent.
  std::string text;
  FinishReason finish = FinishReason::none;
};

// Turns one request's generated tokens into text, one token at a time (StreamingDecoder's
// contract: the concatenation of every push() and finish() is the text of all the tokens).
class Detokenizer {
 public:
  virtual ~Detokenizer() = default;
  virtual std::string push(TokenId token) = 0;
  virtual std::string finish() = 0;
};
using DetokenizerFactory = std::function<std::unique_ptr<Detokenizer>()>;
// Detokenizers on `tokenizer`'s StreamingDecoder; the tokenizer must outlive them.
DetokenizerFactory streaming_detokenizer(const Tokenizer& tokenizer,
                                         bool skip_special_tokens = true);

struct GenerationRequest {
  std::vector<TokenId> prompt;              // not empty
  std::int32_t max_tokens = 16;             // >= 1
  std::vector<TokenId> stop_token_ids;      // e.g. the model's EOS ids
  std::vector<std::string> stop_strings;    // need a detokenizer factory
  SamplingParams sampling;
  std::function<void(const StreamEvent&)> on_output;  // optional
};

struct SchedulerConfig {
  std::int32_t num_blocks = 0;               // KV cache blocks
  std::int32_t block_size = 16;              // tokens per block: 16, 32 or 64
  std::int64_t max_model_len = 0;            // the model's context (positions)
  std::int32_t max_batched_tokens = 2048;    // tokens per step, decodes and prefill chunks
  std::int32_t max_running = 256;            // sequences per step (the largest decode graph)
  bool share_prompt_prefixes = true;         // admissions reuse running requests' prefix blocks
};

// One sequence of a step: tokens[i] is at position start_position + i.
struct ScheduledSequence {
  RequestId request = 0;
  std::int64_t start_position = 0;  // tokens of the request already in the cache
  std::vector<TokenId> tokens;
  bool samples = false;             // the chunk ends the known tokens: sample the next one
  std::int64_t output_index = 0;    // the sampled token's index in the output (the draw's counter)
  SamplingParams sampling;
};

struct StepBatch {
  // Decodes first (num_decodes of them, one token each), then prefill chunks.
  std::vector<ScheduledSequence> sequences;
  std::int32_t num_decodes = 0;
  std::int32_t num_tokens = 0;           // <= max_batched_tokens
  std::vector<BlockCopy> block_copies;   // to make before the step writes the cache
  // Row i: sequences[i]'s blocks; lengths include this step's tokens. The stride is fixed:
  // blocks for the longest sequence the scheduler allows.
  PackedBlockTables block_tables;
  std::vector<RequestId> preempted;      // preempted while this batch was built

  bool empty() const { return sequences.empty(); }
};

class ModelExecutor {
 public:
  virtual ~ModelExecutor() = default;
  // Runs the model on the batch and returns one token per sequence whose `samples` is set, in
  // the batch's order.
  virtual std::vector<TokenId> execute(const StepBatch& batch) = 0;
};

// A finished request.
struct RequestOutput {
  std::vector<TokenId> tokens;  // generated tokens (a stop token included)
  std::string text;             // their text, cut before a stop string (empty without detokenizer)
  FinishReason finish = FinishReason::none;
  std::int32_t preemptions = 0;
};

struct SchedulerStats {
  std::int64_t steps = 0;
  std::int64_t preemptions = 0;
  std::int64_t prefill_tokens = 0;  // including recomputed ones
  std::int64_t decode_tokens = 0;
  std::int64_t shared_prefix_tokens = 0;  // prompt tokens admitted on another request's blocks
  std::int64_t shared_admissions = 0;     // admissions that shared a prefix
};

class Scheduler {
 public:
  // Throws kc::Error for a configuration that cannot run a request.
  explicit Scheduler(const SchedulerConfig& config, DetokenizerFactory detokenizer = {});
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request; ids rise in arrival order. Throws kc::Error for a request that can never
  // run (empty prompt, a prompt that fills the context or the cache, max_tokens < 1, bad sampling
  // parameters, stop strings without a detokenizer, an empty stop string).
  RequestId submit(GenerationRequest request);

  // Builds the next step's batch: reserves its blocks, preempting when they run out. An empty
  // batch means there is nothing to do. Call complete() with the step's tokens before the next
  // schedule().
  StepBatch schedule();
  // Takes the sampled tokens of a batch from schedule(): appends them, checks stop conditions,
  // streams, and frees finished requests' blocks.
  void complete(const StepBatch& batch, const std::vector<TokenId>& sampled);
  // schedule(), executor.execute(), complete(); false (and nothing run) when idle.
  bool step(ModelExecutor& executor);
  // Steps until every request has finished.
  void run_to_completion(ModelExecutor& executor);

  bool idle() const { return waiting_.empty() && running_.empty(); }
  std::size_t num_waiting() const { return waiting_.size(); }
  std::size_t num_running() const { return running_.size(); }
  // The longest sequence (prompt and output) a request may reach.
  std::int64_t max_sequence_tokens() const { return max_sequence_tokens_; }
  const KvBlockManager& kv_cache() const { return kv_cache_; }
  const SchedulerStats& stats() const { return stats_; }
  // Drops a waiting or running request and frees its blocks; it streams nothing more and leaves
  // no output. False when the id is unknown or already finished. Call it between steps, never
  // between schedule() and complete().
  bool cancel(RequestId id);
  // For a step whose model run failed (execute() threw): drops every request of the batch from
  // schedule() as cancel() does, freeing their blocks, and leaves the scheduler ready for the
  // next schedule(). Requests outside the batch keep their state. Returns the dropped ids.
  std::vector<RequestId> abandon_step(const StepBatch& batch);
  // A finished request's output, handed over once (none while it runs or after it was taken).
  std::optional<RequestOutput> take_output(RequestId id);

 private:
  struct Request;
  Request& request(RequestId id);
  bool reserve(Request& request, std::int64_t& count, bool allow_fewer, StepBatch& batch);
  void preempt(RequestId id, StepBatch& batch);
  void add_to_batch(Request& request, std::int64_t count, StepBatch& batch);
  // The running request whose computed tokens begin with the most whole blocks of `request`'s
  // tokens (short of its last token), and how many tokens that is; {-1, 0} when none shares one.
  std::pair<RequestId, std::int64_t> longest_shared_prefix(const Request& request) const;
  void finish_text(Request& request, StreamEvent& event);

  SchedulerConfig config_;
  DetokenizerFactory detokenizer_;
  KvBlockManager kv_cache_;
  std::int64_t max_sequence_tokens_ = 0;
  RequestId next_id_ = 0;
  std::unordered_map<RequestId, std::unique_ptr<Request>> requests_;  // waiting and running
  std::deque<RequestId> waiting_;  // front first
  std::vector<RequestId> running_;  // admission order, oldest first
  std::unordered_map<RequestId, RequestOutput> finished_;
  std::int64_t step_in_flight_ = -1;  // the step a batch was scheduled for, -1 when none
  SchedulerStats stats_;
};

}  // namespace kc::engine
