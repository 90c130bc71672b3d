// The thread-safety tests of what pipeline workers share in one process: oneDNN primitives run by
// several backends at once, and the tensor allocator. They live with the runtime's tests so that
// `scripts/test.sh --sanitize=thread` builds one test binary (runtime_tests) and runs them all.
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "exec/tensor.h"
#include "tests/exec/op_harness.h"

namespace gp::exec::testing {
namespace {

using graph::TensorRole;

TEST(CpuBackend, ConcurrentWorkersGetIdenticalResults) {
  Tensor x = random_tensor({2, 3, 8, 8}, 29), w = random_tensor({4, 3, 3, 3}, 30);
  OneOp o =
      make_op("Conv", graph::ConvAttrs{{3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1, false}, {{"x", x, kIn}, {"w", w, kW}});
  CpuBackend be;
  std::vector<float> const want = run_forward(be, o)[0].to_vector();
  std::vector<int> mismatches(2, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      CpuBackend mine;
      for (int i = 0; i < 20; ++i) {
        OpCall call{o.the_op(), o.graph, true, 0};
        std::vector<Tensor> out;
        if (!mine.forward(call, o.inputs, out, nullptr).is_ok() || out[0].to_vector() != want) ++mismatches[t];
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches, (std::vector<int>{0, 0}));
}

TEST(Tensor, AllocatorIsThreadSafe) {
  Allocator& a = cpu_allocator();
  int64_t const before = a.bytes_in_use();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([] {
      for (int i = 0; i < 2000; ++i) {
        Tensor x({static_cast<int64_t>(1 + i % 17)});
        x.fill(1.f);
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(a.bytes_in_use(), before);
}

}  // namespace
}  // namespace gp::exec::testing
