#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "exec/backend.h"
#include "exec/cpu/cpu_backend.h"
#include "exec/host_cache.h"
#include "exec/tensor.h"

namespace gp::exec {
namespace {

TEST(Tensor, AllocationsAreAlignedAndTracked) {
  Allocator& a = cpu_allocator();
  int64_t const before = a.bytes_in_use();
  {
    Tensor t({3, 5});
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.raw()) % 64, 0u);
    EXPECT_EQ(a.bytes_in_use() - before, 60);
    EXPECT_GE(a.peak_bytes(), a.bytes_in_use());
    Tensor odd({1}, DType::kUInt8);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(odd.raw()) % 64, 0u);
  }
  EXPECT_EQ(a.bytes_in_use(), before);
}

// A large block is kept when freed and reused for the next tensor of its size class, so that the
// pages of a step's batch and activations are not faulted in again every step (exec/host_cache.h);
// small ones are not kept, the cache stays under its limit and can be emptied. Without the cache
// (AddressSanitizer builds) nothing is kept.
TEST(Tensor, LargeBlocksAreReusedWithinTheCacheLimit) {
  release_host_cache();
  std::vector<int64_t> const big = {int64_t{10} << 20};  // 40 MiB of float32
  void* first = nullptr;
  {
    Tensor t(big);
    first = t.raw();
    t.fill(1.f);
  }
  if (!host_cache_enabled()) {
    EXPECT_EQ(host_cached_bytes(), 0);
    GTEST_SKIP() << "the large-block cache is off in this build (AddressSanitizer)";
  }
  EXPECT_EQ(host_cached_bytes(), int64_t{40} << 20);
  {
    Tensor same_class({(int64_t{10} << 20) - 1000});  // rounds up to the same 40 MiB
    EXPECT_EQ(same_class.raw(), first);
    EXPECT_EQ(host_cached_bytes(), 0);
    Tensor other({int64_t{11} << 20});  // another class: a new block
    EXPECT_NE(other.raw(), first);
  }
  EXPECT_EQ(host_cached_bytes(), int64_t{84} << 20);
  { Tensor small({1000}); }  // 4 KB: never kept
  EXPECT_EQ(host_cached_bytes(), int64_t{84} << 20);
  {
    // More 40 MiB blocks in use at once than the cache may hold (never touched: address space
    // only), then freed: the cache fills up to its limit and frees the rest.
    auto const limit = static_cast<int64_t>(host_cache_limit_bytes());
    EXPECT_GE(limit, int64_t{256} << 20);
    EXPECT_LE(limit, int64_t{4} << 30);
    std::vector<Tensor> many;
    for (int64_t i = 0; i < limit / (int64_t{40} << 20) + 2; ++i) many.emplace_back(big);
    many.clear();
    EXPECT_LE(host_cached_bytes(), limit);
    EXPECT_GE(host_cached_bytes(), limit - (int64_t{44} << 20));
  }
  release_host_cache();
  EXPECT_EQ(host_cached_bytes(), 0);
}

// An absent tensor has no bytes: `if (t.nbytes() > 0) memset/copy` must not touch its null pointer
// (its empty shape's product, numel(), is 1).
TEST(Tensor, UndefinedTensorHasNoBytes) {
  Tensor const absent;
  EXPECT_FALSE(absent.defined());
  EXPECT_EQ(absent.raw(), nullptr);
  EXPECT_EQ(absent.nbytes(), 0u);
  EXPECT_EQ(Tensor(std::vector<int64_t>{}).nbytes(), 4u);  // a defined scalar still has its element
  EXPECT_EQ(Tensor({2, 0}).nbytes(), 0u);
}

TEST(Tensor, CopyRefusesAnUndefinedSide) {
  CpuBackend cpu;
  Tensor src = Tensor::from_floats({}, {1.f}), absent;
  EXPECT_FALSE(cpu.copy(src, absent).is_ok());
  EXPECT_FALSE(cpu.copy(absent, src).is_ok());
  EXPECT_FALSE(cpu.add_into(absent, src).is_ok());
  EXPECT_FALSE(cpu.fill(absent, 1.f).is_ok());
  EXPECT_TRUE(cpu.copy(Tensor(), absent).is_ok());
}

TEST(Tensor, PeakIsAHighWaterMark) {
  Allocator& a = cpu_allocator();
  int64_t const base = a.bytes_in_use();
  { Tensor big({1 << 20}); }
  EXPECT_GE(a.peak_bytes(), base + (4 << 20));
  EXPECT_EQ(a.bytes_in_use(), base);
}

TEST(Tensor, ReshapeSharesStorageCloneCopies) {
  Tensor t = Tensor::from_floats({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor r = t.reshaped({3, 2});
  EXPECT_EQ(r.raw(), t.raw());
  EXPECT_EQ(r.shape_string(), "[3,2]");
  Tensor c = t.clone();
  EXPECT_NE(c.raw(), t.raw());
  c.data<float>()[0] = 42.f;
  EXPECT_EQ(t.to_vector()[0], 1.f);
  EXPECT_EQ(Tensor::zeros({4}).to_vector(), std::vector<float>(4, 0.f));
  EXPECT_FALSE(Tensor().defined());
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.nbytes(), 24u);
  EXPECT_EQ(t.device(), (DeviceRef{DeviceKind::kCpu, 0}));
}

TEST(Tensor, FromDataCopiesInitializers) {
  auto d = graph::TensorData::from_int64s({3}, {7, -1, 9});
  Tensor t = Tensor::from_data(d);
  EXPECT_EQ(t.dtype(), DType::kInt64);
  EXPECT_EQ(t.data<int64_t>()[2], 9);
  EXPECT_EQ(t.to_vector(), (std::vector<float>{7, -1, 9}));
}

TEST(Saved, BytesCountSharedStorageOnce) {
  Tensor a({10});
  Saved s;
  s.tensors = {a, a.reshaped({2, 5}), Tensor({3}), Tensor()};
  EXPECT_EQ(s.bytes(), 40 + 12);
}

}  // namespace
}  // namespace gp::exec
