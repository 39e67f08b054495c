// BPE, byte-level and SentencePiece-style (kc/engine/tokenizer.hpp): the vocabulary and merge
// tables, loading them from tokenizer.json or GGUF metadata, encoding and decoding.
#include "kc/engine/tokenizer.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "kc/common/error.hpp"
#include "kc/engine/gguf.hpp"
#include "kc/engine/mapped_file.hpp"
#include "pre_tokenizer.hpp"
#include "strict_json.hpp"
#include "unicode.hpp"

namespace kc::engine {

const char* tokenizer_kind_name(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::byte_level: return "byte-level BPE";
    case TokenizerKind::sentencepiece: return "SentencePiece-style BPE";
  }
  return "unknown";
}

const char* pre_tokenizer_name(PreTokenizerKind kind) {
  switch (kind) {
    case PreTokenizerKind::none: return "none";
    case PreTokenizerKind::gpt2: return "gpt2";
    case PreTokenizerKind::smollm: return "smollm";
    case PreTokenizerKind::llama3: return "llama3";
  }
  return "unknown";
}

namespace {

using nlohmann::json;

// The Llama 3 pre-tokenizer regex as tokenizer.json spells it (Split, behavior Isolated).
constexpr std::string_view kLlama3Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// GPT-2's byte-level alphabet: byte b is written as one printable code point. The printable
// Latin-1 bytes stand for themselves; the other 68 (controls, space, 0x7F-0xA0, 0xAD) are
// U+0100, U+0101, ... in byte order, so "Ġ" (U+0120) is the space.
std::array<char32_t, 256> byte_to_code_point_table() {
  std::array<char32_t, 256> table{};
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    table[static_cast<std::size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
  }
  return table;
}

// The bytes a vocabulary entry stands for: every code point mapped back through the byte-level
// alphabet, or — when one of them is not in it, as in some added tokens — the entry's own UTF-8,
// which is what Hugging Face's ByteLevel decoder does.
std::string token_bytes_of(const std::string& text, const std::string& source, TokenId id) {
  static const std::unordered_map<char32_t, char> code_point_to_byte = [] {
    std::unordered_map<char32_t, char> map;
    const auto table = byte_to_code_point_table();
    for (int b = 0; b < 256; ++b) map[table[static_cast<std::size_t>(b)]] = static_cast<char>(b);
    return map;
  }();
  const detail::DecodedText decoded =
      detail::decode_utf8(text, fmt::format("{}: token {}", source, id));
  std::string bytes;
  for (char32_t c : decoded.code_points) {
    const auto it = code_point_to_byte.find(c);
    if (it == code_point_to_byte.end()) return text;
    bytes += it->second;
  }
  return bytes;
}

// SentencePiece's "▁" (U+2581 LOWER ONE EIGHTH BLOCK), which stands for a space.
constexpr std::string_view kMetaspace = "\xE2\x96\x81";

bool starts_with_metaspace(std::string_view text) {
  return text.substr(0, kMetaspace.size()) == kMetaspace;
}

// Every " " as "▁" (Llama 2's Replace normalizer; the Metaspace pre-tokenizer).
std::string spaces_to_metaspace(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 2);
  for (char c : text) {
    if (c == ' ')
      out += kMetaspace;
    else
      out += c;
  }
  return out;
}

// Every "▁" as `replacement` (" " for the decoders' Replace, "" for the Metaspace decoder's first
// token).
std::string replace_metaspace(std::string_view text, std::string_view replacement) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    if (text.compare(i, kMetaspace.size(), kMetaspace) == 0) {
      out += replacement;
      i += kMetaspace.size();
    } else {
      out += text[i++];
    }
  }
  return out;
}

// The byte a token stands for to Hugging Face's ByteFallback decoder: six bytes "<0x", two hex
// digits, ">" (Rust's u8::from_str_radix, so "<0xe6>" and "<0x+A>" count too); else -1.
int fallback_byte_of(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  const auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (text[3] == '+') return hex(text[4]);
  if (hex(text[3]) < 0 || hex(text[4]) < 0) return -1;
  return hex(text[3]) * 16 + hex(text[4]);
}

}  // namespace

namespace detail {

// How a SentencePiece-style tokenizer turns tokens back into text (tokenizer.json "decoder").
enum class SentencePieceDecoder {
  // Sequence[Replace("▁", " "), ByteFallback, Fuse, Strip(" ", 1, 0)]: Llama 2's.
  byte_fallback,
  // Metaspace: "▁" as a space, every "▁" of the first token dropped; <0xXX> tokens are left as
  // they are written.
  metaspace,
  // Sequence[ByteFallback, Fuse, Replace("▁", " "), Strip(" ", 1, 0)]: what transformers gives a
  // GGUF "llama" tokenizer. As byte_fallback, except that a "▁" spelled by <0xXX> tokens
  // (E2 96 81) becomes a space too.
  byte_fallback_then_replace,
};

// What a loader collects before the tables are built.
struct TokenizerSpec {
  std::string source;
  std::vector<std::string> tokens;  // by id; the vocabulary text
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  std::vector<AddedToken> added;
  TokenizerKind kind = TokenizerKind::byte_level;
  // SentencePiece-style only.
  SpacePrefix space_prefix = SpacePrefix::every_segment;
  SentencePieceDecoder decoder = SentencePieceDecoder::byte_fallback;
  std::size_t decoder_strips = 0;  // leading spaces the decoder strips (Strip's start)
  bool fuse_unknown = false;       // consecutive unknown characters become one unknown token
  PreTokenizerKind pre_tokenizer = PreTokenizerKind::gpt2;
  bool ignore_merges = false;
  std::optional<TokenId> bos, eos, padding;
  std::optional<TokenId> unknown;  // what a byte without a token becomes (else it is dropped)
  bool add_bos = false, add_eos = false;
  std::string chat_template;
};
}  // namespace detail

namespace {
using detail::TokenizerSpec;

struct Merge {
  int rank;
  TokenId result;
};

std::uint64_t pair_key(TokenId left, TokenId right) {
  return static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32 |
         static_cast<std::uint32_t>(right);
}

}  // namespace

struct Tokenizer::Tables {
  std::unordered_map<std::string, TokenId> by_text;   // vocabulary text -> id
  std::unordered_map<std::string, TokenId> by_bytes;  // bytes -> id, tokens BPE can produce
  std::array<TokenId, 256> byte_token{};              // the token of each single byte
  std::unordered_map<std::uint64_t, Merge> merges;    // (left, right) -> rank and result
  std::vector<bool> special;
  std::vector<bool> skipped;  // what decode(skip_special_tokens) leaves out
  // Added tokens by their first byte, longest first (leftmost-longest matching), found in the
  // text as it is; and (SentencePiece-style) those with "normalized", found in the normalized
  // text by their normalized pattern.
  std::array<std::vector<std::size_t>, 256> added_by_first_byte;
  std::array<std::vector<std::size_t>, 256> normalized_added_by_first_byte;
  std::vector<std::string> added_pattern;  // by index into added_tokens_

  // SentencePiece-style only.
  std::unordered_map<char32_t, TokenId> char_token;  // the token of a single character
  std::array<TokenId, 256> fallback_token{};         // <0x00>..<0xFF>, -1 where missing
  std::optional<TokenId> unknown;
  bool fuse_unknown = false;
  detail::SentencePieceDecoder decoder = detail::SentencePieceDecoder::byte_fallback;
  std::size_t decoder_strips = 0;
  std::vector<std::string> decoder_text;  // by id: the token as the decoder receives it
  std::vector<int> fallback_byte;         // by id: the byte ByteFallback makes of it, or -1

  // Pieces repeat (" the", "\n"), so their BPE results are cached; a piece longer than
  // kCachedPieceBytes (a SentencePiece-style segment is a whole sentence) is not. encode() is
  // const and may be called from several threads: the cache is guarded.
  static constexpr std::size_t kCacheLimit = 1 << 16;
  static constexpr std::size_t kCachedPieceBytes = 256;
  std::mutex cache_mutex;
  std::unordered_map<std::string, std::vector<TokenId>> cache;
};

