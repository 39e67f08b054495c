// kc/serve/bridge.hpp — between HTTP handler threads and the one thread that runs the engine.
//
// The scheduler is not thread-safe and the model step is long, so one engine thread owns both:
// it loops schedule() → execute() → complete(). HTTP handler threads never step anything; they
//
//   1. submit() a request, under the bridge's mutex (the scheduler checks it there and then, so a
//      request that can never run becomes an error for that client, not for the engine thread);
//   2. read their own RequestStream: the scheduler's output callback, running on the engine
//      thread inside complete(), pushes each StreamEvent into the request's queue and wakes the
//      reader;
//   3. cancel() when their client goes away: the id goes into a list the engine thread applies
//      between steps (Scheduler::cancel may not run while a batch is in flight), which frees the
//      request's KV blocks.
//
// The mutex is never held during execute(), so submissions and cancellations wait at most for a
// schedule() or complete(), never for the model.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kc/engine/scheduler.hpp"

namespace kc::serve {

// One request's queue of streamed events, filled by the engine thread, read by one HTTP thread.
class RequestStream {
 public:
  explicit RequestStream(engine::RequestId id) : id_(id) {}
  engine::RequestId id() const { return id_; }

  // The next event, waiting at most `timeout`; none on timeout or once the stream is closed
  // (closed() tells which). The event with a finish reason is the last one.
  std::optional<engine::StreamEvent> next(std::chrono::milliseconds timeout);
  // True once the bridge shut down before the request finished: no event will come.
  bool closed() const;

  // Engine side.
  void push(const engine::StreamEvent& event);
  void close();

 private:
  engine::RequestId id_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<engine::StreamEvent> events_;
  bool closed_ = false;
};

struct BridgeStats {
  std::size_t waiting = 0;
  std::size_t running = 0;
  std::int32_t free_blocks = 0;
  std::int32_t total_blocks = 0;
};

class EngineBridge {
 public:
  // Starts the engine thread. The executor runs only on that thread.
  EngineBridge(const engine::SchedulerConfig& config, engine::DetokenizerFactory detokenizer,
               std::unique_ptr<engine::ModelExecutor> executor);
  // Stops the engine thread after its current step; unfinished requests' streams close.
  ~EngineBridge();
  EngineBridge(const EngineBridge&) = delete;
  EngineBridge& operator=(const EngineBridge&) = delete;

  // Queues a request (its on_output is replaced) and returns its stream. Throws kc::Error for a
  // request the scheduler refuses (see Scheduler::submit).
  std::shared_ptr<RequestStream> submit(engine::GenerationRequest request);
  // Cancels a request that has not finished; harmless after it finished.
  void cancel(engine::RequestId id);

  std::int64_t max_sequence_tokens() const { return max_sequence_tokens_; }
  BridgeStats stats() const;

 private:
  void run();
  void apply_cancellations();  // holds mutex_

  mutable std::mutex mutex_;
  std::condition_variable work_;
  engine::Scheduler scheduler_;
  std::unique_ptr<engine::ModelExecutor> executor_;
  std::int64_t max_sequence_tokens_;
  std::unordered_map<engine::RequestId, std::shared_ptr<RequestStream>> streams_;
  std::vector<engine::RequestId> cancellations_;
  std::vector<engine::RequestId> finished_;  // this step's, to drop their outputs
  bool stopping_ = false;
  std::thread engine_thread_;  // last: starts after everything above exists
};

}  // namespace kc::serve
