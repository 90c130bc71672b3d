#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "exec/backend.h"
#include "exec/cpu/cpu_backend.h"
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
