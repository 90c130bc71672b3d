// Test helpers for single-operator tests of a Backend: build a one-op OpGraph by hand, run forward
// and backward, and check gradients by central finite differences (float64 accumulation).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "exec/cpu/cpu_backend.h"
#include "graph/onnx_import.h"
#include "graph/op_graph.h"

namespace gp::exec::testing {

inline constexpr graph::TensorRole kIn = graph::TensorRole::kInput;
inline constexpr graph::TensorRole kW = graph::TensorRole::kWeight;
inline constexpr int64_t N = graph::kBatch;  // the symbolic batch dimension of an imported shape

// Element i of a float32 tensor.
inline double at(Tensor const& t, int64_t i) { return t.data<float>()[i]; }

// got equals want element by element, within tol relative to 1 + |want|.
inline void expect_near(Tensor const& got, std::vector<double> const& want, double tol = 1e-5) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << got.shape_string();
  for (std::size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got.data<float>()[i], want[i], tol * (1 + std::fabs(want[i]))) << "element " << i;
}

// The graph of an ONNX text model; a failed import fails the test and gives an empty graph.
inline graph::OpGraph must_load(std::string const& text) {
  auto g = graph::load_onnx_text(text);
  EXPECT_TRUE(g.is_ok()) << g.status().to_string() << "\n" << text;
  if (!g.is_ok()) return graph::OpGraph{};
  return std::move(g).value();
}

struct In {
  std::string name;
  Tensor value;                                        // undefined: an omitted optional input
  graph::TensorRole role = graph::TensorRole::kInput;  // kWeight: gradient via backward_weight
};

struct OneOp {
  graph::OpGraph graph;
  graph::OpId op = graph::kNoOp;
  std::vector<Tensor> inputs;
  std::vector<graph::TensorRole> roles;

  graph::Op const& the_op() const { return graph.op(op); }
};

// out_dtypes: the outputs' dtypes where not float32 (a Cast to int64, a comparison's bool).
inline OneOp make_op(std::string const& type, graph::OpAttrs typed, std::vector<In> const& ins, int num_outputs = 1,
                     std::vector<DType> const& out_dtypes = {}) {
  OneOp o;
  graph::Op op;
  op.name = type + "_0";
  op.type = type;
  op.typed = std::move(typed);
  for (In const& in : ins) {
    o.inputs.push_back(in.value);
    o.roles.push_back(in.role);
    if (!in.value.defined()) {
      op.inputs.push_back(graph::kNoTensor);
      continue;
    }
    graph::TensorInfo info;
    info.name = in.name;
    info.dtype = in.value.dtype();
    info.shape.dims = in.value.shape();
    info.role = in.role;
    if (in.role == graph::TensorRole::kWeight || in.role == graph::TensorRole::kConstant) {
      graph::TensorData d;
      d.dtype = in.value.dtype();
      d.dims = in.value.shape();
      d.bytes.resize(in.value.nbytes());
      std::memcpy(d.bytes.data(), in.value.raw(), in.value.nbytes());
      info.data = std::make_shared<graph::TensorData const>(std::move(d));
    }
    graph::TensorId const t = o.graph.add_tensor(info);
    if (in.role == graph::TensorRole::kInput) o.graph.mark_input(t);
    op.inputs.push_back(t);
  }
  for (int i = 0; i < num_outputs; ++i) {
    graph::TensorInfo info;
    info.name = "out" + std::to_string(i);
    if (static_cast<std::size_t>(i) < out_dtypes.size()) info.dtype = out_dtypes[static_cast<std::size_t>(i)];
    graph::TensorId const t = o.graph.add_tensor(info);
    o.graph.mark_output(t);
    op.outputs.push_back(t);
  }
  o.op = o.graph.add_op(op);
  Status const s = o.graph.finalize();
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return o;
}

