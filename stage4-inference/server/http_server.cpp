// server/http_server.cpp — routes, authentication and the streaming loop
// (kc/serve/http_server.hpp).
#include "kc/serve/http_server.hpp"

#include <algorithm>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <exception>
#include <functional>
#include <list>
#include <mutex>
#include <random>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "kc/common/error.hpp"
#include "kc/serve/api.hpp"

namespace kc::serve {
namespace {

constexpr const char* kJson = "application/json";
constexpr std::chrono::milliseconds kPollInterval{50};  // how often a waiting handler looks up

void send_error(httplib::Response& response, const ApiError& error) {
  response.status = error.status;
  response.set_content(error_body(error), kJson);
}

const char* openai_finish_reason(engine::FinishReason reason) {
  switch (reason) {
    case engine::FinishReason::stop_token:
    case engine::FinishReason::stop_string:
      return "stop";
    case engine::FinishReason::max_tokens:
    case engine::FinishReason::context_limit:
      return "length";
    case engine::FinishReason::none:
      break;
  }
  return "";
}

std::uint64_t random_seed() {
  static std::mutex mutex;
  static std::mt19937_64 engine{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mutex);
  return engine();
}

// Counts a generation request from before its submission to the end of its response; a
// stream's callbacks share it, so a streamed response counts until its last byte.
class ActiveGeneration {
 public:
  explicit ActiveGeneration(std::atomic<int>& count) : count_(count) { ++count_; }
  ~ActiveGeneration() { --count_; }
  ActiveGeneration(const ActiveGeneration&) = delete;
  ActiveGeneration& operator=(const ActiveGeneration&) = delete;

 private:
  std::atomic<int>& count_;
};

// What a response's callbacks share.
struct StreamState {
  std::shared_ptr<ActiveGeneration> active;
  std::shared_ptr<RequestStream> stream;
  ChunkHeader header;
  bool chat = false;
  bool include_usage = false;
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
  bool role_sent = false;
  std::atomic<bool> finished{false};
};

// The error of a request whose stream ended without finishing.
ApiError ended_without_finishing(const RequestStream& stream) {
  const std::string error = stream.error();
  if (!error.empty()) return ApiError{500, "server_error", error, "", ""};
  return ApiError{503, "server_error", "the server is shutting down", "", ""};
}

// An OpenAI-style body for a response httplib or a route left empty (404, 413, 500 ...).
std::string empty_response_message(int status, std::size_t max_body_bytes) {
  switch (status) {
    case 404: return "no such route; kc-serve serves /v1/completions, /v1/chat/completions, "
                     "/v1/models, /health and /metrics";
    case 405: return "this route does not take that method";
    case 413: return fmt::format("the request body is larger than {} bytes", max_body_bytes);
    default: return fmt::format("HTTP {}", status);
  }
}


// cpp-httplib's connection handler: one thread per connection, started when the connection
// arrives, at most `limit` at once, later connections waiting in order for a thread to finish.
// (httplib's own ThreadPool starts a thread only when it sees no idle one, so a burst of
// connections can wait behind streams that last seconds, unseen by the scheduler.)
class ConnectionThreads final : public httplib::TaskQueue {
 public:
  explicit ConnectionThreads(std::size_t limit) : limit_(limit) {}
  ~ConnectionThreads() override { shutdown(); }

  bool enqueue(std::function<void()> job) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return false;
    join_finished();
    if (running_ < limit_) {
      ++running_;
      threads_.emplace_back([this, first = std::move(job)]() mutable { serve(std::move(first)); });
    } else {
      waiting_.push_back(std::move(job));
    }
    return true;
  }

  // Refuses new connections, lets the waiting ones run, and returns when every thread is done.
  void shutdown() override {
    std::unique_lock<std::mutex> lock(mutex_);
    stopping_ = true;
    all_done_.wait(lock, [this] { return running_ == 0; });
    std::list<std::thread> threads = std::move(threads_);
    lock.unlock();
    for (std::thread& thread : threads) thread.join();
  }

 private:
  void serve(std::function<void()> job) {
    for (;;) {
      job();
      std::lock_guard<std::mutex> lock(mutex_);
      if (waiting_.empty()) {
        finished_.push_back(std::this_thread::get_id());
        if (--running_ == 0) all_done_.notify_all();
        return;
      }
      job = std::move(waiting_.front());
      waiting_.pop_front();
    }
  }

