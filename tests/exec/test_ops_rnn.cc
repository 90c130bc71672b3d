// LSTM, GRU, RNN and Einsum: import-time shapes and refusals, forward against plain reference loops
// written here, and finite-difference gradients of every differentiable input.
#include <array>
#include <cmath>
#include <functional>
#include <map>

#include "graph/onnx_tensor_io.h"
#include "graph/ops/registry.h"
#include "tests/exec/op_harness.h"

namespace gp::exec::testing {
namespace {

using graph::RnnAttrs;
using graph::RnnDirection;
using graph::RnnKind;
using graph::TensorRole;

// ---- reference recurrences (layout 0, doubles, straight from the ONNX operator definitions) ----
struct RnnCase {
  RnnKind kind = RnnKind::kLstm;
  int64_t T = 3, N = 2, I = 3, H = 4;
  RnnDirection dir = RnnDirection::kForward;
  bool bias = true, h0 = true, c0 = true, peep = false, lbr = false;
  float clip = 0.f;
  int64_t layout = 0;
  std::array<graph::RnnActivation, 2> acts{graph::RnnActivation::kTanh, graph::RnnActivation::kTanh};  // RNN
};

int64_t dirs(RnnCase const& k) { return k.dir == RnnDirection::kBidirectional ? 2 : 1; }
int64_t gates(RnnCase const& k) { return k.kind == RnnKind::kLstm ? 4 : k.kind == RnnKind::kRnn ? 1 : 3; }
char const* type_of(RnnKind kind) { return kind == RnnKind::kLstm ? "LSTM" : kind == RnnKind::kGru ? "GRU" : "RNN"; }

struct RnnInputs {
  Tensor x, w, r, b, h0, c0, p;
};

RnnInputs rnn_inputs(RnnCase const& k, uint32_t seed) {
  int64_t const D = dirs(k), G = gates(k) * k.H;
  RnnInputs in;
  in.x = random_tensor(k.layout == 0 ? std::vector<int64_t>{k.T, k.N, k.I} : std::vector<int64_t>{k.N, k.T, k.I}, seed,
                       0.1f, 1.f);
  in.w = random_tensor({D, G, k.I}, seed + 1, 0.05f, 0.6f);
  in.r = random_tensor({D, G, k.H}, seed + 2, 0.05f, 0.6f);
  if (k.bias) in.b = random_tensor({D, 2 * G}, seed + 3, 0.05f, 0.5f);
  std::vector<int64_t> const state =
      k.layout == 0 ? std::vector<int64_t>{D, k.N, k.H} : std::vector<int64_t>{k.N, D, k.H};
  if (k.h0) in.h0 = random_tensor(state, seed + 4, 0.1f, 0.8f);
  if (k.kind == RnnKind::kLstm && k.c0) in.c0 = random_tensor(state, seed + 5, 0.1f, 0.8f);
  if (k.kind == RnnKind::kLstm && k.peep) in.p = random_tensor({D, 3 * k.H}, seed + 6, 0.1f, 0.6f);
  return in;
}

OneOp rnn_op(RnnCase const& k, RnnInputs const& in, TensorRole weights = kW) {
  RnnAttrs a;
  a.kind = k.kind;
  a.hidden_size = k.H;
  a.direction = k.dir;
  a.linear_before_reset = k.lbr;
  a.layout = k.layout;
  a.clip = k.clip;
  a.activations = k.acts;
  std::vector<In> ins = {{"x", in.x, kIn},     {"w", in.w, weights},    {"r", in.r, weights},
                         {"b", in.b, weights}, {"lens", Tensor(), kIn}, {"h0", in.h0, kIn}};
  if (k.kind == RnnKind::kLstm) {
    ins.push_back({"c0", in.c0, kIn});
    ins.push_back({"p", in.p, weights});
  }
  return make_op(type_of(k.kind), a, ins, k.kind == RnnKind::kLstm ? 3 : 2);
}

double sig(double x) { return 1 / (1 + std::exp(-x)); }

// Y [T, D, N, H], Y_h [D, N, H], Y_c [D, N, H] (layout 0 inputs).
std::vector<std::vector<double>> reference_rnn(RnnCase const& k, RnnInputs const& in) {
  int64_t const D = dirs(k), H = k.H, N = k.N, T = k.T, I = k.I, G = gates(k) * H;
  bool const lstm = k.kind == RnnKind::kLstm;
  auto at = [](Tensor const& t, int64_t i) { return t.defined() ? static_cast<double>(t.data<float>()[i]) : 0.0; };
  auto clip = [&](double v) { return k.clip > 0 ? std::max<double>(-k.clip, std::min<double>(k.clip, v)) : v; };
  std::vector<double> y(static_cast<std::size_t>(T * D * N * H)), yh(static_cast<std::size_t>(D * N * H)), yc(yh);
  for (int64_t d = 0; d < D; ++d) {
    bool const rev = k.dir == RnnDirection::kReverse || d == 1;
    for (int64_t n = 0; n < N; ++n) {
      std::vector<double> h(static_cast<std::size_t>(H)), c(h);
      for (int64_t j = 0; j < H; ++j) {
        h[j] = at(in.h0, (d * N + n) * H + j);
        c[j] = at(in.c0, (d * N + n) * H + j);
      }
      for (int64_t s = 0; s < T; ++s) {
        int64_t const t = rev ? T - 1 - s : s;
        // xw[g] = x·W_g + Wb_g, hr[g] = h·R_g + Rb_g
        std::vector<double> xw(static_cast<std::size_t>(G)), hr(xw);
        for (int64_t g = 0; g < G; ++g) {
          xw[g] = at(in.b, d * 2 * G + g);
          hr[g] = at(in.b, d * 2 * G + G + g);
          for (int64_t i = 0; i < I; ++i) xw[g] += at(in.x, (t * N + n) * I + i) * at(in.w, (d * G + g) * I + i);
          for (int64_t i = 0; i < H; ++i) hr[g] += h[i] * at(in.r, (d * G + g) * H + i);
        }
        std::vector<double> hn(h);
        if (k.kind == RnnKind::kRnn) {
          for (int64_t j = 0; j < H; ++j) {
            double const v = clip(xw[j] + hr[j]);
            switch (k.acts[static_cast<std::size_t>(d)]) {
              case graph::RnnActivation::kRelu:
                hn[j] = std::max(v, 0.0);
                break;
              case graph::RnnActivation::kSigmoid:
                hn[j] = sig(v);
                break;
              default:
                hn[j] = std::tanh(v);
            }
          }
        } else if (lstm) {
          for (int64_t j = 0; j < H; ++j) {
            double const cp = c[j];
            double const i = sig(clip(xw[j] + hr[j] + at(in.p, d * 3 * H + j) * cp));
            double const f = sig(clip(xw[2 * H + j] + hr[2 * H + j] + at(in.p, d * 3 * H + 2 * H + j) * cp));
            double const cc = std::tanh(clip(xw[3 * H + j] + hr[3 * H + j]));
            c[j] = f * cp + i * cc;
            double const o = sig(clip(xw[H + j] + hr[H + j] + at(in.p, d * 3 * H + H + j) * c[j]));
            hn[j] = o * std::tanh(c[j]);
          }
        } else {
          // lbr = 0: (r ∘ h)·Rh + Rbh
          std::vector<double> rh(static_cast<std::size_t>(H));
          for (int64_t j = 0; j < H; ++j) rh[j] = sig(clip(xw[H + j] + hr[H + j])) * h[j];
          for (int64_t j = 0; j < H; ++j) {
            double const z = sig(clip(xw[j] + hr[j]));
            double const r = sig(clip(xw[H + j] + hr[H + j]));
            double pre = xw[2 * H + j];
            if (k.lbr) {
              pre += r * hr[2 * H + j];
            } else {
              double s2 = at(in.b, d * 2 * G + G + 2 * H + j);
              for (int64_t i = 0; i < H; ++i) s2 += rh[i] * at(in.r, (d * G + 2 * H + j) * H + i);
              pre += s2;
            }
            double const hc = std::tanh(clip(pre));
            hn[j] = (1 - z) * hc + z * h[j];
          }
        }
        h = hn;
        for (int64_t j = 0; j < H; ++j) y[((t * D + d) * N + n) * H + j] = h[j];
      }
      for (int64_t j = 0; j < H; ++j) {
        yh[(d * N + n) * H + j] = h[j];
        yc[(d * N + n) * H + j] = c[j];
      }
    }
  }
  return {y, yh, yc};
}

void expect_near_all(Tensor const& got, std::vector<double> const& want, std::string const& what) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << what;
  for (std::size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got.data<float>()[i], want[i], 1e-5) << what << " element " << i;
}

void check_rnn_forward(RnnCase const& k) {
  CpuBackend be;
  RnnInputs const in = rnn_inputs(k, 11);
  OneOp o = rnn_op(k, in);
  ASSERT_TRUE(be.supports(o.the_op(), o.graph).is_ok()) << be.supports(o.the_op(), o.graph).to_string();
  std::vector<Tensor> const out = run_forward(be, o);
  auto const want = reference_rnn(k, in);
  ASSERT_EQ(out.size(), k.kind == RnnKind::kLstm ? 3u : 2u);
  for (std::size_t i = 0; i < out.size(); ++i) expect_near_all(out[i], want[i], "output " + std::to_string(i));
}

TEST(Lstm, ForwardMatchesReference) {
  RnnCase k;
  check_rnn_forward(k);
  k.dir = RnnDirection::kReverse;
  check_rnn_forward(k);
  k.dir = RnnDirection::kBidirectional;
  k.peep = true;
  check_rnn_forward(k);
  k.bias = k.h0 = k.c0 = false;
  check_rnn_forward(k);
}

TEST(Lstm, ClipBoundsTheGateInputs) {
  RnnCase k;
  k.clip = 0.3f;
  k.peep = true;
  check_rnn_forward(k);
  // The reference without the clip differs: the clip is applied.
  CpuBackend be;
  RnnInputs const in = rnn_inputs(k, 11);
  std::vector<Tensor> const out = run_forward(be, rnn_op(k, in));
  k.clip = 0.f;
  auto const unclipped = reference_rnn(k, in);
  double diff = 0;
  for (std::size_t i = 0; i < unclipped[0].size(); ++i) diff += std::fabs(out[0].data<float>()[i] - unclipped[0][i]);
  EXPECT_GT(diff, 1e-2);
}

TEST(Gru, ForwardMatchesReference) {
  RnnCase k;
  k.kind = RnnKind::kGru;
  for (bool lbr : {false, true}) {
    k.lbr = lbr;
    k.dir = RnnDirection::kForward;
    check_rnn_forward(k);
    k.dir = RnnDirection::kBidirectional;
    check_rnn_forward(k);
  }
  k.bias = k.h0 = false;
  k.dir = RnnDirection::kReverse;
  check_rnn_forward(k);
  k.clip = 0.4f;
  check_rnn_forward(k);
}

// The plain RNN: each activation, each direction (a different activation per direction), clip,
// without bias or initial state.
TEST(PlainRnn, ForwardMatchesReference) {
  using graph::RnnActivation;
  RnnCase k;
  k.kind = RnnKind::kRnn;
  check_rnn_forward(k);
  k.acts = {RnnActivation::kRelu, RnnActivation::kSigmoid};
  check_rnn_forward(k);
  k.dir = RnnDirection::kBidirectional;
  check_rnn_forward(k);
  k.dir = RnnDirection::kReverse;
  k.acts = {RnnActivation::kSigmoid, RnnActivation::kSigmoid};
  k.clip = 0.3f;
  k.bias = k.h0 = false;
  check_rnn_forward(k);
  // The activation is applied: Relu and Tanh differ on these inputs.
  CpuBackend be;
  RnnCase relu, tanh;
  relu.kind = tanh.kind = RnnKind::kRnn;
  relu.acts = {RnnActivation::kRelu, RnnActivation::kRelu};
  RnnInputs in = rnn_inputs(relu, 11);
  in.w = random_tensor(in.w.shape(), 12, -0.6f, 0.6f);  // negative pre-activations too
  EXPECT_NE(run_forward(be, rnn_op(relu, in))[0].to_vector(), run_forward(be, rnn_op(tanh, in))[0].to_vector());
}

// layout=1 equals layout=0 on the same data with the batch and sequence dims swapped.
TEST(Rnn, BatchFirstLayoutIsATranspose) {
  for (RnnKind kind : {RnnKind::kLstm, RnnKind::kGru, RnnKind::kRnn}) {
    RnnCase k;
    k.kind = kind;
    k.dir = RnnDirection::kBidirectional;
    k.layout = 1;
    CpuBackend be;
    RnnInputs in1 = rnn_inputs(k, 21);
    std::vector<Tensor> const out1 = run_forward(be, rnn_op(k, in1));
    RnnCase k0 = k;
    k0.layout = 0;
    RnnInputs in0 = in1;
    auto swap01 = [](Tensor const& t) {
      Tensor o({t.dim(1), t.dim(0), t.dim(2)});
      for (int64_t a = 0; a < t.dim(0); ++a)
        for (int64_t b = 0; b < t.dim(1); ++b)
          for (int64_t c = 0; c < t.dim(2); ++c)
            o.data<float>()[(b * t.dim(0) + a) * t.dim(2) + c] = t.data<float>()[(a * t.dim(1) + b) * t.dim(2) + c];
      return o;
    };
    in0.x = swap01(in1.x);
    in0.h0 = swap01(in1.h0);
    if (in1.c0.defined()) in0.c0 = swap01(in1.c0);
    std::vector<Tensor> const out0 = run_forward(be, rnn_op(k0, in0));
    // Y: [N, T, D, H] vs [T, D, N, H]
    int64_t const T = k.T, D = 2, N = k.N, H = k.H;
    ASSERT_EQ(out1[0].shape(), (std::vector<int64_t>{N, T, D, H}));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t d = 0; d < D; ++d)
          for (int64_t h = 0; h < H; ++h)
            ASSERT_FLOAT_EQ(out1[0].data<float>()[((n * T + t) * D + d) * H + h],
                            out0[0].data<float>()[((t * D + d) * N + n) * H + h]);
    for (std::size_t i = 1; i < out1.size(); ++i) {
      Tensor const back = swap01(out1[i]);
      EXPECT_EQ(back.to_vector(), out0[i].to_vector()) << "output " << i;
    }
  }
}

