// server/http_server.cpp — routes, authentication and the streaming loop
// (kc/serve/http_server.hpp).
#include "kc/serve/http_server.hpp"

#include <atomic>
#include <ctime>
#include <random>

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

// What a streaming response's callbacks share: whether the request has finished.
struct StreamState {
  std::shared_ptr<RequestStream> stream;
  std::string id;
  std::string model;
  std::int64_t created = 0;
  std::atomic<bool> finished{false};
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

HttpServer::HttpServer(ServerOptions options, const engine::Tokenizer& tokenizer,
                       EngineBridge& bridge)
    : options_(std::move(options)),
      tokenizer_(tokenizer),
      bridge_(bridge),
      http_(std::make_unique<httplib::Server>()) {
  http_->set_payload_max_length(std::size_t{4} << 20);
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
void HttpServer::stop() { http_->stop(); }

void HttpServer::add_routes() {
  http_->set_pre_routing_handler([this](const httplib::Request& request,
                                        httplib::Response& response) {
    if (options_.api_key.empty() || request.path.rfind("/v1/", 0) != 0)
      return httplib::Server::HandlerResponse::Unhandled;
    const std::string header = request.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    const std::string given = header.rfind(prefix, 0) == 0 ? header.substr(prefix.size()) : "";
    if (constant_time_equal(given, options_.api_key))
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(response, ApiError{401, "invalid_request_error",
                                  "a valid API key is required (Authorization: Bearer <key>)", ""});
    return httplib::Server::HandlerResponse::Handled;
  });

  http_->Get("/health", [this](const httplib::Request&, httplib::Response& response) {
    const BridgeStats stats = bridge_.stats();
    const nlohmann::json body = {{"status", "ok"},
                                 {"waiting", stats.waiting},
                                 {"running", stats.running},
                                 {"free_kv_blocks", stats.free_blocks},
                                 {"total_kv_blocks", stats.total_blocks}};
    response.set_content(body.dump(), kJson);
  });

  const std::int64_t started = static_cast<std::int64_t>(std::time(nullptr));
  http_->Get("/v1/models", [this, started](const httplib::Request&, httplib::Response& response) {
    response.set_content(models_body(options_.model_name, started), kJson);
  });

  http_->Post("/v1/completions", [this](const httplib::Request& http_request,
                                        httplib::Response& response) {
    auto parsed = parse_completion_request(http_request.body);
    if (const ApiError* error = std::get_if<ApiError>(&parsed)) return send_error(response, *error);
    CompletionRequest& request = std::get<CompletionRequest>(parsed);

    engine::GenerationRequest generation;
    generation.prompt = tokenizer_.encode(request.prompt);
    const auto prompt_tokens = static_cast<std::int64_t>(generation.prompt.size());
    if (prompt_tokens >= bridge_.max_sequence_tokens())
      return send_error(response,
                        ApiError{400, "invalid_request_error",
                                 fmt::format("the prompt has {} tokens; this server's context "
                                             "holds {}, the prompt and at least one new token",
                                             prompt_tokens, bridge_.max_sequence_tokens()),
                                 "prompt"});
    generation.max_tokens = request.max_tokens;
    generation.stop_token_ids = options_.stop_token_ids;
    generation.stop_strings = request.stop;
    generation.sampling.temperature = request.temperature;
    generation.sampling.top_p = request.top_p;
    generation.sampling.seed = request.seed ? *request.seed : random_seed();

    auto state = std::make_shared<StreamState>();
    try {
      state->stream = bridge_.submit(std::move(generation));
    } catch (const kc::Error& e) {
      return send_error(response, ApiError{400, "invalid_request_error", e.what(), ""});
    }
    state->id = "cmpl-" + std::to_string(state->stream->id());
    state->model = request.model.empty() ? options_.model_name : request.model;
    state->created = static_cast<std::int64_t>(std::time(nullptr));

    if (!request.stream) {
      CompletionResult result;
      result.id = state->id;
      result.model = state->model;
      result.created = state->created;
      result.prompt_tokens = prompt_tokens;
      for (;;) {
        const auto event = state->stream->next(kPollInterval);
        if (!event) {
          if (state->stream->closed())
            return send_error(response, ApiError{503, "server_error",
                                                 "the server is shutting down", ""});
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
      response.set_content(completion_body(result), kJson);
      return;
    }

    // Streaming: each piece of text is one server-sent event, then a last chunk with the finish
    // reason and "data: [DONE]". httplib calls the provider again after each `true`.
    response.set_header("Cache-Control", "no-cache");
    response.set_chunked_content_provider(
        "text/event-stream",
        [state](std::size_t, httplib::DataSink& sink) {
          const auto event = state->stream->next(kPollInterval);
          if (!event) return !state->stream->closed() && sink.is_writable();
          const char* finish = openai_finish_reason(event->finish);
          if (!event->text.empty() || *finish != '\0') {
            const std::string data = "data: " +
                                     completion_chunk(state->id, state->model, state->created,
                                                      event->text, finish) +
                                     "\n\n";
            if (!sink.write(data.data(), data.size())) return false;
          }
          if (*finish != '\0') {
            state->finished = true;
            const std::string done = "data: [DONE]\n\n";
            sink.write(done.data(), done.size());
            sink.done();
          }
          return true;
        },
        [this, state](bool) {
          if (!state->finished) bridge_.cancel(state->stream->id());
        });
  });
}

}  // namespace kc::serve
