// The safetensors reader against files written here: every dtype, metadata, scalars and empty
// tensors, sharded checkpoints, and every malformed header or data range a reader must refuse.
#include "kc/engine/safetensors.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "support/safetensors_writer.hpp"
#include "support/test_files.hpp"

namespace kc::engine {
namespace {

using namespace test_support;

std::string open_error(const std::vector<std::byte>& bytes) {
  return open_error_of<SafetensorsFile>(bytes, "bad.safetensors");
}

std::string header_error(std::string_view header, std::size_t data_bytes = 64) {
  return open_error(safetensors_raw(header, byte_ramp(data_bytes)));
}

TEST(Safetensors, ReadsEveryDType) {
  const std::vector<std::pair<std::string, std::size_t>> dtypes = {
      {"F64", 8},     {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F8_E4M3", 1},
      {"F8_E5M2", 1}, {"I64", 8}, {"I32", 4}, {"I16", 2},  {"I8", 1},
      {"U64", 8},     {"U32", 4}, {"U16", 2}, {"U8", 1},   {"BOOL", 1}};
  std::vector<StTensor> tensors;
  unsigned start = 0;
  for (const auto& [dtype, bytes] : dtypes) {
    tensors.push_back({"t." + dtype, dtype, {2, 3}, byte_ramp(6 * bytes, start)});
    start += 17;
  }
  const std::vector<std::byte> file_bytes = safetensors_file(tensors, {{"format", "pt"}});
  TempDir dir;
  const SafetensorsFile file(dir.write("all.safetensors", file_bytes));

  std::uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, file_bytes.data(), 8);
  EXPECT_EQ(file.data_offset(), 8 + header_bytes);
  EXPECT_EQ(file.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
  ASSERT_EQ(file.tensors().size(), dtypes.size());
  for (std::size_t i = 1; i < file.tensors().size(); ++i)
    EXPECT_LT(file.tensors()[i - 1].name, file.tensors()[i].name);  // sorted by name
  for (const StTensor& written : tensors) {
    const SafetensorsTensor& read = file.tensor(written.name);
    EXPECT_EQ(safetensors_dtype_name(read.dtype), written.dtype);
    EXPECT_EQ(read.shape, written.shape);
    EXPECT_EQ(read.element_count, 6u);
    EXPECT_EQ(read.data.size, 6 * safetensors_dtype_bytes(read.dtype));
    // Zero-copy: the view is inside the mapped file, at data_offset + begin.
    EXPECT_EQ(read.data.data, file.bytes().data + file.data_offset() + read.data_begin);
    EXPECT_EQ(read.data_end - read.data_begin, read.data.size);
    EXPECT_EQ(std::memcmp(read.data.data, written.data.data(), written.data.size()), 0);
  }
  EXPECT_EQ(file.find("absent"), nullptr);
  EXPECT_TRUE(contains_all(error_of([&] { file.tensor("absent"); }),
                           {"all.safetensors", "no tensor named 'absent'"}));
}

TEST(Safetensors, ReadsScalarsEmptyTensorsAndPaddedHeaders) {
  std::vector<std::byte> bytes =
      safetensors_raw(R"({"scalar":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
                      R"("empty":{"dtype":"BF16","shape":[0,4],"data_offsets":[4,4]}})"
                      "        ",  // writers pad the header with spaces to align the data
                      byte_ramp(4));
  TempDir dir;
  const SafetensorsFile file(dir.write("small.safetensors", bytes));
  EXPECT_TRUE(file.metadata().empty());
  EXPECT_TRUE(file.tensor("scalar").shape.empty());
  EXPECT_EQ(file.tensor("scalar").element_count, 1u);
  EXPECT_EQ(file.tensor("scalar").data.size, 4u);
  EXPECT_EQ(file.tensor("empty").element_count, 0u);
  EXPECT_EQ(file.tensor("empty").data.size, 0u);
}

TEST(Safetensors, RefusesBadFraming) {
  EXPECT_TRUE(contains_all(open_error(byte_ramp(5)),
                           {"at byte 0", "5 bytes, fewer than the 8 of the header length"}));
  std::vector<std::byte> past = safetensors_raw("{}", {});
  past[0] = std::byte{100};  // claims 100 header bytes, 2 follow
  EXPECT_TRUE(
      contains_all(open_error(past), {"at byte 0", "header length is 100 bytes, but only 2"}));
  std::memset(past.data(), 0xFF, 8);
  EXPECT_TRUE(contains_all(open_error(past), {"18446744073709551615 bytes"}));
}

TEST(Safetensors, RefusesBadJson) {
  EXPECT_TRUE(contains_all(header_error(R"({"a": })"), {"at byte 14", "invalid JSON"}));
  EXPECT_TRUE(contains_all(header_error("{\"a\": \"\xff\"}"), {"invalid JSON"}));  // not UTF-8
  EXPECT_TRUE(contains_all(header_error(R"([1, 2])"), {"the header is an array, not an object"}));
  EXPECT_TRUE(contains_all(header_error(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                                        R"("w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})"),
                           {"the key \"w\" twice"}));
}

// An input fuzz/fuzz_safetensors found (minimized in fuzz/regressions/): a number past the range
// of a double in the header escaped as nlohmann's out_of_range instead of a kc::Error.
TEST(Safetensors, RefusesWhatTheFuzzerFound) {
  const std::string path =
      std::string(KC_FUZZ_REGRESSIONS) + "/safetensors_number_past_double.safetensors";
  EXPECT_TRUE(contains_all(error_of([&] { SafetensorsFile file(path); }),
                           {path, "at byte 8", "invalid JSON", "number overflow"}));
}

TEST(Safetensors, RefusesBadTensorEntries) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"w": 5})", "tensor 'w' is an integer, not an object"},
      {R"({"w": {"shape": [1], "data_offsets": [0, 4]}})", "tensor 'w' has no \"dtype\""},
      {R"({"w": {"dtype": "F32", "data_offsets": [0, 4]}})", "tensor 'w' has no \"shape\""},
      {R"({"w": {"dtype": "F32", "shape": [1]}})", "tensor 'w' has no \"data_offsets\""},
      {R"({"w": {"dtype": 7, "shape": [1], "data_offsets": [0, 4]}})",
       "the dtype of tensor 'w' is an integer"},
      {R"({"w": {"dtype": "F4", "shape": [1], "data_offsets": [0, 1]}})",
       "tensor 'w' has the unknown dtype \"F4\""},
      {R"({"w": {"dtype": "F32", "shape": 4, "data_offsets": [0, 16]}})",
       "the shape of tensor 'w' is an integer, not an array"},
      {R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})",
       "a dimension of tensor 'w' is an integer (-1), not a non-negative integer"},
      {R"({"w": {"dtype": "F32", "shape": [2.5], "data_offsets": [0, 4]}})",
       "a dimension of tensor 'w' is a floating-point number"},
      {R"({"w": {"dtype": "U8", "shape": [4294967296, 4294967296, 2], "data_offsets": [0, 0]}})",
       "has more than 2^64 elements"},
      {R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})",
       "the data_offsets of tensor 'w' are [0], not [begin, end]"},
      {R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})",
       "data_offsets [8, 4], which end before they begin"},
      {R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}})",
       "shape [2, 3] of F32 (6 elements of 4 bytes), but its data_offsets [0, 20] hold 20 bytes"},
      {R"({"w": {"dtype": "U8", "shape": [100], "data_offsets": [0, 100]}})",
       "past the end of the data section, which holds 64 bytes"},
      {R"({"__metadata__": {"format": 1}})", "__metadata__ \"format\" is an integer"},
      {R"({"__metadata__": ["pt"]})", "__metadata__ is an array, not an object of strings"},
  };
  for (const auto& [header, expected] : cases)
    EXPECT_TRUE(contains_all(header_error(header), {"at byte 8", expected})) << header;
}