void check_rnn_grads(RnnCase const& k, TensorRole weights = kW) {
  CpuBackend be;
  OneOp o = rnn_op(k, rnn_inputs(k, 31), weights);
  ASSERT_TRUE(be.supports(o.the_op(), o.graph).is_ok()) << be.supports(o.the_op(), o.graph).to_string();
  GradCheckResult const r = grad_check(be, o);
  expect_grads_ok(r);
  for (std::size_t i = 0; i < o.inputs.size(); ++i)
    if (o.inputs[i].defined()) {
      EXPECT_GE(r.rel_error[i], 0) << "input " << i << " was not checked";
    }
}

TEST(Lstm, GradientsOfEveryInput) {
  RnnCase k;
  k.peep = true;
  check_rnn_grads(k);
  k.dir = RnnDirection::kBidirectional;
  check_rnn_grads(k, kIn);  // W, R, B, P as activations: backward_input
  k.dir = RnnDirection::kReverse;
  k.layout = 1;
  check_rnn_grads(k);
}

TEST(Lstm, GradientsWithClipAndNoInitialState) {
  RnnCase k;
  k.clip = 0.5f;
  k.h0 = k.c0 = false;
  k.T = 4;
  check_rnn_grads(k);
}

TEST(Gru, GradientsOfEveryInput) {
  RnnCase k;
  k.kind = RnnKind::kGru;
  for (bool lbr : {false, true}) {
    k.lbr = lbr;
    k.dir = RnnDirection::kForward;
    k.layout = 0;
    check_rnn_grads(k);
    k.dir = RnnDirection::kBidirectional;
    k.layout = 1;
    check_rnn_grads(k, kIn);
  }
}

