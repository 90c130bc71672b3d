// CPU kernels: LSTM, GRU and RNN (ONNX semantics, gate orders iofc and zrh), forward and backward
// through time. The input products of all time steps are one matmul; each step adds its
// recurrent product (oneDNN matmul) and runs the gates in a plain loop over kernels/hd/rnn.h's
// per-element functions (the CUDA kernels run the same ones). Internally every tensor is in
// layout 0 ([seq, batch, ...]); layout 1 is permuted at the edges.
#include <cmath>

#include "exec/cpu/cpu_gemm.h"
#include "exec/cpu/cpu_ops.h"
#include "exec/rnn_plan.h"
#include "kernels/hd/rnn.h"
#include "kernels/move.h"

namespace gp::exec::cpu {
namespace {

using graph::RnnAttrs;
using graph::RnnDirection;
using graph::RnnKind;

using rnn::Shape;  // exec/rnn_plan.h: shared with the CUDA backend's plan
using rnn::shape_of_call;
using enum rnn::Slot;

// out[i...] = in[perm applied]: out dim i is input dim perm[i].
Tensor permuted(Tensor const& in, std::vector<int64_t> const& perm) {
  std::vector<int64_t> const in_strides = kernels::contiguous_strides(in.shape());
  std::vector<int64_t> shape, strides;
  for (int64_t p : perm) {
    shape.push_back(in.shape()[static_cast<std::size_t>(p)]);
    strides.push_back(in_strides[static_cast<std::size_t>(p)]);
  }
  Tensor out(shape);
  kernels::strided_copy(in.data<float>(), strides, out.data<float>(), kernels::contiguous_strides(shape), shape);
  return out;
}
Tensor swap01(Tensor const& t) {
  std::vector<int64_t> perm(t.shape().size());
  for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
  std::swap(perm[0], perm[1]);
  return permuted(t, perm);
}
Tensor defined_or(std::vector<Tensor> const& v, std::size_t i) { return i < v.size() ? v[i] : Tensor(); }

namespace hd = kernels::hd;

// Runs a step function for every element (n, j) of the [N, H] state. The step is copied so that
// the compiler keeps its fields in registers (a float store could otherwise alias clip).
template <typename Step, typename Fn>
void each_element(Step const& step, Fn fn) {
  Step const s = step;
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t j = 0; j < s.h; ++j) fn(s, n, j);
}

// The tensors of one forward pass, in layout 0.
using Fwd = rnn::Tensors;

// h_{t'} of direction d where t' = prev(t): Y, the initial state, or zeros.
float const* h_before(Shape const& s, Fwd const& f, std::vector<float> const& zeros, int64_t d, int64_t t) {
  int64_t const tp = s.prev(d, t);
  if (tp >= 0) return f.y.data<float>() + (tp * s.D + d) * s.N * s.H;
  return f.h0.defined() ? f.h0.data<float>() + d * s.N * s.H : zeros.data();
}
float const* c_before(Shape const& s, Fwd const& f, std::vector<float> const& zeros, int64_t d, int64_t t) {
  int64_t const tp = s.prev(d, t);
  if (tp >= 0) return f.state.data<float>() + (d * s.T + tp) * s.N * s.H;
  return f.c0.defined() ? f.c0.data<float>() + d * s.N * s.H : zeros.data();
}
bool has_h_before(Shape const& s, Fwd const& f, int64_t d, int64_t t) { return s.prev(d, t) >= 0 || f.h0.defined(); }

void lstm_forward_dir(Shape const& s, Fwd& f, int64_t d) {
  int64_t const N = s.N, H = s.H, GH = s.GH();
  std::vector<float> const zeros(static_cast<std::size_t>(N * H), 0.f);
  float const* rd = f.r.data<float>() + d * GH * H;
  float* acts = f.acts.data<float>() + d * s.T * N * GH;
  float* mask = f.mask.defined() ? f.mask.data<float>() + d * s.T * N * GH : nullptr;
  gemm(mat(f.x.raw(), s.T * N, s.I, s.I), transposed(mat(f.w.data<float>() + d * GH * s.I, GH, s.I, s.I)),
       mat(acts, s.T * N, GH, GH), false);
  hd::LstmStep st;
  st.n = N;
  st.h = H;
  st.clip = s.clip;
  st.bias = f.b.defined() ? f.b.data<float>() + d * 2 * GH : nullptr;
  st.p = f.p.defined() ? f.p.data<float>() + d * 3 * H : nullptr;
  for (int64_t step = 0; step < s.T; ++step) {
    int64_t const t = s.time(d, step);
    float const* hp = h_before(s, f, zeros, d, t);
    st.a = acts + t * N * GH;
    st.mask = mask ? mask + t * N * GH : nullptr;
    if (has_h_before(s, f, d, t)) gemm(mat(hp, N, H, H), transposed(mat(rd, GH, H, H)), mat(st.a, N, GH, GH), true);
    st.cp = c_before(s, f, zeros, d, t);
    st.c = f.state.data<float>() + (d * s.T + t) * N * H;
    st.y = f.y.data<float>() + (t * s.D + d) * N * H;
    each_element(st, [](hd::LstmStep const& x, int64_t n, int64_t j) { hd::lstm_forward_at(x, n, j); });
  }
}

void gru_forward_dir(Shape const& s, Fwd& f, int64_t d) {
  int64_t const N = s.N, H = s.H, GH = s.GH();
  std::vector<float> const zeros(static_cast<std::size_t>(N * H), 0.f);
  float const* rd = f.r.data<float>() + d * GH * H;
  float* acts = f.acts.data<float>() + d * s.T * N * GH;
  float* mask = f.mask.defined() ? f.mask.data<float>() + d * s.T * N * GH : nullptr;
  std::vector<float> tmp(static_cast<std::size_t>(N * GH), 0.f);
  gemm(mat(f.x.raw(), s.T * N, s.I, s.I), transposed(mat(f.w.data<float>() + d * GH * s.I, GH, s.I, s.I)),
       mat(acts, s.T * N, GH, GH), false);
  hd::GruStep st;
  st.n = N;
  st.h = H;
  st.clip = s.clip;
  st.lbr = s.lbr;
  st.bias = f.b.defined() ? f.b.data<float>() + d * 2 * GH : nullptr;
  for (int64_t step = 0; step < s.T; ++step) {
    int64_t const t = s.time(d, step);
    float const* hp = h_before(s, f, zeros, d, t);
    bool const rec = has_h_before(s, f, d, t);
    st.a = acts + t * N * GH;
    st.mask = mask ? mask + t * N * GH : nullptr;
    st.hp = hp;
    st.hh = f.state.data<float>() + (d * s.T + t) * N * H;
    st.y = f.y.data<float>() + (t * s.D + d) * N * H;
    st.rec = rec ? tmp.data() : nullptr;  // no recurrent product: zeros
    if (rec) {                            // lbr: all three recurrent products; else z and r only (h needs r first)
      int64_t const rows = s.lbr ? GH : 2 * H;
      gemm(mat(hp, N, H, H), transposed(mat(rd, rows, H, H)), mat(tmp.data(), N, rows, GH), false);
    }
    each_element(st, [](hd::GruStep const& x, int64_t n, int64_t j) { hd::gru_gates_at(x, n, j); });
    if (!s.lbr && rec)
      gemm(mat(st.hh, N, H, H), transposed(mat(rd + 2 * H * H, H, H, H)), mat(tmp.data() + 2 * H, N, H, GH), false);
    each_element(st, [](hd::GruStep const& x, int64_t n, int64_t j) { hd::gru_output_at(x, n, j); });
  }
}

void rnn_forward_dir(Shape const& s, Fwd& f, int64_t d) {
  int64_t const N = s.N, H = s.H;
  std::vector<float> const zeros(static_cast<std::size_t>(N * H), 0.f);
  float const* rd = f.r.data<float>() + d * H * H;
  float* acts = f.acts.data<float>() + d * s.T * N * H;
  float* mask = f.mask.defined() ? f.mask.data<float>() + d * s.T * N * H : nullptr;
  gemm(mat(f.x.raw(), s.T * N, s.I, s.I), transposed(mat(f.w.data<float>() + d * H * s.I, H, s.I, s.I)),
       mat(acts, s.T * N, H, H), false);
  hd::RnnStep st;
  st.n = N;
  st.h = H;
  st.clip = s.clip;
  st.act = s.acts[d];
  st.bias = f.b.defined() ? f.b.data<float>() + d * 2 * H : nullptr;
  for (int64_t step = 0; step < s.T; ++step) {
    int64_t const t = s.time(d, step);
    st.a = acts + t * N * H;
    st.mask = mask ? mask + t * N * H : nullptr;
    if (has_h_before(s, f, d, t))
      gemm(mat(h_before(s, f, zeros, d, t), N, H, H), transposed(mat(rd, H, H, H)), mat(st.a, N, H, H), true);
    st.y = f.y.data<float>() + (t * s.D + d) * N * H;
    each_element(st, [](hd::RnnStep const& x, int64_t n, int64_t j) { hd::rnn_forward_at(x, n, j); });
  }
}

Status check_lens(OpCall const& call, Tensor const& lens, int64_t T) {
  for (int64_t i = 0; i < lens.numel(); ++i) {
    int64_t const v = lens.dtype() == DType::kInt32 ? lens.data<int32_t>()[i] : lens.data<int64_t>()[i];
    if (v != T)
      return op_error(call, "sequence_lens holds " + std::to_string(v) + ", the sequence length is " +
                                std::to_string(T) + "; variable lengths are not supported: pad the sequences");
  }
  return Status::ok();
}

Status rnn_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  auto const& a = *attrs_of<RnnAttrs>(call.op);
  bool const l1 = a.layout == 1;
  Fwd f;
  if (in[kX].rank() != 3) return op_error(call, "X must be 3-D, got " + in[kX].shape_string());
  f.x = l1 ? swap01(in[kX]) : in[kX];
  Shape const s = shape_of_call(call, f.x.shape());
  if (s.T == 0) return op_error(call, "X " + in[kX].shape_string() + " has an empty sequence");
  f.w = in[kW];
  f.r = in[kR];
  f.b = defined_or(in, kB);
  if (Tensor lens = defined_or(in, kLens); lens.defined()) RETURN_IF_ERROR(check_lens(call, lens, s.T));
  Tensor const h0 = defined_or(in, kH0), c0 = s.lstm ? defined_or(in, kC0) : Tensor();
  f.h0 = h0.defined() && l1 ? swap01(h0) : h0;
  f.c0 = c0.defined() && l1 ? swap01(c0) : c0;
  f.p = s.lstm ? defined_or(in, kP) : Tensor();
  std::vector<int64_t> const state{s.D, s.N, s.H};
  if (f.w.shape() != std::vector<int64_t>{s.D, s.GH(), s.I} || f.r.shape() != std::vector<int64_t>{s.D, s.GH(), s.H} ||
      (f.b.defined() && f.b.shape() != std::vector<int64_t>{s.D, 2 * s.GH()}) ||
      (f.h0.defined() && f.h0.shape() != state) || (f.c0.defined() && f.c0.shape() != state) ||
      (f.p.defined() && f.p.shape() != std::vector<int64_t>{s.D, 3 * s.H}))
    return op_error(call,
                    "input shapes do not match X " + in[kX].shape_string() + " and hidden_size " + std::to_string(s.H));
  f.y = Tensor({s.T, s.D, s.N, s.H});
  f.acts = Tensor({s.D, s.T, s.N, s.GH()});
  if (!s.rnn) f.state = Tensor({s.D, s.T, s.N, s.H});
  if (s.clip > 0.f) f.mask = Tensor::zeros({s.D, s.T, s.N, s.GH()});
  for (int64_t d = 0; d < s.D; ++d) {
    if (s.rnn)
      rnn_forward_dir(s, f, d);
    else if (s.lstm)
      lstm_forward_dir(s, f, d);
    else
      gru_forward_dir(s, f, d);
  }