TEST(Safetensors, RefusesOverlappingTensors) {
  const std::string message =
      header_error(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},)"
                   R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})");
  EXPECT_TRUE(contains_all(message, {"tensors 'a' (data bytes 0 to 16) and 'b' (from 8) overlap"}));
}

TEST(Safetensors, EveryTruncationAndRandomCorruptionIsRefusedOrRead) {
  const std::vector<std::byte> whole = safetensors_file(
      {{"a", "F32", {2, 2}, byte_ramp(16)}, {"b", "I8", {3}, byte_ramp(3)}}, {{"k", "v"}});
  TempDir dir;
  const std::string path = dir.path("t.safetensors");
  for (std::size_t length = 0; length < whole.size(); ++length) {
    dir.write("t.safetensors", std::vector<std::byte>(whole.begin(), whole.begin() + length));
    ASSERT_TRUE(contains_all(error_of([&] { SafetensorsFile file(path); }), {path, "at byte"}))
        << "cut at " << length;
  }
  std::mt19937 random(1201);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<std::byte> bytes = whole;
    for (int f = 0; f < 1 + static_cast<int>(random() % 3); ++f)
      bytes[random() % bytes.size()] = static_cast<std::byte>(random() & 0xFF);
    dir.write("t.safetensors", bytes);
    try {
      SafetensorsFile file(path);
      for (const SafetensorsTensor& tensor : file.tensors())
        ASSERT_LE(tensor.data.data + tensor.data.size, file.bytes().data + file.bytes().size);
    } catch (const kc::Error&) {
    }
  }
}

