// server/bridge.cpp — the engine thread and the per-request streams (kc/serve/bridge.hpp).
#include "kc/serve/bridge.hpp"

#include <utility>

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

EngineBridge::EngineBridge(const engine::SchedulerConfig& config,
                           engine::DetokenizerFactory detokenizer,
                           std::unique_ptr<engine::ModelExecutor> executor)
    : scheduler_(config, std::move(detokenizer)),
      executor_(std::move(executor)),
      max_sequence_tokens_(scheduler_.max_sequence_tokens()),
      engine_thread_([this] { run(); }) {}

EngineBridge::~EngineBridge() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_.notify_one();
  engine_thread_.join();
  for (auto& entry : streams_) entry.second->close();
}

std::shared_ptr<RequestStream> EngineBridge::submit(engine::GenerationRequest request) {
  std::shared_ptr<RequestStream> stream;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // The callback runs on the engine thread, inside complete(), with mutex_ held.
    auto slot = std::make_shared<std::shared_ptr<RequestStream>>();
    request.on_output = [this, slot](const engine::StreamEvent& event) {
      (*slot)->push(event);
      if (event.finish != engine::FinishReason::none) {
        finished_.push_back(event.request);
        streams_.erase(event.request);
      }
    };
    const engine::RequestId id = scheduler_.submit(std::move(request));  // may throw kc::Error
    stream = std::make_shared<RequestStream>(id);
    *slot = stream;
    streams_.emplace(id, stream);
  }
  work_.notify_one();
  return stream;
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
  return stats;
}

void EngineBridge::apply_cancellations() {
  for (const engine::RequestId id : cancellations_) {
    if (scheduler_.cancel(id)) {
      const auto it = streams_.find(id);
      if (it != streams_.end()) {
        it->second->close();
        streams_.erase(it);
      }
    }
  }
  cancellations_.clear();
}

void EngineBridge::run() {
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
    const std::vector<engine::TokenId> sampled = executor_->execute(batch);
    std::lock_guard<std::mutex> lock(mutex_);
    scheduler_.complete(batch, sampled);
    // Every event was streamed; the outputs the scheduler keeps for take_output() are not needed.
    for (const engine::RequestId id : finished_) scheduler_.take_output(id);
    finished_.clear();
  }
}

}  // namespace kc::serve