Tokenizer::Tokenizer() : tables_(std::make_unique<Tables>()) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

// ---------------------------------------------------------------------------------------------
// Building the tables (shared by both loaders)

namespace {

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw Error(fmt::format("{}: {}", source, what));
}

}  // namespace

// Friend-free construction: the loaders fill a TokenizerSpec, this turns it into a Tokenizer.
namespace detail {
struct TokenizerBuilder {
  static Tokenizer build(TokenizerSpec spec) {
    Tokenizer t;
    Tokenizer::Tables& tables = *t.tables_;
    const std::string& source = spec.source;
    if (spec.tokens.empty()) fail(source, "the vocabulary is empty");
    const auto size = static_cast<TokenId>(spec.tokens.size());
    const bool byte_level = spec.kind == TokenizerKind::byte_level;
    tables.special.assign(spec.tokens.size(), false);
    for (TokenId id = 0; id < size; ++id)
      tables.by_text.emplace(spec.tokens[static_cast<std::size_t>(id)], id);
    std::vector<bool> is_added(spec.tokens.size(), false);
    for (const AddedToken& added : spec.added) {
      if (added.content.empty()) fail(source, fmt::format("added token {} is empty", added.id));
      is_added[static_cast<std::size_t>(added.id)] = true;
      tables.special[static_cast<std::size_t>(added.id)] = added.special;
      // What the text must contain: Llama 2's legacy normalizer turns "<pad>" into "▁<pad>".
      tables.added_pattern.push_back(
          added.normalized && !byte_level && spec.space_prefix == SpacePrefix::every_segment
              ? std::string(kMetaspace) + spaces_to_metaspace(added.content)
              : added.content);
    }

    if (byte_level) {
      t.token_bytes_.reserve(spec.tokens.size());
      for (TokenId id = 0; id < size; ++id) {
        const std::string& text = spec.tokens[static_cast<std::size_t>(id)];
        t.token_bytes_.push_back(token_bytes_of(text, source, id));
      }
      tables.skipped = tables.special;
      // BPE produces the tokens of the model's own vocabulary, never an added token.
      for (TokenId id = 0; id < size; ++id)
        if (!is_added[static_cast<std::size_t>(id)])
          tables.by_bytes.emplace(t.token_bytes_[static_cast<std::size_t>(id)], id);

      // A byte without a token becomes the unknown token when there is one, else it is dropped,
      // as Hugging Face's BPE does (SmolLM2's vocabulary lacks a few control bytes and bytes
      // UTF-8 never uses).
      const auto alphabet = byte_to_code_point_table();
      for (int b = 0; b < 256; ++b) {
        std::string text;
        detail::append_utf8(text, alphabet[static_cast<std::size_t>(b)]);
        const auto it = tables.by_text.find(text);
        tables.byte_token[static_cast<std::size_t>(b)] =
            it != tables.by_text.end() ? it->second : spec.unknown.value_or(-1);
      }
    } else {
      build_sentencepiece(spec, is_added, t);
    }

    if (spec.merges.empty()) fail(source, "there are no merges; BPE needs its merge list");
    int rank = 0;
    for (const auto& merge : spec.merges) {
      // Named references, not structured bindings: C++17 lambdas cannot capture those.
      const std::string& left = merge.first;
      const std::string& right = merge.second;
      const auto find = [&](const std::string& text) {
        const auto it = tables.by_text.find(text);
        if (it == tables.by_text.end())
          fail(source, fmt::format("merge {} (\"{} {}\"): \"{}\" is not in the vocabulary", rank,
                                   left, right, text));
        return it->second;
      };
      const TokenId left_id = find(left);
      const TokenId right_id = find(right);
      const TokenId result = find(left + right);
      // A pair listed twice keeps its first (best) rank, as Hugging Face does.
      tables.merges.emplace(pair_key(left_id, right_id), Merge{rank, result});
      ++rank;
    }

    // Byte-level: every added token is found in the text as it is (there is no normalizer).
    // SentencePiece-style: as Hugging Face does, first those without "normalized" in the text as
    // it is, then the others in each normalized segment between them.
    for (std::size_t i = 0; i < spec.added.size(); ++i) {
      const std::string& pattern = tables.added_pattern[i];
      auto& by_first_byte = !byte_level && spec.added[i].normalized
                                ? tables.normalized_added_by_first_byte
                                : tables.added_by_first_byte;
      by_first_byte[static_cast<unsigned char>(pattern[0])].push_back(i);
    }
    for (auto* table : {&tables.added_by_first_byte, &tables.normalized_added_by_first_byte})
      for (auto& candidates : *table)
        std::stable_sort(candidates.begin(), candidates.end(), [&](std::size_t a, std::size_t b) {
          return tables.added_pattern[a].size() > tables.added_pattern[b].size();
        });

    const auto check = [&](const char* what, const std::optional<TokenId>& id) {
      if (id && (*id < 0 || *id >= size))
        fail(source, fmt::format("the {} id {} is outside the vocabulary of {} tokens", what, *id,
                                 size));
    };
    check("BOS", spec.bos);
    check("EOS", spec.eos);
    check("padding", spec.padding);
    if (spec.add_bos && !spec.bos) fail(source, "BOS is to be added but no BOS token is named");
    if (spec.add_eos && !spec.eos) fail(source, "EOS is to be added but no EOS token is named");

    t.source_ = std::move(spec.source);
    t.token_text_ = std::move(spec.tokens);
    t.added_tokens_ = std::move(spec.added);
    t.kind_ = spec.kind;
    t.space_prefix_ = spec.space_prefix;
    t.pre_tokenizer_ = spec.pre_tokenizer;
    t.ignore_merges_ = spec.ignore_merges;
    t.merge_count_ = spec.merges.size();
    t.bos_id_ = spec.bos;
    t.eos_id_ = spec.eos;
    t.padding_id_ = spec.padding;
    t.add_bos_ = spec.add_bos;
    t.add_eos_ = spec.add_eos;
    t.chat_template_ = std::move(spec.chat_template);
    return t;
  }

  // The SentencePiece-style tables: the tokens of single characters and of the 256 bytes for
  // encoding; for decoding, each token as Hugging Face's decoder receives it and what it makes
  // of it.
  static void build_sentencepiece(const TokenizerSpec& spec, const std::vector<bool>& is_added,
                                  Tokenizer& t) {
    Tokenizer::Tables& tables = *t.tables_;
    const std::size_t size = spec.tokens.size();
    tables.unknown = spec.unknown;
    tables.fuse_unknown = spec.fuse_unknown;
    tables.decoder = spec.decoder;
    tables.decoder_strips = spec.decoder_strips;
    for (std::size_t id = 0; id < size; ++id) {
      const std::string& text = spec.tokens[id];
      if (is_added[id] || text.empty()) continue;
      const detail::Utf8Step step = detail::utf8_step(text, 0);
      if (step.valid && step.length == text.size()) {
        const detail::DecodedText decoded = detail::decode_utf8(text, spec.source);
        tables.char_token.emplace(decoded.code_points[0], static_cast<TokenId>(id));
      }
    }
    for (int b = 0; b < 256; ++b) {
      const auto it = tables.by_text.find(fmt::format("<0x{:02X}>", b));
      tables.fallback_token[static_cast<std::size_t>(b)] =
          it != tables.by_text.end() && !is_added[static_cast<std::size_t>(it->second)]
              ? it->second
              : -1;
    }
    // Hugging Face hands the decoder an added token's pattern (so "▁<pad>" for a normalized
    // "<pad>" under the legacy normalizer), and skip_special_tokens skips a token only when that
    // text is the content of a special token.
    tables.decoder_text = spec.tokens;
    std::unordered_set<std::string> special_content;
    for (std::size_t i = 0; i < spec.added.size(); ++i) {
      tables.decoder_text[static_cast<std::size_t>(spec.added[i].id)] = tables.added_pattern[i];
      if (spec.added[i].special) special_content.insert(spec.added[i].content);
    }
    tables.skipped.assign(size, false);
    tables.fallback_byte.assign(size, -1);
    t.token_bytes_.resize(size);
    for (std::size_t id = 0; id < size; ++id) {
      const std::string& text = tables.decoder_text[id];
      tables.skipped[id] = special_content.count(text) > 0;
      std::string piece = replace_metaspace(text, " ");
      const int byte =
          spec.decoder != SentencePieceDecoder::metaspace ? fallback_byte_of(piece) : -1;
      tables.fallback_byte[id] = byte;
      t.token_bytes_[id] = byte >= 0 ? std::string(1, static_cast<char>(byte)) : std::move(piece);
    }
  }
};
}  // namespace detail