  out.assign(call.op.outputs.size(), Tensor());
  if (!out.empty()) out[0] = l1 ? permuted(f.y, {2, 0, 1, 3}) : f.y;
  for (std::size_t k = 1; k < out.size() && k < (s.lstm ? 3u : 2u); ++k) {
    Tensor last(state);
    Tensor const& src = k == 1 ? f.y : f.state;
    for (int64_t d = 0; d < s.D; ++d) {
      int64_t const t = s.reversed(d) ? 0 : s.T - 1;
      float const* p = src.data<float>() + (k == 1 ? (t * s.D + d) : (d * s.T + t)) * s.N * s.H;
      std::copy(p, p + s.N * s.H, last.data<float>() + d * s.N * s.H);
    }
    out[k] = l1 ? swap01(last) : last;
  }
  if (saved) saved->tensors = f.to_saved();
  return Status::ok();
}

// Gradients in layout 0; only the wanted ones are defined.
struct Grads {
  Tensor x, w, r, b, h0, c0, p;
};

void col_sums(float const* src, int64_t rows, int64_t cols, int64_t ld, float* dst) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[j] += src[i * ld + j];
}

// The previous hidden state of every time step, [T, N, H] (the right operand of dR).
std::vector<float> h_before_all(Shape const& s, Fwd const& f, int64_t d) {
  std::vector<float> const zeros(static_cast<std::size_t>(s.N * s.H), 0.f);
  std::vector<float> out(static_cast<std::size_t>(s.T * s.N * s.H));
  for (int64_t t = 0; t < s.T; ++t) {
    float const* p = h_before(s, f, zeros, d, t);
    std::copy(p, p + s.N * s.H, out.begin() + t * s.N * s.H);
  }
  return out;
}

