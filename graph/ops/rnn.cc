// LSTM, GRU and RNN: import-time inference (graph/ops/infer.h) and cost (graph/ops/cost.h).
#include <algorithm>
#include <cmath>
#include <cctype>

#include "graph/ops/registry.h"

namespace gp::graph::ops {
namespace {

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// `what` has shape `want` (no batch allowed where `want` has none).
Status expect_dims(InferContext const& c, std::size_t k, std::string const& what, Dims const& want) {
  if (c.dims(k) != want)
    return invalid_argument(c.type + ": " + what + " has shape " + dims_str(c.dims(k)) + ", expected " +
                            dims_str(want));
  return Status::ok();
}

// A plain RNN's activations: one per direction (or one for both), Tanh, Relu or Sigmoid.
Status rnn_activations(InferContext const& c, int64_t dirs, RnnAttrs& a) {
  auto it = c.attrs.find("activations");
  auto const* acts = it == c.attrs.end() ? nullptr : std::get_if<std::vector<std::string>>(&it->second);
  if (!acts) return Status::ok();  // Tanh
  if (acts->size() != static_cast<std::size_t>(dirs) && acts->size() != 1)
    return invalid_argument("RNN: " + std::to_string(acts->size()) + " activations for " + std::to_string(dirs) +
                            " direction(s); give one per direction");
  for (std::size_t d = 0; d < 2; ++d) {
    std::string const name = lower((*acts)[std::min(d, acts->size() - 1)]);
    if (name == "tanh") {
      a.activations[d] = RnnActivation::kTanh;
    } else if (name == "relu") {
      a.activations[d] = RnnActivation::kRelu;
    } else if (name == "sigmoid") {
      a.activations[d] = RnnActivation::kSigmoid;
    } else {
      return unsupported("RNN: activation '" + (*acts)[std::min(d, acts->size() - 1)] +
                         "' is not supported (Tanh, Relu or Sigmoid)");
    }
  }
  return Status::ok();
}

Result<Inferred> infer_rnn(InferContext const& c) {
  bool const lstm = c.type == "LSTM", plain = c.type == "RNN";
  std::string const& T = c.type;
  int64_t const gates = lstm ? 4 : plain ? 1 : 3;
  RnnAttrs a;
  a.kind = lstm ? RnnKind::kLstm : plain ? RnnKind::kRnn : RnnKind::kGru;
  a.hidden_size = c.attr_int("hidden_size", 0);
  a.layout = c.attr_int("layout", 0);
  a.clip = static_cast<float>(c.attr_float("clip", 0.0));
  a.linear_before_reset = !lstm && c.attr_int("linear_before_reset", 0) != 0;
  std::string const dir = c.attr_string("direction", "forward");
  if (dir == "forward") {
    a.direction = RnnDirection::kForward;
  } else if (dir == "reverse") {
    a.direction = RnnDirection::kReverse;
  } else if (dir == "bidirectional") {
    a.direction = RnnDirection::kBidirectional;
  } else {
    return invalid_argument(T + ": unknown direction '" + dir + "' (forward, reverse or bidirectional)");
  }
  int64_t const dirs = a.direction == RnnDirection::kBidirectional ? 2 : 1;
  if (a.hidden_size <= 0) return invalid_argument(T + " needs a positive 'hidden_size' attribute");
  if (a.layout != 0 && a.layout != 1) return invalid_argument(T + ": layout must be 0 or 1");
  if (a.clip < 0.f) return invalid_argument(T + ": clip must be positive");
  if (lstm && c.attr_int("input_forget", 0) != 0)
    return unsupported("LSTM: input_forget=1 (coupled input and forget gates) is not supported");
  auto it = c.attrs.find("activations");
  if (plain) {
    RETURN_IF_ERROR(rnn_activations(c, dirs, a));
  } else if (auto const* acts = it == c.attrs.end() ? nullptr : std::get_if<std::vector<std::string>>(&it->second)) {
    std::vector<std::string> const dflt =
        lstm ? std::vector<std::string>{"sigmoid", "tanh", "tanh"} : std::vector<std::string>{"sigmoid", "tanh"};
    bool ok = acts->size() == dflt.size() * static_cast<std::size_t>(dirs);
    for (std::size_t i = 0; ok && i < acts->size(); ++i) ok = lower((*acts)[i]) == dflt[i % dflt.size()];
    if (!ok)
      return unsupported(T + ": activations other than the defaults (" +
                         std::string(lstm ? "Sigmoid, Tanh, Tanh" : "Sigmoid, Tanh") +
                         " per direction) are not supported");
  }
  for (std::size_t k = 0; k < c.inputs.size(); ++k)
    if (c.has(k) && k != 4 && !is_float_dtype(c.dtype(k)))
      return unsupported(T + ": input " + std::to_string(k) + " must be float");
  if (!c.has(1) || !c.has(2)) return invalid_argument(T + " needs inputs W and R");
  Dims const& x = c.dims(0);
  if (x.size() != 3) return invalid_argument(T + ": X must be 3-D, has shape " + dims_str(x));
  int64_t const seq = a.layout == 0 ? x[0] : x[1], batch = a.layout == 0 ? x[1] : x[0], input = x[2];
  if (seq < 0)
    return unsupported(
        T + ": X " + dims_str(x) + " has the batch in its sequence dim; " +
        (a.layout == 0 ? "use layout=1 or transpose X to [seq, batch, input]" : "transpose X to [batch, seq, input]"));
  if (input < 0) return unsupported(T + ": X " + dims_str(x) + " has the batch in its input dim");
  int64_t const h = a.hidden_size, g = gates * h;
  RETURN_IF_ERROR(expect_dims(c, 1, "W", {dirs, g, input}));
  RETURN_IF_ERROR(expect_dims(c, 2, "R", {dirs, g, h}));
  if (c.has(3)) RETURN_IF_ERROR(expect_dims(c, 3, "B", {dirs, 2 * g}));
  if (c.has(4)) {
    if (c.dims(4) != Dims{batch})
      return invalid_argument(T + ": sequence_lens has shape " + dims_str(c.dims(4)) + ", expected [" + dim_str(batch) +
                              "]");
    auto lens = c.static_ints(4, "sequence_lens");
    if (lens.is_ok())
      for (int64_t len : *lens)
        if (len != seq)
          return unsupported(T + ": sequence_lens holds " + std::to_string(len) + ", the sequence length is " +
                             std::to_string(seq) + "; variable lengths are not supported: pad the sequences");
  }
  Dims const state = a.layout == 0 ? Dims{dirs, batch, h} : Dims{batch, dirs, h};
  if (c.has(5)) RETURN_IF_ERROR(expect_dims(c, 5, "initial_h", state));
  if (lstm && c.has(6)) RETURN_IF_ERROR(expect_dims(c, 6, "initial_c", state));
  if (lstm && c.has(7)) RETURN_IF_ERROR(expect_dims(c, 7, "P", {dirs, 3 * h}));
  if (c.inputs.size() > (lstm ? 8u : 6u)) return invalid_argument(T + " has too many inputs");
  Inferred k;
  k.typed = a;
  k.data_inputs = all_slots(c);
  Dims const y = a.layout == 0 ? Dims{seq, dirs, batch, h} : Dims{batch, seq, dirs, h};
  std::size_t const n = std::min<std::size_t>(c.outputs.size(), lstm ? 3 : 2);
  for (std::size_t i = 0; i < n; ++i) k.outs.push_back({c.dtype(0), i == 0 ? y : state});
  return k;
}

// Per time step and direction: the gates' products with the input and the previous state.
OpCost rnn_cost(CostContext const& c, double gates) {
  OpCost r;
  auto const* a = std::get_if<RnnAttrs>(&c.op.typed);
  double const h = a ? static_cast<double>(a->hidden_size) : 0;
  auto const& x = c.tensors[c.input(0)].shape.dims;
  double const inputs = x.empty() ? 0 : static_cast<double>(std::abs(x.back()));
  double const steps_dirs = h > 0 ? c.elems(c.output0()) / h : 0;  // Y is [T, D, N, H]: T*D per sample
  double const mm = steps_dirs * 2 * gates * h * (inputs + h);
  r.fwd_flops_per_sample = mm + steps_dirs * 15 * gates * h;
  r.bwd_weight_flops_per_sample = c.needs_weight_grad(c.input(1)) ? mm : 0;
  r.bwd_flops_per_sample = mm + r.bwd_weight_flops_per_sample;
  return r;
}

OpCost lstm_cost(CostContext const& c) { return rnn_cost(c, 4); }
OpCost gru_cost(CostContext const& c) { return rnn_cost(c, 3); }
OpCost plain_rnn_cost(CostContext const& c) { return rnn_cost(c, 1); }

}  // namespace

void register_rnn_ops(OpTable& t) {
  // sequence_lens (slot 4) gets no gradient; the initial states do (a learned h0 trains, as in
  // torch; ONNX declares them non-differentiable).
  define(t, "LSTM", {.infer = infer_rnn, .cost = lstm_cost, .saved = save_input0, .grad_free = input_slots({4})});
  define(t, "GRU", {.infer = infer_rnn, .cost = gru_cost, .saved = save_input0, .grad_free = input_slots({4})});
  define(t, "RNN", {.infer = infer_rnn, .cost = plain_rnn_cost, .saved = save_input0, .grad_free = input_slots({4})});
}

}  // namespace gp::graph::ops
