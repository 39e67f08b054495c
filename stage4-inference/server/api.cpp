// server/api.cpp — request validation and response bodies (kc/serve/api.hpp says the rules).
#include "kc/serve/api.hpp"

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

namespace kc::serve {
namespace {

using nlohmann::json;

ApiError invalid(std::string message, std::string param = {}) {
  return ApiError{400, "invalid_request_error", std::move(message), std::move(param)};
}

// A field that is absent or null takes its default.
const json* field(const json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::optional<ApiError> read_number(const json& body, const char* name, float low, float high,
                                    bool low_open, float& out) {
  const json* value = field(body, name);
  if (!value) return std::nullopt;
  if (!value->is_number())
    return invalid(std::string("'") + name + "' must be a number", name);
  const double x = value->get<double>();
  if (!std::isfinite(x) || x > high || (low_open ? x <= low : x < low))
    return invalid(std::string("'") + name + "' must be in " + (low_open ? "(" : "[") +
                       json(low).dump() + ", " + json(high).dump() + "]",
                   name);
  out = static_cast<float>(x);
  return std::nullopt;
}

std::optional<ApiError> read_stop(const json& body, std::vector<std::string>& out) {
  const json* value = field(body, "stop");
  if (!value) return std::nullopt;
  if (value->is_string()) {
    out.push_back(value->get<std::string>());
  } else if (value->is_array()) {
    for (const json& item : *value) {
      if (!item.is_string()) return invalid("'stop' must be a string or an array of strings", "stop");
      out.push_back(item.get<std::string>());
    }
  } else {
    return invalid("'stop' must be a string or an array of strings", "stop");
  }
  if (out.size() > 4) return invalid("'stop' holds at most 4 strings", "stop");
  for (const std::string& s : out)
    if (s.empty()) return invalid("'stop' strings must not be empty", "stop");
  return std::nullopt;
}

}  // namespace

std::string error_body(const ApiError& error) {
  json body = {{"error",
                {{"message", error.message},
                 {"type", error.type},
                 {"param", error.param.empty() ? json(nullptr) : json(error.param)},
                 {"code", nullptr}}}};
  return body.dump();
}

std::variant<CompletionRequest, ApiError> parse_completion_request(std::string_view text) {
  const json body = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return invalid("the request body is not valid JSON");
  if (!body.is_object()) return invalid("the request body must be a JSON object");

  CompletionRequest request;
  if (const json* model = field(body, "model")) {
    if (!model->is_string()) return invalid("'model' must be a string", "model");
    request.model = model->get<std::string>();
  }
  const json* prompt = field(body, "prompt");
  if (!prompt) return invalid("'prompt' is required", "prompt");
  if (!prompt->is_string()) return invalid("'prompt' must be a string", "prompt");
  request.prompt = prompt->get<std::string>();
  if (request.prompt.empty()) return invalid("'prompt' must not be empty", "prompt");

  if (const json* max_tokens = field(body, "max_tokens")) {
    if (!max_tokens->is_number_integer())
      return invalid("'max_tokens' must be an integer", "max_tokens");
    // nlohmann keeps a non-negative integer unsigned and a negative one signed.
    const bool is_unsigned = max_tokens->is_number_unsigned();
    if (is_unsigned ? max_tokens->get<std::uint64_t>() < 1 : max_tokens->get<std::int64_t>() < 1)
      return invalid("'max_tokens' must be at least 1", "max_tokens");
    if (max_tokens->get<std::uint64_t>() >
        static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max()))
      return invalid("'max_tokens' must be at most 2147483647", "max_tokens");
    request.max_tokens = max_tokens->get<std::int32_t>();
  }
  if (auto error = read_number(body, "temperature", 0.0f, 2.0f, false, request.temperature))
    return *error;
  if (auto error = read_number(body, "top_p", 0.0f, 1.0f, true, request.top_p)) return *error;
  if (const json* seed = field(body, "seed")) {
    if (!seed->is_number_integer()) return invalid("'seed' must be an integer", "seed");
    request.seed = seed->is_number_unsigned() ? seed->get<std::uint64_t>()
                                              : static_cast<std::uint64_t>(seed->get<std::int64_t>());
  }
  if (auto error = read_stop(body, request.stop)) return *error;
  if (const json* n = field(body, "n")) {
    if (!n->is_number_integer() || n->get<std::int64_t>() != 1)
      return invalid("'n' must be 1: kc-serve returns one choice per request", "n");
  }
  if (const json* stream = field(body, "stream")) {
    if (!stream->is_boolean()) return invalid("'stream' must be true or false", "stream");
    request.stream = stream->get<bool>();
  }
  return request;
}

std::string completion_body(const CompletionResult& result) {
  json body = {
      {"id", result.id},
      {"object", "text_completion"},
      {"created", result.created},
      {"model", result.model},
      {"choices",
       json::array({{{"index", 0},
                     {"text", result.text},
                     {"logprobs", nullptr},
                     {"finish_reason", result.finish_reason}}})},
      {"usage",
       {{"prompt_tokens", result.prompt_tokens},
        {"completion_tokens", result.completion_tokens},
        {"total_tokens", result.prompt_tokens + result.completion_tokens}}}};
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string completion_chunk(const std::string& id, const std::string& model,
                             std::int64_t created, const std::string& text,
                             const std::string& finish_reason) {
  json body = {{"id", id},
               {"object", "text_completion"},
               {"created", created},
               {"model", model},
               {"choices",
                json::array({{{"index", 0},
                              {"text", text},
                              {"logprobs", nullptr},
                              {"finish_reason",
                               finish_reason.empty() ? json(nullptr) : json(finish_reason)}}})}};
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string models_body(const std::string& model, std::int64_t created) {
  json body = {{"object", "list"},
               {"data", json::array({{{"id", model},
                                      {"object", "model"},
                                      {"created", created},
                                      {"owned_by", "kc"}}})}};
  return body.dump();
}

}  // namespace kc::serve
