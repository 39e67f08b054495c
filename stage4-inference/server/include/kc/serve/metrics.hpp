// kc/serve/metrics.hpp — kc-serve's counters and latency histograms, and GET /metrics in the
// Prometheus text exposition format (version 0.0.4), written by hand: a few lines of text per
// metric need no library.
//
//   kc_serve_requests_total{endpoint, status}         counter: answered HTTP requests
//   kc_serve_prompt_tokens_total                      counter: prompt tokens of accepted requests
//   kc_serve_completion_tokens_total                  counter: generated tokens
//   kc_serve_model_step_failures_total                counter: model steps that threw
//   kc_serve_queue_length                             gauge: requests waiting for admission
//   kc_serve_running_sequences                        gauge: requests admitted and generating
//   kc_serve_kv_blocks_used, kc_serve_kv_blocks_free  gauges: the paged KV cache
//   kc_serve_preemptions_total                        counter: sequences preempted for KV blocks
//   kc_serve_time_to_first_token_seconds              histogram: submission to first token
//   kc_serve_inter_token_latency_seconds              histogram: between a request's tokens
//
// Latencies are taken on the engine thread, where tokens are made: they leave out the time a
// handler takes to notice an event and write it to the socket.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace kc::serve {

struct BridgeStats;

// Cumulative buckets with fixed upper bounds (seconds), as Prometheus wants them.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // Appends "# HELP", "# TYPE" and the _bucket / _sum / _count lines.
  void write(std::string& out, const std::string& name, const std::string& help) const;

 private:
  std::vector<double> upper_bounds_;
  std::vector<std::uint64_t> counts_;  // per bucket, not cumulative; the last one is +Inf
  double sum_ = 0.0;
  std::uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();

  // `endpoint` is a route ("/v1/completions"); anything else is counted as "other", so a client
  // cannot grow the label set.
  void count_request(const std::string& endpoint, int status);
  void add_prompt_tokens(std::int64_t count);
  void add_completion_tokens(std::int64_t count);
  void count_model_step_failure();
  void observe_time_to_first_token(double seconds);
  void observe_inter_token_latency(double seconds);

  // The exposition: the counters and histograms, and the gauges from `stats`.
  std::string render(const BridgeStats& stats) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, std::uint64_t> requests_;
  std::uint64_t prompt_tokens_ = 0;
  std::uint64_t completion_tokens_ = 0;
  std::uint64_t model_step_failures_ = 0;
  Histogram time_to_first_token_;
  Histogram inter_token_latency_;
};

}  // namespace kc::serve
