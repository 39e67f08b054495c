// Continuous batching over the paged KV cache (kc/engine/scheduler.hpp).
#include "kc/engine/scheduler.hpp"

#include <algorithm>

#include "kc/common/error.hpp"

namespace kc::engine {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::none: return "none";
    case FinishReason::stop_token: return "stop_token";
    case FinishReason::stop_string: return "stop_string";
    case FinishReason::max_tokens: return "max_tokens";
    case FinishReason::context_limit: return "context_limit";
  }
  return "unknown";
}

namespace {

class StreamingDecoderDetokenizer final : public Detokenizer {
 public:
  StreamingDecoderDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
      : decoder_(tokenizer, skip_special_tokens) {}
  std::string push(TokenId token) override { return decoder_.push(token); }
  std::string finish() override { return decoder_.finish(); }

 private:
  StreamingDecoder decoder_;
};

}  // namespace

DetokenizerFactory streaming_detokenizer(const Tokenizer& tokenizer, bool skip_special_tokens) {
  return [&tokenizer, skip_special_tokens]() -> std::unique_ptr<Detokenizer> {
    return std::make_unique<StreamingDecoderDetokenizer>(tokenizer, skip_special_tokens);
  };
}

// A request while it waits or runs.
struct Scheduler::Request {
  RequestId id = 0;
  GenerationRequest spec;
  std::vector<TokenId> tokens;  // the prompt, then the generated tokens
  std::int64_t prompt_length = 0;
  std::int64_t scheduled_step = -1;  // the last step whose batch holds it
  std::int64_t scheduled_tokens = 0;  // its tokens in that step's batch (not computed before it)
  std::unique_ptr<Detokenizer> detokenizer;
  std::string text;           // the generated text so far
  std::size_t streamed = 0;   // bytes of `text` sent to the callback
  std::int32_t preemptions = 0;

  std::int64_t generated() const {
    return static_cast<std::int64_t>(tokens.size()) - prompt_length;
  }
};

Scheduler::Scheduler(const SchedulerConfig& config, DetokenizerFactory detokenizer)
    : config_(config),
      detokenizer_(std::move(detokenizer)),
      kv_cache_(config.num_blocks, config.block_size) {
  require(config.max_model_len >= 2,
          "scheduler: max_model_len {} leaves no room for a prompt and a generated token",
          config.max_model_len);
  require(config.max_batched_tokens >= 1,
          "scheduler: max_batched_tokens must be at least 1, got {}", config.max_batched_tokens);
  require(config.max_running >= 1, "scheduler: max_running must be at least 1, got {}",
          config.max_running);
  max_sequence_tokens_ = std::min<std::int64_t>(
      config.max_model_len, std::int64_t{config.num_blocks} * config.block_size);
}

Scheduler::~Scheduler() = default;

RequestId Scheduler::submit(GenerationRequest spec) {
  require(!spec.prompt.empty(), "scheduler: a request needs a prompt of at least one token");
  require(spec.max_tokens >= 1, "scheduler: max_tokens must be at least 1, got {}",
          spec.max_tokens);
  validate_sampling_params(spec.sampling);
  for (const TokenId token : spec.prompt)
    require(token >= 0, "scheduler: the prompt holds a negative token id ({})", token);
  for (const std::string& stop : spec.stop_strings)
    require(!stop.empty(), "scheduler: an empty stop string would stop every request at once");
  require(spec.stop_strings.empty() || static_cast<bool>(detokenizer_),
          "scheduler: stop strings need a detokenizer; construct the scheduler with one "
          "(streaming_detokenizer(tokenizer))");
  const auto prompt_length = static_cast<std::int64_t>(spec.prompt.size());
  require(prompt_length < max_sequence_tokens_,
          "scheduler: a prompt of {} tokens can never run: a sequence may hold at most {} tokens "
          "(the model's context is {}, the KV cache holds {} blocks of {}), and the prompt must "
          "leave room for one generated token; shorten the prompt or enlarge the cache",
          prompt_length, max_sequence_tokens_, config_.max_model_len, config_.num_blocks,
          config_.block_size);

  auto request = std::make_unique<Request>();
  request->id = next_id_++;
  request->tokens = spec.prompt;
  request->prompt_length = prompt_length;
  request->spec = std::move(spec);
  if (detokenizer_) request->detokenizer = detokenizer_();
  const RequestId id = request->id;
  requests_.emplace(id, std::move(request));
  waiting_.push_back(id);
  return id;
}