TEST(PlainRnn, GradientsOfEveryInput) {
  using graph::RnnActivation;
  RnnCase k;
  k.kind = RnnKind::kRnn;
  k.T = 4;
  check_rnn_grads(k);
  k.dir = RnnDirection::kBidirectional;
  k.layout = 1;
  k.acts = {RnnActivation::kRelu, RnnActivation::kSigmoid};
  check_rnn_grads(k, kIn);  // W, R, B as activations: backward_input
  k.dir = RnnDirection::kReverse;
  k.acts = {RnnActivation::kRelu, RnnActivation::kRelu};
  k.clip = 0.5f;
  k.h0 = false;
  check_rnn_grads(k);
}

// One backward pass (backward_both) gives what the split B and W passes give.
TEST(Rnn, JointBackwardMatchesSplit) {
  RnnCase k;
  k.peep = true;
  k.dir = RnnDirection::kBidirectional;
  CpuBackend be;
  OneOp o = rnn_op(k, rnn_inputs(k, 41));
  Saved saved;
  std::vector<Tensor> const out = run_forward(be, o, true, 7, &saved);
  std::vector<Tensor> gout = loss_weights(out);
  OpCall call{o.the_op(), o.graph, true, 7};
  std::vector<bool> needs(o.inputs.size(), false);
  needs[0] = needs[5] = needs[6] = true;
  auto weight_grads = [&] {
    std::vector<Tensor> w(o.inputs.size());
    for (std::size_t i : {1u, 2u, 3u, 7u}) w[i] = Tensor::zeros(o.inputs[i].shape());
    return w;
  };
  std::vector<Tensor> gi_split, w_split = weight_grads(), gi_both, w_both = weight_grads();
  ASSERT_TRUE(be.backward_input(call, saved, gout, needs, gi_split).is_ok());
  ASSERT_TRUE(be.backward_weight(call, saved, gout, w_split).is_ok());
  ASSERT_TRUE(be.backward(call, saved, gout, needs, gi_both, w_both).is_ok());
  for (std::size_t i = 0; i < o.inputs.size(); ++i) {
    EXPECT_EQ(gi_split[i].defined(), gi_both[i].defined()) << i;
    if (gi_split[i].defined()) {
      EXPECT_EQ(gi_split[i].to_vector(), gi_both[i].to_vector()) << i;
    }
    if (w_split[i].defined()) {
      EXPECT_EQ(w_split[i].to_vector(), w_both[i].to_vector()) << i;
    }
  }
}