namespace {
Tokenizer build_tokenizer(TokenizerSpec spec) {
  return detail::TokenizerBuilder::build(std::move(spec));
}
}  // namespace

// ---------------------------------------------------------------------------------------------
// tokenizer.json

namespace {

class JsonReader {
 public:
  explicit JsonReader(std::string source) : source_(std::move(source)) {}
  [[noreturn]] void fail(const std::string& what) const { ::kc::engine::fail(source_, what); }

  const json& member(const json& object, const char* key, const char* where) const {
    if (!object.is_object()) fail(fmt::format("{} is {}, not an object", where, detail::json_kind(object)));
    const auto it = object.find(key);
    if (it == object.end()) fail(fmt::format("{} has no \"{}\"", where, key));
    return *it;
  }
  std::string string(const json& value, const std::string& where) const {
    if (!value.is_string()) fail(fmt::format("{} is {}, not a string", where, detail::json_kind(value)));
    return value.get<std::string>();
  }
  // A boolean member that may be absent or null (then `fallback`).
  bool flag(const json& object, const char* key, bool fallback, const char* where) const {
    const auto it = object.find(key);
    if (it == object.end() || it->is_null()) return fallback;
    if (!it->is_boolean())
      fail(fmt::format("{}.{} is {}, not true or false", where, key, detail::json_kind(*it)));
    return it->get<bool>();
  }
  TokenId id(const json& value, const std::string& where) const {
    if (!value.is_number_integer() || value.get<std::int64_t>() < 0 ||
        value.get<std::int64_t>() > std::numeric_limits<TokenId>::max())
      fail(fmt::format("{} is {}, not a token id", where, value.dump()));
    return static_cast<TokenId>(value.get<std::int64_t>());
  }
  std::string type_of(const json& object, const char* where) const {
    if (object.is_null()) return "null";
    return string(member(object, "type", where), fmt::format("{}.type", where));
  }