Scheduler::Request& Scheduler::request(RequestId id) {
  const auto it = requests_.find(id);
  require(it != requests_.end(), "scheduler: request {} is neither waiting nor running", id);
  return *it->second;
}

void Scheduler::preempt(RequestId id, StepBatch& batch) {
  Request& victim = request(id);
  kv_cache_.free_sequence(id);
  running_.erase(std::find(running_.begin(), running_.end(), id));
  waiting_.push_front(id);
  ++victim.preemptions;
  ++stats_.preemptions;
  batch.preempted.push_back(id);
}

// Reserves cache slots for `count` tokens of a running request, preempting the newest running
// request not yet in this step's batch until they fit. With allow_fewer, takes as many as fit
// (at least one) and lowers `count`. False when the request had to preempt itself.
bool Scheduler::reserve(Request& request, std::int64_t& count, bool allow_fewer,
                        StepBatch& batch) {
  for (;;) {
    if (allow_fewer) {
      const std::int64_t fit = kv_cache_.appendable_tokens(request.id);
      if (fit >= 1) {
        count = std::min(count, fit);
        break;
      }
    } else if (kv_cache_.can_append(request.id, count)) {
      break;
    }
    // The request itself is not in the batch yet, so there is always a candidate.
    const auto victim = std::find_if(running_.rbegin(), running_.rend(), [&](RequestId id) {
      return this->request(id).scheduled_step != stats_.steps;
    });
    const RequestId victim_id = *victim;
    preempt(victim_id, batch);
    if (victim_id == request.id) return false;
  }
  if (const std::optional<BlockCopy> copy = kv_cache_.append(request.id, count))
    batch.block_copies.push_back(*copy);
  return true;
}

// Adds the request's last `count` reserved tokens to the batch.
void Scheduler::add_to_batch(Request& request, std::int64_t count, StepBatch& batch) {
  ScheduledSequence sequence;
  sequence.request = request.id;
  sequence.start_position = kv_cache_.length(request.id) - count;
  const auto begin = request.tokens.begin() + sequence.start_position;
  sequence.tokens.assign(begin, begin + count);
  sequence.samples =
      sequence.start_position + count == static_cast<std::int64_t>(request.tokens.size());
  sequence.output_index = request.generated();
  sequence.sampling = request.spec.sampling;
  batch.sequences.push_back(std::move(sequence));
  batch.num_tokens += static_cast<std::int32_t>(count);
  request.scheduled_step = stats_.steps;
  request.scheduled_tokens = count;
}

std::pair<RequestId, std::int64_t> Scheduler::longest_shared_prefix(const Request& r) const {
  std::pair<RequestId, std::int64_t> best{-1, 0};
  if (!config_.share_prompt_prefixes) return best;
  const std::int64_t block = config_.block_size;
  // The prompt's last token is computed by the request itself: its logits give the first sample.
  const std::int64_t wanted = static_cast<std::int64_t>(r.tokens.size()) - 1;
  for (const RequestId id : running_) {
    const Request& other = *requests_.at(id);
    // Tokens whose keys and values are in the cache before this step: not the ones this step's
    // batch computes.
    const std::int64_t computed = kv_cache_.length(id) - (other.scheduled_step == stats_.steps ? other.scheduled_tokens : 0);
    const std::int64_t limit = std::min(wanted, computed) / block * block;
    if (limit <= best.second) continue;
    std::int64_t same = 0;
    while (same < limit && r.tokens[static_cast<std::size_t>(same)] == other.tokens[static_cast<std::size_t>(same)]) ++same;
    same = same / block * block;
    if (same > best.second) best = {id, same};
  }
  return best;
}