TEST(Rnn, SequenceLensMustEqualTheSequenceLength) {
  RnnCase k;
  CpuBackend be;
  RnnInputs const in = rnn_inputs(k, 51);
  OneOp o = rnn_op(k, in);
  o.inputs[4] = int_tensor({k.N}, {k.T, k.T});
  std::vector<Tensor> const full = run_forward(be, o);  // equal lengths: accepted
  EXPECT_EQ(full[0].to_vector(), run_forward(be, rnn_op(k, in))[0].to_vector());
  o.inputs[4] = int_tensor({k.N}, {k.T, k.T - 1});
  OpCall call{o.the_op(), o.graph, true, 7};
  std::vector<Tensor> out;
  Status const s = be.forward(call, o.inputs, out, nullptr);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("variable lengths are not supported"), std::string::npos) << s.message();
}

// ---- import-time shapes and refusals ----
graph::ops::InputDesc desc(std::vector<int64_t> dims, DType dtype = DType::kFloat32) {
  return {true, dtype, std::move(dims)};
}

Result<graph::ops::Inferred> infer(std::string const& type, graph::Attributes attrs,
                                   std::vector<graph::ops::InputDesc> inputs, std::vector<std::string> outputs) {
  graph::ops::InferContext c;
  c.type = type;
  c.name = type + "_node";
  c.opset = 17;
  c.attrs = std::move(attrs);
  c.inputs = std::move(inputs);
  c.outputs = std::move(outputs);
  graph::ops::OpDef const* def = graph::ops::find_op(type);
  EXPECT_NE(def, nullptr) << type;
  if (!def) return internal_error("no op");
  return def->infer(c);
}

