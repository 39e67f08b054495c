#include "kc/engine/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "kc/common/error.hpp"

namespace kc::engine {

namespace {

// Closes the descriptor on every path out of the constructor; the mapping outlives it.
struct FileDescriptor {
  int fd = -1;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

MappedFile::MappedFile(const std::string& path) : path_(path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer; it is rejected
  // below as not a regular file.
  FileDescriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (file.fd < 0) throw Error(fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  struct stat info {};
  if (::fstat(file.fd, &info) != 0)
    throw Error(fmt::format("cannot read the size of '{}': {}", path, std::strerror(errno)));
  if (!S_ISREG(info.st_mode))
    throw Error(
        fmt::format("'{}' is not a regular file (a directory, device or pipe); give the "
                    "path of a model file",
                    path));
  size_ = static_cast<std::size_t>(info.st_size);
  if (size_ == 0) return;  // mmap refuses a length of 0; an empty view is the honest answer
  void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, file.fd, 0);
  if (mapped == MAP_FAILED)
    throw Error(fmt::format("cannot map '{}' ({} bytes) into memory: {}", path, size_,
                            std::strerror(errno)));
  data_ = static_cast<const std::byte*>(mapped);
}

MappedFile MappedFile::copy_of(std::string name, ByteView bytes) {
  MappedFile file;
  file.path_ = std::move(name);
  if (bytes.size == 0) return file;
  // Exactly `size` bytes, so a memory checker sees any read past the end.
  file.copy_ = std::make_unique<std::byte[]>(bytes.size);
  std::memcpy(file.copy_.get(), bytes.data, bytes.size);
  file.data_ = file.copy_.get();
  file.size_ = bytes.size;
  return file;
}

MappedFile::~MappedFile() { unmap(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      copy_(std::move(other.copy_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    copy_ = std::move(other.copy_);
  }
  return *this;
}

void MappedFile::unmap() noexcept {
  if (copy_ != nullptr)
    copy_.reset();
  else if (data_ != nullptr)
    ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace kc::engine