 private:
  std::string source_;
};

PreTokenizerKind read_pre_tokenizer(const JsonReader& r, const json& pre) {
  const std::string type = r.type_of(pre, "pre_tokenizer");
  const auto byte_level = [&](const json& step, bool use_regex) {
    return r.type_of(step, "pre_tokenizer") == "ByteLevel" &&
           r.flag(step, "use_regex", true, "pre_tokenizer") == use_regex &&
           !r.flag(step, "add_prefix_space", false, "pre_tokenizer");
  };
  if (type == "ByteLevel" && byte_level(pre, true)) return PreTokenizerKind::gpt2;
  if (type == "Sequence") {
    const json& steps = r.member(pre, "pretokenizers", "pre_tokenizer");
    if (steps.is_array() && steps.size() == 2) {
      const json& first = steps[0];
      const std::string first_type = r.type_of(first, "pre_tokenizer.pretokenizers[0]");
      if (first_type == "Digits" && r.flag(first, "individual_digits", false, "Digits") &&
          byte_level(steps[1], true))
        return PreTokenizerKind::smollm;
      if (first_type == "Split" && byte_level(steps[1], false)) {
        const json& pattern = r.member(first, "pattern", "Split");
        const auto regex = pattern.find("Regex");
        const bool isolated = first.value("behavior", std::string()) == "Isolated";
        if (regex != pattern.end() && regex->is_string() && *regex == kLlama3Regex && isolated &&
            !r.flag(first, "invert", false, "Split"))
          return PreTokenizerKind::llama3;
        r.fail(fmt::format("pre_tokenizer Split {} is not the Llama 3 split (that regex, "
                           "behavior Isolated, not inverted), the only Split the engine knows",
                           first.dump()));
      }
    }
  }
  r.fail(fmt::format("pre_tokenizer {} is not one the engine knows: ByteLevel (GPT-2), "
                     "Sequence[Digits(individual_digits), ByteLevel] (SmolLM2) or "
                     "Sequence[Split(Llama 3 regex), ByteLevel(use_regex=false)] (Llama 3), "
                     "each without add_prefix_space",
                     pre.dump().substr(0, 300)));
}

// The post-processor's single-sequence template: which special tokens go before and after.
void read_post_processor(const JsonReader& r, const json& post, TokenizerSpec& spec) {
  const std::string type = r.type_of(post, "post_processor");
  if (type == "null" || type == "ByteLevel") return;  // ByteLevel only adjusts offsets
  if (type == "Sequence") {
    for (const json& step : r.member(post, "processors", "post_processor"))
      read_post_processor(r, step, spec);
    return;
  }
  if (type != "TemplateProcessing")
    r.fail(fmt::format("post_processor {} is not supported (ByteLevel, TemplateProcessing or a "
                       "Sequence of them are)", type));
  const json& single = r.member(post, "single", "post_processor");
  const json& special_tokens = r.member(post, "special_tokens", "post_processor");
  bool seen_sequence = false;
  for (const json& item : single) {
    if (item.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    const std::string name =
        r.string(r.member(r.member(item, "SpecialToken", "a template item"), "id", "SpecialToken"),
                 "SpecialToken.id");
    const json& ids = r.member(r.member(special_tokens, name.c_str(), "special_tokens"), "ids",
                               "a special token");
    if (!ids.is_array() || ids.size() != 1)
      r.fail(fmt::format("post_processor special token \"{}\" is not one id", name));
    const TokenId id = r.id(ids[0], "a special token id");
    std::optional<TokenId>& slot = seen_sequence ? spec.eos : spec.bos;
    bool& add = seen_sequence ? spec.add_eos : spec.add_bos;
    if (add)
      r.fail("post_processor adds more than one token on one side of the text; the engine "
             "supports one BOS before and one EOS after");
    slot = id;
    add = true;
  }
}

// A string member of a JSON object, or "" when the object, the member or the string is not there.
std::string text_of(const json& object, const char* key) {
  if (!object.is_object()) return {};
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// {"type": "Replace", "pattern": {"String": from}, "content": to}
bool is_replace(const json& step, std::string_view from, std::string_view to) {
  return text_of(step, "type") == "Replace" && step.contains("pattern") &&
         text_of(step["pattern"], "String") == from && text_of(step, "content") == to;
}

// A Metaspace pre-tokenizer or decoder: its prepend_scheme ("always" when missing, as in files
// older than the scheme, whose add_prefix_space false means "never"), or "" when `value` is not
// a Metaspace with replacement "▁".
std::string metaspace_scheme(const json& value) {
  if (text_of(value, "type") != "Metaspace" || text_of(value, "replacement") != kMetaspace)
    return {};
  if (value.contains("prepend_scheme")) return text_of(value, "prepend_scheme");
  const auto add_prefix_space = value.find("add_prefix_space");
  if (add_prefix_space != value.end() && add_prefix_space->is_boolean() &&
      !add_prefix_space->get<bool>())
    return "never";
  return "always";
}

// Llama 2's SentencePiece-style BPE (model.byte_fallback), in one of the two forms of its
// tokenizer.json: transformers' "legacy" one, normalizer Sequence[Prepend("▁"), Replace(" ",
// "▁")] and no pre-tokenizer; or its legacy=False one, no normalizer and the pre-tokenizer
// Metaspace("▁", prepend_scheme "first" or "always", split false). The decoder is Llama 2's
// Sequence[Replace("▁", " "), ByteFallback, Fuse, Strip(" ", 1, 0)] or a Metaspace.
void read_sentencepiece(const JsonReader& r, const json& root, TokenizerSpec& spec) {
  spec.kind = TokenizerKind::sentencepiece;
  spec.pre_tokenizer = PreTokenizerKind::none;
  const auto dump = [](const json& value) { return value.dump().substr(0, 300); };
  const char* kForms =
      "Llama 2's SentencePiece-style BPE (model.byte_fallback) comes in two forms the engine "
      "reads: normalizer Sequence[Prepend(\"▁\"), Replace(\" \", \"▁\")] with no pre-tokenizer, "
      "or no normalizer with pre-tokenizer Metaspace(\"▁\", prepend_scheme \"first\" or "
      "\"always\", split false)";
  if (r.flag(r.member(root, "model", "the file"), "ignore_merges", false, "model"))
    r.fail("model.ignore_merges is true in a SentencePiece-style BPE (model.byte_fallback); "
           "Llama 2's has it false, the only setting the engine reads");
  const json null_value;
  const json& normalizer = root.contains("normalizer") ? root["normalizer"] : null_value;
  const json& pre = r.member(root, "pre_tokenizer", "the file");
  if (!normalizer.is_null()) {
    const json* steps = normalizer.is_object() && normalizer.contains("normalizers")
                            ? &normalizer["normalizers"]
                            : nullptr;
    const bool legacy = text_of(normalizer, "type") == "Sequence" && steps != nullptr &&
                        steps->is_array() && steps->size() == 2 &&
                        text_of((*steps)[0], "type") == "Prepend" &&
                        text_of((*steps)[0], "prepend") == kMetaspace &&
                        is_replace((*steps)[1], " ", kMetaspace);
    if (!legacy)
      r.fail(fmt::format("normalizer {} is not Llama 2's; {}", dump(normalizer), kForms));
    if (!pre.is_null())
      r.fail(fmt::format("pre_tokenizer {} comes with Llama 2's legacy normalizer, which has "
                         "none; {}",
                         dump(pre), kForms));
    spec.space_prefix = SpacePrefix::every_segment;
  } else {
    const std::string scheme = metaspace_scheme(pre);
    const auto split = pre.is_object() ? pre.find("split") : pre.end();
    const bool split_false = pre.is_object() && split != pre.end() && split->is_boolean() &&
                             !split->get<bool>();
    if (scheme.empty() || !split_false || (scheme != "first" && scheme != "always"))
      r.fail(fmt::format("pre_tokenizer {} is not one the engine reads (Metaspace splits at "
                         "every \"▁\" unless split is false, and prepend_scheme \"never\" is not "
                         "Llama 2's); {}",
                         dump(pre), kForms));
    spec.space_prefix = scheme == "first" ? SpacePrefix::first : SpacePrefix::always;
  }

  const json& decoder = r.member(root, "decoder", "the file");
  const json* steps = decoder.is_object() && decoder.contains("decoders") ? &decoder["decoders"]
                                                                          : nullptr;
  const auto is_strip = [](const json& step) {
    const auto number = [&](const char* key) {
      return step.contains(key) && step[key].is_number_integer() ? step[key].get<std::int64_t>()
                                                                 : -1;
    };
    return text_of(step, "type") == "Strip" && text_of(step, "content") == " " &&
           number("start") == 1 && number("stop") == 0;
  };
  const std::string decoder_scheme = metaspace_scheme(decoder);
  if (text_of(decoder, "type") == "Sequence" && steps != nullptr && steps->is_array() &&
      steps->size() == 4 && is_replace((*steps)[0], kMetaspace, " ") &&
      text_of((*steps)[1], "type") == "ByteFallback" && text_of((*steps)[2], "type") == "Fuse" &&
      is_strip((*steps)[3])) {
    spec.decoder = detail::SentencePieceDecoder::byte_fallback;
    spec.decoder_strips = 1;
  } else if (decoder_scheme == "first" || decoder_scheme == "always") {
    spec.decoder = detail::SentencePieceDecoder::metaspace;
  } else {
    r.fail(fmt::format("decoder {} is not one the engine reads for a SentencePiece-style BPE: "
                       "Llama 2's Sequence[Replace(\"▁\", \" \"), ByteFallback, Fuse, Strip(\" \", "
                       "1, 0)], or Metaspace(\"▁\", prepend_scheme \"first\" or \"always\")",
                       dump(decoder)));
  }
}

}  // namespace

Tokenizer Tokenizer::from_tokenizer_json(const std::string& path) {
  const MappedFile file(path);
  return parse_tokenizer_json(
      std::string_view(reinterpret_cast<const char*>(file.data()), file.size()), path);
}

Tokenizer Tokenizer::parse_tokenizer_json(std::string_view json_text, const std::string& path) {
  const json root = detail::parse_strict_json(json_text, path, 0);
  const JsonReader r(path);
  TokenizerSpec spec;
  spec.source = path;

  const json& model = r.member(root, "model", "the file");
  const std::string model_type = model.contains("type") ? r.string(model["type"], "model.type")
                                                        : std::string("BPE");
  if (model_type != "BPE")
    r.fail(fmt::format("model.type is \"{}\"; the engine's tokenizer is byte-level BPE "
                       "(model.type \"BPE\")", model_type));
  // byte_fallback marks Llama 2's SentencePiece-style BPE; without it, byte-level BPE.
  const bool sentencepiece = r.flag(model, "byte_fallback", false, "model");
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(affix) && !model[affix].is_null() && model[affix] != "")
      r.fail(fmt::format("model.{} is set; the BPE models the engine reads have none", affix));
  if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"] != 0)
    r.fail("model.dropout is set; BPE dropout is for training, not inference");
  spec.ignore_merges = r.flag(model, "ignore_merges", false, "model");
  const bool has_unknown = model.contains("unk_token") && !model["unk_token"].is_null();
  if (sentencepiece) {
    read_sentencepiece(r, root, spec);
    spec.fuse_unknown = r.flag(model, "fuse_unk", false, "model");
  } else {
    if (has_unknown && r.flag(model, "fuse_unk", false, "model"))
      r.fail("model.fuse_unk is true; the engine gives each byte without a token its own unknown "
             "token and does not fuse them");
    if (root.contains("normalizer") && !root["normalizer"].is_null())
      r.fail(fmt::format("normalizer {} is not supported; byte-level BPE models have none (a "
                         "SentencePiece-style BPE such as Llama 2's says model.byte_fallback)",
                         r.type_of(root["normalizer"], "normalizer")));
    spec.pre_tokenizer = read_pre_tokenizer(r, r.member(root, "pre_tokenizer", "the file"));
    if (r.type_of(r.member(root, "decoder", "the file"), "decoder") != "ByteLevel")
      r.fail(fmt::format("decoder {} is not ByteLevel, the decoder of byte-level BPE",
                         root["decoder"].dump().substr(0, 200)));
  }
  if (root.contains("post_processor")) read_post_processor(r, root["post_processor"], spec);

  // The vocabulary and the added tokens together number the ids 0 .. n-1.
  const json& vocab = r.member(model, "vocab", "model");
  if (!vocab.is_object()) r.fail("model.vocab is not an object of token: id");
  // By id, in a map: the ids are checked to run from 0 without gaps only once all are read, and
  // a table sized by the largest id would let one id such as 2147483647 reserve gigabytes.
  std::map<TokenId, std::string> tokens;
  const auto place = [&](TokenId id, const std::string& text, bool added) {
    const auto [slot, inserted] = tokens.emplace(id, text);
    if (!inserted && slot->second != text)
      r.fail(fmt::format("id {} is both \"{}\" and \"{}\"{}", id, slot->second, text,
                         added ? " (an added token)" : ""));
  };
  for (const auto& [text, id] : vocab.items()) place(r.id(id, "a vocabulary id"), text, false);
  if (root.contains("added_tokens") && !root["added_tokens"].is_null()) {
    for (const json& entry : root["added_tokens"]) {
      AddedToken added;
      added.id = r.id(r.member(entry, "id", "an added token"), "added token id");
      added.content = r.string(r.member(entry, "content", "an added token"), "added token content");
      added.special = r.flag(entry, "special", false, "added token");
      added.normalized = r.flag(entry, "normalized", false, "added token");
      for (const char* option : {"single_word", "lstrip", "rstrip"})
        if (r.flag(entry, option, false, "added token"))
          r.fail(fmt::format("added token \"{}\" has {} set, which the engine does not support",
                             added.content, option));
      place(added.id, added.content, true);
      spec.added.push_back(std::move(added));
    }
  }
  spec.tokens.reserve(tokens.size());
  for (auto& [id, text] : tokens) {
    const auto next = static_cast<TokenId>(spec.tokens.size());
    if (id != next)
      r.fail(fmt::format("no token has id {} (ids must run from 0 without gaps)", next));
    spec.tokens.push_back(std::move(text));
  }
  if (has_unknown) {
    const std::string unknown = r.string(model["unk_token"], "model.unk_token");
    const auto it = std::find(spec.tokens.begin(), spec.tokens.end(), unknown);
    if (it == spec.tokens.end())
      r.fail(fmt::format("model.unk_token \"{}\" is not in the vocabulary", unknown));
    spec.unknown = static_cast<TokenId>(it - spec.tokens.begin());
  }

  // merges: "left right" strings (older files) or [left, right] pairs (newer ones).
  const json& merges = r.member(model, "merges", "model");
  if (!merges.is_array()) r.fail("model.merges is not an array");
  spec.merges.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const json& merge = merges[i];
    if (merge.is_string()) {
      const std::string text = merge.get<std::string>();
      const std::size_t space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos)
        r.fail(fmt::format("merge {} \"{}\" is not two tokens separated by one space", i, text));
      spec.merges.emplace_back(text.substr(0, space), text.substr(space + 1));
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      spec.merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    } else {
      r.fail(fmt::format("merge {} is {}, not \"a b\" or [\"a\", \"b\"]", i, merge.dump()));
    }
  }
  return build_tokenizer(std::move(spec));
}