TEST(RnnImport, ShapesCarryTheBatch) {
  constexpr int64_t N = -1;  // the symbolic batch
  auto r =
      infer("LSTM", {{"hidden_size", int64_t{4}}, {"direction", std::string("bidirectional")}},
            {desc({7, N, 3}), desc({2, 16, 3}), desc({2, 16, 4}), desc({2, 32}), {}, desc({2, N, 4}), desc({2, N, 4})},
            {"y", "yh", "yc"});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->outs.size(), 3u);
  EXPECT_EQ(r->outs[0].second, (std::vector<int64_t>{7, 2, N, 4}));
  EXPECT_EQ(r->outs[1].second, (std::vector<int64_t>{2, N, 4}));
  EXPECT_EQ(r->outs[2].second, (std::vector<int64_t>{2, N, 4}));
  EXPECT_EQ(r->data_inputs.size(), 7u);

  auto g = infer("GRU", {{"hidden_size", int64_t{5}}, {"layout", int64_t{1}}, {"linear_before_reset", int64_t{1}}},
                 {desc({N, 6, 3}), desc({1, 15, 3}), desc({1, 15, 5})}, {"y", "yh"});
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  EXPECT_EQ(g->outs[0].second, (std::vector<int64_t>{N, 6, 1, 5}));
  EXPECT_EQ(g->outs[1].second, (std::vector<int64_t>{N, 1, 5}));
  EXPECT_TRUE(std::get<RnnAttrs>(g->typed).linear_before_reset);

  // torch's nn.RNN(nonlinearity='relu', bidirectional=True): one activation per direction.
  auto p = infer("RNN",
                 {{"hidden_size", int64_t{5}},
                  {"direction", std::string("bidirectional")},
                  {"activations", std::vector<std::string>{"Relu", "Relu"}}},
                 {desc({7, N, 3}), desc({2, 5, 3}), desc({2, 5, 5}), desc({2, 10}), {}, desc({2, N, 5})}, {"y", "yh"});
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  EXPECT_EQ(p->outs[0].second, (std::vector<int64_t>{7, 2, N, 5}));
  EXPECT_EQ(p->outs[1].second, (std::vector<int64_t>{2, N, 5}));
  EXPECT_EQ(std::get<RnnAttrs>(p->typed).kind, RnnKind::kRnn);
  EXPECT_EQ(std::get<RnnAttrs>(p->typed).activations[1], graph::RnnActivation::kRelu);
  auto t = infer("RNN", {{"hidden_size", int64_t{5}}}, {desc({7, N, 3}), desc({1, 5, 3}), desc({1, 5, 5})}, {"y"});
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_EQ(std::get<RnnAttrs>(t->typed).activations[0], graph::RnnActivation::kTanh);

  auto e = infer("Einsum", {{"equation", std::string("bhqd, bhkd -> bhqk")}}, {desc({N, 2, 5, 8}), desc({N, 2, 6, 8})},
                 {"z"});
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  EXPECT_EQ(e->outs[0].second, (std::vector<int64_t>{N, 2, 5, 6}));
  EXPECT_EQ(std::get<graph::EinsumAttrs>(e->typed).equation, "bhqd,bhkd->bhqk");
}

