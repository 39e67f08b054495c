// server/api.cpp — request validation and response bodies (kc/serve/api.hpp says the rules).
#include "kc/serve/api.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace kc::serve {
namespace {

using nlohmann::json;

ApiError invalid(std::string message, std::string param = {}) {
  return ApiError{400, "invalid_request_error", std::move(message), std::move(param), ""};
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

// Thrown by the parser callback at the first object or array past kMaxJsonDepth.
struct TooDeep {};

// The body as a JSON object, or the 400 that says why it is not one.
std::optional<ApiError> parse_body(std::string_view text, json& body) {
  if (const auto at = first_invalid_utf8(text))
    return invalid(fmt::format("the request body is not valid UTF-8 (byte {})", *at));
  const json::parser_callback_t limit_depth = [](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start ||
         event == json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth)
      throw TooDeep{};
    return true;
  };
  try {
    body = json::parse(text.begin(), text.end(), limit_depth);
  } catch (const TooDeep&) {
    return invalid(fmt::format("the request body nests objects and arrays more than {} deep",
                               kMaxJsonDepth));
  } catch (const json::parse_error& e) {
    return invalid(fmt::format("the request body is not valid JSON (at byte {})", e.byte));
  } catch (const json::exception&) {  // e.g. a number beyond a double (1e309)
    return invalid("the request body is not valid JSON (a number out of range)");
  }
  if (!body.is_object()) return invalid("the request body must be a JSON object");
  return std::nullopt;
}

std::optional<ApiError> read_max_tokens(const json& body, const char* name, std::int32_t& out) {
  const json* value = field(body, name);
  if (!value) return std::nullopt;
  const std::string quoted = std::string("'") + name + "'";
  if (!value->is_number_integer()) return invalid(quoted + " must be an integer", name);
  // nlohmann keeps a non-negative integer unsigned and a negative one signed.
  const bool is_unsigned = value->is_number_unsigned();
  if (is_unsigned ? value->get<std::uint64_t>() < 1 : value->get<std::int64_t>() < 1)
    return invalid(quoted + " must be at least 1", name);
  if (value->get<std::uint64_t>() >
      static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max()))
    return invalid(quoted + " must be at most 2147483647", name);
  out = value->get<std::int32_t>();
  return std::nullopt;
}

// The fields both endpoints share (max_tokens aside: its default differs).
std::optional<ApiError> read_options(const json& body, GenerationOptions& options) {
  if (const json* model = field(body, "model")) {
    if (!model->is_string()) return invalid("'model' must be a string", "model");
    options.model = model->get<std::string>();
  }
  if (auto error = read_number(body, "temperature", 0.0f, 2.0f, false, options.temperature))
    return error;
  if (auto error = read_number(body, "top_p", 0.0f, 1.0f, true, options.top_p)) return error;
  if (const json* seed = field(body, "seed")) {
    if (!seed->is_number_integer()) return invalid("'seed' must be an integer", "seed");
    options.seed = seed->is_number_unsigned()
                       ? seed->get<std::uint64_t>()
                       : static_cast<std::uint64_t>(seed->get<std::int64_t>());
  }
  if (auto error = read_stop(body, options.stop)) return error;
  if (const json* n = field(body, "n")) {
    if (!n->is_number_integer() || n->get<std::int64_t>() != 1)
      return invalid("'n' must be 1: kc-serve returns one choice per request", "n");
  }
  if (const json* stream = field(body, "stream")) {
    if (!stream->is_boolean()) return invalid("'stream' must be true or false", "stream");
    options.stream = stream->get<bool>();
  }
  if (const json* stream_options = field(body, "stream_options")) {
    if (!stream_options->is_object())
      return invalid("'stream_options' must be an object", "stream_options");
    if (const json* include_usage = field(*stream_options, "include_usage")) {
      if (!include_usage->is_boolean())
        return invalid("'stream_options.include_usage' must be true or false", "stream_options");
      options.include_usage = include_usage->get<bool>();
    }
  }
  return std::nullopt;
}

}  // namespace