// Adds the input-side gradients of direction d (X, W, the W half of B) from dG [T, N, GH].
void input_side_grads(Shape const& s, Fwd const& f, int64_t d, float const* dg, Grads& g) {
  int64_t const GH = s.GH(), TN = s.T * s.N;
  if (g.x.defined())
    gemm(mat(dg, TN, GH, GH), mat(f.w.data<float>() + d * GH * s.I, GH, s.I, s.I), mat(g.x.raw(), TN, s.I, s.I), d > 0);
  if (g.w.defined())
    gemm(transposed(mat(dg, TN, GH, GH)), mat(f.x.raw(), TN, s.I, s.I),
         mat(g.w.data<float>() + d * GH * s.I, GH, s.I, s.I), false);
  if (g.b.defined()) col_sums(dg, TN, GH, GH, g.b.data<float>() + d * 2 * GH);
}

void lstm_backward_dir(Shape const& s, Fwd const& f, float const* dy, float const* dyh, float const* dyc, int64_t d,
                       Grads& g) {
  int64_t const N = s.N, H = s.H, GH = s.GH(), NH = N * H;
  std::vector<float> const zeros(static_cast<std::size_t>(NH), 0.f);
  float const* rd = f.r.data<float>() + d * GH * H;
  float const* acts = f.acts.data<float>() + d * s.T * N * GH;
  float const* mask = f.mask.defined() ? f.mask.data<float>() + d * s.T * N * GH : nullptr;
  std::vector<float> dg(static_cast<std::size_t>(s.T * N * GH));
  std::vector<float> dh(static_cast<std::size_t>(NH), 0.f), dc(dh);
  if (dyh) std::copy(dyh + d * NH, dyh + (d + 1) * NH, dh.begin());
  if (dyc) std::copy(dyc + d * NH, dyc + (d + 1) * NH, dc.begin());
  std::vector<float> dp(static_cast<std::size_t>(3 * H), 0.f);
  hd::LstmBackStep st;
  st.n = N;
  st.h = H;
  st.p = f.p.defined() ? f.p.data<float>() + d * 3 * H : nullptr;
  st.dh = dh.data();
  st.dc = dc.data();
  for (int64_t step = s.T - 1; step >= 0; --step) {
    int64_t const t = s.time(d, step);
    st.a = acts + t * N * GH;
    st.mask = mask ? mask + t * N * GH : nullptr;
    st.c = f.state.data<float>() + (d * s.T + t) * NH;
    st.cp = c_before(s, f, zeros, d, t);
    st.dy = dy ? dy + (t * s.D + d) * NH : nullptr;
    st.g = dg.data() + t * N * GH;
    each_element(st, [](hd::LstmBackStep const& x, int64_t n, int64_t j) { hd::lstm_backward_at(x, n, j); });
    if (st.p)
      for (int64_t j = 0; j < H; ++j) hd::lstm_peephole_grad_at(st, dp.data(), j);
    gemm(mat(st.g, N, GH, GH), mat(rd, GH, H, H), mat(dh.data(), N, H, H), false);
  }
  if (g.h0.defined()) std::copy(dh.begin(), dh.end(), g.h0.data<float>() + d * NH);
  if (g.c0.defined()) std::copy(dc.begin(), dc.end(), g.c0.data<float>() + d * NH);
  if (g.p.defined()) std::copy(dp.begin(), dp.end(), g.p.data<float>() + d * 3 * H);
  input_side_grads(s, f, d, dg.data(), g);
  if (g.r.defined()) {
    std::vector<float> const hb = h_before_all(s, f, d);
    gemm(transposed(mat(dg.data(), s.T * N, GH, GH)), mat(hb.data(), s.T * N, H, H),
         mat(g.r.data<float>() + d * GH * H, GH, H, H), false);
  }
  if (g.b.defined()) col_sums(dg.data(), s.T * N, GH, GH, g.b.data<float>() + d * 2 * GH + GH);
}