void expect_refused(Result<graph::ops::Inferred> const& r, std::string const& words) {
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find(words), std::string::npos) << r.status().message();
}

TEST(RnnImport, RefusesWhatItCannotRun) {
  constexpr int64_t N = -1;
  std::vector<graph::ops::InputDesc> const lstm_in = {desc({7, N, 3}), desc({1, 16, 3}), desc({1, 16, 4})};
  expect_refused(
      infer("LSTM", {{"hidden_size", int64_t{4}}, {"activations", std::vector<std::string>{"Relu", "Tanh", "Tanh"}}},
            lstm_in, {"y"}),
      "activations other than the defaults");
  EXPECT_TRUE(infer("LSTM",
                    {{"hidden_size", int64_t{4}}, {"activations", std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}}},
                    lstm_in, {"y"})
                  .is_ok());
  expect_refused(infer("LSTM", {{"hidden_size", int64_t{4}}, {"input_forget", int64_t{1}}}, lstm_in, {"y"}),
                 "input_forget");
  expect_refused(
      infer("LSTM", {{"hidden_size", int64_t{4}}}, {desc({N, 7, 3}), desc({1, 16, 3}), desc({1, 16, 4})}, {"y"}),
      "batch in its sequence dim");
  expect_refused(infer("LSTM", {{"hidden_size", int64_t{5}}}, lstm_in, {"y"}), "W has shape");
  expect_refused(infer("GRU", {{"hidden_size", int64_t{4}}, {"direction", std::string("sideways")}},
                       {desc({7, N, 3}), desc({1, 12, 3}), desc({1, 12, 4})}, {"y"}),
                 "unknown direction");
  std::vector<graph::ops::InputDesc> const rnn_in = {desc({7, N, 3}), desc({1, 4, 3}), desc({1, 4, 4})};
  expect_refused(
      infer("RNN", {{"hidden_size", int64_t{4}}, {"activations", std::vector<std::string>{"Elu"}}}, rnn_in, {"y"}),
      "activation 'Elu' is not supported (Tanh, Relu or Sigmoid)");
  expect_refused(infer("RNN", {{"hidden_size", int64_t{4}}, {"activations", std::vector<std::string>{"Tanh", "Relu"}}},
                       rnn_in, {"y"}),
                 "2 activations for 1 direction(s)");
  expect_refused(
      infer("RNN", {{"hidden_size", int64_t{4}}}, {desc({7, N, 3}), desc({1, 12, 3}), desc({1, 12, 4})}, {"y"}),
      "W has shape");
  expect_refused(infer("Einsum", {{"equation", std::string("bij,bjk->ik")}}, {desc({N, 2, 3}), desc({N, 3, 4})}, {"z"}),
                 "sums over the batch");
  expect_refused(infer("Einsum", {{"equation", std::string("ij,jk->ik")}}, {desc({2, 3}), desc({4, 4})}, {"z"}),
                 "a label has size");
  expect_refused(infer("Einsum", {{"equation", std::string("ij->k")}}, {desc({2, 3})}, {"z"}), "in no operand");
}

