// LSTM, GRU and RNN one-op graphs for the CUDA tests (the host twin, tests/cuda/test_hd_rnn.cc, and the
// GPU differential sweep, test_cuda_backend.cc): one struct of the attributes and optional inputs.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "tests/exec/op_harness.h"

namespace gp::exec::testing {

struct RnnOpCase {
  std::string label;
  graph::RnnKind kind = graph::RnnKind::kLstm;
  int64_t T = 3, N = 2, I = 3, H = 4;
  graph::RnnDirection dir = graph::RnnDirection::kForward;
  bool bias = true, h0 = true, c0 = true, peep = false, lbr = false, lens = false;
  float clip = 0.f;
  int64_t layout = 0;
  int outputs = 0;  // 0: all (3 for LSTM, 2 for GRU and RNN)
  std::array<graph::RnnActivation, 2> acts{graph::RnnActivation::kTanh, graph::RnnActivation::kTanh};  // RNN
};

inline OneOp rnn_case_op(RnnOpCase const& k, uint32_t seed) {
  using graph::TensorRole;
  bool const lstm = k.kind == graph::RnnKind::kLstm, plain = k.kind == graph::RnnKind::kRnn;
  int64_t const D = k.dir == graph::RnnDirection::kBidirectional ? 2 : 1, G = (lstm ? 4 : plain ? 1 : 3) * k.H;
  std::vector<int64_t> const x_shape =
      k.layout == 0 ? std::vector<int64_t>{k.T, k.N, k.I} : std::vector<int64_t>{k.N, k.T, k.I};
  std::vector<int64_t> const state =
      k.layout == 0 ? std::vector<int64_t>{D, k.N, k.H} : std::vector<int64_t>{k.N, D, k.H};
  graph::RnnAttrs a;
  a.kind = k.kind;
  a.hidden_size = k.H;
  a.direction = k.dir;
  a.linear_before_reset = k.lbr;
  a.layout = k.layout;
  a.clip = k.clip;
  a.activations = k.acts;
  std::vector<In> ins = {
      {"x", random_tensor(x_shape, seed, 0.1f, 1.f), TensorRole::kInput},
      {"w", random_tensor({D, G, k.I}, seed + 1, 0.05f, 0.6f), TensorRole::kWeight},
      {"r", random_tensor({D, G, k.H}, seed + 2, 0.05f, 0.6f), TensorRole::kWeight},
      {"b", k.bias ? random_tensor({D, 2 * G}, seed + 3, 0.05f, 0.5f) : Tensor(), TensorRole::kWeight},
      {"lens",
       k.lens ? int32_tensor({k.N}, std::vector<int32_t>(static_cast<std::size_t>(k.N), static_cast<int32_t>(k.T)))
              : Tensor(),
       TensorRole::kInput},
      {"h0", k.h0 ? random_tensor(state, seed + 4, 0.1f, 0.8f) : Tensor(), TensorRole::kInput}};
  if (lstm) {
    ins.push_back({"c0", k.c0 ? random_tensor(state, seed + 5, 0.1f, 0.8f) : Tensor(), TensorRole::kInput});
    ins.push_back({"p", k.peep ? random_tensor({D, 3 * k.H}, seed + 6, 0.1f, 0.6f) : Tensor(), TensorRole::kWeight});
  }
  while (!ins.empty() && !ins.back().value.defined()) ins.pop_back();  // trailing optional inputs omitted
  int const outs = k.outputs > 0 ? k.outputs : (lstm ? 3 : 2);
  return make_op(lstm ? "LSTM" : plain ? "RNN" : "GRU", a, ins, outs);
}

// The configurations both tests run: every attribute and optional input on LSTM, GRU and RNN.
inline std::vector<RnnOpCase> rnn_op_cases() {
  using graph::RnnDirection;
  using graph::RnnKind;
  std::vector<RnnOpCase> c;
  RnnOpCase k;
  k.label = "LSTM forward, initial states, bias";
  c.push_back(k);
  k = {};
  k.label = "LSTM bidirectional, peepholes, sequence_lens, initial states";
  k.dir = RnnDirection::kBidirectional;
  k.peep = true;
  k.lens = true;
  k.T = 4;
  k.H = 5;
  c.push_back(k);
  k = {};
  k.label = "LSTM reverse, clip, no bias, no initial states, layout 1";
  k.dir = RnnDirection::kReverse;
  k.clip = 0.6f;
  k.bias = k.h0 = k.c0 = false;
  k.layout = 1;
  k.N = 3;
  c.push_back(k);
  k = {};
  k.label = "LSTM bidirectional, peepholes, clip, layout 1, Y only";
  k.dir = RnnDirection::kBidirectional;
  k.peep = true;
  k.clip = 0.8f;
  k.layout = 1;
  k.outputs = 1;
  c.push_back(k);
  k = {};
  k.label = "GRU forward, initial state, bias";
  k.kind = RnnKind::kGru;
  c.push_back(k);
  k = {};
  k.label = "GRU bidirectional, linear_before_reset, sequence_lens";
  k.kind = RnnKind::kGru;
  k.dir = RnnDirection::kBidirectional;
  k.lbr = true;
  k.lens = true;
  k.T = 4;
  c.push_back(k);
  k = {};
  k.label = "GRU reverse, clip, no bias, no initial state, layout 1";
  k.kind = RnnKind::kGru;
  k.dir = RnnDirection::kReverse;
  k.clip = 0.6f;
  k.bias = k.h0 = false;
  k.layout = 1;
  k.N = 3;
  c.push_back(k);
  k = {};
  k.label = "GRU bidirectional, linear_before_reset, clip, layout 1";
  k.kind = RnnKind::kGru;
  k.dir = RnnDirection::kBidirectional;
  k.lbr = true;
  k.clip = 0.8f;
  k.layout = 1;
  c.push_back(k);
  k = {};
  k.label = "RNN forward, Tanh, initial state, bias";
  k.kind = RnnKind::kRnn;
  c.push_back(k);
  k = {};
  k.label = "RNN bidirectional, Relu then Sigmoid, sequence_lens, layout 1";
  k.kind = RnnKind::kRnn;
  k.dir = RnnDirection::kBidirectional;
  k.acts = {graph::RnnActivation::kRelu, graph::RnnActivation::kSigmoid};
  k.lens = true;
  k.layout = 1;
  k.T = 4;
  c.push_back(k);
  k = {};
  k.label = "RNN reverse, Relu, clip, no bias, no initial state, Y only";
  k.kind = RnnKind::kRnn;
  k.dir = RnnDirection::kReverse;
  k.acts = {graph::RnnActivation::kRelu, graph::RnnActivation::kRelu};
  k.clip = 0.5f;
  k.bias = k.h0 = false;
  k.outputs = 1;
  k.N = 3;
  c.push_back(k);
  return c;
}

}  // namespace gp::exec::testing