void gru_backward_dir(Shape const& s, Fwd const& f, float const* dy, float const* dyh, int64_t d, Grads& g) {
  int64_t const N = s.N, H = s.H, GH = s.GH(), NH = N * H, TN = s.T * N;
  std::vector<float> const zeros(static_cast<std::size_t>(NH), 0.f);
  float const* rd = f.r.data<float>() + d * GH * H;
  float const* acts = f.acts.data<float>() + d * s.T * N * GH;
  float const* mask = f.mask.defined() ? f.mask.data<float>() + d * s.T * N * GH : nullptr;
  float const* hh_all = f.state.data<float>() + d * s.T * NH;
  std::vector<float> dg(static_cast<std::size_t>(TN * GH));
  std::vector<float> dhh(s.lbr ? static_cast<std::size_t>(TN * H) : 0u);  // lbr: gradient of hh
  std::vector<float> dh(static_cast<std::size_t>(NH), 0.f), dhn(dh), drh(dh);
  if (dyh) std::copy(dyh + d * NH, dyh + (d + 1) * NH, dh.begin());
  hd::GruBackStep st;
  st.n = N;
  st.h = H;
  st.lbr = s.lbr;
  st.drh = drh.data();
  for (int64_t step = s.T - 1; step >= 0; --step) {
    int64_t const t = s.time(d, step);
    st.a = acts + t * N * GH;
    st.mask = mask ? mask + t * N * GH : nullptr;
    st.hp = h_before(s, f, zeros, d, t);
    st.hh = hh_all + t * NH;
    st.dh = dh.data();
    st.dy = dy ? dy + (t * s.D + d) * NH : nullptr;
    st.g = dg.data() + t * N * GH;
    st.dhp = dhn.data();
    st.dhh = s.lbr ? dhh.data() + t * NH : nullptr;
    each_element(st, [](hd::GruBackStep const& x, int64_t n, int64_t j) { hd::gru_backward_at(x, n, j); });
    if (s.lbr) {
      gemm(mat(st.dhh, N, H, H), mat(rd + 2 * H * H, H, H, H), mat(dhn.data(), N, H, H), true);
    } else {  // d(r ∘ h_prev) through Rh
      gemm(mat(st.g + 2 * H, N, H, GH), mat(rd + 2 * H * H, H, H, H), mat(drh.data(), N, H, H), false);
      each_element(st, [](hd::GruBackStep const& x, int64_t n, int64_t j) { hd::gru_reset_grad_at(x, n, j); });
    }
    gemm(mat(st.g, N, 2 * H, GH), mat(rd, 2 * H, H, H), mat(dhn.data(), N, H, H), true);
    std::swap(dh, dhn);
  }
  if (g.h0.defined()) std::copy(dh.begin(), dh.end(), g.h0.data<float>() + d * NH);
  input_side_grads(s, f, d, dg.data(), g);
  float const* dgh = s.lbr ? dhh.data() : dg.data() + 2 * H;  // the h gate's recurrent gradient
  int64_t const ldh = s.lbr ? H : GH;
  if (g.r.defined()) {
    std::vector<float> const hb = h_before_all(s, f, d);
    float* dr = g.r.data<float>() + d * GH * H;
    gemm(transposed(mat(dg.data(), TN, 2 * H, GH)), mat(hb.data(), TN, H, H), mat(dr, 2 * H, H, H), false);
    // lbr: Rh multiplies h_prev; else it multiplies r ∘ h_prev (saved as hh).
    gemm(transposed(mat(dgh, TN, H, ldh)), mat(s.lbr ? hb.data() : hh_all, TN, H, H), mat(dr + 2 * H * H, H, H, H),
         false);
  }
  if (g.b.defined()) {
    float* rb = g.b.data<float>() + d * 2 * GH + GH;
    col_sums(dg.data(), TN, 2 * H, GH, rb);
    col_sums(dgh, TN, H, ldh, rb + 2 * H);
  }
}