// ---- Einsum ----
// Brute force over every label value: out[o] = Σ Π operands (letters only).
std::vector<double> reference_einsum(std::string const& eq, std::vector<Tensor> const& ops,
                                     std::vector<int64_t>& out_shape) {
  std::string const lhs = eq.substr(0, eq.find("->")), rhs = eq.substr(eq.find("->") + 2);
  std::vector<std::string> terms;
  for (std::size_t s = 0, c; s <= lhs.size(); s = c + 1) {
    c = lhs.find(',', s);
    if (c == std::string::npos) c = lhs.size();
    terms.push_back(lhs.substr(s, c - s));
  }
  std::map<char, int64_t> size;
  for (std::size_t k = 0; k < terms.size(); ++k)
    for (std::size_t i = 0; i < terms[k].size(); ++i) size[terms[k][i]] = ops[k].dim(static_cast<int>(i));
  std::vector<char> labels;
  for (auto const& [l, n] : size) labels.push_back(l);
  out_shape.clear();
  for (char l : rhs) out_shape.push_back(size[l]);
  int64_t out_n = 1;
  for (int64_t d : out_shape) out_n *= d;
  std::vector<double> out(static_cast<std::size_t>(out_n), 0.0);
  std::map<char, int64_t> v;
  std::function<void(std::size_t)> walk = [&](std::size_t li) {
    if (li == labels.size()) {
      double p = 1;
      for (std::size_t k = 0; k < terms.size(); ++k) {
        int64_t off = 0;
        for (char l : terms[k]) off = off * size[l] + v[l];
        p *= ops[k].data<float>()[off];
      }
      int64_t off = 0;
      for (char l : rhs) off = off * size[l] + v[l];
      out[static_cast<std::size_t>(off)] += p;
      return;
    }
    for (v[labels[li]] = 0; v[labels[li]] < size[labels[li]]; ++v[labels[li]]) walk(li + 1);
  };
  walk(0);
  return out;
}

struct EinsumCase {
  std::string eq;                          // as the op gets it
  std::string ref;                         // explicit letters-only form for the reference ("" = eq)
  std::vector<std::vector<int64_t>> dims;  // operand shapes
};

std::vector<EinsumCase> einsum_cases() {
  return {
      {"bij,bjk->bik", "", {{2, 3, 4}, {2, 4, 5}}},
      {"bhqd,bhkd->bhqk", "", {{2, 2, 3, 4}, {2, 2, 5, 4}}},
      {"bhqk,bhkd->bhqd", "", {{2, 2, 3, 5}, {2, 2, 5, 4}}},
      {"ij->ji", "", {{3, 4}}},
      {"ij->i", "", {{3, 4}}},
      {"i,i", "i,i->", {{5}, {5}}},
      {"i,j->ij", "", {{3}, {4}}},
      {"ii->i", "", {{4, 4}}},
      {"ii", "ii->", {{4, 4}}},
      {"bij,jk", "bij,jk->bik", {{2, 3, 4}, {4, 5}}},
      {"...ii->...i", "bii->bi", {{3, 4, 4}}},
      {"b...d,kd->b...k", "bsd,kd->bsk", {{2, 3, 4}, {5, 4}}},
      {"ij,ij->ij", "", {{3, 4}, {3, 4}}},
      {"bij,bkj->bki", "", {{2, 3, 4}, {2, 5, 4}}},
      {"ijk,jl->lk", "", {{2, 3, 4}, {3, 5}}},
      {"iij,j->i", "", {{3, 3, 2}, {2}}},
  };
}