// Values in ±[lo, hi] with random signs, away from 0 (kinks of Relu/Abs, poles of Div).
inline Tensor random_tensor(std::vector<int64_t> shape, uint32_t seed, float lo = 0.1f, float hi = 1.f,
                            bool positive = false) {
  Tensor t(std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mag(lo, hi);
  std::bernoulli_distribution sign(0.5);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = (positive || sign(rng) ? 1.f : -1.f) * mag(rng);
  return t;
}

// Distinct values spaced at least `gap` apart (stable arg-max under small perturbations).
inline Tensor distinct_tensor(std::vector<int64_t> shape, uint32_t seed, float gap = 0.02f) {
  Tensor t(std::move(shape));
  std::vector<float> v(static_cast<std::size_t>(t.numel()));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = gap * static_cast<float>(i) - gap * static_cast<float>(v.size()) / 2;
  std::shuffle(v.begin(), v.end(), std::mt19937(seed));
  for (std::size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = v[i];
  return t;
}

inline Tensor int_tensor(std::vector<int64_t> shape, std::vector<int64_t> const& values) {
  Tensor t(std::move(shape), DType::kInt64);
  for (std::size_t i = 0; i < values.size(); ++i) t.data<int64_t>()[i] = values[i];
  return t;
}

inline Tensor int32_tensor(std::vector<int64_t> shape, std::vector<int32_t> const& v) {
  Tensor t(std::move(shape), DType::kInt32);
  for (std::size_t i = 0; i < v.size(); ++i) t.data<int32_t>()[i] = v[i];
  return t;
}

// A tensor of `dtype` holding `v` as T (its C++ type: double, int8_t, uint8_t, ...).
template <typename T>
Tensor typed_tensor(std::vector<int64_t> shape, DType dtype, std::vector<T> const& v) {
  Tensor t(std::move(shape), dtype);
  for (std::size_t i = 0; i < v.size(); ++i) t.data<T>()[i] = v[i];
  return t;
}

inline std::vector<Tensor> run_forward(Backend& be, OneOp const& o, bool training = true, uint64_t seed = 7,
                                       Saved* saved = nullptr) {
  OpCall call{o.the_op(), o.graph, training, seed};
  std::vector<Tensor> out;
  Status const s = be.forward(call, o.inputs, out, saved);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return out;
}

struct GradCheckOptions {
  double eps = 1e-3;
  double rtol = 1e-2;
  bool training = true;
  std::vector<int> skip_inputs{};  // float inputs not to differentiate (e.g. BN running stats)
};

struct GradCheckResult {
  std::vector<double> rel_error;          // per input; -1 where not checked
  std::vector<double> rel_error_scaled;   // the analytic gradient ×1.1
  std::vector<double> rel_error_flipped;  // the analytic gradient with its sign flipped
};

// Projection weights for the scalar loss L = Σ_k Σ_i R_k[i] · out_k[i].
inline std::vector<Tensor> loss_weights(std::vector<Tensor> const& outs) {
  std::vector<Tensor> r;
  for (std::size_t k = 0; k < outs.size(); ++k) {
    if (!outs[k].defined() || outs[k].dtype() != DType::kFloat32) {
      r.emplace_back();
      continue;
    }
    r.push_back(random_tensor(outs[k].shape(), 1000 + static_cast<uint32_t>(k), 0.2f, 1.f));
  }
  return r;
}

inline double loss_of(std::vector<Tensor> const& outs, std::vector<Tensor> const& r) {
  double l = 0;
  for (std::size_t k = 0; k < outs.size() && k < r.size(); ++k) {
    if (!r[k].defined()) continue;
    for (int64_t i = 0; i < outs[k].numel(); ++i)
      l += static_cast<double>(r[k].data<float>()[i]) * static_cast<double>(outs[k].data<float>()[i]);
  }
  return l;
}

inline double rel_err(std::vector<double> const& a, std::vector<double> const& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-6);
}

// Checks every float input: backward_input for role kInput, backward_weight for kWeight (which
// must accumulate: the slot starts at 0.25 and must end at 0.25 + gradient).
inline GradCheckResult grad_check(Backend& be, OneOp& o, GradCheckOptions const& opt = {}) {
  GradCheckResult res;
  std::size_t const n = o.inputs.size();
  res.rel_error.assign(n, -1);
  res.rel_error_scaled.assign(n, -1);
  res.rel_error_flipped.assign(n, -1);
  Saved saved;
  std::vector<Tensor> const outs = run_forward(be, o, opt.training, 7, &saved);
  // Only the outputs the graph names carry the loss (training BatchNorm also returns its running
  // statistics, which are state, not differentiable outputs).
  std::vector<Tensor> r = loss_weights(outs);
  r.resize(std::min(r.size(), o.the_op().outputs.size()));
  std::vector<Tensor> gouts;
  for (std::size_t k = 0; k < r.size(); ++k) gouts.push_back(r[k]);
  OpCall call{o.the_op(), o.graph, opt.training, 7};

  std::vector<bool> needs(n, false);
  std::vector<Tensor> wgrads(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (!o.inputs[i].defined() || o.inputs[i].dtype() != DType::kFloat32) continue;
    if (std::find(opt.skip_inputs.begin(), opt.skip_inputs.end(), static_cast<int>(i)) != opt.skip_inputs.end())
      continue;
    if (o.roles[i] == graph::TensorRole::kWeight) {
      wgrads[i] = Tensor(o.inputs[i].shape());
      wgrads[i].fill(0.25f);
    } else if (o.roles[i] == graph::TensorRole::kInput) {
      needs[i] = true;
    }
  }
  std::vector<Tensor> ginputs;
  Status s = be.backward_input(call, saved, gouts, needs, ginputs);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  s = be.backward_weight(call, saved, gouts, wgrads);
  EXPECT_TRUE(s.is_ok()) << s.to_string();

  for (std::size_t i = 0; i < n; ++i) {
    bool const is_weight = wgrads[i].defined();
    if (!needs[i] && !is_weight) continue;
    Tensor const& g = is_weight ? wgrads[i] : (i < ginputs.size() ? ginputs[i] : Tensor());
    EXPECT_TRUE(g.defined()) << "no gradient for input " << i;
    if (!g.defined()) continue;
    EXPECT_EQ(g.numel(), o.inputs[i].numel()) << "gradient of input " << i << " has shape " << g.shape_string();
    std::vector<double> analytic(static_cast<std::size_t>(g.numel())), numeric(analytic.size());
    for (int64_t j = 0; j < g.numel(); ++j) analytic[j] = g.data<float>()[j] - (is_weight ? 0.25 : 0.0);
    Tensor original = o.inputs[i].clone();
    for (int64_t j = 0; j < o.inputs[i].numel(); ++j) {
      float* p = o.inputs[i].data<float>() + j;
      float const x = original.data<float>()[j];
      *p = static_cast<float>(x + opt.eps);
      double const lp = loss_of(run_forward(be, o, opt.training, 7), r);
      *p = static_cast<float>(x - opt.eps);
      double const lm = loss_of(run_forward(be, o, opt.training, 7), r);
      *p = x;
      numeric[j] = (lp - lm) / (2 * opt.eps);
    }
    res.rel_error[i] = rel_err(analytic, numeric);
    std::vector<double> scaled = analytic, flipped = analytic;
    for (auto& v : scaled) v *= 1.1;
    for (auto& v : flipped) v = -v;
    res.rel_error_scaled[i] = rel_err(scaled, numeric);
    res.rel_error_flipped[i] = rel_err(flipped, numeric);
  }
  return res;
}

// Asserts the check passed for every checked input and that perturbed gradients fail it.
inline void expect_grads_ok(GradCheckResult const& r, double rtol = 1e-2) {
  int checked = 0;
  for (std::size_t i = 0; i < r.rel_error.size(); ++i) {
    if (r.rel_error[i] < 0) continue;
    ++checked;
    EXPECT_LT(r.rel_error[i], rtol) << "input " << i;
    EXPECT_GT(r.rel_error_scaled[i], rtol) << "input " << i << ": a 10% wrong gradient would pass";
    EXPECT_GT(r.rel_error_flipped[i], rtol) << "input " << i << ": a sign-flipped gradient would pass";
  }
  EXPECT_GT(checked, 0) << "no input was checked";
}

inline double max_abs_diff(Tensor const& a, Tensor const& b) {
  EXPECT_EQ(a.shape(), b.shape());
  if (a.shape() != b.shape()) return 1e30;
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    m = std::max(m, std::fabs(static_cast<double>(a.data<float>()[i]) - b.data<float>()[i]));
  return m;
}

// Backend::backward (one pass for B and W) equals backward_input followed by backward_weight.
inline void expect_one_pass_equals_split(OneOp& o) {
  CpuBackend be;
  Saved saved;
  std::vector<Tensor> const outs = run_forward(be, o, true, 7, &saved);
  std::vector<Tensor> const gouts = {random_tensor(outs[0].shape(), 77)};
  OpCall call{o.the_op(), o.graph, true, 7};
  std::size_t const n = o.inputs.size();
  std::vector<bool> needs(n, false);
  std::vector<Tensor> split_w(n), both_w(n);
  for (std::size_t i = 0; i < n; ++i) {
    needs[i] = o.roles[i] == graph::TensorRole::kInput;
    if (o.roles[i] == graph::TensorRole::kWeight) {
      split_w[i] = Tensor(o.inputs[i].shape());
      split_w[i].fill(0.5f);
      both_w[i] = split_w[i].clone();
    }
  }
  std::vector<Tensor> split_in, both_in;
  ASSERT_TRUE(be.backward_input(call, saved, gouts, needs, split_in).is_ok());
  ASSERT_TRUE(be.backward_weight(call, saved, gouts, split_w).is_ok());
  Status const s = be.backward(call, saved, gouts, needs, both_in, both_w);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  for (std::size_t i = 0; i < n; ++i) {
    if (needs[i]) {
      ASSERT_TRUE(both_in[i].defined()) << "input " << i;
      EXPECT_LT(max_abs_diff(both_in[i], split_in[i]), 1e-5) << "input " << i;
    }
    if (split_w[i].defined()) {
      EXPECT_LT(max_abs_diff(both_w[i], split_w[i]), 1e-5) << "weight " << i;
      double moved = 0;
      for (int64_t j = 0; j < both_w[i].numel(); ++j) moved += std::fabs(both_w[i].data<float>()[j] - 0.5f);
      EXPECT_GT(moved, 0.0) << "weight " << i << " got no gradient";
    }
  }
}

}  // namespace gp::exec::testing