void rnn_backward_dir(Shape const& s, Fwd const& f, float const* dy, float const* dyh, int64_t d, Grads& g) {
  int64_t const N = s.N, H = s.H, NH = N * H, TN = s.T * N;
  float const* rd = f.r.data<float>() + d * H * H;
  float const* acts = f.acts.data<float>() + d * s.T * NH;
  float const* mask = f.mask.defined() ? f.mask.data<float>() + d * s.T * NH : nullptr;
  std::vector<float> dg(static_cast<std::size_t>(TN * H));
  std::vector<float> dh(static_cast<std::size_t>(NH), 0.f);
  if (dyh) std::copy(dyh + d * NH, dyh + (d + 1) * NH, dh.begin());
  hd::RnnBackStep st;
  st.n = N;
  st.h = H;
  st.act = s.acts[d];
  st.dh = dh.data();
  for (int64_t step = s.T - 1; step >= 0; --step) {
    int64_t const t = s.time(d, step);
    st.a = acts + t * NH;
    st.mask = mask ? mask + t * NH : nullptr;
    st.dy = dy ? dy + (t * s.D + d) * NH : nullptr;
    st.g = dg.data() + t * NH;
    each_element(st, [](hd::RnnBackStep const& x, int64_t n, int64_t j) { hd::rnn_backward_at(x, n, j); });
    gemm(mat(st.g, N, H, H), mat(rd, H, H, H), mat(dh.data(), N, H, H), false);
  }
  if (g.h0.defined()) std::copy(dh.begin(), dh.end(), g.h0.data<float>() + d * NH);
  input_side_grads(s, f, d, dg.data(), g);
  if (g.r.defined()) {
    std::vector<float> const hb = h_before_all(s, f, d);
    gemm(transposed(mat(dg.data(), TN, H, H)), mat(hb.data(), TN, H, H), mat(g.r.data<float>() + d * H * H, H, H, H),
         false);
  }
  if (g.b.defined()) col_sums(dg.data(), TN, H, H, g.b.data<float>() + d * 2 * H + H);
}

