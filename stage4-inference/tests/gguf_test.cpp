// The GGUF reader against files written here: every metadata value type, every tensor type the
// engine dequantizes (and one it does not), alignment, versions, and every kind of malformed
// input, each of which must be a kc::Error naming the file, the offset and the fault.
#include "kc/engine/gguf.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>

#include "kc/engine/dequantize.hpp"
#include "support/gguf_writer.hpp"
#include "support/test_files.hpp"

namespace kc::engine {
namespace {

using namespace test_support;

constexpr std::uint32_t kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ8_0 = 8, kQ6_K = 14, kI32 = 26,
                        kBF16 = 30;

// A small valid file: a few metadata entries and two f32 tensors.
GgufWriter small_file() {
  GgufWriter writer;
  writer.add("general.architecture", v_string("llama"))
      .add("general.name", v_string("tiny"))
      .add("test.list", v_array(gguf_type::int32, {v_i32(1), v_i32(2)}))
      .add_tensor({"a", {4, 2}, kF32, f32_bytes({1, 2, 3, 4, 5, 6, 7, 8}), {}})
      .add_tensor({"b", {3}, kF32, f32_bytes({-1, -2, -3}), {}});
  return writer;
}

void patch_u64(std::vector<std::byte>& bytes, std::size_t at, std::uint64_t value) {
  std::memcpy(bytes.data() + at, &value, sizeof value);
}

void patch_u32(std::vector<std::byte>& bytes, std::size_t at, std::uint32_t value) {
  std::memcpy(bytes.data() + at, &value, sizeof value);
}

// The message of the error that opening `bytes` as a GGUF file gives.
std::string open_error(const std::vector<std::byte>& bytes) {
  return open_error_of<GgufFile>(bytes, "bad.gguf");
}

std::string open_error(const GgufWriter& writer) { return open_error(writer.build().bytes); }

TEST(Gguf, ReadsEveryMetadataValueType) {
  const std::string with_nul("h\xc3\xa9llo\0!", 8);
  GgufWriter writer;
  writer.add("t.u8", v_u8(200))
      .add("t.i8", v_i8(-100))
      .add("t.u16", v_u16(60000))
      .add("t.i16", v_i16(-30000))
      .add("t.u32", v_u32(4000000000u))
      .add("t.i32", v_i32(-2000000000))
      .add("t.f32", v_f32(0.15625f))
      .add("t.true", v_bool(true))
      .add("t.false", v_bool(false))
      .add("t.string", v_string(with_nul))
      .add("t.empty_string", v_string(""))
      .add("t.u64", v_u64(std::numeric_limits<std::uint64_t>::max()))
      .add("t.i64", v_i64(std::numeric_limits<std::int64_t>::min()))
      .add("t.f64", v_f64(-1.0e300))
      .add("t.array_u8", v_array(gguf_type::uint8, {v_u8(1), v_u8(255)}))
      .add("t.array_i8", v_array(gguf_type::int8, {v_i8(-128), v_i8(127)}))
      .add("t.array_u16", v_array(gguf_type::uint16, {v_u16(65535)}))
      .add("t.array_i16", v_array(gguf_type::int16, {v_i16(-2), v_i16(3)}))
      .add("t.array_u32", v_array(gguf_type::uint32, {v_u32(7), v_u32(8), v_u32(9)}))
      .add("t.array_i32", v_array(gguf_type::int32, {v_i32(-7)}))
      .add("t.array_f32", v_array(gguf_type::float32, {v_f32(0.5f), v_f32(-2.25f)}))
      .add("t.array_bool", v_array(gguf_type::boolean, {v_bool(true), v_bool(false), v_bool(true)}))
      .add("t.array_strings", v_strings({"a", "", "ccc"}))
      .add("t.array_u64", v_array(gguf_type::uint64, {v_u64(1ull << 40)}))
      .add("t.array_i64", v_array(gguf_type::int64, {v_i64(-(1ll << 40))}))
      .add("t.array_f64", v_array(gguf_type::float64, {v_f64(3.5), v_f64(-0.125)}))
      .add("t.empty_array", v_array(gguf_type::uint32, {}))
      .add("t.nested",
           v_array(gguf_type::array,
                   {v_array(gguf_type::int16, {v_i16(1), v_i16(2)}), v_strings({"x", "yz"}),
                    v_array(gguf_type::array, {v_array(gguf_type::uint8, {})})}));
  TempDir dir;
  const GgufFile file(dir.write("values.gguf", writer.build().bytes));

  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.alignment(), 32u);
  EXPECT_TRUE(file.tensors().empty());
  ASSERT_EQ(file.metadata().size(), 28u);
  EXPECT_EQ(file.metadata().front().key, "t.u8");  // file order
  EXPECT_EQ(file.metadata().back().key, "t.nested");