// ---------------------------------------------------------------------------------------------
// GGUF metadata

namespace {

// GGUF tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum GgufTokenType : std::int64_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4 };

class GgufTokenizerKeys {
 public:
  explicit GgufTokenizerKeys(const GgufFile& file) : file_(file) {}
  [[noreturn]] void fail(const std::string& what) const { ::kc::engine::fail(file_.path(), what); }

  // Runs `read` on the value of `key`, turning a value of the wrong type into an error naming it.
  template <typename Read>
  auto read(const char* key, Read read_value) const {
    const GgufValue* value = file_.find(key);
    if (value == nullptr) fail(fmt::format("metadata '{}' is missing", key));
    try {
      return read_value(*value);
    } catch (const Error& e) {
      fail(fmt::format("metadata '{}': {}", key, e.what()));
    }
  }
  std::vector<std::string> strings(const char* key) const {
    return read(key, [](const GgufValue& value) {
      const GgufArray& array = value.as_array();
      std::vector<std::string> out;
      out.reserve(array.size());
      for (std::size_t i = 0; i < array.size(); ++i)
        out.emplace_back(array.at(i).as_string());
      return out;
    });
  }
  std::optional<TokenId> optional_id(const char* key) const {
    if (file_.find(key) == nullptr) return std::nullopt;
    return read(key, [&](const GgufValue& value) {
      const std::uint64_t id = value.as_uint64();
      if (id > static_cast<std::uint64_t>(std::numeric_limits<TokenId>::max()))
        fail(fmt::format("metadata '{}' = {} is not a token id", key, id));
      return static_cast<TokenId>(id);
    });
  }
  std::optional<bool> optional_bool(const char* key) const {
    if (file_.find(key) == nullptr) return std::nullopt;
    return read(key, [](const GgufValue& value) { return value.as_bool(); });
  }
  std::string string(const char* key) const {
    return read(key, [](const GgufValue& value) { return std::string(value.as_string()); });
  }

 private:
  const GgufFile& file_;
};

}  // namespace

// The merges transformers builds for a GGUF "llama" tokenizer, which has scores instead of merges
// (integrations/ggml.py, GGUFTokenizerSkeleton): every way of cutting a token into two tokens
// (at a character boundary) is a merge; a token's cuts in the order of their halves' scores,
// best first (the left half's, then the right's; equal ones by where the cut is); then all
// merges, stably, in the order of the score of the token they make, best first.
std::vector<std::pair<std::string, std::string>> detail::merges_from_scores(
    const std::vector<std::string>& tokens, const std::vector<double>& scores,
    const std::string& source) {
  std::unordered_map<std::string_view, std::size_t> id_of;
  for (std::size_t id = 0; id < tokens.size(); ++id) id_of.emplace(tokens[id], id);
  struct Cut {
    std::size_t token, left, right;
  };
  std::vector<Cut> all;
  std::vector<Cut> cuts;
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    const std::string_view token = tokens[id];
    const detail::DecodedText decoded = detail::decode_utf8(
        token, fmt::format("{}: tokenizer.ggml.tokens[{}]", source, id));
    cuts.clear();
    for (std::size_t k = 1; k < decoded.code_points.size(); ++k) {
      const std::size_t at = decoded.offsets[k];
      const auto left = id_of.find(token.substr(0, at));
      const auto right = id_of.find(token.substr(at));
      if (left != id_of.end() && right != id_of.end())
        cuts.push_back({id, left->second, right->second});
    }
    std::stable_sort(cuts.begin(), cuts.end(), [&](const Cut& a, const Cut& b) {
      return std::make_pair(scores[a.left], scores[a.right]) >
             std::make_pair(scores[b.left], scores[b.right]);
    });
    all.insert(all.end(), cuts.begin(), cuts.end());
  }
  std::stable_sort(all.begin(), all.end(), [&](const Cut& a, const Cut& b) {
    return scores[a.token] > scores[b.token];
  });
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(all.size());
  for (const Cut& cut : all) merges.emplace_back(tokens[cut.left], tokens[cut.right]);
  return merges;
}

