// Per-element math of one time step of LSTM (gates i o f c) and GRU (gates z r h), ONNX semantics
// with the default activations, and of a plain RNN (one gate, Tanh, Relu or Sigmoid), forward and
// backward: what the CUDA kernels (kernels/cuda/rnn.cu)
// run per thread and the host twin (tests/cuda/test_hd_rnn.cc) per loop iteration. The step's
// matrix products happen around these calls (exec/rnn_plan.cc). Element (n, j) of a step is
// e = n·H + j of the [N, H] state (a kernel's thread e runs (e / H, e % H); host loops run n and j
// without dividing); gate rows are [N, G·H]. A null pointer reads as zeros (no bias, no
// peepholes, no dY, no recurrent product) or is not written (no clip mask).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/hd/hd.h"

// The step functions run once per element from the CPU backend's loops too: force them inline
// there (as GP_HD does on the device), so the loops keep their per-step checks hoisted.
#if defined(__CUDACC__)
#define GP_HD_STEP GP_HD
#else
#define GP_HD_STEP [[gnu::always_inline]] inline
#endif

namespace gp::kernels::hd {

GP_HD float rnn_sigmoid(float x) { return 1.f / (1.f + expf(-x)); }

// A gate's pre-activation clipped to [-clip, clip] (clip > 0); *mask (when given) records whether
// the gradient passes.
GP_HD float rnn_clipped(float x, float clip, float* mask) {
  if (clip <= 0.f) return x;
  bool const pass = x >= -clip && x <= clip;
  if (mask) *mask = pass ? 1.f : 0.f;
  return pass ? x : (x > 0 ? clip : -clip);
}
GP_HD float rnn_mask_at(float const* m, int64_t i) { return m ? m[i] : 1.f; }

struct LstmStep {
  int64_t n = 0, h = 0;
  float clip = 0.f;
  float* a = nullptr;           // [N, 4H]: x·Wᵀ + h_prev·Rᵀ in; the activated gates i o f c out
  float const* bias = nullptr;  // [8H]: Wb then Rb
  float const* p = nullptr;     // [3H]: peepholes i o f
  float const* cp = nullptr;    // [N, H] the previous cell state
  float* c = nullptr;           // [N, H]
  float* y = nullptr;           // [N, H] the hidden state
  float* mask = nullptr;        // [N, 4H] clip pass-through, or null
};

GP_HD_STEP void lstm_forward_at(LstmStep const& s, int64_t n, int64_t j) {
  int64_t const H = s.h, GH = 4 * H, row = n * GH, e = n * H + j;
  float* a = s.a + row;
  auto pre = [&](int64_t gate) {
    float v = a[gate * H + j];
    if (s.bias) v += s.bias[gate * H + j] + s.bias[GH + gate * H + j];
    return v;
  };
  float gi = pre(0), go = pre(1), gf = pre(2), gc = pre(3);
  float const cp = s.cp[e];
  if (s.p) {
    gi += s.p[j] * cp;
    gf += s.p[2 * H + j] * cp;
  }
  float* mr = s.mask ? s.mask + row + j : nullptr;
  float const i = rnn_sigmoid(rnn_clipped(gi, s.clip, mr));
  float const fg = rnn_sigmoid(rnn_clipped(gf, s.clip, mr ? mr + 2 * H : nullptr));
  float const cc = tanhf(rnn_clipped(gc, s.clip, mr ? mr + 3 * H : nullptr));
  float const c = fg * cp + i * cc;
  s.c[e] = c;
  if (s.p) go += s.p[H + j] * c;
  float const o = rnn_sigmoid(rnn_clipped(go, s.clip, mr ? mr + H : nullptr));
  s.y[e] = o * tanhf(c);
  a[j] = i;
  a[H + j] = o;
  a[2 * H + j] = fg;
  a[3 * H + j] = cc;
}

struct LstmBackStep {
  int64_t n = 0, h = 0;
  float const* a = nullptr;     // [N, 4H] the activated gates
  float const* mask = nullptr;  // [N, 4H] or null
  float const* c = nullptr;     // [N, H] this step's cell state
  float const* cp = nullptr;    // [N, H] the previous one
  float const* p = nullptr;     // [3H] or null
  float const* dh = nullptr;    // [N, H] gradient of h from later steps (and dY_h)
  float const* dy = nullptr;    // [N, H] this step's slice of dY, or null
  float* dc = nullptr;          // [N, H] gradient of c: this step's in, the previous step's out
  float* g = nullptr;           // [N, 4H] out: gradients of the gates' pre-activations
};

GP_HD_STEP void lstm_backward_at(LstmBackStep const& s, int64_t n, int64_t j) {
  int64_t const H = s.h, GH = 4 * H, row = n * GH, e = n * H + j;
  float const* a = s.a + row;
  float const* m = s.mask ? s.mask + row : nullptr;
  float const dh = s.dh[e] + (s.dy ? s.dy[e] : 0.f);
  float const i = a[j], o = a[H + j], fg = a[2 * H + j], cc = a[3 * H + j];
  float const c = s.c[e], cp = s.cp[e];
  float const tc = tanhf(c);
  float dcv = s.dc[e] + dh * o * (1.f - tc * tc);
  float const go = dh * tc * o * (1.f - o) * rnn_mask_at(m, H + j);
  if (s.p) dcv += go * s.p[H + j];
  float const gi = dcv * cc * i * (1.f - i) * rnn_mask_at(m, j);
  float const gf = dcv * cp * fg * (1.f - fg) * rnn_mask_at(m, 2 * H + j);
  float const gc = dcv * i * (1.f - cc * cc) * rnn_mask_at(m, 3 * H + j);
  s.dc[e] = dcv * fg + (s.p ? gi * s.p[j] + gf * s.p[2 * H + j] : 0.f);
  float* g = s.g + row;
  g[j] = gi;
  g[H + j] = go;
  g[2 * H + j] = gf;
  g[3 * H + j] = gc;
}

// dp[j], dp[H + j], dp[2H + j] (peepholes i o f) += this step's contributions, summed over n in
// order: one thread per j, after lstm_backward_at wrote s.g.
GP_HD_STEP void lstm_peephole_grad_at(LstmBackStep const& s, float* dp, int64_t j) {
  int64_t const H = s.h, GH = 4 * H;
  float pi = dp[j], po = dp[H + j], pf = dp[2 * H + j];
  for (int64_t n = 0; n < s.n; ++n) {
    int64_t const row = n * GH, k = n * H + j;
    pi += s.g[row + j] * s.cp[k];
    po += s.g[row + H + j] * s.c[k];
    pf += s.g[row + 2 * H + j] * s.cp[k];
  }
  dp[j] = pi;
  dp[H + j] = po;
  dp[2 * H + j] = pf;
}

struct GruStep {
  int64_t n = 0, h = 0;
  float clip = 0.f;
  bool lbr = false;             // linear_before_reset
  float* a = nullptr;           // [N, 3H]: x·Wᵀ in; the activated gates z r h out
  float const* rec = nullptr;   // [N, 3H] h_prev·Rᵀ (z, r; h when lbr; (r∘h_prev)·Rhᵀ else), or null
  float const* bias = nullptr;  // [6H]: Wb then Rb
  float const* hp = nullptr;    // [N, H] the previous hidden state
  float* hh = nullptr;          // [N, H]: lbr: h_prev·Rhᵀ + Rbh; else r∘h_prev
  float* y = nullptr;           // [N, H] the hidden state
  float* mask = nullptr;        // [N, 3H] or null
};

GP_HD float gru_bias(GruStep const& s, int64_t gate, int64_t j, bool rec) {
  int64_t const GH = 3 * s.h;
  return s.bias ? s.bias[gate * s.h + j] + (rec ? s.bias[GH + gate * s.h + j] : 0.f) : 0.f;
}
GP_HD float gru_rec(GruStep const& s, int64_t i) { return s.rec ? s.rec[i] : 0.f; }

// First half of a step: z and r, then hh (which the h gate's product needs when not lbr).
GP_HD_STEP void gru_gates_at(GruStep const& s, int64_t n, int64_t j) {
  int64_t const H = s.h, GH = 3 * H, row = n * GH, e = n * H + j;
  float* mr = s.mask ? s.mask + row + j : nullptr;
  float const z = rnn_sigmoid(rnn_clipped(s.a[row + j] + gru_rec(s, row + j) + gru_bias(s, 0, j, true), s.clip, mr));
  float const r = rnn_sigmoid(
      rnn_clipped(s.a[row + H + j] + gru_rec(s, row + H + j) + gru_bias(s, 1, j, true), s.clip, mr ? mr + H : nullptr));
  s.a[row + j] = z;
  s.a[row + H + j] = r;
  s.hh[e] = s.lbr ? gru_rec(s, row + 2 * H + j) + (s.bias ? s.bias[GH + 2 * H + j] : 0.f) : r * s.hp[e];
}

// Second half: the h gate and the new hidden state.
GP_HD_STEP void gru_output_at(GruStep const& s, int64_t n, int64_t j) {
  int64_t const H = s.h, row = n * 3 * H, e = n * H + j;
  float const r = s.a[row + H + j];
  float const pre = s.lbr ? s.a[row + 2 * H + j] + gru_bias(s, 2, j, false) + r * s.hh[e]
                          : s.a[row + 2 * H + j] + gru_rec(s, row + 2 * H + j) + gru_bias(s, 2, j, true);
  float const hc = tanhf(rnn_clipped(pre, s.clip, s.mask ? s.mask + row + 2 * H + j : nullptr));
  float const z = s.a[row + j];
  s.a[row + 2 * H + j] = hc;
  s.y[e] = (1.f - z) * hc + z * s.hp[e];
}

struct GruBackStep {
  int64_t n = 0, h = 0;
  bool lbr = false;
  float const* a = nullptr;     // [N, 3H] the activated gates
  float const* mask = nullptr;  // [N, 3H] or null
  float const* hp = nullptr;    // [N, H] the previous hidden state
  float const* hh = nullptr;    // [N, H] as GruStep::hh
  float const* dh = nullptr;    // [N, H] gradient of h from later steps (and dY_h)
  float const* dy = nullptr;    // [N, H] this step's slice of dY, or null
  float const* drh = nullptr;   // not lbr: [N, H] gradient of r∘h_prev (g_h·Rh), for gru_reset_grad_at
  float* g = nullptr;           // [N, 3H] out: gradients of the gates' pre-activations
  float* dhp = nullptr;         // [N, H] out: gradient of h_prev (this step's direct part)
  float* dhh = nullptr;         // lbr: [N, H] out: gradient of hh
};

// z and h gates (and r when lbr); dhp = dh·z. Not lbr: gru_reset_grad_at after drh is known.
GP_HD_STEP void gru_backward_at(GruBackStep const& s, int64_t n, int64_t j) {
  int64_t const H = s.h, row = n * 3 * H, e = n * H + j;
  float const* m = s.mask ? s.mask + row : nullptr;
  float const dh = s.dh[e] + (s.dy ? s.dy[e] : 0.f);
  float const z = s.a[row + j], r = s.a[row + H + j], hc = s.a[row + 2 * H + j];
  float const gh = dh * (1.f - z) * (1.f - hc * hc) * rnn_mask_at(m, 2 * H + j);
  s.g[row + j] = dh * (s.hp[e] - hc) * z * (1.f - z) * rnn_mask_at(m, j);
  s.g[row + 2 * H + j] = gh;
  s.dhp[e] = dh * z;
  if (s.lbr) {
    s.g[row + H + j] = gh * s.hh[e] * r * (1.f - r) * rnn_mask_at(m, H + j);
    s.dhh[e] = gh * r;
  }
}

// Not lbr: the r gate's gradient through r∘h_prev, and that product's share of dhp.
GP_HD_STEP void gru_reset_grad_at(GruBackStep const& s, int64_t n, int64_t j) {
  int64_t const H = s.h, row = n * 3 * H, e = n * H + j;
  float const r = s.a[row + H + j];
  s.g[row + H + j] = s.drh[e] * s.hp[e] * r * (1.f - r) * rnn_mask_at(s.mask ? s.mask + row : nullptr, H + j);
  s.dhp[e] += s.drh[e] * r;
}

// A plain RNN's activation (graph::RnnActivation, same order), and its derivative from its output.
enum class RnnAct : uint8_t { kTanh, kRelu, kSigmoid };
GP_HD float rnn_activate(RnnAct act, float v) {
  switch (act) {
    case RnnAct::kRelu:
      return v > 0.f ? v : 0.f;
    case RnnAct::kSigmoid:
      return rnn_sigmoid(v);
    default:
      return tanhf(v);
  }
}
GP_HD float rnn_activation_grad(RnnAct act, float out) {
  switch (act) {
    case RnnAct::kRelu:
      return out > 0.f ? 1.f : 0.f;
    case RnnAct::kSigmoid:
      return out * (1.f - out);
    default:
      return 1.f - out * out;
  }
}

struct RnnStep {
  int64_t n = 0, h = 0;
  float clip = 0.f;
  RnnAct act = RnnAct::kTanh;
  float* a = nullptr;           // [N, H]: x·Wᵀ + h_prev·Rᵀ in; the new hidden state out
  float const* bias = nullptr;  // [2H]: Wb then Rb
  float* y = nullptr;           // [N, H] the hidden state
  float* mask = nullptr;        // [N, H] clip pass-through, or null
};

GP_HD_STEP void rnn_forward_at(RnnStep const& s, int64_t n, int64_t j) {
  int64_t const e = n * s.h + j;
  float v = s.a[e];
  if (s.bias) v += s.bias[j] + s.bias[s.h + j];
  float const h = rnn_activate(s.act, rnn_clipped(v, s.clip, s.mask ? s.mask + e : nullptr));
  s.a[e] = h;
  s.y[e] = h;
}

struct RnnBackStep {
  int64_t n = 0, h = 0;
  RnnAct act = RnnAct::kTanh;
  float const* a = nullptr;     // [N, H] this step's hidden state
  float const* mask = nullptr;  // [N, H] or null
  float const* dh = nullptr;    // [N, H] gradient of h from later steps (and dY_h)
  float const* dy = nullptr;    // [N, H] this step's slice of dY, or null
  float* g = nullptr;           // [N, H] out: gradient of the pre-activation
};

GP_HD_STEP void rnn_backward_at(RnnBackStep const& s, int64_t n, int64_t j) {
  int64_t const e = n * s.h + j;
  float const dh = s.dh[e] + (s.dy ? s.dy[e] : 0.f);
  s.g[e] = dh * rnn_activation_grad(s.act, s.a[e]) * rnn_mask_at(s.mask, e);
}

// dst[col] += Σ_i src[i·ld + col] over `rows` rows in order (a bias gradient; one thread per column).
GP_HD_STEP void rnn_col_sum_at(float const* src, int64_t rows, int64_t ld, float* dst, int64_t col) {
  float v = dst[col];
  for (int64_t i = 0; i < rows; ++i) v += src[i * ld + col];
  dst[col] = v;
}

}  // namespace gp::kernels::hd