  EXPECT_EQ(file.at("t.u8").type(), GgufValueType::uint8);
  EXPECT_EQ(file.at("t.u8").as_uint64(), 200u);
  EXPECT_EQ(file.at("t.i8").type(), GgufValueType::int8);
  EXPECT_EQ(file.at("t.i8").as_int64(), -100);
  EXPECT_EQ(file.at("t.u16").as_uint64(), 60000u);
  EXPECT_EQ(file.at("t.i16").as_int64(), -30000);
  EXPECT_EQ(file.at("t.u32").type(), GgufValueType::uint32);
  EXPECT_EQ(file.at("t.u32").as_uint64(), 4000000000u);
  EXPECT_EQ(file.at("t.u32").as_int64(), 4000000000);
  EXPECT_EQ(file.at("t.i32").as_int64(), -2000000000);
  EXPECT_EQ(file.at("t.f32").type(), GgufValueType::float32);
  EXPECT_EQ(file.at("t.f32").as_double(), 0.15625);
  EXPECT_TRUE(file.at("t.true").as_bool());
  EXPECT_FALSE(file.at("t.false").as_bool());
  EXPECT_EQ(file.at("t.string").as_string(), with_nul);  // UTF-8 and an embedded NUL, as stored
  EXPECT_EQ(file.at("t.empty_string").as_string(), "");
  EXPECT_EQ(file.at("t.u64").as_uint64(), std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(file.at("t.i64").as_int64(), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(file.at("t.f64").type(), GgufValueType::float64);
  EXPECT_EQ(file.at("t.f64").as_double(), -1.0e300);

  const auto& u8s = file.at("t.array_u8").as_array();
  EXPECT_EQ(u8s.element_type(), GgufValueType::uint8);
  ASSERT_EQ(u8s.size(), 2u);
  EXPECT_EQ(u8s.at(1).as_uint64(), 255u);
  EXPECT_EQ(file.at("t.array_i8").as_array().at(0).as_int64(), -128);
  EXPECT_EQ(file.at("t.array_i8").as_array().at(1).as_int64(), 127);
  EXPECT_EQ(file.at("t.array_u16").as_array().at(0).as_uint64(), 65535u);
  EXPECT_EQ(file.at("t.array_i16").as_array().at(0).as_int64(), -2);
  EXPECT_EQ(file.at("t.array_u32").as_array().size(), 3u);
  EXPECT_EQ(file.at("t.array_u32").as_array().at(2).as_uint64(), 9u);
  EXPECT_EQ(file.at("t.array_i32").as_array().at(0).as_int64(), -7);
  EXPECT_EQ(file.at("t.array_f32").as_array().at(1).as_double(), -2.25);
  const auto& bools = file.at("t.array_bool").as_array();
  EXPECT_EQ(bools.element_type(), GgufValueType::boolean);
  EXPECT_TRUE(bools.at(0).as_bool());
  EXPECT_FALSE(bools.at(1).as_bool());
  EXPECT_TRUE(bools.at(2).as_bool());
  const auto& strings = file.at("t.array_strings").as_array();
  EXPECT_EQ(strings.element_type(), GgufValueType::string);
  ASSERT_EQ(strings.size(), 3u);
  EXPECT_EQ(strings.at(0).as_string(), "a");
  EXPECT_EQ(strings.at(1).as_string(), "");
  EXPECT_EQ(strings.at(2).as_string(), "ccc");
  EXPECT_EQ(file.at("t.array_u64").as_array().at(0).as_uint64(), 1ull << 40);
  EXPECT_EQ(file.at("t.array_i64").as_array().at(0).as_int64(), -(1ll << 40));
  EXPECT_EQ(file.at("t.array_f64").as_array().at(1).as_double(), -0.125);
  EXPECT_EQ(file.at("t.empty_array").as_array().size(), 0u);
  EXPECT_EQ(file.at("t.empty_array").as_array().element_type(), GgufValueType::uint32);

  const auto& nested = file.at("t.nested").as_array();
  EXPECT_EQ(nested.element_type(), GgufValueType::array);
  ASSERT_EQ(nested.size(), 3u);
  EXPECT_EQ(nested.at(0).as_array().element_type(), GgufValueType::int16);
  EXPECT_EQ(nested.at(0).as_array().at(1).as_int64(), 2);
  EXPECT_EQ(nested.at(1).as_array().at(1).as_string(), "yz");
  const auto& deepest = nested.at(2).as_array().at(0).as_array();
  EXPECT_EQ(deepest.element_type(), GgufValueType::uint8);
  EXPECT_EQ(deepest.size(), 0u);
}

TEST(Gguf, ValueAccessorsRefuseTheWrongKind) {
  GgufWriter writer;
  writer.add("n", v_i32(-5)).add("u", v_u64(std::numeric_limits<std::uint64_t>::max()));
  writer.add("s", v_string("text")).add("a", v_array(gguf_type::uint8, {v_u8(1)}));
  TempDir dir;
  const GgufFile file(dir.write("kinds.gguf", writer.build().bytes));
  EXPECT_TRUE(contains_all(error_of([&] { file.at("n").as_uint64(); }), {"int32", "negative"}));
  EXPECT_TRUE(contains_all(error_of([&] { file.at("u").as_int64(); }), {"does not fit"}));
  EXPECT_TRUE(contains_all(error_of([&] { file.at("n").as_string(); }), {"int32", "not a string"}));
  EXPECT_TRUE(contains_all(error_of([&] { file.at("s").as_double(); }), {"not a number"}));
  EXPECT_TRUE(contains_all(error_of([&] { file.at("s").as_array(); }), {"not an array"}));
  EXPECT_TRUE(contains_all(error_of([&] { file.at("s").as_bool(); }), {"not a bool"}));
  EXPECT_TRUE(
      contains_all(error_of([&] { file.at("a").as_array().at(1); }), {"element 1", "1 elements"}));
  EXPECT_TRUE(contains_all(error_of([&] { file.at("missing.key"); }),
                           {"kinds.gguf", "no metadata key 'missing.key'"}));
  EXPECT_TRUE(contains_all(error_of([&] { file.tensor("w"); }), {"no tensor named 'w'"}));
  EXPECT_EQ(file.find("missing.key"), nullptr);
  EXPECT_EQ(file.find_tensor("w"), nullptr);
}

TEST(Gguf, ReadsTensorsOfEveryTypeAsZeroCopyViews) {
  // Hand-made blocks (dequantize_test.cpp works through their values); here what matters is
  // that each tensor's bytes come back at the right place and decode as their type says.
  std::vector<std::byte> q8_0(2 * 34);
  std::vector<std::byte> q4_0(2 * 18);
  std::vector<std::byte> q4_1(20);
  std::vector<std::byte> q6_k(210);
  for (std::size_t i = 0; i < q6_k.size(); ++i) q6_k[i] = static_cast<std::byte>(i * 7);
  for (std::size_t b = 0; b < 2; ++b) {
    patch_u32(q8_0, b * 34, 0x3C00);  // d = 1 (the low two bytes; the next write fixes the rest)
    for (std::size_t i = 0; i < 32; ++i)
      q8_0[b * 34 + 2 + i] = static_cast<std::byte>(static_cast<std::int8_t>(i) - 16);
    patch_u32(q4_0, b * 18, 0x4000);  // d = 2
    for (std::size_t j = 0; j < 16; ++j) q4_0[b * 18 + 2 + j] = static_cast<std::byte>(0x80 | j);
  }
  patch_u32(q4_1, 0, 0xBC003800);  // d = 0.5, m = -1
  for (std::size_t j = 0; j < 16; ++j) q4_1[4 + j] = static_cast<std::byte>(0xF0 | j);

  GgufWriter writer;
  writer.add_tensor({"f32", {4, 2}, kF32, f32_bytes({1, 2, 3, 4, 5, 6, 7, 8}), {}})
      .add_tensor({"f16", {3}, kF16, u16_bytes({0x3C00, 0xC000, 0x3800}), {}})  // 1, -2, 0.5
      .add_tensor({"bf16", {2}, kBF16, u16_bytes({0x3F80, 0xC040}), {}})        // 1, -3
      .add_tensor({"q8_0", {32, 2}, kQ8_0, q8_0, {}})
      .add_tensor({"q4_0", {64}, kQ4_0, q4_0, {}})
      .add_tensor({"q4_1", {32, 1, 1, 1}, kQ4_1, q4_1, {}})
      .add_tensor({"q6_K", {256}, kQ6_K, q6_k, {}})
      .add_tensor({"i32", {3}, kI32, f32_bytes({0, 0, 0}), {}});
  const BuiltGguf built = writer.build();
  TempDir dir;
  const GgufFile file(dir.write("tensors.gguf", built.bytes));

  ASSERT_EQ(file.tensors().size(), 8u);
  EXPECT_EQ(file.data_offset(), built.data_offset);
  EXPECT_EQ(file.data_offset() % 32, 0u);
  const char* names[] = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q6_K", "i32"};
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(file.tensors()[i].name, names[i]);  // file order

  const GgufTensorInfo& f32 = file.tensor("f32");
  EXPECT_EQ(f32.type, GgmlType::f32);
  EXPECT_EQ(f32.dims, (std::vector<std::uint64_t>{4, 2}));
  EXPECT_EQ(f32.element_count, 8u);
  EXPECT_EQ(f32.byte_size, 32u);
  EXPECT_EQ(f32.offset, 0u);
  EXPECT_EQ(file.tensor("q4_1").dims, (std::vector<std::uint64_t>{32, 1, 1, 1}));
  EXPECT_EQ(file.tensor("q8_0").byte_size, 68u);
  EXPECT_EQ(file.tensor("q4_0").byte_size, 36u);
  EXPECT_EQ(file.tensor("q6_K").type, GgmlType::q6_K);
  EXPECT_EQ(file.tensor("q6_K").byte_size, 210u);
  for (const GgufTensorInfo& tensor : file.tensors()) {
    EXPECT_EQ(tensor.offset % 32, 0u) << tensor.name;
    EXPECT_EQ(tensor.file_offset, file.data_offset() + tensor.offset) << tensor.name;
    // Zero-copy: the view points into the mapped file, at the tensor's bytes.
    const ByteView view = file.tensor_bytes(tensor);
    EXPECT_EQ(view.data, file.bytes().data + tensor.file_offset) << tensor.name;
    ASSERT_EQ(view.size, tensor.byte_size);
    EXPECT_EQ(std::memcmp(view.data, built.bytes.data() + tensor.file_offset, view.size), 0);
  }
  EXPECT_EQ(std::memcmp(file.tensor_bytes(file.tensor("q6_K")).data, q6_k.data(), 210), 0);

  EXPECT_EQ(file.tensor_to_float(f32), (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(file.tensor_to_float(file.tensor("f16")), (std::vector<float>{1, -2, 0.5f}));
  EXPECT_EQ(file.tensor_to_float(file.tensor("bf16")), (std::vector<float>{1, -3}));
  const std::vector<float> q8 = file.tensor_to_float(file.tensor("q8_0"));
  ASSERT_EQ(q8.size(), 64u);
  EXPECT_EQ(q8[0], -16.0f);
  EXPECT_EQ(q8[31], 15.0f);
  EXPECT_EQ(q8[32], -16.0f);
  const std::vector<float> q40 = file.tensor_to_float(file.tensor("q4_0"));
  ASSERT_EQ(q40.size(), 64u);
  EXPECT_EQ(q40[0], -16.0f);  // low nibble 0: (0 - 8) * 2
  EXPECT_EQ(q40[15], 14.0f);  // low nibble 15
  EXPECT_EQ(q40[16], 0.0f);   // high nibble 8: (8 - 8) * 2
  const std::vector<float> q41 = file.tensor_to_float(file.tensor("q4_1"));
  EXPECT_EQ(q41[0], -1.0f);  // 0 * 0.5 - 1
  EXPECT_EQ(q41[15], 6.5f);  // 15 * 0.5 - 1
  EXPECT_EQ(q41[16], 6.5f);  // high nibble 15
  EXPECT_TRUE(contains_all(error_of([&] { file.tensor_to_float(file.tensor("q6_K")); }),
                           {"cannot dequantize", "q6_K"}));
}

TEST(Gguf, HonoursGeneralAlignment) {
  GgufWriter writer;
  writer.alignment = 64;
  writer.add("general.alignment", v_u32(64))
      .add_tensor({"a", {3}, kF32, f32_bytes({1, 2, 3}), {}})
      .add_tensor({"b", {3}, kF32, f32_bytes({4, 5, 6}), {}});
  TempDir dir;
  const GgufFile file(dir.write("aligned.gguf", writer.build().bytes));
  EXPECT_EQ(file.alignment(), 64u);
  EXPECT_EQ(file.data_offset() % 64, 0u);
  EXPECT_EQ(file.tensor("b").offset, 64u);
  EXPECT_EQ(file.tensor_to_float(file.tensor("b")), (std::vector<float>{4, 5, 6}));

  // Aligned to 32 but not to the file's 64.
  GgufWriter misaligned = writer;
  misaligned.add_tensor({"c", {8}, kF32, f32_bytes(std::vector<float>(8, 1.0f)), 96});
  EXPECT_TRUE(contains_all(open_error(misaligned),
                           {"tensor 'c' starts at data offset 96", "alignment 64"}));
}

TEST(Gguf, ReadsVersions2And3) {
  for (std::uint32_t version : {2u, 3u}) {
    GgufWriter writer = small_file();
    writer.version = version;
    TempDir dir;
    const GgufFile file(dir.write("v.gguf", writer.build().bytes));
    EXPECT_EQ(file.version(), version);
    EXPECT_EQ(file.at("general.name").as_string(), "tiny");
    EXPECT_EQ(file.tensor_to_float(file.tensor("b")), (std::vector<float>{-1, -2, -3}));
  }
}

TEST(Gguf, RefusesOtherVersionsAndBigEndianFiles) {
  GgufWriter writer = small_file();
  writer.version = 1;
  EXPECT_TRUE(contains_all(open_error(writer), {"at byte 4", "version 1", "not supported"}));
  writer.version = 4;
  EXPECT_TRUE(contains_all(open_error(writer), {"at byte 4", "unsupported GGUF version 4"}));
  writer.version = 0x03000000;  // 3, as a big-endian writer stores it
  EXPECT_TRUE(contains_all(open_error(writer), {"big-endian"}));
}

TEST(Gguf, RefusesWhatIsNotGguf) {
  EXPECT_TRUE(contains_all(open_error(std::vector<std::byte>{}),
                           {"at byte 0", "the file ends inside the magic"}));
  std::vector<std::byte> ggml(64, std::byte{0});
  std::memcpy(ggml.data(), "ggml", 4);
  EXPECT_TRUE(contains_all(open_error(ggml), {"at byte 0", "not a GGUF file", "\"ggml\""}));
  std::vector<std::byte> binary(64, std::byte{0});
  EXPECT_TRUE(contains_all(open_error(binary), {"not a GGUF file", "\\x00"}));
  TempDir dir;
  EXPECT_TRUE(contains_all(error_of([&] { GgufFile file(dir.path("absent.gguf")); }),
                           {"cannot open", "absent.gguf", "No such file"}));
  EXPECT_TRUE(contains_all(error_of([&] { GgufFile file(dir.root()); }), {"not a regular file"}));
}

TEST(Gguf, EveryTruncationIsAnError) {
  const std::vector<std::byte> whole = small_file().build().bytes;
  TempDir dir;
  const std::string path = dir.path("cut.gguf");
  for (std::size_t length = 0; length < whole.size(); ++length) {
    dir.write("cut.gguf", std::vector<std::byte>(whole.begin(), whole.begin() + length));
    const std::string message = error_of([&] { GgufFile file(path); });
    ASSERT_TRUE(contains_all(message, {path, ": at byte "})) << "cut at " << length;
  }
  dir.write("cut.gguf", whole);
  EXPECT_NO_THROW(GgufFile file(path));
}

TEST(Gguf, RandomCorruptionIsReadOrRefusedNeverACrash) {
  GgufWriter writer = small_file();
  writer.add("tokens", v_strings({"<s>", "</s>", "hello", "world"}));
  writer.add("nested", v_array(gguf_type::array, {v_array(gguf_type::float32, {v_f32(1)})}));
  const std::vector<std::byte> whole = writer.build().bytes;
  TempDir dir;
  const std::string path = dir.path("corrupt.gguf");
  std::mt19937 random(20261201);
  int refused = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<std::byte> bytes = whole;
    const int flips = 1 + static_cast<int>(random() % 4);
    for (int f = 0; f < flips; ++f)
      bytes[random() % bytes.size()] = static_cast<std::byte>(random() & 0xFF);
    dir.write("corrupt.gguf", bytes);
    try {
      GgufFile file(path);
      for (const GgufTensorInfo& tensor : file.tensors()) {
        const ByteView view = file.tensor_bytes(tensor);
        ASSERT_LE(view.data + view.size, file.bytes().data + file.bytes().size);
      }
    } catch (const kc::Error&) {
      ++refused;
    }
  }
  EXPECT_GT(refused, 0);
}

TEST(Gguf, RefusesCountsTheFileCannotHold) {
  GgufWriter writer = small_file();
  writer.metadata_count = 1ull << 62;
  EXPECT_TRUE(contains_all(open_error(writer),
                           {"at byte 16", "claims 4611686018427387904 metadata entries"}));
  writer = small_file();
  writer.tensor_count = std::numeric_limits<std::uint64_t>::max();
  EXPECT_TRUE(
      contains_all(open_error(writer), {"at byte 8", "claims 18446744073709551615 tensors"}));
  // A count that passes the size check but claims one entry more than written: the reader takes
  // the first tensor info for a metadata entry and fails somewhere after it (open_error checks
  // that the message names the file and an offset).
  writer = small_file();
  writer.metadata_count = 4;
  open_error(writer);

  GgufWriter arrays;
  arrays.add("big", v_array(gguf_type::uint64, {v_u64(1)}));
  std::vector<std::byte> bytes = arrays.build().bytes;
  // The array's count follows the header (24), the key (8 + 3), the type (4), the element type (4).
  const std::size_t count_at = 24 + 11 + 4 + 4;
  patch_u64(bytes, count_at, 1ull << 61);
  EXPECT_TRUE(contains_all(open_error(bytes),
                           {"at byte 39", "claims 2305843009213693952 elements of type uint64"}));
}

TEST(Gguf, RefusesStringsLongerThanTheFile) {
  std::vector<std::byte> bytes = small_file().build().bytes;
  patch_u64(bytes, 24, 1000);  // the first key's length
  EXPECT_TRUE(contains_all(open_error(bytes),
                           {"at byte 24", "the key of metadata entry 0", "string of 1000 bytes"}));
  patch_u64(bytes, 24, std::numeric_limits<std::uint64_t>::max());
  EXPECT_TRUE(contains_all(open_error(bytes), {"string of 18446744073709551615 bytes"}));

  GgufWriter strings;
  strings.add("s", v_strings({"ab", "cd"}));
  bytes = strings.build().bytes;
  patch_u64(bytes, 24 + 9 + 4 + 4 + 8 + 8 + 2, 99);  // the second element's length
  EXPECT_TRUE(contains_all(open_error(bytes), {"element 1 of metadata 's'", "string of 99 bytes"}));
}

TEST(Gguf, RefusesUnknownValueTypes) {
  GgufWriter writer;
  writer.add("k", Value{13, Bytes().u32(0)});
  EXPECT_TRUE(contains_all(open_error(writer),
                           {"at byte 33", "unknown metadata value type 13 for metadata 'k'"}));
  GgufWriter arrays;
  arrays.add("k", v_array(99, {}));
  EXPECT_TRUE(contains_all(open_error(arrays),
                           {"unknown metadata value type 99", "the element type of metadata 'k'"}));
}

TEST(Gguf, RefusesBooleansOtherThanZeroOrOne) {
  GgufWriter writer;
  writer.add("flag", Value{gguf_type::boolean, Bytes().u8(2)});
  EXPECT_TRUE(contains_all(open_error(writer), {"at byte 40", "boolean stored as 2"}));
  GgufWriter arrays;
  arrays.add("flags", Value{gguf_type::array, Bytes().u32(gguf_type::boolean).u64(2).u8(1).u8(7)});
  EXPECT_TRUE(contains_all(open_error(arrays), {"element 1 of metadata 'flags'", "stored as 7"}));
}

TEST(Gguf, RefusesArraysNestedTooDeep) {
  Value value = v_array(gguf_type::uint8, {});
  for (int depth = 0; depth < 40; ++depth) value = v_array(gguf_type::array, {value});
  GgufWriter writer;
  writer.add("deep", value);
  EXPECT_TRUE(contains_all(open_error(writer), {"nests arrays more than 32 deep"}));
}

TEST(Gguf, RefusesBadKeys) {
  GgufWriter duplicate = small_file();
  duplicate.add("general.name", v_string("again"));
  EXPECT_TRUE(contains_all(open_error(duplicate),
                           {"duplicate metadata key 'general.name' (entries 1 and 3)"}));
  GgufWriter empty;
  empty.add("", v_u8(1));
  EXPECT_TRUE(contains_all(open_error(empty), {"at byte 24", "metadata entry 0 has an empty key"}));
  GgufWriter longer;
  longer.add(std::string(70000, 'k'), v_u8(1));
  EXPECT_TRUE(contains_all(open_error(longer), {"metadata key of 70000 bytes"}));
}

TEST(Gguf, RefusesBadAlignments) {
  for (const auto& [value, expected] : std::vector<std::pair<Value, std::string>>{
           {v_string("32"), "general.alignment is a string; GGUF stores it as a uint32"},
           {v_u64(32), "general.alignment is a uint64"},
           {v_u32(0), "general.alignment is 0; it must be a power of two"},
           {v_u32(48), "general.alignment is 48; it must be a power of two"}}) {
    GgufWriter writer = small_file();
    writer.add("general.alignment", value);
    EXPECT_TRUE(contains_all(open_error(writer), {expected}));
  }
}

TEST(Gguf, RefusesBadTensorInfos) {
  // Unknown types: 4 was removed from ggml, 40 is not defined.
  for (std::uint32_t type : {4u, 40u, 1000u}) {
    GgufWriter writer;
    writer.add_tensor({"w", {32}, type, std::vector<std::byte>(32), {}});
    const BuiltGguf built = writer.build();
    const std::size_t type_at = built.tensor_info_offsets[0] + 8 + 1 + 4 + 8;
    EXPECT_TRUE(contains_all(open_error(built.bytes),
                             {fmt::format("at byte {}", type_at),
                              fmt::format("tensor 'w' has unknown ggml type {}", type)}));
  }
  GgufWriter dims;
  dims.add_tensor({"w", {1, 1, 1, 1, 1}, kF32, f32_bytes({1}), {}});
  EXPECT_TRUE(contains_all(open_error(dims), {"tensor 'w' has 5 dimensions", "at most 4"}));

  GgufWriter huge_dim;
  huge_dim.add_tensor({"w", {1ull << 63}, kF32, {}, {}});
  EXPECT_TRUE(contains_all(open_error(huge_dim), {"dimension 0 of tensor 'w'", "int64 limit"}));

  GgufWriter elements;
  elements.add_tensor({"w", {1ull << 40, 1ull << 40}, kF32, {}, {}});
  EXPECT_TRUE(contains_all(open_error(elements), {"multiply to more than 2^64 elements"}));

  GgufWriter bytes;
  bytes.add_tensor({"w", {1ull << 62, 2}, kF32, {}, {}});
  EXPECT_TRUE(contains_all(open_error(bytes), {"takes more than 2^64 bytes"}));

  GgufWriter blocks;
  blocks.add_tensor({"w", {48}, kQ4_0, std::vector<std::byte>(27), {}});
  EXPECT_TRUE(contains_all(open_error(blocks),
                           {"rows of 48 values", "not a whole number of q4_0's 32-value blocks"}));

  GgufWriter duplicate = small_file();
  duplicate.add_tensor({"a", {1}, kF32, f32_bytes({9}), {}});
  const BuiltGguf built = duplicate.build();
  EXPECT_TRUE(contains_all(open_error(built.bytes),
                           {fmt::format("at byte {}", built.tensor_info_offsets[2]),
                            "duplicate tensor name 'a' (tensors 0 and 2)"}));

  GgufWriter long_name;
  long_name.add_tensor({std::string(65, 'n'), {1}, kF32, f32_bytes({1}), {}});
  EXPECT_TRUE(contains_all(open_error(long_name), {"name of 65 bytes", "at most 64"}));
}

TEST(Gguf, RefusesTensorDataOutsideTheDataSection) {
  GgufWriter misaligned;
  misaligned.add_tensor({"w", {2}, kF32, f32_bytes({1, 2}), 8});
  EXPECT_TRUE(
      contains_all(open_error(misaligned),
                   {"tensor 'w' starts at data offset 8, not a multiple of the alignment 32"}));

  GgufWriter past_end = small_file();
  past_end.add_tensor({"far", {8}, kF32, {}, 1ull << 20});
  EXPECT_TRUE(contains_all(open_error(past_end),
                           {"tensor 'far' (32 bytes of f32 at data offset 1048576) runs past the "
                            "end of the file"}));

  GgufWriter wrapping;  // offset + size would wrap around 2^64
  wrapping.add_tensor({"wrap", {8}, kF32, {}, std::numeric_limits<std::uint64_t>::max() - 31});
  EXPECT_TRUE(contains_all(open_error(wrapping), {"tensor 'wrap'", "runs past the end"}));

  GgufWriter short_data;
  short_data.add_tensor({"short", {16}, kF32, f32_bytes({1, 2, 3}), {}});
  EXPECT_TRUE(contains_all(open_error(short_data),
                           {"tensor 'short' (64 bytes of f32 at data offset 0) runs past"}));

  GgufWriter overlap;
  overlap.add_tensor({"x", {16}, kF32, f32_bytes(std::vector<float>(16, 1.0f)), 0})
      .add_tensor({"y", {4}, kF32, f32_bytes({2, 2, 2, 2}), 32});
  const BuiltGguf built = overlap.build();
  EXPECT_TRUE(contains_all(open_error(built.bytes),
                           {fmt::format("at byte {}", built.tensor_info_offsets[1]),
                            "tensors 'x' (data bytes 0 to 64) and 'y' (from 32) overlap"}));
}

TEST(Gguf, AcceptsEmptyTensors) {
  GgufWriter writer;
  writer.add_tensor({"empty", {0, 4}, kF32, {}, {}})
      .add_tensor({"one", {1}, kF32, f32_bytes({5}), {}});
  TempDir dir;
  const GgufFile file(dir.write("empty.gguf", writer.build().bytes));
  EXPECT_EQ(file.tensor("empty").element_count, 0u);
  EXPECT_EQ(file.tensor_bytes(file.tensor("empty")).size, 0u);
  EXPECT_TRUE(file.tensor_to_float(file.tensor("empty")).empty());
  EXPECT_EQ(file.tensor_to_float(file.tensor("one")), std::vector<float>{5});
}

}  // namespace
}  // namespace kc::engine
