// server/metrics.cpp — counters, histograms and their Prometheus text (kc/serve/metrics.hpp).
#include "kc/serve/metrics.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "kc/serve/bridge.hpp"

namespace kc::serve {
namespace {

// The routes a request is counted under; every other path is "other".
constexpr const char* kEndpoints[] = {"/health", "/metrics", "/v1/models", "/v1/completions",
                                      "/v1/chat/completions"};

void write_header(std::string& out, const std::string& name, const char* type,
                  const std::string& help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void write_single(std::string& out, const std::string& name, const char* type,
                  const std::string& help, double value) {
  write_header(out, name, type, help);
  out += fmt::format("{} {}\n", name, value);
}

// Prometheus wants bounds as floats: "0.005", "1", "+Inf".
std::string bound_label(double bound) { return fmt::format("{}", bound); }

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), counts_(upper_bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const auto bucket = std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value);
  ++counts_[static_cast<std::size_t>(bucket - upper_bounds_.begin())];
  sum_ += value;
  ++count_;
}

void Histogram::write(std::string& out, const std::string& name, const std::string& help) const {
  write_header(out, name, "histogram", help);
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < upper_bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bound_label(upper_bounds_[i]),
                       cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", name, count_);
  out += fmt::format("{}_sum {}\n{}_count {}\n", name, sum_, name, count_);
}

Metrics::Metrics()
    : time_to_first_token_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      inter_token_latency_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}) {}

void Metrics::count_request(const std::string& endpoint, int status) {
  const bool known = std::find(std::begin(kEndpoints), std::end(kEndpoints), endpoint) !=
                     std::end(kEndpoints);
  std::lock_guard<std::mutex> lock(mutex_);
  ++requests_[{known ? endpoint : "other", status}];
}

void Metrics::add_prompt_tokens(std::int64_t count) {
  std::lock_guard<std::mutex> lock(mutex_);
  prompt_tokens_ += static_cast<std::uint64_t>(count);
}

void Metrics::add_completion_tokens(std::int64_t count) {
  std::lock_guard<std::mutex> lock(mutex_);
  completion_tokens_ += static_cast<std::uint64_t>(count);
}

void Metrics::count_model_step_failure() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++model_step_failures_;
}

void Metrics::observe_time_to_first_token(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  time_to_first_token_.observe(seconds);
}

void Metrics::observe_inter_token_latency(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  inter_token_latency_.observe(seconds);
}

std::string Metrics::render(const BridgeStats& stats) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  write_header(out, "kc_serve_requests_total", "counter",
               "HTTP requests answered, by endpoint and status");
  for (const auto& [key, count] : requests_)
    out += fmt::format("kc_serve_requests_total{{endpoint=\"{}\",status=\"{}\"}} {}\n", key.first,
                       key.second, count);
  write_single(out, "kc_serve_prompt_tokens_total", "counter",
               "prompt tokens of the requests the engine accepted",
               static_cast<double>(prompt_tokens_));
  write_single(out, "kc_serve_completion_tokens_total", "counter", "tokens generated",
               static_cast<double>(completion_tokens_));
  write_single(out, "kc_serve_model_step_failures_total", "counter",
               "model steps that threw; their requests failed",
               static_cast<double>(model_step_failures_));
  write_single(out, "kc_serve_queue_length", "gauge", "requests waiting for admission",
               static_cast<double>(stats.waiting));
  write_single(out, "kc_serve_running_sequences", "gauge", "requests admitted and generating",
               static_cast<double>(stats.running));
  write_single(out, "kc_serve_kv_blocks_used", "gauge", "KV cache blocks in use",
               static_cast<double>(stats.total_blocks - stats.free_blocks));
  write_single(out, "kc_serve_kv_blocks_free", "gauge", "KV cache blocks free",
               static_cast<double>(stats.free_blocks));
  write_single(out, "kc_serve_preemptions_total", "counter",
               "sequences preempted when KV blocks ran out (recomputed later)",
               static_cast<double>(stats.preemptions));
  time_to_first_token_.write(out, "kc_serve_time_to_first_token_seconds",
                             "from a request's submission to its first generated token");
  inter_token_latency_.write(out, "kc_serve_inter_token_latency_seconds",
                             "between consecutive generated tokens of one request");
  return out;
}

}  // namespace kc::serve