  // Joins the threads that have returned from serve() (holds mutex_).
  void join_finished() {
    for (const std::thread::id id : finished_) {
      const auto done = std::find_if(threads_.begin(), threads_.end(),
                                     [id](const std::thread& thread) { return thread.get_id() == id; });
      if (done == threads_.end()) continue;
      done->join();
      threads_.erase(done);
    }
    finished_.clear();
  }

  const std::size_t limit_;
  std::mutex mutex_;
  std::condition_variable all_done_;
  std::size_t running_ = 0;
  bool stopping_ = false;
  std::deque<std::function<void()>> waiting_;
  std::list<std::thread> threads_;
  std::vector<std::thread::id> finished_;
};

}  // namespace

bool constant_time_equal(const std::string& given, const std::string& secret) {
  unsigned char difference = given.size() == secret.size() ? 0 : 1;
  for (std::size_t i = 0; i < secret.size(); ++i) {
    const char g = i < given.size() ? given[i] : '\0';
    difference |= static_cast<unsigned char>(g ^ secret[i]);
  }
  return difference == 0;
}

std::vector<engine::TokenId> end_of_turn_tokens(const engine::ChatTemplate& chat_template,
                                                const engine::Tokenizer& tokenizer) {
  const char* text = "<|eot_id|>";  // Llama 3, 3.1 and 3.2
  switch (chat_template.kind()) {
    case engine::ChatTemplateKind::chatml: text = "<|im_end|>"; break;
    case engine::ChatTemplateKind::llama2: text = "</s>"; break;  // a reply ends with EOS
    case engine::ChatTemplateKind::llama3:
    case engine::ChatTemplateKind::llama31: break;
  }
  std::vector<engine::TokenId> ids;
  if (const auto id = tokenizer.find_token(text)) ids.push_back(*id);
  return ids;
}

HttpServer::HttpServer(ServerOptions options, const engine::Tokenizer& tokenizer,
                       EngineBridge& bridge)
    : options_(std::move(options)),
      tokenizer_(tokenizer),
      bridge_(bridge),
      http_(std::make_unique<httplib::Server>()) {
  http_->set_payload_max_length(options_.max_body_bytes);
  // cpp-httplib's default pool (about 4 threads per core at most) would hold every stream past
  // its size in the pool's own queue, unseen by the scheduler: no batching and no 429 for them.
  std::size_t connections = options_.max_connections;
  if (connections == 0) {
    const std::size_t capacity = bridge_.capacity();
    connections = capacity >= ServerOptions::kMaxConnections - ServerOptions::kSpareConnections
                      ? ServerOptions::kMaxConnections
                      : capacity + ServerOptions::kSpareConnections;
  }
  http_->new_task_queue = [connections] { return new ConnectionThreads(connections); };
  add_routes();
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  const int port = options_.port == 0 ? http_->bind_to_any_port(options_.host)
                                      : (http_->bind_to_port(options_.host, options_.port)
                                             ? options_.port
                                             : -1);
  require(port > 0, "kc-serve: cannot bind {}:{} (is the port in use?)", options_.host,
          options_.port);
  return port;
}

void HttpServer::listen() { http_->listen_after_bind(); }
void HttpServer::begin_drain() { draining_ = true; }
void HttpServer::stop() { http_->stop(); }