namespace {

// A GGUF "llama" tokenizer (Llama 2, TinyLlama, Mistral 7B v0.1: tokens, scores, token types, no
// merges) as transformers converts it (GGUFLlamaConverter): SentencePiece-style BPE with
// byte_fallback and fuse_unk, merges from the scores, Llama 2's legacy normalizer (a "▁" before
// every text between added tokens, spaces as "▁"), the decoder Sequence[ByteFallback, Fuse,
// Replace("▁", " "), Strip(" ", 1, 0)]; the control tokens (type 3), the unknown token and the
// BOS token are special added tokens. transformers adds no BOS or EOS (it does not read
// add_bos_token / add_eos_token); the engine reads them when the file has them.
// tokenizer.ggml.merges: "a b" strings, each two tokens and one space.
std::vector<std::pair<std::string, std::string>> gguf_merges(const GgufTokenizerKeys& keys) {
  std::vector<std::pair<std::string, std::string>> merges;
  for (std::string& merge : keys.strings("tokenizer.ggml.merges")) {
    const std::size_t space = merge.find(' ');
    if (space == std::string::npos || merge.find(' ', space + 1) != std::string::npos)
      keys.fail(fmt::format("tokenizer.ggml.merges has \"{}\", not two tokens separated by one "
                            "space",
                            merge));
    merges.emplace_back(merge.substr(0, space), merge.substr(space + 1));
  }
  return merges;
}

// tokenizer.ggml.token_type, one per token (`count` of them).
std::vector<std::int64_t> gguf_token_types(const GgufTokenizerKeys& keys, std::size_t count) {
  const std::vector<std::int64_t> types = keys.read("tokenizer.ggml.token_type", [](const GgufValue& value) {
    const GgufArray& array = value.as_array();
    std::vector<std::int64_t> out;
    out.reserve(array.size());
    for (std::size_t i = 0; i < array.size(); ++i) out.push_back(array.at(i).as_int64());
    return out;
  });
  if (types.size() != count)
    keys.fail(fmt::format("metadata 'tokenizer.ggml.token_type' has {} entries for {} tokens", types.size(),
                          count));
  return types;
}

void read_gguf_sentencepiece(const GgufFile& file, const GgufTokenizerKeys& keys,
                             TokenizerSpec& spec) {
  spec.kind = TokenizerKind::sentencepiece;
  spec.pre_tokenizer = PreTokenizerKind::none;
  spec.space_prefix = SpacePrefix::every_segment;
  spec.decoder = detail::SentencePieceDecoder::byte_fallback_then_replace;
  spec.decoder_strips = 1;
  spec.fuse_unknown = true;
  spec.tokens = keys.strings("tokenizer.ggml.tokens");
  const std::size_t count = spec.tokens.size();
  if (count == 0) keys.fail("metadata 'tokenizer.ggml.tokens' is empty");
  std::unordered_map<std::string_view, std::size_t> seen;
  for (std::size_t id = 0; id < count; ++id) {
    const auto [it, inserted] = seen.emplace(spec.tokens[id], id);
    if (!inserted)
      keys.fail(fmt::format("metadata 'tokenizer.ggml.tokens' has \"{}\" twice (ids {} and {}); a "
                            "SentencePiece vocabulary has each token once",
                            spec.tokens[id], it->second, id));
  }
  for (int b = 0; b < 256; ++b) {
    const std::string byte = fmt::format("<0x{:02X}>", b);
    if (seen.count(byte) == 0)
      keys.fail(fmt::format("metadata 'tokenizer.ggml.tokens' has no byte token {}; a "
                            "SentencePiece vocabulary (\"llama\") has all 256, <0x00> to <0xFF>, "
                            "for the characters it has no token for",
                            byte));
  }
  const auto in_vocabulary = [&](const char* key, std::optional<TokenId> id) {
    if (id && static_cast<std::size_t>(*id) >= count)
      keys.fail(fmt::format("metadata '{}' = {} is outside the vocabulary of {} tokens", key, *id,
                            count));
    return id;
  };
  spec.bos = in_vocabulary("tokenizer.ggml.bos_token_id",
                           keys.optional_id("tokenizer.ggml.bos_token_id"));
  spec.eos = in_vocabulary("tokenizer.ggml.eos_token_id",
                           keys.optional_id("tokenizer.ggml.eos_token_id"));
  spec.padding = in_vocabulary("tokenizer.ggml.padding_token_id",
                               keys.optional_id("tokenizer.ggml.padding_token_id"));
  spec.unknown = in_vocabulary("tokenizer.ggml.unknown_token_id",
                               keys.optional_id("tokenizer.ggml.unknown_token_id"));
  if (!keys.optional_bool("tokenizer.ggml.add_space_prefix").value_or(true))
    keys.fail("metadata 'tokenizer.ggml.add_space_prefix' is false; the engine reads SentencePiece "
              "tokenizers that put \"▁\" before the text (true, Llama 2's), only");
  spec.add_bos = keys.optional_bool("tokenizer.ggml.add_bos_token").value_or(false);
  spec.add_eos = keys.optional_bool("tokenizer.ggml.add_eos_token").value_or(false);

  if (file.find("tokenizer.ggml.merges") != nullptr) {
    // transformers uses merges when a file has them, and the scores only when it does not.
    spec.merges = gguf_merges(keys);
  } else {
    const std::vector<double> scores =
        keys.read("tokenizer.ggml.scores", [](const GgufValue& value) {
          const GgufArray& array = value.as_array();
          std::vector<double> out;
          out.reserve(array.size());
          for (std::size_t i = 0; i < array.size(); ++i) out.push_back(array.at(i).as_double());
          return out;
        });
    if (scores.size() != count)
      keys.fail(fmt::format("metadata 'tokenizer.ggml.scores' has {} scores for {} tokens",
                            scores.size(), count));
    for (std::size_t id = 0; id < count; ++id)
      if (!std::isfinite(scores[id]))
        keys.fail(fmt::format("metadata 'tokenizer.ggml.scores' has {} for token {} (\"{}\"); a "
                              "score is a finite number",
                              scores[id], id, spec.tokens[id]));
    spec.merges = detail::merges_from_scores(spec.tokens, scores, file.path());
    if (spec.merges.empty())
      keys.fail("no token of 'tokenizer.ggml.tokens' is two others joined, so there are no "
                "merges to make from 'tokenizer.ggml.scores'");
  }

  // Special added tokens: the control tokens, then the unknown and BOS tokens, which transformers
  // adds as special whatever their type. (It names the BOS token's text as the EOS token too, so
  // the EOS token is added only when it is a control token.)
  std::vector<bool> special(count, false);
  if (file.find("tokenizer.ggml.token_type") != nullptr) {
    const std::vector<std::int64_t> types = gguf_token_types(keys, count);
    for (std::size_t id = 0; id < count; ++id) special[id] = types[id] == kControl;
  }
  for (const auto& id : {spec.unknown, spec.bos})
    if (id) special[static_cast<std::size_t>(*id)] = true;
  for (std::size_t id = 0; id < count; ++id)
    if (special[id]) spec.added.push_back({static_cast<TokenId>(id), spec.tokens[id], true, false});
  if (file.find("tokenizer.chat_template") != nullptr)
    spec.chat_template = keys.string("tokenizer.chat_template");
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const GgufFile& file) {
  const GgufTokenizerKeys keys(file);
  TokenizerSpec spec;
  spec.source = file.path();

  const std::string model = keys.string("tokenizer.ggml.model");
  if (model == "llama") {
    read_gguf_sentencepiece(file, keys, spec);
    return build_tokenizer(std::move(spec));
  }
  if (model != "gpt2")
    keys.fail(fmt::format("tokenizer.ggml.model is \"{}\"; the engine reads \"gpt2\" (byte-level "
                          "BPE: GPT-2, SmolLM2, Llama 3) and \"llama\" (SentencePiece-style BPE: "
                          "Llama 2, TinyLlama, Mistral 7B v0.1)",
                          model));
  const std::string pre = file.find("tokenizer.ggml.pre") != nullptr
                              ? keys.string("tokenizer.ggml.pre")
                              : std::string("(missing)");
  if (pre == "smollm") {
    spec.pre_tokenizer = PreTokenizerKind::smollm;
  } else if (pre == "llama-bpe" || pre == "llama3") {
    spec.pre_tokenizer = PreTokenizerKind::llama3;
    spec.ignore_merges = true;  // as Hugging Face's Llama 3 tokenizer.json and llama.cpp do
  } else if (pre == "gpt-2") {
    spec.pre_tokenizer = PreTokenizerKind::gpt2;
  } else {
    keys.fail(fmt::format("tokenizer.ggml.pre is {}; the engine knows \"gpt-2\", \"smollm\" and "
                          "\"llama-bpe\"",
                          pre == "(missing)" ? pre : "\"" + pre + "\""));
  }

  spec.tokens = keys.strings("tokenizer.ggml.tokens");
  spec.merges = gguf_merges(keys);
  if (file.find("tokenizer.ggml.token_type") != nullptr) {
    const std::vector<std::int64_t> types = gguf_token_types(keys, spec.tokens.size());
    // Control tokens are the special ones; user-defined tokens are added but not special.
    for (std::size_t id = 0; id < types.size(); ++id)
      if (types[id] == kControl || types[id] == kUserDefined)
        spec.added.push_back(
            {static_cast<TokenId>(id), spec.tokens[id], types[id] == kControl, false});
  }
  spec.bos = keys.optional_id("tokenizer.ggml.bos_token_id");
  spec.eos = keys.optional_id("tokenizer.ggml.eos_token_id");
  spec.padding = keys.optional_id("tokenizer.ggml.padding_token_id");
  spec.add_bos = keys.optional_bool("tokenizer.ggml.add_bos_token")
                     .value_or(spec.pre_tokenizer == PreTokenizerKind::llama3);
  spec.add_eos = keys.optional_bool("tokenizer.ggml.add_eos_token").value_or(false);
  if (file.find("tokenizer.chat_template") != nullptr)
    spec.chat_template = keys.string("tokenizer.chat_template");
  return build_tokenizer(std::move(spec));
}

// ---------------------------------------------------------------------------------------------
// Encoding and decoding

bool Tokenizer::cached(const std::string& piece, std::vector<TokenId>& out) const {
  if (piece.size() > Tables::kCachedPieceBytes) return false;
  Tables& tables = *tables_;
  const std::lock_guard<std::mutex> lock(tables.cache_mutex);
  const auto it = tables.cache.find(piece);
  if (it == tables.cache.end()) return false;
  out.insert(out.end(), it->second.begin(), it->second.end());
  return true;
}

void Tokenizer::cache(const std::string& piece, const std::vector<TokenId>& ids) const {
  if (piece.size() > Tables::kCachedPieceBytes) return;
  Tables& tables = *tables_;
  const std::lock_guard<std::mutex> lock(tables.cache_mutex);
  if (tables.cache.size() >= Tables::kCacheLimit) tables.cache.clear();
  tables.cache.emplace(piece, ids);
}

// BPE on a piece's starting tokens: merges the adjacent pair with the best rank (the leftmost of
// equals) until no pair has a merge. Each merge is O(log n): the candidate pairs wait in a
// priority queue, and a candidate whose tokens have changed since it was queued is skipped when
// it comes up (lazy invalidation, as Hugging Face's Word::merge_all and llama.cpp do).
std::vector<TokenId> Tokenizer::merge(std::vector<TokenId> ids) const {
  const Tables& tables = *tables_;
  // The piece as a linked list of tokens.
  struct Symbol {
    TokenId id;
    int prev;
    int next;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(ids.size());
  for (TokenId id : ids) {
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({id, index - 1, index + 1});
  }
  const int count = static_cast<int>(symbols.size());
  if (count > 0) symbols.back().next = -1;

  // Candidate merges, best rank first and, among equal ranks, leftmost first. A candidate is
  // stale once either of its tokens has been merged into something else; it is then skipped.
  struct Candidate {
    int rank;
    int left;
    TokenId left_id;
    TokenId right_id;
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : left > other.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  const auto consider = [&](int left) {
    const int right = symbols[static_cast<std::size_t>(left)].next;
    if (right < 0) return;
    const TokenId a = symbols[static_cast<std::size_t>(left)].id;
    const TokenId b = symbols[static_cast<std::size_t>(right)].id;
    const auto it = tables.merges.find(pair_key(a, b));
    if (it != tables.merges.end()) queue.push({it->second.rank, left, a, b});
  };
  for (int i = 0; i + 1 < count; ++i) consider(i);

  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[static_cast<std::size_t>(top.left)];
    if (left.id != top.left_id || left.next < 0) continue;
    Symbol& right = symbols[static_cast<std::size_t>(left.next)];
    if (right.id != top.right_id) continue;
    left.id = tables.merges.at(pair_key(top.left_id, top.right_id)).result;
    right.id = -1;
    left.next = right.next;
    if (left.next >= 0) symbols[static_cast<std::size_t>(left.next)].prev = top.left;
    if (left.prev >= 0) consider(left.prev);
    consider(top.left);
  }

  std::vector<TokenId> result;
  for (int i = count > 0 ? 0 : -1; i >= 0; i = symbols[static_cast<std::size_t>(i)].next)
    result.push_back(symbols[static_cast<std::size_t>(i)].id);
  return result;
}

void Tokenizer::encode_piece(std::string_view bytes, std::vector<TokenId>& out) const {
  const Tables& tables = *tables_;
  if (ignore_merges_) {
    const auto it = tables.by_bytes.find(std::string(bytes));
    if (it != tables.by_bytes.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const std::string key(bytes);
  if (cached(key, out)) return;
  // One token per byte to begin with.
  std::vector<TokenId> symbols;
  symbols.reserve(bytes.size());
  for (char byte : bytes) {
    const TokenId id = tables.byte_token[static_cast<unsigned char>(byte)];
    if (id >= 0) symbols.push_back(id);  // else a byte without a token (and no unknown token)
  }
  const std::vector<TokenId> result = merge(std::move(symbols));
  out.insert(out.end(), result.begin(), result.end());
  cache(key, result);
}

void Tokenizer::encode_ordinary(std::string_view text, std::vector<TokenId>& out) const {
  if (text.empty()) return;
  const detail::DecodedText decoded = detail::decode_utf8(text, source_);
  for (const detail::Piece& piece : detail::pre_tokenize(pre_tokenizer_, decoded.code_points)) {
    const std::size_t begin = decoded.offsets[piece.begin];
    encode_piece(text.substr(begin, decoded.offsets[piece.end] - begin), out);
  }
}

// A SentencePiece-style piece (spaces already "▁"): one token per character where the vocabulary
// has one, else the character's UTF-8 bytes as <0xXX> tokens, else the unknown token (runs of
// unknown characters fused into one when fuse_unk says so); then BPE. This is Hugging Face's
// BPE::merge_word, including one quirk: an unknown token still waiting to be fused is placed
// after the byte tokens of a character that follows it (only possible when some <0xXX> tokens
// are missing from the vocabulary).
void Tokenizer::encode_sentencepiece_piece(std::string_view piece,
                                           std::vector<TokenId>& out) const {
  const Tables& tables = *tables_;
  const std::string key(piece);
  if (cached(key, out)) return;
  std::vector<TokenId> symbols;
  symbols.reserve(piece.size());
  bool unknown_waiting = false;
  const auto flush_unknown = [&] {
    if (unknown_waiting) symbols.push_back(*tables.unknown);
    unknown_waiting = false;
  };
  const detail::DecodedText decoded = detail::decode_utf8(piece, source_);
  for (std::size_t i = 0; i < decoded.code_points.size(); ++i) {
    const auto known = tables.char_token.find(decoded.code_points[i]);
    if (known != tables.char_token.end()) {
      flush_unknown();
      symbols.push_back(known->second);
      continue;
    }
    const std::string_view bytes =
        piece.substr(decoded.offsets[i], decoded.offsets[i + 1] - decoded.offsets[i]);
    const bool all_bytes = std::all_of(bytes.begin(), bytes.end(), [&](char b) {
      return tables.fallback_token[static_cast<unsigned char>(b)] >= 0;
    });
    if (all_bytes) {
      for (char b : bytes) symbols.push_back(tables.fallback_token[static_cast<unsigned char>(b)]);
      continue;
    }
    if (!tables.unknown) continue;  // no token at all: dropped, as Hugging Face does
    if (unknown_waiting && !tables.fuse_unknown) flush_unknown();
    unknown_waiting = true;
  }
  flush_unknown();
  const std::vector<TokenId> result = merge(std::move(symbols));
  out.insert(out.end(), result.begin(), result.end());
  cache(key, result);
}

namespace {
// Walks `text` left to right, finding at each position the added token whose pattern starts there
// (of those `by_first_byte` lists, longest first): calls piece(begin, end) for the text before each
// one and token(added) for it, then piece for the rest of the text (pieces may be empty).
template <typename Piece, typename Token>
void split_at_added_tokens(std::string_view text, const std::array<std::vector<std::size_t>, 256>& by_first_byte,
                           const std::vector<std::string>& patterns, const std::vector<AddedToken>& added,
                           Piece&& piece, Token&& token) {
  std::size_t begin = 0;
  for (std::size_t position = 0; position < text.size();) {
    const std::vector<std::size_t>& candidates = by_first_byte[static_cast<unsigned char>(text[position])];
    const auto match = std::find_if(candidates.begin(), candidates.end(), [&](std::size_t index) {
      return text.compare(position, patterns[index].size(), patterns[index]) == 0;
    });
    if (match == candidates.end()) {
      ++position;
      continue;
    }
    piece(begin, position);
    token(added[*match]);
    position += patterns[*match].size();
    begin = position;
  }
  piece(begin, text.size());
}
}  // namespace

// A SentencePiece-style text between two added tokens (`starts_text`: at the start of the whole
// text), in Hugging Face's order: the normalizer (legacy form: "▁" before, every space as "▁"),
// the added tokens with "normalized" found in that normalized text, then, between them, the
// Metaspace pre-tokenizer (legacy=False form: every space as "▁", and a "▁" before the piece
// that starts the text, or before every piece, unless it starts with one already); BPE on each.
void Tokenizer::encode_sentencepiece_segment(std::string_view text, bool starts_text,
                                             std::vector<TokenId>& out) const {
  if (text.empty()) return;
  const std::string normalized = space_prefix_ == SpacePrefix::every_segment
                                     ? std::string(kMetaspace) + spaces_to_metaspace(text)
                                     : std::string(text);
  const auto encode_piece_at = [&](std::size_t begin, std::size_t end) {
    if (begin == end) return;
    const std::string_view piece = std::string_view(normalized).substr(begin, end - begin);
    if (space_prefix_ == SpacePrefix::every_segment) {
      encode_sentencepiece_piece(piece, out);
      return;
    }
    std::string spaced = spaces_to_metaspace(piece);
    const bool prefix = space_prefix_ == SpacePrefix::always || (starts_text && begin == 0);
    if (prefix && !starts_with_metaspace(spaced)) spaced.insert(0, kMetaspace);
    encode_sentencepiece_piece(spaced, out);
  };
  split_at_added_tokens(normalized, tables_->normalized_added_by_first_byte, tables_->added_pattern, added_tokens_,
                        encode_piece_at, [&](const AddedToken& added) { out.push_back(added.id); });
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  detail::decode_utf8(text, fmt::format("encoding with {}", source_));  // refuse bad UTF-8 first
  std::vector<TokenId> ids;
  if (add_special_tokens && add_bos_) ids.push_back(*bos_id_);
  const auto encode_segment = [&](std::size_t begin, std::size_t end) {
    const std::string_view segment = text.substr(begin, end - begin);
    if (kind_ == TokenizerKind::sentencepiece)
      encode_sentencepiece_segment(segment, begin == 0, ids);
    else
      encode_ordinary(segment, ids);
  };
  split_at_added_tokens(text, tables_->added_by_first_byte, tables_->added_pattern, added_tokens_, encode_segment,
                        [&](const AddedToken& added) { ids.push_back(added.id); });
  if (add_special_tokens && add_eos_) ids.push_back(*eos_id_);
  return ids;
}

void Tokenizer::check_id(TokenId id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= token_text_.size())
    throw Error(fmt::format("token id {} is outside the vocabulary of {} ({} tokens, ids 0 to {})",
                            id, source_, token_text_.size(), token_text_.size() - 1));
}

const std::string& Tokenizer::token_text(TokenId id) const {
  check_id(id);
  return token_text_[static_cast<std::size_t>(id)];
}

const std::string& Tokenizer::token_bytes(TokenId id) const {
  check_id(id);
  return token_bytes_[static_cast<std::size_t>(id)];
}

std::optional<TokenId> Tokenizer::find_token(std::string_view text) const {
  const auto it = tables_->by_text.find(std::string(text));
  if (it == tables_->by_text.end()) return std::nullopt;
  return it->second;
}

bool Tokenizer::is_special(TokenId id) const {
  check_id(id);
  return tables_->special[static_cast<std::size_t>(id)];
}

std::string Tokenizer::decode(const std::vector<TokenId>& ids, bool skip_special_tokens) const {
  if (kind_ == TokenizerKind::sentencepiece) {
    // The streaming decoder is the definition: decode() is it run over all the ids.
    StreamingDecoder stream(*this, skip_special_tokens);
    std::string text;
    for (TokenId id : ids) text += stream.push(id);
    return text + stream.finish();
  }
  std::string bytes;
  for (TokenId id : ids) {
    if (skip_special_tokens && is_special(id)) continue;
    bytes += token_bytes(id);
  }
  return detail::utf8_lossy(bytes);
}

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer),
      skip_special_tokens_(skip_special_tokens),
      spaces_to_strip_(tokenizer.kind() == TokenizerKind::sentencepiece
                           ? tokenizer.tables_->decoder_strips
                           : 0) {}

std::string StreamingDecoder::push(TokenId id) {
  if (tokenizer_.kind() == TokenizerKind::sentencepiece) {
    tokenizer_.check_id(id);
    const Tokenizer::Tables& tables = *tokenizer_.tables_;
    const auto index = static_cast<std::size_t>(id);
    if (skip_special_tokens_ && tables.skipped[index]) return {};
    const bool first = tokens_decoded_++ == 0;
    if (tables.decoder == detail::SentencePieceDecoder::metaspace)
      return first ? replace_metaspace(tables.decoder_text[index], "")
                   : tokenizer_.token_bytes_[index];
    if (tables.fallback_byte[index] >= 0) {
      pending_ += static_cast<char>(tables.fallback_byte[index]);
      return {};
    }
    return emit(flush_byte_run() + tokenizer_.token_bytes_[index]);
  }
  if (skip_special_tokens_ && tokenizer_.is_special(id)) return {};
  pending_ += tokenizer_.token_bytes(id);
  // Everything up to a character cut off by the end of the bytes so far is final.
  std::size_t complete = 0;
  while (complete < pending_.size()) {
    const detail::Utf8Step step = detail::utf8_step(pending_, complete);
    if (step.truncated) break;
    complete += step.length;
  }
  std::string out = detail::utf8_lossy(std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  return out;
}

std::string StreamingDecoder::finish() {
  if (tokenizer_.kind() == TokenizerKind::sentencepiece) return emit(flush_byte_run());
  std::string out = detail::utf8_lossy(pending_);
  pending_.clear();
  return out;
}

// A finished run of <0xXX> tokens, as Hugging Face's ByteFallback decoder has it: the bytes when
// they are valid UTF-8, else one U+FFFD for every byte of the run.
std::string StreamingDecoder::flush_byte_run() {
  bool valid = true;
  for (std::size_t i = 0; i < pending_.size() && valid;) {
    const detail::Utf8Step step = detail::utf8_step(pending_, i);
    valid = step.valid;
    i += step.length;
  }
  std::string out;
  if (valid) {
    out = tokenizer_.tables_->decoder == detail::SentencePieceDecoder::byte_fallback_then_replace
              ? replace_metaspace(pending_, " ")
              : std::move(pending_);
  } else {
    for (std::size_t i = 0; i < pending_.size(); ++i) out += "\xEF\xBF\xBD";
  }
  pending_.clear();
  return out;
}

// The decoder's Strip(" ", 1, 0): the first space of the whole text goes, if it starts with one.
std::string StreamingDecoder::emit(std::string text) {
  std::size_t cut = 0;
  while (spaces_to_strip_ > 0 && cut < text.size() && text[cut] == ' ') {
    ++cut;
    --spaces_to_strip_;
  }
  if (cut < text.size()) spaces_to_strip_ = 0;
  return text.erase(0, cut);
}

}  // namespace kc::engine
