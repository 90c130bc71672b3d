// Host twin of the CUDA multi-tensor optimizer update (kernels/cuda/device_ops.cu's
// multi_sgd_kernel / multi_adam_kernel, CudaBackend::optimizer_update_all): the chunk plan and the
// per-element steps, one block per chunk and one loop iteration per thread as the kernels run,
// against the CPU backend's one-parameter updates, bit for bit.
#include <gtest/gtest.h>

#include <random>

#include "exec/cpu/cpu_backend.h"
#include "exec/optimizer.h"
#include "kernels/hd/optim.h"

namespace gp::exec {
namespace {

namespace hd = kernels::hd;

TEST(HdOptim, ChunksCoverEveryElementOnceInOrder) {
  std::vector<int64_t> const sizes{5, 0, 70000, 2 * hd::kMultiTensorChunk + 3};
  auto const chunks = hd::multi_tensor_chunks(sizes);
  ASSERT_EQ(chunks.size(), 1u + 2u + 3u);  // the empty parameter has none
  std::vector<int64_t> covered(sizes.size(), 0);
  for (auto const& c : chunks) {
    ASSERT_LT(c.begin, c.end);
    EXPECT_LE(c.end - c.begin, hd::kMultiTensorChunk);
    EXPECT_EQ(c.begin, covered[c.tensor]) << "chunks of one parameter are contiguous and in order";
    covered[c.tensor] = c.end;
  }
  EXPECT_EQ(covered, sizes);
}

struct Param {
  Tensor w, g, s0, s1;
};

Tensor random_vector(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = d(rng);
  return Tensor::from_floats({n}, v);
}

// Three steps of `config` over parameters of `sizes`: the multi-tensor twin against the CPU
// backend's optimizer_update, parameter by parameter.
void expect_twin_equals_cpu(OptimizerConfig const& config, std::vector<int64_t> const& sizes) {
  std::mt19937 rng(11);
  auto const moments = static_cast<std::size_t>(moment_count(config));
  std::vector<Param> twin, cpu;
  for (int64_t n : sizes) {
    Param p{random_vector(n, rng), random_vector(n, rng), Tensor::zeros({n}), Tensor::zeros({n})};
    twin.push_back({p.w.clone(), p.g.clone(), p.s0.clone(), p.s1.clone()});
    cpu.push_back({p.w.clone(), p.g.clone(), p.s0.clone(), p.s1.clone()});
  }
  std::vector<hd::MultiTensorEntry> entries;
  for (Param& p : twin)
    entries.push_back({p.w.data<float>(), p.g.data<float>(), moments > 0 ? p.s0.data<float>() : nullptr,
                       moments > 1 ? p.s1.data<float>() : nullptr, p.w.numel()});
  auto const chunks = hd::multi_tensor_chunks(sizes);
  CpuBackend be;
  for (int64_t step = 1; step <= 3; ++step) {
    int const threads = 256;  // the kernels' block size: thread t runs elements t, t + 256, ...
    for (auto const& c : chunks)
      for (int t = 0; t < threads; ++t)
        for (int64_t i = t; i < c.end - c.begin; i += threads) {
          if (config.kind == OptimizerKind::kSgd)
            hd::multi_sgd_at(entries.data(), c, i, config.lr, config.momentum, config.weight_decay);
          else
            hd::multi_adam_at(entries.data(), c, i, hd::adam_coeffs(adam_params(config, step)));
        }
    for (Param& p : cpu) {
      std::vector<Tensor*> state;
      if (moments > 0) state.push_back(&p.s0);
      if (moments > 1) state.push_back(&p.s1);
      ASSERT_TRUE(be.optimizer_update(config, step, p.w, p.g, state).is_ok());
    }
  }
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    EXPECT_EQ(twin[k].w.to_vector(), cpu[k].w.to_vector()) << "parameter " << k;
    EXPECT_EQ(twin[k].s0.to_vector(), cpu[k].s0.to_vector()) << "parameter " << k;
    EXPECT_EQ(twin[k].s1.to_vector(), cpu[k].s1.to_vector()) << "parameter " << k;
  }
}

TEST(HdOptim, MultiTensorStepsEqualOneUpdatePerParameterBitForBit) {
  std::vector<int64_t> const sizes{5, 0, 70000, 2 * hd::kMultiTensorChunk + 3};
  OptimizerConfig c;
  c.lr = 0.05f;
  c.kind = OptimizerKind::kSgd;
  c.momentum = 0.9f;
  c.weight_decay = 1e-3f;
  expect_twin_equals_cpu(c, sizes);
  c.momentum = 0.f;  // no momentum buffer
  expect_twin_equals_cpu(c, sizes);
  c.kind = OptimizerKind::kAdam;
  c.weight_decay = 1e-2f;
  expect_twin_equals_cpu(c, sizes);
  c.kind = OptimizerKind::kAdamW;
  expect_twin_equals_cpu(c, sizes);
}

}  // namespace
}  // namespace gp::exec