std::string error_body(const ApiError& error) {
  json body = {{"error",
                {{"message", error.message},
                 {"type", error.type},
                 {"param", error.param.empty() ? json(nullptr) : json(error.param)},
                 {"code", error.code.empty() ? json(nullptr) : json(error.code)}}}};
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::optional<std::size_t> first_invalid_utf8(std::string_view text) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const auto continuation = [&](std::size_t i) { return i < text.size() && (byte(i) & 0xC0) == 0x80; };
  std::size_t i = 0;
  while (i < text.size()) {
    const unsigned char lead = byte(i);
    std::size_t length = 0;
    std::uint32_t low = 0;  // the smallest code point of this length: below it is overlong
    std::uint32_t code = 0;
    if (lead < 0x80) {
      ++i;
      continue;
    } else if ((lead & 0xE0) == 0xC0) {
      length = 2, low = 0x80, code = lead & 0x1Fu;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3, low = 0x800, code = lead & 0x0Fu;
    } else if ((lead & 0xF8) == 0xF0) {
      length = 4, low = 0x10000, code = lead & 0x07u;
    } else {
      return i;  // a continuation byte without a lead, or 0xF8..0xFF
    }
    for (std::size_t k = 1; k < length; ++k) {
      if (!continuation(i + k)) return i;
      code = (code << 6) | (byte(i + k) & 0x3Fu);
    }
    if (code < low || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return i;
    i += length;
  }
  return std::nullopt;
}

std::variant<CompletionRequest, ApiError> parse_completion_request(std::string_view text) {
  json body;
  if (auto error = parse_body(text, body)) return *error;
  CompletionRequest request;
  if (auto error = read_options(body, request)) return *error;
  const json* prompt = field(body, "prompt");
  if (!prompt) return invalid("'prompt' is required", "prompt");
  if (!prompt->is_string()) return invalid("'prompt' must be a string", "prompt");
  request.prompt = prompt->get<std::string>();
  if (request.prompt.empty()) return invalid("'prompt' must not be empty", "prompt");
  if (auto error = read_max_tokens(body, "max_tokens", request.max_tokens)) return *error;
  return request;
}

std::variant<ChatRequest, ApiError> parse_chat_request(std::string_view text) {
  json body;
  if (auto error = parse_body(text, body)) return *error;
  ChatRequest request;
  if (auto error = read_options(body, request)) return *error;
  const json* messages = field(body, "messages");
  if (!messages) return invalid("'messages' is required", "messages");
  if (!messages->is_array() || messages->empty())
    return invalid("'messages' must be a non-empty array of {\"role\", \"content\"} objects",
                   "messages");
  for (std::size_t i = 0; i < messages->size(); ++i) {
    const json& message = (*messages)[i];
    const std::string where = fmt::format("messages[{}]", i);
    if (!message.is_object()) return invalid("'" + where + "' must be an object", "messages");
    const json* role = field(message, "role");
    if (!role || !role->is_string() ||
        (*role != "system" && *role != "user" && *role != "assistant"))
      return invalid("'" + where + ".role' must be \"system\", \"user\" or \"assistant\"",
                     "messages");
    const json* content = field(message, "content");
    if (!content || !content->is_string())
      return invalid("'" + where + ".content' must be a string", "messages");
    request.messages.push_back({role->get<std::string>(), content->get<std::string>()});
  }
  // Chat has no default length: the reply runs until it ends its turn or fills the context.
  request.max_tokens = std::numeric_limits<std::int32_t>::max();
  if (auto error = read_max_tokens(body, "max_tokens", request.max_tokens)) return *error;
  if (auto error = read_max_tokens(body, "max_completion_tokens", request.max_tokens))
    return *error;
  return request;
}

namespace {

json choice_with_text(const std::string& text, const std::string& finish_reason) {
  return {{"index", 0},
          {"text", text},
          {"logprobs", nullptr},
          {"finish_reason", finish_reason.empty() ? json(nullptr) : json(finish_reason)}};
}

json usage(std::int64_t prompt_tokens, std::int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

json chunk(const ChunkHeader& header, const char* object, json choices) {
  return {{"id", header.id},
          {"object", object},
          {"created", header.created},
          {"model", header.model},
          {"choices", std::move(choices)}};
}

json chat_choice(json delta, const std::string& finish_reason) {
  return json::array({{{"index", 0},
                       {"delta", std::move(delta)},
                       {"logprobs", nullptr},
                       {"finish_reason",
                        finish_reason.empty() ? json(nullptr) : json(finish_reason)}}});
}

// Generated text may end inside a character (a length stop); such bytes become U+FFFD.
std::string dump(const json& body) { return body.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

std::string completion_body(const CompletionResult& result) {
  json body = chunk({result.id, result.model, result.created}, "text_completion",
                    json::array({choice_with_text(result.text, result.finish_reason)}));
  body["usage"] = usage(result.prompt_tokens, result.completion_tokens);
  return dump(body);
}

std::string chat_completion_body(const CompletionResult& result) {
  json body = chunk({result.id, result.model, result.created}, "chat.completion",
                    json::array({{{"index", 0},
                                  {"message", {{"role", "assistant"}, {"content", result.text}}},
                                  {"logprobs", nullptr},
                                  {"finish_reason", result.finish_reason}}}));
  body["usage"] = usage(result.prompt_tokens, result.completion_tokens);
  return dump(body);
}

std::string completion_chunk(const ChunkHeader& header, const std::string& text,
                             const std::string& finish_reason) {
  return dump(chunk(header, "text_completion",
                    json::array({choice_with_text(text, finish_reason)})));
}

std::string chat_role_chunk(const ChunkHeader& header) {
  return dump(chunk(header, "chat.completion.chunk",
                    chat_choice({{"role", "assistant"}, {"content", ""}}, "")));
}

std::string chat_content_chunk(const ChunkHeader& header, const std::string& text) {
  return dump(chunk(header, "chat.completion.chunk", chat_choice({{"content", text}}, "")));
}

std::string chat_finish_chunk(const ChunkHeader& header, const std::string& finish_reason) {
  return dump(chunk(header, "chat.completion.chunk", chat_choice(json::object(), finish_reason)));
}

std::string usage_chunk(const ChunkHeader& header, const char* object, std::int64_t prompt_tokens,
                        std::int64_t completion_tokens) {
  json body = chunk(header, object, json::array());
  body["usage"] = usage(prompt_tokens, completion_tokens);
  return dump(body);
}

std::string models_body(const std::string& model, std::int64_t created) {
  json body = {{"object", "list"},
               {"data", json::array({{{"id", model},
                                      {"object", "model"},
                                      {"created", created},
                                      {"owned_by", "kc"}}})}};
  return dump(body);
}

}  // namespace kc::serve