// Every gradient `want` asks for (slots of the op's inputs), in the op's layout.
Status rnn_grads(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout, std::vector<bool> const& want,
                 std::vector<Tensor>& result) {
  auto const& a = *attrs_of<RnnAttrs>(call.op);
  bool const l1 = a.layout == 1;
  Fwd f;
  RETURN_IF_ERROR(rnn::from_saved(call, saved, f));
  Shape const s = shape_of_call(call, f.x.shape());
  Tensor dy = defined_or(gout, 0), dyh = defined_or(gout, 1), dyc = s.lstm ? defined_or(gout, 2) : Tensor();
  if (l1) {
    if (dy.defined()) dy = permuted(dy, {1, 2, 0, 3});
    if (dyh.defined()) dyh = swap01(dyh);
    if (dyc.defined()) dyc = swap01(dyc);
  }
  auto make = [&](std::size_t slot, Tensor const& like) {
    return wants(want, slot) && like.defined() ? Tensor::zeros(like.shape()) : Tensor();
  };
  Grads g;
  g.x = make(kX, f.x);
  g.w = make(kW, f.w);
  g.r = make(kR, f.r);
  g.b = make(kB, f.b);
  g.h0 = make(kH0, f.h0);
  g.c0 = s.lstm ? make(kC0, f.c0) : Tensor();
  g.p = s.lstm ? make(kP, f.p) : Tensor();
  float const* dyp = dy.defined() ? dy.data<float>() : nullptr;
  float const* dyhp = dyh.defined() ? dyh.data<float>() : nullptr;
  for (int64_t d = 0; d < s.D; ++d) {
    if (s.rnn)
      rnn_backward_dir(s, f, dyp, dyhp, d, g);
    else if (s.lstm)
      lstm_backward_dir(s, f, dyp, dyhp, dyc.defined() ? dyc.data<float>() : nullptr, d, g);
    else
      gru_backward_dir(s, f, dyp, dyhp, d, g);
  }
  result.assign(call.op.inputs.size(), Tensor());
  auto put = [&](std::size_t slot, Tensor const& t) {
    if (slot < result.size()) result[slot] = t;
  };
  put(kX, g.x.defined() && l1 ? swap01(g.x) : g.x);
  put(kW, g.w);
  put(kR, g.r);
  put(kB, g.b);
  put(kH0, g.h0.defined() && l1 ? swap01(g.h0) : g.h0);
  put(kC0, g.c0.defined() && l1 ? swap01(g.c0) : g.c0);
  put(kP, g.p);
  return Status::ok();
}

Status rnn_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                    std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  std::vector<Tensor> g;
  RETURN_IF_ERROR(rnn_grads(call, saved, gout, wanted, g));
  for (std::size_t i = 0; i < g.size(); ++i)
    if (g[i].defined()) RETURN_IF_ERROR(emit_grad(call, grads, i, g[i], accumulate));
  return Status::ok();
}

}  // namespace

CpuKernelFamily rnn_kernels() {
  // One pass through time computes every gradient: B's set, W's added (fresh_then_add).
  OpKernels const rnn{rnn_forward, rnn_backward, rnn_backward, rnn::check, fresh_then_add<rnn_backward>};
  return {{OpKind::kLSTM, {rnn, 3}}, {OpKind::kGRU, {rnn, 3}}, {OpKind::kRNN, {rnn, 3}}};
}

}  // namespace gp::exec::cpu
