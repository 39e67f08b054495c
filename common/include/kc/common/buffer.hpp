// kc/common/buffer.hpp — RAII device and pinned-host buffers.
//
// Stage code never calls cudaMalloc/cudaFree itself: a DeviceBuffer<T> owns `size()` elements of
// device memory and frees them when it goes out of scope, so an exception thrown half-way through
// a benchmark leaks nothing. Buffers move but do not copy.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "kc/common/error.hpp"

namespace kc {
namespace detail {
// cudaMalloc with a message that says how much was asked for and how much is free.
void* device_allocate(std::size_t bytes);
void device_free(void* pointer) noexcept;
void* pinned_allocate(std::size_t bytes);
void pinned_free(void* pointer) noexcept;
}  // namespace detail

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count)
      : data_(static_cast<T*>(detail::device_allocate(count * sizeof(T)))), size_(count) {}
  ~DeviceBuffer() { detail::device_free(data_); }

  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      detail::device_free(data_);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  std::size_t bytes() const noexcept { return size_ * sizeof(T); }
  bool empty() const noexcept { return size_ == 0; }

  void copy_from_host(const T* host, std::size_t count, cudaStream_t stream = nullptr) {
    require(count <= size_, "copy_from_host: {} elements do not fit a buffer of {}", count, size_);
    KC_CUDA_CHECK(cudaMemcpyAsync(data_, host, count * sizeof(T), cudaMemcpyHostToDevice, stream));
    KC_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  void copy_from_host(const std::vector<T>& host, cudaStream_t stream = nullptr) {
    copy_from_host(host.data(), host.size(), stream);
  }
  // Synchronous copy of the whole buffer back to the host.
  std::vector<T> to_host(cudaStream_t stream = nullptr) const {
    std::vector<T> host(size_);
    if (size_ == 0) return host;
    KC_CUDA_CHECK(cudaMemcpyAsync(host.data(), data_, bytes(), cudaMemcpyDeviceToHost, stream));
    KC_CUDA_CHECK(cudaStreamSynchronize(stream));
    return host;
  }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

// Device memory a kernel keeps between launches (a split-K workspace, the S and P of an unfused
// attention chunk): grown to the largest size asked for, never shrunk. kc-bench's untimed
// warm-up makes the first, largest request, so no timed launch allocates.
class DeviceScratch {
 public:
  std::byte* reserve(std::size_t bytes) {
    if (buffer_.size() < bytes) {
      buffer_ = DeviceBuffer<std::byte>();  // free before allocating the larger one
      buffer_ = DeviceBuffer<std::byte>(bytes);
    }
    return buffer_.data();
  }

 private:
  DeviceBuffer<std::byte> buffer_;
};

// Arrival counters a kernel keeps between launches (the last CTA of a split-K reduction or of a
// paged decode's splits counts the others in): grown to the largest count asked for, zeroed on
// `stream` when (re)allocated, never cleared between launches — each launch leaves every counter
// it used at zero again. One stream at a time: two launches in flight together would share them.
class DeviceCounters {
 public:
  // True when it grew (and queued the zeroing on `stream`).
  bool reserve(std::size_t count, cudaStream_t stream) {
    if (buffer_.size() >= count) return false;
    buffer_ = DeviceBuffer<std::uint32_t>();  // free before allocating the larger one
    buffer_ = DeviceBuffer<std::uint32_t>(count);
    KC_CUDA_CHECK(cudaMemsetAsync(buffer_.data(), 0, buffer_.bytes(), stream));
    return true;
  }
  std::uint32_t* data() { return buffer_.data(); }

 private:
  DeviceBuffer<std::uint32_t> buffer_;
};

// Page-locked host memory: device<->host copies from it run at full PCIe/NVLink speed and can
// be asynchronous.
template <typename T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(std::size_t count)
      : data_(static_cast<T*>(detail::pinned_allocate(count * sizeof(T)))), size_(count) {}
  ~PinnedBuffer() { detail::pinned_free(data_); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  PinnedBuffer(PinnedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept {
    if (this != &other) {
      detail::pinned_free(data_);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  T& operator[](std::size_t i) noexcept { return data_[i]; }
  const T& operator[](std::size_t i) const noexcept { return data_[i]; }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace kc
