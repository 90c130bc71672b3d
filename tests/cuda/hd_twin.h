// Helpers of the host-twin tests (tests/cuda/test_hd_*.cc): the comparison with a stated
// tolerance, the kernels' block reduction and sum_to replayed on the host, and one-op runs on the
// CPU backend (the reference) with their input and weight gradients.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/hd/binary.h"
#include "tests/exec/op_harness.h"

namespace gp::exec::testing {

using Vec = std::vector<float>;

struct Tol {
  double abs;
  double rel;
};

// |got − ref| ≤ abs + rel·|ref| for every element (a NaN never passes).
inline ::testing::AssertionResult close(Vec const& got, Vec const& ref, Tol tol) {
  if (got.size() != ref.size())
    return ::testing::AssertionFailure() << got.size() << " values, expected " << ref.size();
  for (std::size_t i = 0; i < ref.size(); ++i) {
    double const g = got[i], r = ref[i];
    if (!(std::fabs(g - r) <= tol.abs + tol.rel * std::fabs(r)))
      return ::testing::AssertionFailure() << "element " << i << ": " << g << " vs reference " << r << " (tol "
                                           << tol.abs << " + " << tol.rel << "·|ref|)";
  }
  return ::testing::AssertionSuccess();
}

inline Vec values(Tensor const& t) { return t.to_vector(); }

// The kernels' block_reduce: one partial per thread, a butterfly over each warp's 32 lanes, then
// over the warp totals. Exact emulation: same operands, same order.
inline float tree(Vec v, bool is_max) {
  auto op = [&](float a, float b) { return is_max ? std::fmax(a, b) : a + b; };
  auto warp = [&](float* a) {
    for (int o = 16; o > 0; o >>= 1) {
      float b[32];
      for (int i = 0; i < 32; ++i) b[i] = op(a[i], a[i ^ o]);
      std::copy(b, b + 32, a);
    }
    return a[0];
  };
  std::size_t const warps = v.size() / 32;
  Vec w(32, is_max ? -INFINITY : 0.f);
  for (std::size_t k = 0; k < warps; ++k) w[k] = warp(&v[32 * k]);
  return warps == 1 ? w[0] : warp(w.data());
}
// A row of `cols` split over `block` threads (thread t takes c = t, t + block, ...), then the tree.
template <typename F>
float block_row(int block, int64_t cols, bool is_max, F f) {
  Vec part(static_cast<std::size_t>(block), is_max ? -INFINITY : 0.f);
  for (int t = 0; t < block; ++t)
    for (int64_t c = t; c < cols; c += block) part[t] = is_max ? std::fmax(part[t], f(c)) : part[t] + f(c);
  return tree(part, is_max);
}

// sum_to's two kernels: one thread per output, or one 256-thread block per output.
inline Vec sum_twin(Vec const& full, std::vector<int64_t> const& full_shape, std::vector<int64_t> const& target,
                    float scale, bool per_block) {
  kernels::hd::SumIndex p;
  EXPECT_TRUE(kernels::hd::make_sum_index(full_shape, target, p));
  Vec out(static_cast<std::size_t>(p.out_count));
  for (int64_t o = 0; o < p.out_count; ++o) {
    int64_t const base = kernels::hd::dim_offset(p.kept, o);
    float s = 0.f;
    if (per_block) {
      Vec part(256);
      for (int64_t t = 0; t < 256; ++t) part[t] = kernels::hd::sum_partial(full.data(), p, base, t, int64_t{256});
      s = tree(part, false);
    } else {
      s = kernels::hd::sum_partial(full.data(), p, base, int64_t{0}, int64_t{1});
    }
    out[o] = scale * s;
  }
  return out;
}

// One-op graph on the CPU backend: outputs, and the input and weight gradients for a random dy.
struct CpuRun {
  std::vector<Tensor> out;
  Tensor dy;
  std::vector<Tensor> gin, gw;
};

inline CpuRun run_cpu(OneOp const& o, bool training = true, uint64_t seed = 7) {
  CpuBackend be;
  CpuRun r;
  Saved saved;
  r.out = run_forward(be, o, training, seed, &saved);
  r.dy = random_tensor(r.out.at(0).shape(), 99, 0.1f, 1.f);
  OpCall call{o.the_op(), o.graph, training, seed};
  std::size_t const n = o.inputs.size();
  std::vector<bool> needs(n, false);
  r.gw.assign(n, Tensor());
  for (std::size_t i = 0; i < n; ++i) {
    if (!o.inputs[i].defined() || o.inputs[i].dtype() != DType::kFloat32) continue;
    if (o.roles[i] == graph::TensorRole::kInput) needs[i] = true;
    if (o.roles[i] == graph::TensorRole::kWeight) r.gw[i] = Tensor::zeros(o.inputs[i].shape());
  }
  Status s = be.backward_input(call, saved, {r.dy}, needs, r.gin);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  s = be.backward_weight(call, saved, {r.dy}, r.gw);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return r;
}

}  // namespace gp::exec::testing
