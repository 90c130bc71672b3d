// Tensors of the executor: dense, row-major, owning (shared) storage on one device.
// Any dtype of graph::DType; the float kernels run float32 and (mixed precision) bfloat16.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "graph/op_graph.h"

namespace gp::exec {

using graph::DType;

enum class DeviceKind : uint8_t { kCpu, kCuda };
struct DeviceRef {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;
  bool operator==(DeviceRef const&) const = default;
};

// A point in a device's queued work that another thread can wait for on the host: calling it
// returns once everything enqueued before the point is done (its error, if that work failed). Made
// by Backend::fence; empty where work runs as it is issued (the CPU).
using HostFence = std::function<Status()>;

// Owns raw bytes on one device. CPU allocations are 64-byte aligned.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual DeviceRef device() const = 0;
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* ptr, std::size_t bytes) = 0;
  virtual int64_t bytes_in_use() const = 0;
  virtual int64_t peak_bytes() const = 0;
  virtual void reset_peak() {}  // peak := bytes in use now (where the allocator tracks one)

  // Byte moves on memory this allocator made, the other side being host memory where named. The
  // CPU allocator uses memcpy/memset; a device allocator its runtime, synchronously, so that
  // Tensor's edge copies (zeros, clone, to_vector) work on any device without a vendor header
  // here. A device allocator throws std::runtime_error naming the call when its runtime fails.
  virtual void zero_bytes(void* ptr, std::size_t n) { std::memset(ptr, 0, n); }
  virtual void copy_to_host(void* host_dst, void const* src, std::size_t n) { std::memcpy(host_dst, src, n); }
  virtual void copy_from_host(void* dst, void const* host_src, std::size_t n) { std::memcpy(dst, host_src, n); }
  virtual void copy_within(void* dst, void const* src, std::size_t n) { std::memcpy(dst, src, n); }
  // Into memory this allocator made, from memory `from` made on another device, after the work
  // queued on either side (as a copy through the host would be): true when done directly (a GPU's
  // peer copy), false when the caller must stage through the host.
  virtual bool copy_from_peer(void* /*dst*/, Allocator& /*from*/, void const* /*src*/, std::size_t /*n*/) {
    return false;
  }
};
// The allocator new CPU tensors of the calling thread come from: the process-wide one, unless the
// thread installed its own (a pipeline worker does, so that each device's memory is counted and
// limited apart). Thread-safe; a tensor is freed by the allocator that made it, on any thread.
Allocator& cpu_allocator();
Allocator& process_cpu_allocator();  // process-wide, thread-safe, tracks bytes in use and peak

// Counts what one device holds: allocations go to the process allocator, bytes in use and the
// peak are its own.
class CountingAllocator final : public Allocator {
 public:
  explicit CountingAllocator(Allocator& parent = process_cpu_allocator()) : parent_(parent) {}
  DeviceRef device() const override { return parent_.device(); }
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) override;
  int64_t bytes_in_use() const override { return in_use_.load(); }
  int64_t peak_bytes() const override { return peak_.load(); }
  void zero_bytes(void* ptr, std::size_t n) override { parent_.zero_bytes(ptr, n); }
  void copy_to_host(void* host_dst, void const* src, std::size_t n) override { parent_.copy_to_host(host_dst, src, n); }
  void copy_from_host(void* dst, void const* host_src, std::size_t n) override {
    parent_.copy_from_host(dst, host_src, n);
  }
  void copy_within(void* dst, void const* src, std::size_t n) override { parent_.copy_within(dst, src, n); }
  void reset_peak() override { peak_.store(in_use_.load()); }

 private:
  Allocator& parent_;
  std::atomic<int64_t> in_use_{0};
  std::atomic<int64_t> peak_{0};
};

// Installs `alloc` as the calling thread's CPU allocator for the scope's lifetime.
class ScopedThreadAllocator {
 public:
  explicit ScopedThreadAllocator(Allocator& alloc);
  ~ScopedThreadAllocator();
  ScopedThreadAllocator(ScopedThreadAllocator const&) = delete;
  ScopedThreadAllocator& operator=(ScopedThreadAllocator const&) = delete;

 private:
  Allocator* previous_;
};

class Tensor {
 public:
  Tensor() = default;  // empty (no storage): an absent optional input or gradient
  Tensor(std::vector<int64_t> shape, DType dtype = DType::kFloat32, Allocator& alloc = cpu_allocator());
  static Tensor zeros(std::vector<int64_t> shape, DType dtype = DType::kFloat32, Allocator& alloc = cpu_allocator());
  static Tensor from_data(graph::TensorData const& data);  // CPU copy of an initializer/constant
  static Tensor from_floats(std::vector<int64_t> shape, std::vector<float> const& values);

  bool defined() const { return storage_ != nullptr; }
  std::vector<int64_t> const& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_.at(i); }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t numel() const;  // the shape's product: 1 for an undefined tensor's empty shape
  DType dtype() const { return dtype_; }
  DeviceRef device() const;
  // The storage's size: 0 for an undefined tensor, so that `if (t.nbytes() > 0) memset/copy` never
  // touches the null pointer of an absent tensor.
  std::size_t nbytes() const { return defined() ? static_cast<std::size_t>(numel()) * graph::dtype_size(dtype_) : 0; }

  void* raw() { return data_; }
  void const* raw() const { return data_; }
  template <typename T>
  T* data() {
    return static_cast<T*>(data_);
  }
  template <typename T>
  T const* data() const {
    return static_cast<T const*>(data_);
  }

  // Same storage, new shape (numel must match).
  Tensor reshaped(std::vector<int64_t> shape) const;
  Tensor clone() const;                     // deep copy on the same device
  Tensor clone_to(Allocator& alloc) const;  // deep copy into `alloc`'s memory (any device to any device)
  // This tensor's bytes into `dst` (as many bytes, any device to any device), as clone_to copies.
  void copy_bytes_into(Tensor& dst) const;
  void fill(float value);                // float32 or bfloat16, host memory only (devices: Backend::fill)
  std::vector<float> to_vector() const;  // → host floats (copies from a device)
  Allocator& allocator() const;          // the allocator that made the storage (defined() only)
  std::string shape_string() const;

 private:
  struct Storage;
  std::shared_ptr<Storage> storage_;
  void* data_ = nullptr;
  std::vector<int64_t> shape_;
  DType dtype_ = DType::kFloat32;
};

}  // namespace gp::exec
