// Per-element optimizer updates (kernels/cuda/device_ops.cu) with kernels/optim.cc's semantics
// (PyTorch 1.13): SGD with momentum and L2 decay, Adam, AdamW. The step-dependent bias
// corrections are computed once on the host, in double, as kernels/optim.cc does.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/hd/hd.h"
#include "kernels/optim.h"

namespace gp::kernels::hd {

// buf = momentum·buf + (g + wd·w); w −= lr·buf. Without momentum (buf unused): w −= lr·(g + wd·w).
template <typename T>
GP_HD void sgd_step(T& w, T g, T* buf, float lr, float momentum, float weight_decay) {
  float const wf = static_cast<float>(w);
  float const d = static_cast<float>(g) + weight_decay * wf;
  if (buf == nullptr) {
    w = static_cast<T>(wf - lr * d);
    return;
  }
  float const b = momentum * static_cast<float>(*buf) + d;
  *buf = static_cast<T>(b);
  w = static_cast<T>(wf - lr * b);
}

struct AdamCoeffs {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float step_size = 1e-3f;  // lr / (1 − beta1^step)
  float sqrt_bc2 = 1.f;     // √(1 − beta2^step)
  float decay = 1.f;        // AdamW: 1 − lr·wd, else 1
  float l2 = 0.f;           // Adam: wd, else 0
  bool decoupled = false;
};

inline AdamCoeffs adam_coeffs(AdamParams const& p) {
  double const bc1 = 1.0 - std::pow(static_cast<double>(p.beta1), static_cast<double>(p.step));
  double const bc2 = 1.0 - std::pow(static_cast<double>(p.beta2), static_cast<double>(p.step));
  AdamCoeffs c;
  c.beta1 = p.beta1;
  c.beta2 = p.beta2;
  c.eps = p.eps;
  c.step_size = static_cast<float>(p.lr / bc1);
  c.sqrt_bc2 = static_cast<float>(std::sqrt(bc2));
  c.decay = p.decoupled ? 1.f - p.lr * p.weight_decay : 1.f;
  c.l2 = p.decoupled ? 0.f : p.weight_decay;
  c.decoupled = p.decoupled;
  return c;
}

// torch: denom = √v / √bc2 + eps; w −= step_size · m / denom.
template <typename T>
GP_HD void adam_step(T& w, T g, T& m, T& v, AdamCoeffs const& c) {
  float wf = static_cast<float>(w);
  if (c.decoupled) wf *= c.decay;
  float const d = static_cast<float>(g) + c.l2 * wf;
  float const mf = c.beta1 * static_cast<float>(m) + (1.f - c.beta1) * d;
  float const vf = c.beta2 * static_cast<float>(v) + (1.f - c.beta2) * d * d;
  m = static_cast<T>(mf);
  v = static_cast<T>(vf);
  float const denom = sqrtf(vf) / c.sqrt_bc2 + c.eps;
  w = static_cast<T>(wf - c.step_size * mf / denom);
}

// ---- Multi-tensor updates: every parameter of a stage in one launch (PyTorch's foreach/fused
// optimizers do the same): a table of the parameters and a list of chunks, one block per chunk. ----

// One parameter: weights, gradient, the moments (s0: SGD's momentum or Adam's m; s1: Adam's v;
// null where the optimizer keeps none) and its element count.
struct MultiTensorEntry {
  float* w = nullptr;
  float const* g = nullptr;
  float* s0 = nullptr;
  float* s1 = nullptr;
  int64_t n = 0;
};
inline bool operator==(MultiTensorEntry const& a, MultiTensorEntry const& b) {
  return a.w == b.w && a.g == b.g && a.s0 == b.s0 && a.s1 == b.s1 && a.n == b.n;
}

// Elements [begin, end) of entry `tensor`.
struct MultiTensorChunk {
  int64_t tensor = 0;
  int64_t begin = 0;
  int64_t end = 0;
};

inline constexpr int64_t kMultiTensorChunk = 65536;

// The chunks of entries of `sizes` elements: each entry cut into pieces of at most `chunk`, in
// entry order; an empty entry has none.
inline std::vector<MultiTensorChunk> multi_tensor_chunks(std::vector<int64_t> const& sizes,
                                                         int64_t chunk = kMultiTensorChunk) {
  std::vector<MultiTensorChunk> out;
  for (std::size_t t = 0; t < sizes.size(); ++t)
    for (int64_t b = 0; b < sizes[t]; b += chunk)
      out.push_back({static_cast<int64_t>(t), b, b + chunk < sizes[t] ? b + chunk : sizes[t]});
  return out;
}

// Element i of chunk c: the same per-element step as the one-parameter kernels, so a multi-tensor
// update equals one update per parameter bit for bit.
GP_HD void multi_sgd_at(MultiTensorEntry const* entries, MultiTensorChunk const& c, int64_t i, float lr, float momentum,
                        float weight_decay) {
  MultiTensorEntry const& e = entries[c.tensor];
  int64_t const k = c.begin + i;
  sgd_step(e.w[k], e.g[k], e.s0 != nullptr ? e.s0 + k : nullptr, lr, momentum, weight_decay);
}
GP_HD void multi_adam_at(MultiTensorEntry const* entries, MultiTensorChunk const& c, int64_t i, AdamCoeffs const& a) {
  MultiTensorEntry const& e = entries[c.tensor];
  int64_t const k = c.begin + i;
  adam_step(e.w[k], e.g[k], e.s0[k], e.s1[k], a);
}

}  // namespace gp::kernels::hd
