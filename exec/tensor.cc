#include "exec/tensor.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <sstream>

#include "exec/host_cache.h"
#include "kernels/bf16.h"
#include "kernels/vector_ops.h"

namespace gp::exec {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCacheLargeBlocks = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kCacheLargeBlocks = false;
#else
constexpr bool kCacheLargeBlocks = true;
#endif
#else
constexpr bool kCacheLargeBlocks = true;
#endif

// Freed blocks of kHostCacheMinBytes or more, by size class (exec/host_cache.h).
class LargeBlockCache {
 public:
  static std::size_t size_class(std::size_t rounded) {
    constexpr std::size_t kMiB = std::size_t{1} << 20;
    return rounded >= kHostCacheMinBytes ? (rounded + kMiB - 1) / kMiB * kMiB : rounded;
  }
  void* take(std::size_t cls) {
    if (!kCacheLargeBlocks || cls < kHostCacheMinBytes) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blocks_.find(cls);
    if (it == blocks_.end()) return nullptr;
    void* p = it->second;
    blocks_.erase(it);
    held_ -= cls;
    return p;
  }
  bool keep(void* p, std::size_t cls) {
    if (!kCacheLargeBlocks || cls < kHostCacheMinBytes) return false;
    std::lock_guard<std::mutex> lock(mu_);
    if (held_ + cls > host_cache_limit_bytes()) return false;
    blocks_.emplace(cls, p);
    held_ += cls;
    return true;
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [cls, p] : blocks_) std::free(p);
    blocks_.clear();
    held_ = 0;
  }
  int64_t held() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int64_t>(held_);
  }

 private:
  mutable std::mutex mu_;
  std::multimap<std::size_t, void*> blocks_;
  std::size_t held_ = 0;
};

LargeBlockCache& large_blocks() {
  // Never destroyed: tensors of other static objects may be freed after it would be.
  static auto* cache = new LargeBlockCache;
  return *cache;
}

class CpuAllocator final : public Allocator {
 public:
  DeviceRef device() const override { return {DeviceKind::kCpu, 0}; }

  void* allocate(std::size_t bytes) override {
    std::size_t const cls = block_size(bytes);
    void* p = large_blocks().take(cls);
    if (p == nullptr) p = std::aligned_alloc(kAlign, cls);
    if (p == nullptr) {  // what the cache holds may be what is missing
      large_blocks().release();
      p = std::aligned_alloc(kAlign, cls);
    }
    if (p == nullptr) throw std::bad_alloc();
    int64_t const now = in_use_.fetch_add(static_cast<int64_t>(bytes)) + static_cast<int64_t>(bytes);
    int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    return p;
  }

  void deallocate(void* ptr, std::size_t bytes) override {
    if (ptr == nullptr) return;
    if (!large_blocks().keep(ptr, block_size(bytes))) std::free(ptr);
    in_use_.fetch_sub(static_cast<int64_t>(bytes));
  }

  int64_t bytes_in_use() const override { return in_use_.load(); }
  int64_t peak_bytes() const override { return peak_.load(); }

 private:
  static constexpr std::size_t kAlign = 64;
  // aligned_alloc needs a size that is a multiple of the alignment; never zero. Large blocks are
  // rounded up to their cache size class (whole MiB), so that a kept block fits its next use.
  static std::size_t block_size(std::size_t bytes) {
    return LargeBlockCache::size_class(((bytes == 0 ? 1 : bytes) + kAlign - 1) / kAlign * kAlign);
  }
  std::atomic<int64_t> in_use_{0};
  std::atomic<int64_t> peak_{0};
};

}  // namespace

std::size_t host_cache_limit_bytes() {
  static std::size_t const limit = [] {
    long const pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    std::size_t const quarter = pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * page / 4 : 0;
    std::size_t const max = std::size_t{4} << 30;
    return quarter > 0 ? std::min(quarter, max) : std::size_t{1} << 30;
  }();
  return limit;
}

int64_t host_cached_bytes() { return large_blocks().held(); }
void release_host_cache() { large_blocks().release(); }
bool host_cache_enabled() { return kCacheLargeBlocks; }

namespace {
thread_local Allocator* t_thread_allocator = nullptr;

void raise_peak(std::atomic<int64_t>& peak, int64_t now) {
  int64_t p = peak.load();
  while (now > p && !peak.compare_exchange_weak(p, now)) {
  }
}
}  // namespace

Allocator& process_cpu_allocator() {
  static CpuAllocator alloc;
  return alloc;
}

Allocator& cpu_allocator() { return t_thread_allocator ? *t_thread_allocator : process_cpu_allocator(); }

void* CountingAllocator::allocate(std::size_t bytes) {
  void* p = parent_.allocate(bytes);
  raise_peak(peak_, in_use_.fetch_add(static_cast<int64_t>(bytes)) + static_cast<int64_t>(bytes));
  return p;
}

void CountingAllocator::deallocate(void* ptr, std::size_t bytes) {
  if (ptr == nullptr) return;
  parent_.deallocate(ptr, bytes);
  in_use_.fetch_sub(static_cast<int64_t>(bytes));
}

ScopedThreadAllocator::ScopedThreadAllocator(Allocator& alloc) : previous_(t_thread_allocator) {
  t_thread_allocator = &alloc;
}
ScopedThreadAllocator::~ScopedThreadAllocator() { t_thread_allocator = previous_; }