// Two shards and their index, as transformers writes them.
struct ShardedCheckpoint {
  TempDir dir;
  ShardedCheckpoint() {
    dir.write("model-00001-of-00002.safetensors",
              safetensors_file({{"model.embed_tokens.weight", "BF16", {8, 4}, byte_ramp(64, 1)},
                                {"model.norm.weight", "F32", {4}, byte_ramp(16, 2)}}));
    dir.write("model-00002-of-00002.safetensors",
              safetensors_file({{"lm_head.weight", "BF16", {8, 4}, byte_ramp(64, 3)}}));
  }
  void write_index(const std::string& weight_map) const {
    dir.write_text("model.safetensors.index.json",
                   R"({"metadata": {"total_size": 144}, "weight_map": )" + weight_map + "}");
  }
};

constexpr const char* kWeightMap =
    R"({"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
  "model.norm.weight": "model-00001-of-00002.safetensors",
  "lm_head.weight": "model-00002-of-00002.safetensors"})";

TEST(SafetensorsCheckpoint, ResolvesTensorsAcrossShards) {
  ShardedCheckpoint model;
  model.write_index(kWeightMap);
  for (const std::string& path :
       {model.dir.root(), model.dir.path("model.safetensors.index.json")}) {
    const SafetensorsCheckpoint checkpoint(path);
    EXPECT_EQ(checkpoint.shards().size(), 2u);
    EXPECT_EQ(checkpoint.tensor_names(),
              (std::vector<std::string>{"lm_head.weight", "model.embed_tokens.weight",
                                        "model.norm.weight"}));
    EXPECT_EQ(checkpoint.shard_of("lm_head.weight").path(),
              model.dir.path("model-00002-of-00002.safetensors"));
    EXPECT_EQ(checkpoint.shard_of("model.norm.weight").path(),
              model.dir.path("model-00001-of-00002.safetensors"));
    const SafetensorsTensor& head = checkpoint.tensor("lm_head.weight");
    EXPECT_EQ(head.shape, (std::vector<std::uint64_t>{8, 4}));
    EXPECT_EQ(std::memcmp(head.data.data, byte_ramp(64, 3).data(), 64), 0);
    EXPECT_EQ(checkpoint.find("absent"), nullptr);
    EXPECT_TRUE(contains_all(error_of([&] { checkpoint.tensor("absent"); }),
                             {"model.safetensors.index.json", "no tensor named 'absent'"}));
  }
}

TEST(SafetensorsCheckpoint, ReadsASingleFileModel) {
  TempDir dir;
  dir.write("model.safetensors", safetensors_file({{"w", "F16", {2}, byte_ramp(4)}}));
  for (const std::string& path : {dir.root(), dir.path("model.safetensors")}) {
    const SafetensorsCheckpoint checkpoint(path);
    EXPECT_EQ(checkpoint.tensor_names(), std::vector<std::string>{"w"});
    EXPECT_EQ(checkpoint.shard_of("w").path(), dir.path("model.safetensors"));
  }
}

TEST(SafetensorsCheckpoint, RefusesIndicesThatDisagreeWithTheShards) {
  ShardedCheckpoint model;
  const auto index_error = [&](const std::string& weight_map) {
    model.write_index(weight_map);
    return error_of([&] { SafetensorsCheckpoint checkpoint(model.dir.root()); });
  };
  EXPECT_TRUE(
      contains_all(index_error(R"({"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
        "model.norm.weight": "model-00002-of-00002.safetensors",
        "lm_head.weight": "model-00002-of-00002.safetensors"})"),
                   {"model.safetensors.index.json", "puts 'model.norm.weight' in",
                    "model-00002-of-00002.safetensors, which has no tensor of that name"}));
  EXPECT_TRUE(
      contains_all(index_error(R"({"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
        "lm_head.weight": "model-00002-of-00002.safetensors"})"),
                   {"holds the tensor 'model.norm.weight', which the weight_map does not list"}));
  EXPECT_TRUE(contains_all(index_error(R"({"lm_head.weight": "model-00003-of-00003.safetensors"})"),
                           {"cannot open", "model-00003-of-00003.safetensors"}));
  EXPECT_TRUE(contains_all(index_error(R"({"lm_head.weight": "../model.safetensors"})"),
                           {"names the shard \"../model.safetensors\"", "without a path"}));
  EXPECT_TRUE(contains_all(index_error(R"({"lm_head.weight": 2})"),
                           {"weight_map[\"lm_head.weight\"] is an integer"}));
  EXPECT_TRUE(contains_all(index_error(R"([])"), {"\"weight_map\" object"}));
  EXPECT_TRUE(contains_all(index_error(R"({"a": "x.safetensors", "a": "y.safetensors"})"),
                           {"the key \"a\" twice"}));
  TempDir empty;
  EXPECT_TRUE(contains_all(error_of([&] { SafetensorsCheckpoint checkpoint(empty.root()); }),
                           {"holds neither model.safetensors.index.json nor model.safetensors"}));
}

}  // namespace
}  // namespace kc::engine
