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
//
// Admission control: at most `max_queue` requests wait beyond the free sequence slots (a request
// that would be one more gets QueueFull, which the HTTP layer answers with 429). A model step
// that throws fails the requests of its batch — their streams end with the error, their blocks
// are freed (Scheduler::abandon_step) — and the engine thread goes on with the others: one bad
// batch costs its requests, not the server.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kc/engine/scheduler.hpp"
#include "kc/serve/metrics.hpp"

namespace kc::serve {

// One request's queue of streamed events, filled by the engine thread, read by one HTTP thread.
class RequestStream {
 public:
  explicit RequestStream(engine::RequestId id) : id_(id) {}
  engine::RequestId id() const { return id_; }

  // The next event, waiting at most `timeout`; none on timeout or once the stream is closed
  // (closed() tells which). The event with a finish reason is the last one.
  std::optional<engine::StreamEvent> next(std::chrono::milliseconds timeout);
  // True once the request ended without finishing and every event was read: the bridge shut
  // down, or the model step failed (error() says why). No event will come.
  bool closed() const;
  // Why the request failed; empty when it did not (a shutdown closes without an error).
  std::string error() const;

  // Engine side.
  void push(const engine::StreamEvent& event);
  void close();
  void fail(std::string message);

 private:
  engine::RequestId id_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<engine::StreamEvent> events_;
  bool closed_ = false;
  std::string error_;
};

// submit() refuses a request because the queue is full (HTTP 429).
class QueueFull : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// submit() refuses a request because the bridge shut down (HTTP 503).
class ShuttingDown : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct BridgeStats {
  std::size_t waiting = 0;
  std::size_t running = 0;
  std::int32_t free_blocks = 0;
  std::int32_t total_blocks = 0;
  std::int64_t preemptions = 0;  // sequences preempted (KV blocks ran out) and later recomputed
};

class EngineBridge {
 public:
  static constexpr std::size_t kUnboundedQueue = static_cast<std::size_t>(-1);

  // Starts the engine thread. The executor runs only on that thread.
  EngineBridge(const engine::SchedulerConfig& config, engine::DetokenizerFactory detokenizer,
               std::unique_ptr<engine::ModelExecutor> executor,
               std::size_t max_queue = kUnboundedQueue);
  // shutdown().
  ~EngineBridge();
  EngineBridge(const EngineBridge&) = delete;
  EngineBridge& operator=(const EngineBridge&) = delete;

  // Queues a request (its on_output is replaced) and returns its stream. Throws QueueFull when
  // max_queue requests already wait beyond the free sequence slots, ShuttingDown after
  // shutdown(), and kc::Error for a request the scheduler refuses (see Scheduler::submit).
  std::shared_ptr<RequestStream> submit(engine::GenerationRequest request);
  // Cancels a request that has not finished; harmless after it finished.
  void cancel(engine::RequestId id);
  // Stops the engine thread after its current step; unfinished requests' streams close and
  // later submissions are refused. Idempotent.
  void shutdown();

  std::int64_t max_sequence_tokens() const { return max_sequence_tokens_; }
  // Requests that can be in the bridge at once: the sequence slots plus the queue
  // (kUnboundedQueue when the queue is).
  std::size_t capacity() const {
    return max_queue_ == kUnboundedQueue ? kUnboundedQueue : max_running_ + max_queue_;
  }
  BridgeStats stats() const;
  Metrics& metrics() { return metrics_; }
  // Empty while the engine thread runs; why it stopped when bookkeeping outside the model step
  // threw (then every request fails and /health reports the error).
  std::string engine_error() const;

 private:
  // A request the engine thread serves: its stream and when its last token came.
  struct Tracked {
    std::shared_ptr<RequestStream> stream;
    std::chrono::steady_clock::time_point last_event;
    bool has_token = false;
  };
  void run();
  void serve_steps();
  void apply_cancellations();  // holds mutex_
  void on_output(Tracked& tracked, const engine::StreamEvent& event);  // holds mutex_
  void fail_step(const engine::StepBatch& batch, const std::string& reason);

  mutable std::mutex mutex_;
  std::condition_variable work_;
  engine::Scheduler scheduler_;
  std::unique_ptr<engine::ModelExecutor> executor_;
  std::int64_t max_sequence_tokens_;
  std::size_t max_running_;
  std::size_t max_queue_;
  Metrics metrics_;
  std::unordered_map<engine::RequestId, std::shared_ptr<Tracked>> requests_;
  std::vector<engine::RequestId> cancellations_;
  std::vector<engine::RequestId> finished_;  // this step's, to drop their outputs
  bool stopping_ = false;
  std::string engine_error_;
  std::thread engine_thread_;  // last: starts after everything above exists
};

}  // namespace kc::serve