struct Tensor::Storage {
  Allocator* alloc = nullptr;
  void* ptr = nullptr;
  std::size_t bytes = 0;
  Storage(Allocator& a, std::size_t n) : alloc(&a), ptr(a.allocate(n)), bytes(n) {}
  ~Storage() { alloc->deallocate(ptr, bytes); }
  Storage(Storage const&) = delete;
  Storage& operator=(Storage const&) = delete;
};

namespace {
int64_t product(std::vector<int64_t> const& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}
}  // namespace

Tensor::Tensor(std::vector<int64_t> shape, DType dtype, Allocator& alloc) : shape_(std::move(shape)), dtype_(dtype) {
  for ([[maybe_unused]] int64_t d : shape_) assert(d >= 0 && "tensor dimensions must be concrete (kBatch resolved)");
  // Not nbytes(): that is 0 until the storage exists.
  storage_ = std::make_shared<Storage>(alloc, static_cast<std::size_t>(numel()) * graph::dtype_size(dtype_));
  data_ = storage_->ptr;
}

Tensor Tensor::zeros(std::vector<int64_t> shape, DType dtype, Allocator& alloc) {
  Tensor t(std::move(shape), dtype, alloc);
  if (t.nbytes() > 0) alloc.zero_bytes(t.raw(), t.nbytes());
  return t;
}

Tensor Tensor::from_data(graph::TensorData const& data) {
  Tensor t(data.dims, data.dtype);
  std::size_t const n = std::min(t.nbytes(), data.bytes.size());
  if (n > 0) std::memcpy(t.raw(), data.bytes.data(), n);
  return t;
}

Tensor Tensor::from_floats(std::vector<int64_t> shape, std::vector<float> const& values) {
  Tensor t(std::move(shape), DType::kFloat32);
  assert(static_cast<int64_t>(values.size()) == t.numel());
  if (!values.empty()) std::memcpy(t.raw(), values.data(), t.nbytes());
  return t;
}

int64_t Tensor::numel() const { return product(shape_); }

DeviceRef Tensor::device() const { return storage_ ? storage_->alloc->device() : DeviceRef{}; }

Tensor Tensor::reshaped(std::vector<int64_t> shape) const {
  assert(product(shape) == numel());
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::clone() const {
  if (!defined()) return {};
  return clone_to(*storage_->alloc);
}

Tensor Tensor::clone_to(Allocator& alloc) const {
  if (!defined()) return {};
  Tensor t(shape_, dtype_, alloc);
  copy_bytes_into(t);
  return t;
}

void Tensor::copy_bytes_into(Tensor& dst) const {
  std::size_t const n = nbytes();
  assert(dst.nbytes() == n);
  if (n == 0) return;
  Allocator& from = *storage_->alloc;
  Allocator& to = dst.allocator();
  bool const from_host = from.device().kind == DeviceKind::kCpu;
  bool const to_host = to.device().kind == DeviceKind::kCpu;
  if (from_host && to_host) {
    std::memcpy(dst.raw(), raw(), n);
  } else if (from_host) {
    to.copy_from_host(dst.raw(), raw(), n);
  } else if (to_host) {
    from.copy_to_host(dst.raw(), raw(), n);
  } else if (from.device() == to.device()) {
    to.copy_within(dst.raw(), raw(), n);
  } else if (!to.copy_from_peer(dst.raw(), from, raw(), n)) {
    // Device to another device, where the two cannot copy directly: through the host.
    std::vector<std::byte> staging(n);
    from.copy_to_host(staging.data(), raw(), n);
    to.copy_from_host(dst.raw(), staging.data(), n);
  }
}

Allocator& Tensor::allocator() const {
  assert(defined());
  return *storage_->alloc;
}

void Tensor::fill(float value) {
  assert(dtype_ == DType::kFloat32 || dtype_ == DType::kBFloat16);
  assert(device().kind == DeviceKind::kCpu && "Tensor::fill is host-only: use Backend::fill");
  if (dtype_ == DType::kBFloat16) {
    std::fill_n(data<uint16_t>(), numel(), kernels::float_to_bf16(value));
    return;
  }
  kernels::fill(data<float>(), value, numel());
}

std::vector<float> Tensor::to_vector() const {
  if (!defined()) return {};
  if (device().kind != DeviceKind::kCpu) return clone_to(process_cpu_allocator()).to_vector();
  std::vector<float> out(static_cast<std::size_t>(numel()));
  if (dtype_ == DType::kFloat32) {
    if (!out.empty()) std::memcpy(out.data(), raw(), nbytes());
  } else if (dtype_ == DType::kBFloat16) {
    kernels::bf16_to_float(data<uint16_t>(), numel(), out.data());
  } else if (dtype_ == DType::kFloat16) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = kernels::half_to_float(data<uint16_t>()[i]);
  } else if (dtype_ == DType::kFloat64) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(data<double>()[i]);
  } else if (dtype_ == DType::kInt64) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(data<int64_t>()[i]);
  } else if (dtype_ == DType::kInt32) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(data<int32_t>()[i]);
  } else if (dtype_ == DType::kInt8) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(data<int8_t>()[i]);
  } else if (dtype_ == DType::kUInt8 || dtype_ == DType::kBool) {  // a bool is one byte, 0 or 1
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(data<uint8_t>()[i]);
  } else {
    assert(false && "to_vector: unsupported dtype");
  }
  return out;
}

std::string Tensor::shape_string() const {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < shape_.size(); ++i) os << (i ? "," : "") << shape_[i];
  os << ']';
  return os.str();
}

}  // namespace gp::exec