StepBatch Scheduler::schedule() {
  require(step_in_flight_ < 0,
          "scheduler: schedule() was called again before complete() took the previous batch's "
          "tokens");
  StepBatch batch;
  std::int64_t budget = config_.max_batched_tokens;
  const auto pending = [this](const Request& r) {
    return static_cast<std::int64_t>(r.tokens.size()) - kv_cache_.length(r.id);
  };

  // 1. Decodes, oldest admission first.
  for (std::size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Request& r = request(running_[i]);
    if (pending(r) != 1) continue;
    std::int64_t count = 1;
    if (!reserve(r, count, false, batch)) break;  // everything newer is preempted too
    add_to_batch(r, count, batch);
    --budget;
  }
  batch.num_decodes = static_cast<std::int32_t>(batch.sequences.size());
  stats_.decode_tokens += batch.num_decodes;

  // 2. Prefill chunks of running requests.
  for (std::size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Request& r = request(running_[i]);
    if (r.scheduled_step == stats_.steps || pending(r) <= 1) continue;
    std::int64_t count = std::min(pending(r), budget);
    if (!reserve(r, count, true, batch)) break;
    add_to_batch(r, count, batch);
    budget -= count;
  }

  // 3. Admissions in arrival order (not in a step that had to preempt).
  while (batch.preempted.empty() && !waiting_.empty() && budget > 0 &&
         running_.size() < static_cast<std::size_t>(config_.max_running)) {
    Request& r = request(waiting_.front());
    const auto [parent, shared] = longest_shared_prefix(r);
    const std::int64_t length = static_cast<std::int64_t>(r.tokens.size());
    if (kv_cache_.blocks_for(length) - kv_cache_.blocks_for(shared) > kv_cache_.free_blocks()) break;
    waiting_.pop_front();
    if (shared > 0) {
      kv_cache_.fork(parent, r.id, shared);  // whole computed blocks: nothing to copy
      ++stats_.shared_admissions;
      stats_.shared_prefix_tokens += shared;
    } else {
      kv_cache_.add_sequence(r.id);
    }
    running_.push_back(r.id);
    const std::int64_t count = std::min(length - shared, budget);
    if (const std::optional<BlockCopy> copy = kv_cache_.append(r.id, count)) batch.block_copies.push_back(*copy);
    add_to_batch(r, count, batch);
    budget -= count;
  }
  stats_.prefill_tokens += batch.num_tokens - batch.num_decodes;

  std::vector<SequenceId> rows;
  rows.reserve(batch.sequences.size());
  for (const ScheduledSequence& sequence : batch.sequences) rows.push_back(sequence.request);
  batch.block_tables =
      pack_block_tables(kv_cache_, rows, kv_cache_.blocks_for(max_sequence_tokens_));
  if (!batch.empty()) step_in_flight_ = stats_.steps;
  return batch;
}

namespace {

// Where the first stop string starts in `text` at or after `from`, if one does.
std::optional<std::size_t> find_stop_string(const std::string& text, std::size_t from,
                                            const std::vector<std::string>& stops) {
  std::optional<std::size_t> first;
  for (const std::string& stop : stops) {
    const std::size_t at = text.find(stop, from);
    if (at != std::string::npos && (!first || at < *first)) first = at;
  }
  return first;
}

// The end of the text that can be sent: before the longest ending of `text` (after `from`) that
// a stop string begins with, which more tokens could complete.
std::size_t sendable_end(const std::string& text, std::size_t from,
                         const std::vector<std::string>& stops) {
  std::size_t held = 0;
  for (const std::string& stop : stops) {
    const std::size_t longest = std::min(stop.size() - 1, text.size() - from);
    for (std::size_t length = longest; length > held; --length) {
      if (text.compare(text.size() - length, length, stop, 0, length) == 0) {
        held = length;
        break;
      }
    }
  }
  return text.size() - held;
}

}  // namespace

// Sets the event's text (and a stop-string finish) from the request's text so far.
void Scheduler::finish_text(Request& r, StreamEvent& event) {
  const std::vector<std::string>& stops = r.spec.stop_strings;
  std::optional<std::size_t> stop_at = find_stop_string(r.text, r.streamed, stops);
  if (!stop_at && event.finish != FinishReason::none && r.detokenizer) {
    r.text += r.detokenizer->finish();  // the end: what a split character left behind
    stop_at = find_stop_string(r.text, r.streamed, stops);
  }
  if (stop_at) {
    event.finish = FinishReason::stop_string;
    r.text.resize(*stop_at);
  }
  const std::size_t end =
      event.finish != FinishReason::none ? r.text.size() : sendable_end(r.text, r.streamed, stops);
  event.text = r.text.substr(r.streamed, end - r.streamed);
  r.streamed = end;
}

