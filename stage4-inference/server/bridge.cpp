// server/bridge.cpp — the engine thread and the per-request streams (kc/serve/bridge.hpp).
#include "kc/serve/bridge.hpp"

#include <algorithm>
#include <iostream>
#include <utility>

#include <fmt/format.h>

namespace kc::serve {

std::optional<engine::StreamEvent> RequestStream::next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  ready_.wait_for(lock, timeout, [&] { return !events_.empty() || closed_; });
  if (events_.empty()) return std::nullopt;
  engine::StreamEvent event = std::move(events_.front());
  events_.pop_front();
  return event;
}

bool RequestStream::closed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return closed_ && events_.empty();
}

std::string RequestStream::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

void RequestStream::push(const engine::StreamEvent& event) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    events_.push_back(event);
  }
  ready_.notify_one();
}

void RequestStream::close() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
  }
  ready_.notify_one();
}

void RequestStream::fail(std::string message) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = std::move(message);
    closed_ = true;
  }
  ready_.notify_one();
}

EngineBridge::EngineBridge(const engine::SchedulerConfig& config,
                           engine::DetokenizerFactory detokenizer,
                           std::unique_ptr<engine::ModelExecutor> executor, std::size_t max_queue)
    : scheduler_(config, std::move(detokenizer)),
      executor_(std::move(executor)),
      max_sequence_tokens_(scheduler_.max_sequence_tokens()),
      max_running_(static_cast<std::size_t>(config.max_running)),
      max_queue_(max_queue),
      engine_thread_([this] { run(); }) {}

EngineBridge::~EngineBridge() { shutdown(); }

void EngineBridge::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_.notify_one();
  if (engine_thread_.joinable()) engine_thread_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& entry : requests_) entry.second->stream->close();
  requests_.clear();
}

std::shared_ptr<RequestStream> EngineBridge::submit(engine::GenerationRequest request) {
  std::shared_ptr<RequestStream> stream;
  const auto prompt_tokens = static_cast<std::int64_t>(request.prompt.size());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_)
      throw ShuttingDown(engine_error_.empty() ? "the server is shutting down" : engine_error_);
    // Requests the next schedule() can admit into a free slot do not count as queued.
    const std::size_t running = scheduler_.num_running();
    const std::size_t free_slots = running < max_running_ ? max_running_ - running : 0;
    const std::size_t queued = scheduler_.num_waiting() + 1;
    if (queued > free_slots && queued - free_slots > max_queue_)
      throw QueueFull(fmt::format("the server's queue is full ({} requests wait); retry later",
                                  scheduler_.num_waiting()));
    auto tracked = std::make_shared<Tracked>();
    // The callback runs on the engine thread, inside complete(), with mutex_ held.
    request.on_output = [this, tracked](const engine::StreamEvent& event) {
      on_output(*tracked, event);
    };
    const engine::RequestId id = scheduler_.submit(std::move(request));  // may throw kc::Error
    stream = std::make_shared<RequestStream>(id);
    tracked->stream = stream;
    tracked->last_event = std::chrono::steady_clock::now();
    requests_.emplace(id, std::move(tracked));
  }
  metrics_.add_prompt_tokens(prompt_tokens);
  work_.notify_one();
  return stream;
}

void EngineBridge::on_output(Tracked& tracked, const engine::StreamEvent& event) {
  const auto now = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(now - tracked.last_event).count();
  if (tracked.has_token)
    metrics_.observe_inter_token_latency(seconds);
  else
    metrics_.observe_time_to_first_token(seconds);
  tracked.has_token = true;
  tracked.last_event = now;
  metrics_.add_completion_tokens(1);
  tracked.stream->push(event);
  if (event.finish != engine::FinishReason::none) {
    finished_.push_back(event.request);
    requests_.erase(event.request);  // the callback's own reference keeps `tracked` alive
  }
}

void EngineBridge::cancel(engine::RequestId id) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    cancellations_.push_back(id);
  }
  work_.notify_one();
}

BridgeStats EngineBridge::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  BridgeStats stats;
  stats.waiting = scheduler_.num_waiting();
  stats.running = scheduler_.num_running();
  stats.free_blocks = scheduler_.kv_cache().free_blocks();
  stats.total_blocks = scheduler_.kv_cache().num_blocks();
  stats.preemptions = scheduler_.stats().preemptions;
  return stats;
}

void EngineBridge::apply_cancellations() {
  for (const engine::RequestId id : cancellations_) {
    if (scheduler_.cancel(id)) {
      const auto it = requests_.find(id);
      if (it != requests_.end()) {
        it->second->stream->close();
        requests_.erase(it);
      }
    }
  }
  cancellations_.clear();
}

void EngineBridge::fail_step(const engine::StepBatch& batch, const std::string& reason) {
  const std::string message = "the model step failed: " + reason;
  std::lock_guard<std::mutex> lock(mutex_);
  const std::vector<engine::RequestId> dropped = scheduler_.abandon_step(batch);
  // One line per failed step, so an operator sees it; the clients get the message.
  std::cerr << "kc-serve: " << message << "; failing its " << dropped.size()
            << " request(s), serving on" << std::endl;
  for (const engine::RequestId id : dropped) {
    const auto it = requests_.find(id);
    if (it == requests_.end()) continue;
    it->second->stream->fail(message);
    requests_.erase(it);
  }
  metrics_.count_model_step_failure();
}

void EngineBridge::run() {
  try {
    serve_steps();
  } catch (const std::exception& e) {
    // Not the model step (fail_step handles that) but the bookkeeping around it: the scheduler's
    // state is unknown, so no request can go on. Every stream ends with the error and later
    // submissions are refused; the HTTP side keeps answering, /health says "error".
    std::lock_guard<std::mutex> lock(mutex_);
    engine_error_ = std::string("the engine stopped: ") + e.what();
    std::cerr << "kc-serve: " << engine_error_ << "; every request fails from now on" << std::endl;
    stopping_ = true;
    for (auto& entry : requests_) entry.second->stream->fail(engine_error_);
    requests_.clear();
  }
}

void EngineBridge::serve_steps() {
  for (;;) {
    engine::StepBatch batch;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_.wait(lock, [&] { return stopping_ || !scheduler_.idle() || !cancellations_.empty(); });
      if (stopping_) return;
      apply_cancellations();
      batch = scheduler_.schedule();
    }
    if (batch.empty()) continue;
    std::vector<engine::TokenId> sampled;
    try {
      sampled = executor_->execute(batch);
    } catch (const std::exception& e) {
      fail_step(batch, e.what());
      continue;
    } catch (...) {
      fail_step(batch, "an exception that is not a std::exception");
      continue;
    }
    const auto samplers = static_cast<std::size_t>(
        std::count_if(batch.sequences.begin(), batch.sequences.end(),
                      [](const engine::ScheduledSequence& s) { return s.samples; }));
    if (sampled.size() != samplers) {
      fail_step(batch, fmt::format("it returned {} tokens for {} sampling sequences",
                                   sampled.size(), samplers));
      continue;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    scheduler_.complete(batch, sampled);
    // Every event was streamed; the outputs the scheduler keeps for take_output() are not needed.
    for (const engine::RequestId id : finished_) scheduler_.take_output(id);
    finished_.clear();
  }
}

std::string EngineBridge::engine_error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return engine_error_;
}

}  // namespace kc::serve