void HttpServer::add_routes() {
  http_->set_pre_routing_handler([this](const httplib::Request& request,
                                        httplib::Response& response) {
    if (request.path.rfind("/v1/", 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
    if (draining_) {
      response.set_header("Retry-After", std::to_string(options_.retry_after_seconds));
      response.set_header("Connection", "close");
      send_error(response, ApiError{503, "server_error", "the server is shutting down", "", ""});
      return httplib::Server::HandlerResponse::Handled;
    }
    if (options_.api_key.empty()) return httplib::Server::HandlerResponse::Unhandled;
    const std::string header = request.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    const std::string given = header.rfind(prefix, 0) == 0 ? header.substr(prefix.size()) : "";
    if (constant_time_equal(given, options_.api_key))
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(response, ApiError{401, "invalid_request_error",
                                  "a valid API key is required (Authorization: Bearer <key>)", "",
                                  ""});
    return httplib::Server::HandlerResponse::Handled;
  });
  // Every error gets an OpenAI-style body, also those httplib answers itself.
  http_->set_error_handler([this](const httplib::Request&, httplib::Response& response) {
    if (!response.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    const int status = response.status;
    send_error(response, ApiError{status,
                                  status >= 500 ? "server_error" : "invalid_request_error",
                                  empty_response_message(status, options_.max_body_bytes), "",
                                  ""});
    return httplib::Server::HandlerResponse::Handled;
  });
  http_->set_exception_handler([](const httplib::Request&, httplib::Response& response,
                                  std::exception_ptr thrown) {
    std::string what = "an exception that is not a std::exception";
    try {
      std::rethrow_exception(thrown);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(response, ApiError{500, "server_error", "internal error: " + what, "", ""});
  });
  http_->set_logger([this](const httplib::Request& request, const httplib::Response& response) {
    bridge_.metrics().count_request(request.path, response.status);
  });

  http_->Get("/health", [this](const httplib::Request&, httplib::Response& response) {
    const BridgeStats stats = bridge_.stats();
    const std::string engine_error = bridge_.engine_error();
    const char* status = !engine_error.empty() ? "error" : draining_ ? "draining" : "ok";
    nlohmann::json body = {{"status", status},
                           {"waiting", stats.waiting},
                           {"running", stats.running},
                           {"free_kv_blocks", stats.free_blocks},
                           {"total_kv_blocks", stats.total_blocks}};
    if (!engine_error.empty()) body["error"] = engine_error;
    if (!engine_error.empty() || draining_) response.status = 503;
    response.set_content(body.dump(), kJson);
  });

  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& response) {
    response.set_content(bridge_.metrics().render(bridge_.stats()),
                         "text/plain; version=0.0.4; charset=utf-8");
  });

  const std::int64_t started = static_cast<std::int64_t>(std::time(nullptr));
  http_->Get("/v1/models", [this, started](const httplib::Request&, httplib::Response& response) {
    response.set_content(models_body(options_.model_name, started), kJson);
  });

  http_->Post("/v1/completions", [this](const httplib::Request& http_request,
                                        httplib::Response& response) {
    auto parsed = parse_completion_request(http_request.body);
    if (const ApiError* error = std::get_if<ApiError>(&parsed)) return send_error(response, *error);
    const CompletionRequest& request = std::get<CompletionRequest>(parsed);
    std::vector<engine::TokenId> prompt;
    try {
      prompt = tokenizer_.encode(request.prompt);
    } catch (const kc::Error& e) {
      return send_error(response, ApiError{400, "invalid_request_error", e.what(), "prompt", ""});
    }
    generate(http_request, response, request, std::move(prompt), /*chat=*/false);
  });

  http_->Post("/v1/chat/completions", [this](const httplib::Request& http_request,
                                             httplib::Response& response) {
    if (!options_.chat_template)
      return send_error(response, ApiError{400, "invalid_request_error",
                                           "this model has no chat template; use "
                                           "/v1/completions with the prompt written out",
                                           "messages", ""});
    auto parsed = parse_chat_request(http_request.body);
    if (const ApiError* error = std::get_if<ApiError>(&parsed)) return send_error(response, *error);
    const ChatRequest& request = std::get<ChatRequest>(parsed);
    std::vector<engine::TokenId> prompt;
    try {
      // The rendering holds the special tokens as text, BOS included where the format has one.
      prompt = tokenizer_.encode(options_.chat_template->render(request.messages),
                                 /*add_special_tokens=*/false);
    } catch (const kc::Error& e) {
      return send_error(response,
                        ApiError{400, "invalid_request_error", e.what(), "messages", ""});
    }
    generate(http_request, response, request, std::move(prompt), /*chat=*/true);
  });
}

void HttpServer::generate(const httplib::Request& http_request, httplib::Response& response,
                          const GenerationOptions& options, std::vector<engine::TokenId> prompt,
                          bool chat) {
  const auto prompt_tokens = static_cast<std::int64_t>(prompt.size());
  const char* prompt_field = chat ? "messages" : "prompt";
  if (prompt_tokens >= bridge_.max_sequence_tokens())
    return send_error(response,
                      ApiError{400, "invalid_request_error",
                               fmt::format("the prompt has {} tokens; this server's context "
                                           "holds {}, the prompt and at least one new token",
                                           prompt_tokens, bridge_.max_sequence_tokens()),
                               prompt_field, ""});
  engine::GenerationRequest generation;
  generation.prompt = std::move(prompt);
  generation.max_tokens = options.max_tokens;
  generation.stop_token_ids = options_.stop_token_ids;
  if (chat)
    generation.stop_token_ids.insert(generation.stop_token_ids.end(),
                                     options_.end_of_turn_ids.begin(),
                                     options_.end_of_turn_ids.end());
  generation.stop_strings = options.stop;
  generation.sampling.temperature = options.temperature;
  generation.sampling.top_p = options.top_p;
  generation.sampling.seed = options.seed ? *options.seed : random_seed();

  auto state = std::make_shared<StreamState>();
  state->active = std::make_shared<ActiveGeneration>(active_generations_);
  try {
    state->stream = bridge_.submit(std::move(generation));
  } catch (const QueueFull& e) {
    response.set_header("Retry-After", std::to_string(options_.retry_after_seconds));
    return send_error(response, ApiError{429, "rate_limit_error", e.what(), "", "queue_full"});
  } catch (const ShuttingDown& e) {
    return send_error(response, ApiError{503, "server_error", e.what(), "", ""});
  } catch (const kc::Error& e) {
    return send_error(response, ApiError{400, "invalid_request_error", e.what(), "", ""});
  }
  state->header.id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(state->stream->id());
  state->header.model = options.model.empty() ? options_.model_name : options.model;
  state->header.created = static_cast<std::int64_t>(std::time(nullptr));
  state->chat = chat;
  state->include_usage = options.include_usage;
  state->prompt_tokens = prompt_tokens;

  if (!options.stream) {
    CompletionResult result;
    result.id = state->header.id;
    result.model = state->header.model;
    result.created = state->header.created;
    result.prompt_tokens = prompt_tokens;
    for (;;) {
      const auto event = state->stream->next(kPollInterval);
      if (!event) {
        if (state->stream->closed())
          return send_error(response, ended_without_finishing(*state->stream));
        if (http_request.is_connection_closed()) {  // nobody waits for the answer
          bridge_.cancel(state->stream->id());
          return;
        }
        continue;
      }
      result.text += event->text;
      ++result.completion_tokens;
      if (event->finish != engine::FinishReason::none) {
        result.finish_reason = openai_finish_reason(event->finish);
        break;
      }
    }
    response.set_content(chat ? chat_completion_body(result) : completion_body(result), kJson);
    return;
  }

  // Streaming: each piece of text is one server-sent event; the finish reason comes last (in
  // the last text chunk for completions, in a chunk of its own for chat), then the usage when
  // asked for, then "data: [DONE]". A request that fails gets an error event instead.
  // httplib calls the provider again after each `true`.
  response.set_header("Cache-Control", "no-cache");
  response.set_chunked_content_provider(
      "text/event-stream",
      [state](std::size_t, httplib::DataSink& sink) {
        const auto send = [&sink](const std::string& data) {
          const std::string event = "data: " + data + "\n\n";
          return sink.write(event.data(), event.size());
        };
        const auto end = [&] {
          state->finished = true;
          send("[DONE]");
          sink.done();
          return true;
        };
        if (state->chat && !state->role_sent) {
          state->role_sent = true;
          return send(chat_role_chunk(state->header));
        }
        const auto event = state->stream->next(kPollInterval);
        if (!event) {
          if (!state->stream->closed()) return sink.is_writable();
          send(error_body(ended_without_finishing(*state->stream)));
          return end();
        }
        ++state->completion_tokens;
        const std::string finish = openai_finish_reason(event->finish);
        if (state->chat) {
          if (!event->text.empty() && !send(chat_content_chunk(state->header, event->text)))
            return false;
          if (!finish.empty() && !send(chat_finish_chunk(state->header, finish))) return false;
        } else if (!event->text.empty() || !finish.empty()) {
          if (!send(completion_chunk(state->header, event->text, finish))) return false;
        }
        if (finish.empty()) return true;
        if (state->include_usage)
          send(usage_chunk(state->header, state->chat ? "chat.completion.chunk" : "text_completion",
                           state->prompt_tokens, state->completion_tokens));
        return end();
      },
      [this, state](bool) {
        if (!state->finished) bridge_.cancel(state->stream->id());
      });
}

}  // namespace kc::serve
