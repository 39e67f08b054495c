// kc/engine/mapped_file.hpp — a model file mapped read-only into memory.
//
// The GGUF and safetensors readers parse their files in place and hand out views of the tensor
// bytes without copying them: the pages are read from disk when first touched, and a tensor that
// is never used is never read. A view stays valid as long as the reader that gave it out.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace kc::engine {

// Bytes inside a mapped file (or any buffer): where they start and how many there are.
struct ByteView {
  const std::byte* data = nullptr;
  std::size_t size = 0;
};

// A whole regular file mapped read-only (POSIX mmap), or a copy of bytes held in memory (copy_of).
// Move-only; unmaps when destroyed.
// The mapping is private and read-only, so nothing the process does can change the file; a file
// truncated by another process while it is mapped is outside what a reader can guard against.
class MappedFile {
 public:
  // Throws kc::Error naming the path and the system's reason when the file cannot be opened,
  // is not a regular file, or cannot be mapped. An empty file maps to an empty view.
  explicit MappedFile(const std::string& path);
  // Bytes that are not a file on disk (a download in memory, a fuzzer's input): a copy held on
  // the heap under `name`, which messages use as the path. The readers parse it exactly as they
  // parse a mapped file.
  static MappedFile copy_of(std::string name, ByteView bytes);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  ByteView bytes() const { return {data_, size_}; }

 private:
  MappedFile() = default;
  void unmap() noexcept;

  std::string path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::unique_ptr<std::byte[]> copy_;  // copy_of(): the bytes data_ points at; else empty

};

}  // namespace kc::engine