void Scheduler::complete(const StepBatch& batch, const std::vector<TokenId>& sampled) {
  require(step_in_flight_ == stats_.steps && !batch.empty(),
          "scheduler: complete() needs the batch of the last schedule() (and only once)");
  const auto samplers = static_cast<std::size_t>(
      std::count_if(batch.sequences.begin(), batch.sequences.end(),
                    [](const ScheduledSequence& s) { return s.samples; }));
  require(sampled.size() == samplers,
          "scheduler: the step returned {} tokens for a batch with {} sampling sequences",
          sampled.size(), samplers);
  step_in_flight_ = -1;
  ++stats_.steps;

  std::size_t next = 0;
  for (const ScheduledSequence& sequence : batch.sequences) {
    if (!sequence.samples) continue;
    Request& r = request(sequence.request);
    const TokenId token = sampled[next++];
    r.tokens.push_back(token);
    StreamEvent event;
    event.request = r.id;
    event.token = token;
    const std::vector<TokenId>& stop_ids = r.spec.stop_token_ids;
    if (std::find(stop_ids.begin(), stop_ids.end(), token) != stop_ids.end()) {
      event.finish = FinishReason::stop_token;
    } else {
      if (r.detokenizer) r.text += r.detokenizer->push(token);
      if (r.generated() >= r.spec.max_tokens)
        event.finish = FinishReason::max_tokens;
      else if (static_cast<std::int64_t>(r.tokens.size()) >= max_sequence_tokens_)
        event.finish = FinishReason::context_limit;
    }
    finish_text(r, event);
    if (r.spec.on_output) r.spec.on_output(event);
    if (event.finish == FinishReason::none) continue;

    kv_cache_.free_sequence(r.id);
    running_.erase(std::find(running_.begin(), running_.end(), r.id));
    RequestOutput output;
    output.tokens.assign(r.tokens.begin() + r.prompt_length, r.tokens.end());
    output.text = std::move(r.text);
    output.finish = event.finish;
    output.preemptions = r.preemptions;
    finished_.emplace(r.id, std::move(output));
    requests_.erase(sequence.request);
  }
}

bool Scheduler::step(ModelExecutor& executor) {
  const StepBatch batch = schedule();
  if (batch.empty()) return false;
  complete(batch, executor.execute(batch));
  return true;
}

void Scheduler::run_to_completion(ModelExecutor& executor) {
  while (!idle()) {
    // Cannot happen (every admitted request fits alone); a guard, not a code path.
    require(step(executor), "scheduler: {} requests wait but none could be scheduled",
            waiting_.size());
  }
}

bool Scheduler::cancel(RequestId id) {
  require(step_in_flight_ < 0, "scheduler: cancel({}) between schedule() and complete()", id);
  if (requests_.erase(id) == 0) return false;
  const auto waiting = std::find(waiting_.begin(), waiting_.end(), id);
  if (waiting != waiting_.end()) {
    waiting_.erase(waiting);
  } else {
    kv_cache_.free_sequence(id);
    running_.erase(std::find(running_.begin(), running_.end(), id));
  }
  return true;
}

std::vector<RequestId> Scheduler::abandon_step(const StepBatch& batch) {
  require(step_in_flight_ == stats_.steps && !batch.empty(),
          "scheduler: abandon_step() needs the batch of the last schedule(), not yet completed");
  step_in_flight_ = -1;
  ++stats_.steps;
  std::vector<RequestId> dropped;
  for (const ScheduledSequence& sequence : batch.sequences)
    if (cancel(sequence.request)) dropped.push_back(sequence.request);
  return dropped;
}

std::optional<RequestOutput> Scheduler::take_output(RequestId id) {
  const auto it = finished_.find(id);
  if (it == finished_.end()) return std::nullopt;
  RequestOutput output = std::move(it->second);
  finished_.erase(it);
  return output;
}

}  // namespace kc::engine