OneOp einsum_op(EinsumCase const& c, uint32_t seed, TensorRole second = kIn) {
  std::vector<In> ins;
  for (std::size_t k = 0; k < c.dims.size(); ++k)
    ins.push_back({"x" + std::to_string(k), random_tensor(c.dims[k], seed + static_cast<uint32_t>(k), 0.2f, 1.f),
                   k == 1 ? second : kIn});
  return make_op("Einsum", graph::EinsumAttrs{c.eq}, ins);
}

TEST(Einsum, ForwardMatchesBruteForce) {
  CpuBackend be;
  for (EinsumCase const& c : einsum_cases()) {
    SCOPED_TRACE(c.eq);
    OneOp o = einsum_op(c, 61);
    ASSERT_TRUE(be.supports(o.the_op(), o.graph).is_ok());
    std::vector<Tensor> const out = run_forward(be, o);
    std::vector<int64_t> shape;
    std::vector<double> const want = reference_einsum(c.ref.empty() ? c.eq : c.ref, o.inputs, shape);
    EXPECT_EQ(out[0].shape(), shape);
    expect_near_all(out[0], want, c.eq);
  }
}

TEST(Einsum, GradientsOfEveryOperand) {
  CpuBackend be;
  for (EinsumCase const& c : einsum_cases()) {
    SCOPED_TRACE(c.eq);
    OneOp o = einsum_op(c, 71, kW);
    GradCheckResult const r = grad_check(be, o);
    expect_grads_ok(r);
    for (std::size_t i = 0; i < o.inputs.size(); ++i) EXPECT_GE(r.rel_error[i], 0) << i;
  }
}

// ONNX's Einsum node tests hold float64 data, which the float32 backend refuses (the conformance
// suite counts them as unsupported): replay them here in float32.
Tensor as_float32(graph::TensorData const& d) {
  Tensor t(d.dims);
  for (int64_t i = 0; i < d.numel(); ++i)
    t.data<float>()[i] = d.dtype == DType::kFloat64 ? static_cast<float>(d.as<double>()[i]) : d.as<float>()[i];
  return t;
}

TEST(Einsum, OnnxNodeTestsInFloat32) {
  std::string const root = "/usr/share/libonnx-testdata/data/node/";
  std::vector<std::pair<std::string, std::string>> const tests = {{"test_einsum_batch_diagonal", "...ii ->...i"},
                                                                  {"test_einsum_batch_matmul", "bij, bjk -> bik"},
                                                                  {"test_einsum_inner_prod", "i,i"},
                                                                  {"test_einsum_sum", "ij->i"},
                                                                  {"test_einsum_transpose", "ij->ji"}};
  CpuBackend be;
  int ran = 0;
  for (auto const& [name, eq] : tests) {
    std::string const dir = root + name + "/test_data_set_0/";
    std::vector<In> ins;
    for (int i = 0;; ++i) {
      auto t = graph::load_tensor_pb(dir + "input_" + std::to_string(i) + ".pb");
      if (!t.is_ok()) break;
      ins.push_back({"x" + std::to_string(i), as_float32(t->data), kIn});
    }
    auto want = graph::load_tensor_pb(dir + "output_0.pb");
    if (ins.empty() || !want.is_ok()) continue;
    std::string equation;
    for (char ch : eq)
      if (ch != ' ') equation += ch;
    OneOp o = make_op("Einsum", graph::EinsumAttrs{equation}, ins);
    std::vector<Tensor> const out = run_forward(be, o);
    Tensor const w = as_float32(want->data);
    ASSERT_EQ(out[0].shape(), w.shape()) << name;
    for (int64_t i = 0; i < w.numel(); ++i)
      EXPECT_NEAR(out[0].data<float>()[i], w.data<float>()[i], 1e-5 + 1e-4 * std::fabs(w.data<float>()[i])) << name;
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "libonnx-testdata is not installed (" << root << ")";
  EXPECT_EQ(ran, 5);
}

TEST(Einsum, RefusesMoreThanTwoOperands) {
  CpuBackend be;
  OneOp o = make_op(
      "Einsum", graph::EinsumAttrs{"i,i,i->i"},
      {{"a", random_tensor({2}, 1), kIn}, {"b", random_tensor({2}, 2), kIn}, {"c", random_tensor({2}, 3), kIn}});
  Status const s = be.supports(o.the_op(), o.graph);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("one or two are supported"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace gp::exec::testing
