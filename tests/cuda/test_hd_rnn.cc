// Host twin of the CUDA LSTM, GRU and RNN (exec/cuda/rnn.cc): exec/rnn_plan.cc's sequencing, the very
// code the CUDA backend runs, on host primitives (a plain float64 GEMM on the same strided views,
// and one loop iteration per thread over kernels/hd/rnn.h's functions, the kernels' per-thread
// math), against the CPU backend (exec/cpu/rnn.cc: the same per-element functions, its own step
// sequencing and oneDNN products; tests/exec/test_ops_rnn.cc checks it against reference loops and
// finite differences): outputs Y, Y_h, Y_c and the gradients of every float input from random
// gradients of every output. Tolerance 1e-5 + 1e-4·|ref| (other summation orders).
#include <algorithm>
#include <string>

#include "exec/rnn_plan.h"
#include "kernels/hd/move.h"
#include "tests/cuda/hd_twin.h"
#include "tests/cuda/rnn_cases.h"

namespace gp::exec::testing {
namespace {

namespace hd = kernels::hd;

float mat_at(RnnMat const& m, int64_t i, int64_t j) { return m.t ? m.p[j * m.ld + i] : m.p[i * m.ld + j]; }

RnnPrimitives host_primitives() {
  RnnPrimitives p;
  p.gemm = [](RnnMat const& a, RnnMat const& b, float* c, int64_t ldc, bool accumulate) -> Status {
    if (a.cols != b.rows)
      return internal_error("gemm: inner dims " + std::to_string(a.cols) + " and " + std::to_string(b.rows));
    for (int64_t i = 0; i < a.rows; ++i)
      for (int64_t j = 0; j < b.cols; ++j) {
        double s = accumulate ? c[i * ldc + j] : 0.0;
        for (int64_t l = 0; l < a.cols; ++l) s += static_cast<double>(mat_at(a, i, l)) * mat_at(b, l, j);
        c[i * ldc + j] = static_cast<float>(s);
      }
    return Status::ok();
  };
  p.zeros = [](std::vector<int64_t> const& shape) -> Result<Tensor> { return Tensor::zeros(shape); };
  p.permute = [](Tensor const& x, std::vector<int64_t> const& perm) -> Result<Tensor> {
    std::vector<int64_t> const in_strides = hd::row_major_strides(x.shape());
    std::vector<int64_t> shape, strides;
    for (int64_t d : perm) {
      shape.push_back(x.shape()[static_cast<std::size_t>(d)]);
      strides.push_back(in_strides[static_cast<std::size_t>(d)]);
    }
    Tensor y(shape);
    std::vector<int64_t> idx(shape.size(), 0);
    for (int64_t e = 0; e < y.numel(); ++e) {
      int64_t src = 0;
      for (std::size_t k = 0; k < idx.size(); ++k) src += idx[k] * strides[k];
      y.data<float>()[e] = x.data<float>()[src];
      for (std::size_t k = idx.size(); k-- > 0;) {
        if (++idx[k] < shape[k]) break;
        idx[k] = 0;
      }
    }
    return y;
  };
  p.copy = [](float const* src, float* dst, int64_t n) -> Status {
    std::copy(src, src + n, dst);
    return Status::ok();
  };
  p.host_ints = [](Tensor const& lens) -> Result<std::vector<int64_t>> {
    std::vector<int64_t> v;
    for (int64_t i = 0; i < lens.numel(); ++i)
      v.push_back(lens.dtype() == DType::kInt32 ? lens.data<int32_t>()[i] : lens.data<int64_t>()[i]);
    return v;
  };
  auto each = [](auto fn) {  // thread e of the kernel runs (e / h, e % h)
    return [fn](auto const& s) -> Status {
      for (int64_t e = 0; e < s.n * s.h; ++e) fn(s, e / s.h, e % s.h);
      return Status::ok();
    };
  };
  p.lstm_forward = each([](hd::LstmStep const& s, int64_t n, int64_t j) { hd::lstm_forward_at(s, n, j); });
  p.lstm_backward = each([](hd::LstmBackStep const& s, int64_t n, int64_t j) { hd::lstm_backward_at(s, n, j); });
  p.lstm_peephole_grad = [](hd::LstmBackStep const& s, float* dp) -> Status {
    for (int64_t j = 0; j < s.h; ++j) hd::lstm_peephole_grad_at(s, dp, j);
    return Status::ok();
  };
  p.gru_gates = each([](hd::GruStep const& s, int64_t n, int64_t j) { hd::gru_gates_at(s, n, j); });
  p.gru_output = each([](hd::GruStep const& s, int64_t n, int64_t j) { hd::gru_output_at(s, n, j); });
  p.gru_backward = each([](hd::GruBackStep const& s, int64_t n, int64_t j) { hd::gru_backward_at(s, n, j); });
  p.gru_reset_grad = each([](hd::GruBackStep const& s, int64_t n, int64_t j) { hd::gru_reset_grad_at(s, n, j); });
  p.rnn_forward = each([](hd::RnnStep const& s, int64_t n, int64_t j) { hd::rnn_forward_at(s, n, j); });
  p.rnn_backward = each([](hd::RnnBackStep const& s, int64_t n, int64_t j) { hd::rnn_backward_at(s, n, j); });
  p.col_sums = [](float const* src, int64_t rows, int64_t cols, int64_t ld, float* dst) -> Status {
    for (int64_t c = 0; c < cols; ++c) hd::rnn_col_sum_at(src, rows, ld, dst, c);
    return Status::ok();
  };
  return p;
}

struct RnnRun {
  std::vector<Tensor> out, grads;
  int64_t clipped = 0;  // gate pre-activations the clip cut (the twin's saved mask)
};

// Forward, then every float input's gradient for the output gradients `gouts`.
RnnRun run_cpu_backend(OneOp const& o, std::vector<Tensor> const& gouts) {
  CpuBackend be;
  RnnRun r;
  Saved saved;
  r.out = run_forward(be, o, true, 7, &saved);
  OpCall call{o.the_op(), o.graph, true, 7};
  std::vector<bool> want(o.inputs.size(), false);
  for (std::size_t i = 0; i < o.inputs.size(); ++i)
    want[i] = o.inputs[i].defined() && o.inputs[i].dtype() == DType::kFloat32;
  Status const s = be.backward_input(call, saved, gouts, want, r.grads);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return r;
}

RnnRun run_twin(OneOp const& o, std::vector<Tensor> const& gouts, RnnPrimitives const& prims) {
  RnnRun r;
  Saved saved;
  OpCall call{o.the_op(), o.graph, true, 7};
  Status s = rnn_plan_forward(call, o.inputs, r.out, &saved, prims);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  if (Tensor const& mask = saved.tensors.back(); mask.defined())
    for (float m : mask.to_vector()) r.clipped += m == 0.f ? 1 : 0;
  std::vector<bool> want(o.inputs.size(), false);
  for (std::size_t i = 0; i < o.inputs.size(); ++i)
    want[i] = o.inputs[i].defined() && o.inputs[i].dtype() == DType::kFloat32;
  s = rnn_plan_grads(call, saved, gouts, want, r.grads, prims);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return r;
}

::testing::AssertionResult runs_match(RnnRun const& got, RnnRun const& ref) {
  Tol const tol{1e-5, 1e-4};
  auto compare = [&](std::vector<Tensor> const& g, std::vector<Tensor> const& w, char const* what) {
    for (std::size_t k = 0; k < w.size(); ++k) {
      if (!w[k].defined()) continue;
      if (k >= g.size() || !g[k].defined()) return ::testing::AssertionFailure() << what << " " << k << " missing";
      if (g[k].shape() != w[k].shape())
        return ::testing::AssertionFailure()
               << what << " " << k << " has shape " << g[k].shape_string() << ", expected " << w[k].shape_string();
      if (auto r = close(values(g[k]), values(w[k]), tol); !r) return r << " (" << what << " " << k << ")";
    }
    return ::testing::AssertionSuccess();
  };
  if (auto r = compare(got.out, ref.out, "output"); !r) return r;
  return compare(got.grads, ref.grads, "gradient of input");
}

std::vector<Tensor> output_grads(OneOp const& o, std::vector<Tensor> const& outs) {
  std::vector<Tensor> g;
  for (std::size_t k = 0; k < outs.size(); ++k)
    g.push_back(random_tensor(outs[k].shape(), static_cast<uint32_t>(90 + k), 0.1f, 1.f));
  (void)o;
  return g;
}

TEST(HdRnn, TwinMatchesTheCpuBackendForwardAndGradientsForEveryConfiguration) {
  RnnPrimitives const prims = host_primitives();
  uint32_t seed = 300;
  for (RnnOpCase const& k : rnn_op_cases()) {
    SCOPED_TRACE(k.label);
    OneOp const o = rnn_case_op(k, seed += 10);
    CpuBackend be;
    std::vector<Tensor> const outs = run_forward(be, o);
    std::vector<Tensor> const gouts = output_grads(o, outs);
    RnnRun const ref = run_cpu_backend(o, gouts);
    RnnRun const got = run_twin(o, gouts, prims);
    EXPECT_TRUE(runs_match(got, ref));
    if (k.clip > 0.f) {
      EXPECT_GT(got.clipped, 0) << "the clip cuts nothing: the case does not test it";
    }
    // Every float input has a gradient (the comparison covers them all).
    for (std::size_t i = 0; i < o.inputs.size(); ++i) {
      if (o.inputs[i].defined() && o.inputs[i].dtype() == DType::kFloat32) {
        EXPECT_TRUE(i < ref.grads.size() && ref.grads[i].defined()) << "input " << i;
      }
    }
  }
}

// Only the gradient of the first output (Y), as a model that ignores Y_h and Y_c trains it.
TEST(HdRnn, TwinMatchesWithOnlyTheSequenceOutputsGradient) {
  RnnPrimitives const prims = host_primitives();
  uint32_t seed = 500;
  for (RnnOpCase const& k : rnn_op_cases()) {
    SCOPED_TRACE(k.label);
    OneOp const o = rnn_case_op(k, seed += 10);
    CpuBackend be;
    std::vector<Tensor> const outs = run_forward(be, o);
    std::vector<Tensor> const gouts{random_tensor(outs[0].shape(), 77, 0.1f, 1.f)};
    EXPECT_TRUE(runs_match(run_twin(o, gouts, prims), run_cpu_backend(o, gouts)));
  }
}

// The comparison can fail: a slip in any one step function or in the sequencing shows.
TEST(HdRnn, ABrokenStepIsDetected) {
  struct Broken {
    std::string what;
    std::function<void(RnnPrimitives&)> breaks;
  };
  std::vector<Broken> const broken{
      {"LSTM forward without clip",
       [](RnnPrimitives& p) {
         p.lstm_forward = [](hd::LstmStep const& s) -> Status {
           hd::LstmStep t = s;
           t.clip = 0.f;
           for (int64_t e = 0; e < s.n * s.h; ++e) hd::lstm_forward_at(t, e / s.h, e % s.h);
           return Status::ok();
         };
       }},
      {"LSTM backward that drops dY",
       [](RnnPrimitives& p) {
         p.lstm_backward = [](hd::LstmBackStep const& s) -> Status {
           hd::LstmBackStep t = s;
           t.dy = nullptr;
           for (int64_t e = 0; e < s.n * s.h; ++e) hd::lstm_backward_at(t, e / s.h, e % s.h);
           return Status::ok();
         };
       }},
      {"peephole gradients not accumulated",
       [](RnnPrimitives& p) { p.lstm_peephole_grad = [](hd::LstmBackStep const&, float*) { return Status::ok(); }; }},
      {"GRU reset gradient skipped",
       [](RnnPrimitives& p) { p.gru_reset_grad = [](hd::GruBackStep const&) { return Status::ok(); }; }},
      {"GRU gates without the recurrent product",
       [](RnnPrimitives& p) {
         p.gru_gates = [](hd::GruStep const& s) -> Status {
           hd::GruStep t = s;
           t.rec = nullptr;
           for (int64_t e = 0; e < s.n * s.h; ++e) hd::gru_gates_at(t, e / s.h, e % s.h);
           return Status::ok();
         };
       }},
      {"RNN backward that drops dY",
       [](RnnPrimitives& p) {
         p.rnn_backward = [](hd::RnnBackStep const& s) -> Status {
           hd::RnnBackStep t = s;
           t.dy = nullptr;
           for (int64_t e = 0; e < s.n * s.h; ++e) hd::rnn_backward_at(t, e / s.h, e % s.h);
           return Status::ok();
         };
       }},
      {"RNN forward always Tanh",
       [](RnnPrimitives& p) {
         p.rnn_forward = [](hd::RnnStep const& s) -> Status {
           hd::RnnStep t = s;
           t.act = hd::RnnAct::kTanh;
           for (int64_t e = 0; e < s.n * s.h; ++e) hd::rnn_forward_at(t, e / s.h, e % s.h);
           return Status::ok();
         };
       }},
      {"a product that ignores accumulate", [](RnnPrimitives& p) {
         auto gemm = p.gemm;
         p.gemm = [gemm](RnnMat const& a, RnnMat const& b, float* c, int64_t ldc, bool) {
           return gemm(a, b, c, ldc, false);
         };
       }}};
  for (Broken const& b : broken) {
    SCOPED_TRACE(b.what);
    RnnPrimitives prims = host_primitives();
    b.breaks(prims);
    int caught = 0;
    uint32_t seed = 300;
    for (RnnOpCase const& k : rnn_op_cases()) {
      OneOp const o = rnn_case_op(k, seed += 10);
      CpuBackend be;
      std::vector<Tensor> const outs = run_forward(be, o);
      std::vector<Tensor> const gouts = output_grads(o, outs);
      if (!runs_match(run_twin(o, gouts, prims), run_cpu_backend(o, gouts))) ++caught;
    }
    EXPECT_GT(caught, 0);
  }
}

}  // namespace
}  // namespace gp::exec::testing
