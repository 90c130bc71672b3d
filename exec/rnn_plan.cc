#include "exec/rnn_plan.h"

#include <string>

namespace gp::exec {
namespace {

namespace hd = kernels::hd;
using graph::RnnAttrs;
using graph::RnnDirection;
using graph::RnnKind;

using rnn::Shape;
using rnn::shape_of_call;
using enum rnn::Slot;

Tensor defined_or(std::vector<Tensor> const& v, std::size_t i) { return i < v.size() ? v[i] : Tensor(); }

std::vector<int64_t> swap01_perm(std::size_t rank) {
  std::vector<int64_t> perm(rank);
  for (std::size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(i);
  std::swap(perm[0], perm[1]);
  return perm;
}
Result<Tensor> swap01(RnnPrimitives const& prims, Tensor const& t) { return prims.permute(t, swap01_perm(t.rank())); }

RnnMat mat(float const* p, int64_t rows, int64_t cols, int64_t ld) { return {p, rows, cols, ld, false}; }
RnnMat transposed(RnnMat m) {
  std::swap(m.rows, m.cols);
  m.t = !m.t;
  return m;
}

float const* fptr(Tensor const& t) { return t.defined() ? t.data<float>() : nullptr; }

// The tensors of one forward pass, in layout 0.
struct Fwd : rnn::Tensors {
  Tensor zeros;  // [N, H]: the state before the first step without h0 / c0
};

// Fwd or Fwd const: a pointer to write through in the forward pass, to read in the backward one.
template <typename F>
auto* y_at(Shape const& s, F& f, int64_t d, int64_t t) {
  return f.y.template data<float>() + (t * s.D + d) * s.NH();
}
template <typename F>
auto* state_at(Shape const& s, F& f, int64_t d, int64_t t) {
  return f.state.template data<float>() + (d * s.T + t) * s.NH();
}
float const* h_before(Shape const& s, Fwd const& f, int64_t d, int64_t t) {
  int64_t const tp = s.prev(d, t);
  if (tp >= 0) return y_at(s, f, d, tp);
  return f.h0.defined() ? f.h0.data<float>() + d * s.NH() : f.zeros.data<float>();
}
float const* c_before(Shape const& s, Fwd const& f, int64_t d, int64_t t) {
  int64_t const tp = s.prev(d, t);
  if (tp >= 0) return state_at(s, f, d, tp);
  return f.c0.defined() ? f.c0.data<float>() + d * s.NH() : f.zeros.data<float>();
}
bool has_h_before(Shape const& s, Fwd const& f, int64_t d, int64_t t) { return s.prev(d, t) >= 0 || f.h0.defined(); }

// acts of direction d = X · W_dᵀ, [T·N, GH].
Status input_products(Shape const& s, Fwd& f, int64_t d, RnnPrimitives const& prims) {
  int64_t const GH = s.GH();
  return prims.gemm(mat(f.x.data<float>(), s.T * s.N, s.I, s.I),
                    transposed(mat(f.w.data<float>() + d * GH * s.I, GH, s.I, s.I)),
                    f.acts.data<float>() + d * s.T * s.N * GH, GH, false);
}

Status lstm_forward_dir(Shape const& s, Fwd& f, int64_t d, RnnPrimitives const& prims) {
  int64_t const N = s.N, H = s.H, GH = s.GH();
  float const* rd = f.r.data<float>() + d * GH * H;
  RETURN_IF_ERROR(input_products(s, f, d, prims));
  hd::LstmStep st;
  st.n = N;
  st.h = H;
  st.clip = s.clip;
  st.bias = f.b.defined() ? f.b.data<float>() + d * 2 * GH : nullptr;
  st.p = f.p.defined() ? f.p.data<float>() + d * 3 * H : nullptr;
  for (int64_t step = 0; step < s.T; ++step) {
    int64_t const t = s.time(d, step);
    st.a = f.acts.data<float>() + (d * s.T + t) * N * GH;
    st.mask = f.mask.defined() ? f.mask.data<float>() + (d * s.T + t) * N * GH : nullptr;
    if (has_h_before(s, f, d, t))
      RETURN_IF_ERROR(prims.gemm(mat(h_before(s, f, d, t), N, H, H), transposed(mat(rd, GH, H, H)), st.a, GH, true));
    st.cp = c_before(s, f, d, t);
    st.c = state_at(s, f, d, t);
    st.y = y_at(s, f, d, t);
    RETURN_IF_ERROR(prims.lstm_forward(st));
  }
  return Status::ok();
}

Status gru_forward_dir(Shape const& s, Fwd& f, int64_t d, Tensor& tmp, RnnPrimitives const& prims) {
  int64_t const N = s.N, H = s.H, GH = s.GH();
  float const* rd = f.r.data<float>() + d * GH * H;
  float* rec = tmp.data<float>();
  RETURN_IF_ERROR(input_products(s, f, d, prims));
  hd::GruStep st;
  st.n = N;
  st.h = H;
  st.clip = s.clip;
  st.lbr = s.lbr;
  st.bias = f.b.defined() ? f.b.data<float>() + d * 2 * GH : nullptr;
  for (int64_t step = 0; step < s.T; ++step) {
    int64_t const t = s.time(d, step);
    float const* hp = h_before(s, f, d, t);
    bool const has_rec = has_h_before(s, f, d, t);
    st.a = f.acts.data<float>() + (d * s.T + t) * N * GH;
    st.mask = f.mask.defined() ? f.mask.data<float>() + (d * s.T + t) * N * GH : nullptr;
    st.hp = hp;
    st.hh = state_at(s, f, d, t);
    st.y = y_at(s, f, d, t);
    st.rec = has_rec ? rec : nullptr;
    if (has_rec) {  // lbr: all three recurrent products; else z and r only (h needs r first)
      int64_t const rows = s.lbr ? GH : 2 * H;
      RETURN_IF_ERROR(prims.gemm(mat(hp, N, H, H), transposed(mat(rd, rows, H, H)), rec, GH, false));
    }
    RETURN_IF_ERROR(prims.gru_gates(st));
    if (!s.lbr && has_rec)
      RETURN_IF_ERROR(
          prims.gemm(mat(st.hh, N, H, H), transposed(mat(rd + 2 * H * H, H, H, H)), rec + 2 * H, GH, false));
    RETURN_IF_ERROR(prims.gru_output(st));
  }
  return Status::ok();
}

Status rnn_forward_dir(Shape const& s, Fwd& f, int64_t d, RnnPrimitives const& prims) {
  int64_t const N = s.N, H = s.H;
  float const* rd = f.r.data<float>() + d * H * H;
  RETURN_IF_ERROR(input_products(s, f, d, prims));
  hd::RnnStep st;
  st.n = N;
  st.h = H;
  st.clip = s.clip;
  st.act = s.acts[d];
  st.bias = f.b.defined() ? f.b.data<float>() + d * 2 * H : nullptr;
  for (int64_t step = 0; step < s.T; ++step) {
    int64_t const t = s.time(d, step);
    st.a = f.acts.data<float>() + (d * s.T + t) * N * H;
    st.mask = f.mask.defined() ? f.mask.data<float>() + (d * s.T + t) * N * H : nullptr;
    if (has_h_before(s, f, d, t))
      RETURN_IF_ERROR(prims.gemm(mat(h_before(s, f, d, t), N, H, H), transposed(mat(rd, H, H, H)), st.a, H, true));
    st.y = y_at(s, f, d, t);
    RETURN_IF_ERROR(prims.rnn_forward(st));
  }
  return Status::ok();
}

Status check_lens(OpCall const& call, Tensor const& lens, int64_t T, RnnPrimitives const& prims) {
  ASSIGN_OR_RETURN(std::vector<int64_t> const v, prims.host_ints(lens));
  for (int64_t len : v)
    if (len != T)
      return op_error(call, "sequence_lens holds " + std::to_string(len) + ", the sequence length is " +
                                std::to_string(T) + "; variable lengths are not supported: pad the sequences");
  return Status::ok();
}

// The last step's state of every direction, [D, N, H]: Y_h from y (step-major) or Y_c from state.
Result<Tensor> last_state(Shape const& s, Fwd const& f, bool from_y, RnnPrimitives const& prims) {
  ASSIGN_OR_RETURN(Tensor last, prims.zeros({s.D, s.N, s.H}));
  for (int64_t d = 0; d < s.D; ++d) {
    int64_t const t = s.reversed(d) ? 0 : s.T - 1;
    RETURN_IF_ERROR(
        prims.copy(from_y ? y_at(s, f, d, t) : state_at(s, f, d, t), last.data<float>() + d * s.NH(), s.NH()));
  }
  return last;
}

// Gradients in layout 0; only the wanted ones are defined.
struct Grads {
  Tensor x, w, r, b, h0, c0, p;
};

// The previous hidden state of every time step, [T, N, H] (the right operand of dR).
Result<Tensor> h_before_all(Shape const& s, Fwd const& f, int64_t d, RnnPrimitives const& prims) {
  ASSIGN_OR_RETURN(Tensor out, prims.zeros({s.T, s.N, s.H}));
  for (int64_t t = 0; t < s.T; ++t)
    RETURN_IF_ERROR(prims.copy(h_before(s, f, d, t), out.data<float>() + t * s.NH(), s.NH()));
  return out;
}

// Adds the input-side gradients of direction d (X, W, the W half of B) from dG [T, N, GH].
Status input_side_grads(Shape const& s, Fwd const& f, int64_t d, float const* dg, Grads& g,
                        RnnPrimitives const& prims) {
  int64_t const GH = s.GH(), TN = s.T * s.N;
  if (g.x.defined())
    RETURN_IF_ERROR(prims.gemm(mat(dg, TN, GH, GH), mat(f.w.data<float>() + d * GH * s.I, GH, s.I, s.I),
                               g.x.data<float>(), s.I, d > 0));
  if (g.w.defined())
    RETURN_IF_ERROR(prims.gemm(transposed(mat(dg, TN, GH, GH)), mat(f.x.data<float>(), TN, s.I, s.I),
                               g.w.data<float>() + d * GH * s.I, s.I, false));
  if (g.b.defined()) RETURN_IF_ERROR(prims.col_sums(dg, TN, GH, GH, g.b.data<float>() + d * 2 * GH));
  return Status::ok();
}

Status lstm_backward_dir(Shape const& s, Fwd const& f, float const* dy, float const* dyh, float const* dyc, int64_t d,
                         Grads& g, RnnPrimitives const& prims) {
  int64_t const N = s.N, H = s.H, GH = s.GH(), NH = s.NH();
  float const* rd = f.r.data<float>() + d * GH * H;
  ASSIGN_OR_RETURN(Tensor dg, prims.zeros({s.T, N, GH}));
  ASSIGN_OR_RETURN(Tensor dh, prims.zeros({N, H}));
  ASSIGN_OR_RETURN(Tensor dc, prims.zeros({N, H}));
  Tensor dp;
  if (g.p.defined()) {
    ASSIGN_OR_RETURN(dp, prims.zeros({3 * H}));
  }
  if (dyh) RETURN_IF_ERROR(prims.copy(dyh + d * NH, dh.data<float>(), NH));
  if (dyc) RETURN_IF_ERROR(prims.copy(dyc + d * NH, dc.data<float>(), NH));
  hd::LstmBackStep st;
  st.n = N;
  st.h = H;
  st.p = f.p.defined() ? f.p.data<float>() + d * 3 * H : nullptr;
  st.dh = dh.data<float>();
  st.dc = dc.data<float>();
  for (int64_t step = s.T - 1; step >= 0; --step) {
    int64_t const t = s.time(d, step);
    st.a = f.acts.data<float>() + (d * s.T + t) * N * GH;
    st.mask = f.mask.defined() ? f.mask.data<float>() + (d * s.T + t) * N * GH : nullptr;
    st.c = state_at(s, f, d, t);
    st.cp = c_before(s, f, d, t);
    st.dy = dy ? dy + (t * s.D + d) * NH : nullptr;
    st.g = dg.data<float>() + t * N * GH;
    RETURN_IF_ERROR(prims.lstm_backward(st));
    if (dp.defined()) RETURN_IF_ERROR(prims.lstm_peephole_grad(st, dp.data<float>()));
    RETURN_IF_ERROR(prims.gemm(mat(st.g, N, GH, GH), mat(rd, GH, H, H), dh.data<float>(), H, false));
  }
  if (g.h0.defined()) RETURN_IF_ERROR(prims.copy(dh.data<float>(), g.h0.data<float>() + d * NH, NH));
  if (g.c0.defined()) RETURN_IF_ERROR(prims.copy(dc.data<float>(), g.c0.data<float>() + d * NH, NH));
  if (g.p.defined()) RETURN_IF_ERROR(prims.copy(dp.data<float>(), g.p.data<float>() + d * 3 * H, 3 * H));
  RETURN_IF_ERROR(input_side_grads(s, f, d, dg.data<float>(), g, prims));
  if (g.r.defined()) {
    ASSIGN_OR_RETURN(Tensor const hb, h_before_all(s, f, d, prims));
    RETURN_IF_ERROR(prims.gemm(transposed(mat(dg.data<float>(), s.T * N, GH, GH)), mat(hb.data<float>(), s.T * N, H, H),
                               g.r.data<float>() + d * GH * H, H, false));
  }
  if (g.b.defined())
    RETURN_IF_ERROR(prims.col_sums(dg.data<float>(), s.T * N, GH, GH, g.b.data<float>() + d * 2 * GH + GH));
  return Status::ok();
}

Status gru_backward_dir(Shape const& s, Fwd const& f, float const* dy, float const* dyh, int64_t d, Grads& g,
                        RnnPrimitives const& prims) {
  int64_t const N = s.N, H = s.H, GH = s.GH(), NH = s.NH(), TN = s.T * N;
  float const* rd = f.r.data<float>() + d * GH * H;
  float const* hh_all = state_at(s, f, d, 0);
  ASSIGN_OR_RETURN(Tensor dg, prims.zeros({TN, GH}));
  Tensor dhh;  // lbr: gradient of hh, every step
  if (s.lbr) {
    ASSIGN_OR_RETURN(dhh, prims.zeros({TN, H}));
  }
  ASSIGN_OR_RETURN(Tensor dh, prims.zeros({N, H}));
  ASSIGN_OR_RETURN(Tensor dhn, prims.zeros({N, H}));
  ASSIGN_OR_RETURN(Tensor drh, prims.zeros({N, H}));
  if (dyh) RETURN_IF_ERROR(prims.copy(dyh + d * NH, dh.data<float>(), NH));
  hd::GruBackStep st;
  st.n = N;
  st.h = H;
  st.lbr = s.lbr;
  st.drh = drh.data<float>();
  for (int64_t step = s.T - 1; step >= 0; --step) {
    int64_t const t = s.time(d, step);
    st.a = f.acts.data<float>() + (d * s.T + t) * N * GH;
    st.mask = f.mask.defined() ? f.mask.data<float>() + (d * s.T + t) * N * GH : nullptr;
    st.hp = h_before(s, f, d, t);
    st.hh = hh_all + t * NH;
    st.dh = dh.data<float>();
    st.dy = dy ? dy + (t * s.D + d) * NH : nullptr;
    st.g = dg.data<float>() + t * N * GH;
    st.dhp = dhn.data<float>();
    st.dhh = s.lbr ? dhh.data<float>() + t * NH : nullptr;
    RETURN_IF_ERROR(prims.gru_backward(st));
    if (s.lbr) {
      RETURN_IF_ERROR(prims.gemm(mat(st.dhh, N, H, H), mat(rd + 2 * H * H, H, H, H), st.dhp, H, true));
    } else {  // d(r ∘ h_prev) through Rh
      RETURN_IF_ERROR(
          prims.gemm(mat(st.g + 2 * H, N, H, GH), mat(rd + 2 * H * H, H, H, H), drh.data<float>(), H, false));
      RETURN_IF_ERROR(prims.gru_reset_grad(st));
    }
    RETURN_IF_ERROR(prims.gemm(mat(st.g, N, 2 * H, GH), mat(rd, 2 * H, H, H), st.dhp, H, true));
    std::swap(dh, dhn);
  }
  if (g.h0.defined()) RETURN_IF_ERROR(prims.copy(dh.data<float>(), g.h0.data<float>() + d * NH, NH));
  RETURN_IF_ERROR(input_side_grads(s, f, d, dg.data<float>(), g, prims));
  float const* dgh = s.lbr ? dhh.data<float>() : dg.data<float>() + 2 * H;  // the h gate's recurrent gradient
  int64_t const ldh = s.lbr ? H : GH;
  if (g.r.defined()) {
    ASSIGN_OR_RETURN(Tensor const hb, h_before_all(s, f, d, prims));
    float* dr = g.r.data<float>() + d * GH * H;
    RETURN_IF_ERROR(
        prims.gemm(transposed(mat(dg.data<float>(), TN, 2 * H, GH)), mat(hb.data<float>(), TN, H, H), dr, H, false));
    // lbr: Rh multiplies h_prev; else it multiplies r ∘ h_prev (saved as hh).
    RETURN_IF_ERROR(prims.gemm(transposed(mat(dgh, TN, H, ldh)), mat(s.lbr ? hb.data<float>() : hh_all, TN, H, H),
                               dr + 2 * H * H, H, false));
  }
  if (g.b.defined()) {
    float* rb = g.b.data<float>() + d * 2 * GH + GH;
    RETURN_IF_ERROR(prims.col_sums(dg.data<float>(), TN, 2 * H, GH, rb));
    RETURN_IF_ERROR(prims.col_sums(dgh, TN, H, ldh, rb + 2 * H));
  }
  return Status::ok();
}

Status rnn_backward_dir(Shape const& s, Fwd const& f, float const* dy, float const* dyh, int64_t d, Grads& g,
                        RnnPrimitives const& prims) {
  int64_t const N = s.N, H = s.H, NH = s.NH(), TN = s.T * N;
  float const* rd = f.r.data<float>() + d * H * H;
  ASSIGN_OR_RETURN(Tensor dg, prims.zeros({TN, H}));
  ASSIGN_OR_RETURN(Tensor dh, prims.zeros({N, H}));
  if (dyh) RETURN_IF_ERROR(prims.copy(dyh + d * NH, dh.data<float>(), NH));
  hd::RnnBackStep st;
  st.n = N;
  st.h = H;
  st.act = s.acts[d];
  st.dh = dh.data<float>();
  for (int64_t step = s.T - 1; step >= 0; --step) {
    int64_t const t = s.time(d, step);
    st.a = f.acts.data<float>() + (d * s.T + t) * NH;
    st.mask = f.mask.defined() ? f.mask.data<float>() + (d * s.T + t) * NH : nullptr;
    st.dy = dy ? dy + (t * s.D + d) * NH : nullptr;
    st.g = dg.data<float>() + t * NH;
    RETURN_IF_ERROR(prims.rnn_backward(st));
    RETURN_IF_ERROR(prims.gemm(mat(st.g, N, H, H), mat(rd, H, H, H), dh.data<float>(), H, false));
  }
  if (g.h0.defined()) RETURN_IF_ERROR(prims.copy(dh.data<float>(), g.h0.data<float>() + d * NH, NH));
  RETURN_IF_ERROR(input_side_grads(s, f, d, dg.data<float>(), g, prims));
  if (g.r.defined()) {
    ASSIGN_OR_RETURN(Tensor const hb, h_before_all(s, f, d, prims));
    RETURN_IF_ERROR(prims.gemm(transposed(mat(dg.data<float>(), TN, H, H)), mat(hb.data<float>(), TN, H, H),
                               g.r.data<float>() + d * H * H, H, false));
  }
  if (g.b.defined()) RETURN_IF_ERROR(prims.col_sums(dg.data<float>(), TN, H, H, g.b.data<float>() + d * 2 * H + H));
  return Status::ok();
}

}  // namespace

Status rnn_plan_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved,
                        RnnPrimitives const& prims) {
  auto const& a = *attrs_of<RnnAttrs>(call.op);
  bool const l1 = a.layout == 1;
  Fwd f;
  if (in[kX].rank() != 3) return op_error(call, "X must be 3-D, got " + in[kX].shape_string());
  if (l1) {
    ASSIGN_OR_RETURN(f.x, swap01(prims, in[kX]));
  } else {
    f.x = in[kX];
  }
  Shape const s = shape_of_call(call, f.x.shape());
  if (s.T == 0) return op_error(call, "X " + in[kX].shape_string() + " has an empty sequence");
  f.w = in[kW];
  f.r = in[kR];
  f.b = defined_or(in, kB);
  if (Tensor lens = defined_or(in, kLens); lens.defined()) RETURN_IF_ERROR(check_lens(call, lens, s.T, prims));
  Tensor const h0 = defined_or(in, kH0), c0 = s.lstm ? defined_or(in, kC0) : Tensor();
  if (h0.defined() && l1) {
    ASSIGN_OR_RETURN(f.h0, swap01(prims, h0));
  } else {
    f.h0 = h0;
  }
  if (c0.defined() && l1) {
    ASSIGN_OR_RETURN(f.c0, swap01(prims, c0));
  } else {
    f.c0 = c0;
  }
  f.p = s.lstm ? defined_or(in, kP) : Tensor();
  std::vector<int64_t> const state{s.D, s.N, s.H};
  if (f.w.shape() != std::vector<int64_t>{s.D, s.GH(), s.I} || f.r.shape() != std::vector<int64_t>{s.D, s.GH(), s.H} ||
      (f.b.defined() && f.b.shape() != std::vector<int64_t>{s.D, 2 * s.GH()}) ||
      (f.h0.defined() && f.h0.shape() != state) || (f.c0.defined() && f.c0.shape() != state) ||
      (f.p.defined() && f.p.shape() != std::vector<int64_t>{s.D, 3 * s.H}))
    return op_error(call,
                    "input shapes do not match X " + in[kX].shape_string() + " and hidden_size " + std::to_string(s.H));
  ASSIGN_OR_RETURN(f.y, prims.zeros({s.T, s.D, s.N, s.H}));
  ASSIGN_OR_RETURN(f.acts, prims.zeros({s.D, s.T, s.N, s.GH()}));
  if (!s.rnn) {
    ASSIGN_OR_RETURN(f.state, prims.zeros({s.D, s.T, s.N, s.H}));
  }
  ASSIGN_OR_RETURN(f.zeros, prims.zeros({s.N, s.H}));
  if (s.clip > 0.f) {
    ASSIGN_OR_RETURN(f.mask, prims.zeros({s.D, s.T, s.N, s.GH()}));
  }
  Tensor tmp;
  if (!s.lstm && !s.rnn) {
    ASSIGN_OR_RETURN(tmp, prims.zeros({s.N, s.GH()}));
  }
  for (int64_t d = 0; d < s.D; ++d)
    RETURN_IF_ERROR(s.rnn    ? rnn_forward_dir(s, f, d, prims)
                    : s.lstm ? lstm_forward_dir(s, f, d, prims)
                             : gru_forward_dir(s, f, d, tmp, prims));

  out.assign(call.op.outputs.size(), Tensor());
  if (!out.empty()) {
    if (l1) {
      ASSIGN_OR_RETURN(out[0], prims.permute(f.y, {2, 0, 1, 3}));
    } else {
      out[0] = f.y;
    }
  }
  for (std::size_t k = 1; k < out.size() && k < (s.lstm ? 3u : 2u); ++k) {
    ASSIGN_OR_RETURN(Tensor last, last_state(s, f, k == 1, prims));
    if (l1) {
      ASSIGN_OR_RETURN(out[k], swap01(prims, last));
    } else {
      out[k] = last;
    }
  }
  if (saved) saved->tensors = f.to_saved();
  return Status::ok();
}

Status rnn_plan_grads(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                      std::vector<bool> const& want, std::vector<Tensor>& result, RnnPrimitives const& prims) {
  auto const& a = *attrs_of<RnnAttrs>(call.op);
  bool const l1 = a.layout == 1;
  Fwd f;
  RETURN_IF_ERROR(rnn::from_saved(call, saved, f));
  Shape const s = shape_of_call(call, f.x.shape());
  ASSIGN_OR_RETURN(f.zeros, prims.zeros({s.N, s.H}));
  Tensor dy = defined_or(gout, 0), dyh = defined_or(gout, 1), dyc = s.lstm ? defined_or(gout, 2) : Tensor();
  if (l1) {
    if (dy.defined()) {
      ASSIGN_OR_RETURN(dy, prims.permute(dy, {1, 2, 0, 3}));
    }
    if (dyh.defined()) {
      ASSIGN_OR_RETURN(dyh, swap01(prims, dyh));
    }
    if (dyc.defined()) {
      ASSIGN_OR_RETURN(dyc, swap01(prims, dyc));
    }
  }
  Grads g;
  auto make = [&](std::size_t slot, Tensor const& like, Tensor& grad) -> Status {
    if (wants(want, slot) && like.defined()) {
      ASSIGN_OR_RETURN(grad, prims.zeros(like.shape()));
    }
    return Status::ok();
  };
  RETURN_IF_ERROR(make(kX, f.x, g.x));
  RETURN_IF_ERROR(make(kW, f.w, g.w));
  RETURN_IF_ERROR(make(kR, f.r, g.r));
  RETURN_IF_ERROR(make(kB, f.b, g.b));
  RETURN_IF_ERROR(make(kH0, f.h0, g.h0));
  if (s.lstm) {
    RETURN_IF_ERROR(make(kC0, f.c0, g.c0));
    RETURN_IF_ERROR(make(kP, f.p, g.p));
  }
  for (int64_t d = 0; d < s.D; ++d)
    RETURN_IF_ERROR(s.rnn    ? rnn_backward_dir(s, f, fptr(dy), fptr(dyh), d, g, prims)
                    : s.lstm ? lstm_backward_dir(s, f, fptr(dy), fptr(dyh), fptr(dyc), d, g, prims)
                             : gru_backward_dir(s, f, fptr(dy), fptr(dyh), d, g, prims));
  result.assign(call.op.inputs.size(), Tensor());
  auto put = [&](std::size_t slot, Tensor const& t, bool state) -> Status {
    if (slot >= result.size() || !t.defined()) return Status::ok();
    if (state && l1) {
      ASSIGN_OR_RETURN(result[slot], swap01(prims, t));
    } else {
      result[slot] = t;
    }
    return Status::ok();
  };
  RETURN_IF_ERROR(put(kX, g.x, true));
  RETURN_IF_ERROR(put(kW, g.w, false));
  RETURN_IF_ERROR(put(kR, g.r, false));
  RETURN_IF_ERROR(put(kB, g.b, false));
  RETURN_IF_ERROR(put(kH0, g.h0, true));
  RETURN_IF_ERROR(put(kC0, g.c0, true));
  RETURN_IF_ERROR(put(kP, g.p, false));
  return Status::ok();
}

namespace rnn {

Shape shape_of_call(OpCall const& call, std::vector<int64_t> const& x_internal) {
  auto const& a = *attrs_of<graph::RnnAttrs>(call.op);
  Shape s;
  s.lstm = a.kind == graph::RnnKind::kLstm;
  s.rnn = a.kind == graph::RnnKind::kRnn;
  s.lbr = a.linear_before_reset;
  s.G = s.lstm ? 4 : s.rnn ? 1 : 3;
  for (std::size_t d = 0; d < 2; ++d) s.acts[d] = static_cast<kernels::hd::RnnAct>(a.activations[d]);
  s.T = x_internal[0];
  s.N = x_internal[1];
  s.I = x_internal[2];
  s.H = a.hidden_size;
  s.dir = a.direction;
  s.D = a.direction == graph::RnnDirection::kBidirectional ? 2 : 1;
  s.clip = a.clip;
  return s;
}

std::vector<Tensor> Tensors::to_saved() const { return {x, w, r, b, p, h0, c0, y, acts, state, mask}; }

Status from_saved(OpCall const& call, Saved const& saved, Tensors& f) {
  if (saved.tensors.size() != sCount) return op_error(call, "backward without a saved forward pass");
  f.x = saved.tensors[sX];
  f.w = saved.tensors[sW];
  f.r = saved.tensors[sR];
  f.b = saved.tensors[sB];
  f.p = saved.tensors[sP];
  f.h0 = saved.tensors[sH0];
  f.c0 = saved.tensors[sC0];
  f.y = saved.tensors[sY];
  f.acts = saved.tensors[sActs];
  f.state = saved.tensors[sState];
  f.mask = saved.tensors[sMask];
  return Status::ok();
}

Status check(graph::Op const& op, graph::OpGraph const& graph) {
  RETURN_IF_ERROR(require_attrs<graph::RnnAttrs>(op, graph));
  for (std::size_t i = 0; i < op.inputs.size(); ++i) {
    if (op.inputs[i] == graph::kNoTensor) continue;
    DType const d = graph.tensor(op.inputs[i]).dtype;
    bool const ok = i == kLens ? (d == DType::kInt32 || d == DType::kInt64) : d == DType::kFloat32;
    if (!ok) return unsupported(op.type + ": input " + std::to_string(i) + " has dtype " + graph::dtype_name(d));
  }
  std::size_t const max_inputs = attrs_of<graph::RnnAttrs>(op)->kind == graph::RnnKind::kLstm ? 8 : 6;
  static_assert(static_cast<int>(graph::RnnActivation::kRelu) == static_cast<int>(kernels::hd::RnnAct::kRelu) &&
                static_cast<int>(graph::RnnActivation::kSigmoid) == static_cast<int>(kernels::hd::RnnAct::kSigmoid));
  if (op.inputs.size() > max_inputs) return unsupported("more than " + std::to_string(max_inputs) + " inputs");
  return Status::ok();
}

}  // namespace rnn

}  // namespace gp::exec
