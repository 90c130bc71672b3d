#include "graph/accounting.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>

#include "graph/ops/einsum.h"

namespace gp::graph {
namespace {

// Forward FLOPs per output element of elementwise and normalisation ops, and the backward
// multiplier relative to forward.
struct ElemCost {
  double fwd;
  double bwd;
};
std::map<std::string, ElemCost> const& elem_costs() {
  static std::map<std::string, ElemCost> const table = {
      {"Add", {1, 0}},  // the gradient passes through unchanged (a sum where broadcast)
      {"Sub", {1, 1}},
      {"Mul", {1, 2}},
      {"Div", {1, 4}},
      {"Pow", {2, 4}},
      {"Sqrt", {2, 2}},
      {"Relu", {1, 1}},
      {"LeakyRelu", {2, 2}},
      {"Sigmoid", {4, 2}},
      {"Tanh", {4, 2}},
      {"Gelu", {8, 12}},
      {"Dropout", {2, 1}},
      {"Where", {1, 1}},
      {"Equal", {1, 0}},
      {"Softmax", {5, 4}},
      {"BatchNormalization", {8, 12}},
      {"LayerNormalization", {8, 12}},
      {"InstanceNormalization", {8, 12}},
      // issue 14's elementwise ops (transcendentals count 1)
      {"Clip", {2, 1}},
      {"Neg", {1, 1}},
      {"Abs", {1, 1}},
      {"ThresholdedRelu", {1, 1}},
      {"Sign", {1, 0}},
      {"Floor", {1, 0}},
      {"Ceil", {1, 0}},
      {"Round", {1, 0}},
      {"Reciprocal", {1, 2}},
      {"Exp", {1, 2}},
      {"Log", {1, 2}},
      {"Erf", {1, 2}},
      {"Elu", {3, 3}},
      {"Selu", {4, 4}},
      {"Celu", {5, 5}},
      {"Softplus", {3, 3}},
      {"Softsign", {3, 3}},
      {"HardSigmoid", {4, 2}},
      {"HardSwish", {5, 5}},
      {"PRelu", {2, 4}},
      {"Min", {1, 1}},
      {"Max", {1, 1}},
      {"Sum", {1, 1}},
      {"Mean", {2, 1}},
      {"Mod", {3, 3}},
      {"Less", {1, 0}},
      {"Greater", {1, 0}},
      {"LessOrEqual", {1, 0}},
      {"GreaterOrEqual", {1, 0}},
      {"Not", {1, 0}},
      {"And", {1, 0}},
      {"Or", {1, 0}},
      {"Xor", {1, 0}},
      {"LogSoftmax", {5, 5}},
      {"Hardmax", {1, 0}},
      {"CumSum", {1, 1}},
      {"Trilu", {1, 1}},
      {"Pad", {1, 1}},
      {"Tile", {1, 1}},
      {"GatherElements", {1, 1}},
      {"ScatterElements", {1, 1}},
      {"Scatter", {1, 1}},
      {"Resize", {8, 8}},
      {"Sin", {1, 2}},
      {"Cos", {1, 2}},
      {"Tan", {1, 2}},
      {"Asin", {1, 2}},
      {"Acos", {1, 2}},
      {"Atan", {1, 2}},
      {"Sinh", {1, 2}},
      {"Cosh", {1, 2}},
      {"Asinh", {1, 2}},
      {"Acosh", {1, 2}},
      {"Atanh", {1, 2}},
  };
  return table;
}

bool batched(std::vector<TensorInfo> const& ts, TensorId t) { return t != kNoTensor && ts[t].shape.has_batch(); }

// A batched operand that needs its gradient: not the model's own input data.
bool needs_input_grad(std::vector<TensorInfo> const& ts, TensorId t) {
  return batched(ts, t) && ts[t].role != TensorRole::kInput;
}

double elems(std::vector<TensorInfo> const& ts, TensorId t) {
  return batched(ts, t) ? static_cast<double>(ts[t].shape.elements_per_sample()) : 0.0;
}

TensorId input(Op const& op, std::size_t k) { return k < op.inputs.size() ? op.inputs[k] : kNoTensor; }

// An operand that is not batched needs a gradient unless it is a plain constant.
bool needs_weight_grad(std::vector<TensorInfo> const& ts, TensorId t) {
  return t != kNoTensor && !ts[t].shape.has_batch() && ts[t].role != TensorRole::kConstant &&
         ts[t].role != TensorRole::kInput;
}

int64_t product(std::vector<int64_t> const& dims, std::size_t from) {
  int64_t n = 1;
  for (std::size_t k = from; k < dims.size(); ++k) n *= dims[k] < 0 ? -dims[k] : dims[k];
  return n;
}

}  // namespace

SavedForBackward saved_for_backward(Op const& op, std::vector<TensorInfo> const& ts) {
  SavedForBackward s;
  std::string const& t = op.type;
  TensorId const in0 = input(op, 0);
  TensorId const out0 = op.outputs.empty() ? kNoTensor : op.outputs[0];
  auto save = [&](TensorId id) {
    if (batched(ts, id) && std::find(s.tensors.begin(), s.tensors.end(), id) == s.tensors.end())
      s.tensors.push_back(id);
  };
  if (t == "Conv" || t == "ConvTranspose" || t == "BatchNormalization" || t == "InstanceNormalization" ||
      t == "LeakyRelu" || t == "Gelu" || t == "MaxPool" || t == "LSTM" || t == "GRU" || t == "PRelu" || t == "Clip" ||
      t == "Einsum" || t == "SoftmaxCrossEntropyLoss") {
    save(in0);
  } else if (t == "Gemm" || t == "MatMul" || t == "Mul" || t == "Div" || t == "Pow") {
    save(in0);
    save(input(op, 1));
  } else if (t == "Relu" || t == "Sigmoid" || t == "Tanh" || t == "Sqrt" || t == "Softmax") {
    save(out0);
  } else if (t == "LayerNormalization") {
    save(in0);
    if (batched(ts, in0)) {
      auto const& dims = ts[in0].shape.dims;
      auto const* a = std::get_if<LayerNormAttrs>(&op.typed);
      int64_t const axis = a ? a->axis : static_cast<int64_t>(dims.size()) - 1;
      int64_t const norm = product(dims, static_cast<std::size_t>(axis));
      int64_t const rows = norm ? ts[in0].shape.elements_per_sample() / norm : 0;
      s.extra_bytes_per_sample = rows * 2 * 4;
    }
  } else if (t == "Dropout") {
    auto const* a = std::get_if<DropoutAttrs>(&op.typed);
    if (a && a->training && a->ratio > 0) s.extra_bytes_per_sample = static_cast<int64_t>(elems(ts, out0));
  } else if (t == "Gather") {
    save(input(op, 1));
  } else if (t == "Where") {
    save(in0);
  }
  return s;
}

OpCost op_cost(Op const& op, std::vector<TensorInfo> const& ts) {
  OpCost c;
  std::string const& t = op.type;
  TensorId const in0 = input(op, 0), in1 = input(op, 1);
  TensorId const out0 = op.outputs.empty() ? kNoTensor : op.outputs[0];
  double const out_e = elems(ts, out0);
  double const in_e = elems(ts, in0);

  if (t == "Conv" || t == "ConvTranspose") {
    // A Conv output element gathers, a ConvTranspose input element scatters, a (channels / group) x
    // kernel window: the weight's dims after the first.
    double const macs = (t == "Conv" ? out_e : in_e) * static_cast<double>(product(ts[in1].shape.dims, 1));
    bool const bias = input(op, 2) != kNoTensor;
    c.fwd_flops_per_sample = 2 * macs + (bias ? out_e : 0);
    double const in_grad = needs_input_grad(ts, in0) ? 2 * macs : 0;
    double const w_grad = needs_weight_grad(ts, in1) ? 2 * macs + (bias ? out_e : 0) : 0;
    c.bwd_flops_per_sample = in_grad + w_grad;
    c.bwd_weight_flops_per_sample = w_grad;
  } else if (t == "Gemm" || t == "MatMul") {
    auto const& a = ts[in0].shape.dims;
    int64_t k = 0;
    if (t == "Gemm") {
      auto const* g = std::get_if<GemmAttrs>(&op.typed);
      k = (g && g->trans_a) ? a[0] : a[1];
    } else {
      k = a.back();
    }
    if (k < 0) k = -k;
    double const mm = 2 * out_e * static_cast<double>(k);
    c.fwd_flops_per_sample = mm + (t == "Gemm" ? out_e : 0);
    for (TensorId operand : {in0, in1}) {
      if (needs_input_grad(ts, operand)) {
        c.bwd_flops_per_sample += mm;
      } else if (needs_weight_grad(ts, operand)) {
        c.bwd_flops_per_sample += mm;
        c.bwd_weight_flops_per_sample += mm;
      }
    }
    if (t == "Gemm" && needs_weight_grad(ts, input(op, 2))) {
      c.bwd_flops_per_sample += out_e;
      c.bwd_weight_flops_per_sample += out_e;
    }
  } else if (auto it = elem_costs().find(t); it != elem_costs().end()) {
    c.fwd_flops_per_sample = it->second.fwd * out_e;
    c.bwd_flops_per_sample = it->second.bwd * out_e;
    // Scale and bias gradients of the norms: a multiply-add per element, reduced per channel.
    if ((t == "BatchNormalization" || t == "LayerNormalization") && needs_weight_grad(ts, in1)) {
      c.bwd_weight_flops_per_sample = 2 * out_e;
    }
  } else if (t == "MaxPool" || t == "AveragePool") {
    auto const* p = std::get_if<PoolAttrs>(&op.typed);
    double kernel = 1;
    if (p)
      for (int64_t k : p->kernel) kernel *= static_cast<double>(k);
    c.fwd_flops_per_sample = out_e * kernel;
    c.bwd_flops_per_sample = t == "MaxPool" ? in_e : out_e * kernel;
  } else if (t == "GlobalAveragePool" || t.rfind("Reduce", 0) == 0 || t == "ArgMax" || t == "ArgMin") {
    c.fwd_flops_per_sample = t == "ReduceLogSumExp"                      ? 4 * in_e
                             : t == "ReduceL2" || t == "ReduceSumSquare" ? 2 * in_e
                                                                         : in_e;
    c.bwd_flops_per_sample = t == "ArgMax" || t == "ArgMin" ? 0 : c.fwd_flops_per_sample;
  } else if (t == "LSTM" || t == "GRU") {
    // Per time step and direction: the gates' products with the input and the previous state.
    auto const* a = std::get_if<RnnAttrs>(&op.typed);
    double const gates = t == "LSTM" ? 4 : 3;
    double const h = a ? static_cast<double>(a->hidden_size) : 0;
    auto const& x = ts[in0].shape.dims;
    double const inputs = x.empty() ? 0 : static_cast<double>(std::abs(x.back()));
    double const steps_dirs = h > 0 ? elems(ts, out0) / h : 0;  // Y is [T, D, N, H]: T*D per sample
    double const mm = steps_dirs * 2 * gates * h * (inputs + h);
    c.fwd_flops_per_sample = mm + steps_dirs * 15 * gates * h;
    c.bwd_weight_flops_per_sample = needs_weight_grad(ts, in1) ? mm : 0;
    c.bwd_flops_per_sample = mm + c.bwd_weight_flops_per_sample;
  } else if (t == "Einsum") {
    // 2 x the product of every label's size (the batch label counts once per sample); backward twice that.
    auto const* a = std::get_if<EinsumAttrs>(&op.typed);
    std::vector<std::vector<int64_t>> dims;
    std::vector<int64_t> ranks;
    for (TensorId in : op.inputs)
      if (in != kNoTensor) {
        dims.push_back(ts[in].shape.dims);
        ranks.push_back(static_cast<int64_t>(dims.back().size()));
      }
    if (a != nullptr) {
      auto spec = ops::parse_einsum(a->equation, ranks);
      auto sizes = spec.is_ok() ? ops::einsum_label_sizes(*spec, dims) : Result<std::vector<int64_t>>(spec.status());
      if (sizes.is_ok()) {
        double p = 1;
        for (int64_t d : *sizes) p *= d < 0 ? static_cast<double>(-d) : static_cast<double>(d);
        c.fwd_flops_per_sample = (dims.size() > 1 ? 2 : 1) * p;
        c.bwd_flops_per_sample = 2 * c.fwd_flops_per_sample;
      }
    }
  } else if (t == "SoftmaxCrossEntropyLoss" || t == "NegativeLogLikelihoodLoss") {
    bool const sce = t == "SoftmaxCrossEntropyLoss";
    c.fwd_flops_per_sample = (sce ? 5 : 2) * in_e;
    c.bwd_flops_per_sample = (sce ? 3 : 1) * in_e;
  }
  SavedForBackward const s = saved_for_backward(op, ts);
  c.activation_bytes_per_sample = s.extra_bytes_per_sample;
  for (TensorId id : s.tensors) c.activation_bytes_per_sample += ts[id].bytes_per_sample();
  return c;
}

void fill_accounting(std::vector<Op>& ops, std::vector<TensorInfo> const& tensors) {
  std::set<TensorId> counted;
  for (Op& op : ops) {
    OpCost const c = op_cost(op, tensors);
    op.fwd_flops_per_sample = c.fwd_flops_per_sample;
    op.bwd_flops_per_sample = c.bwd_flops_per_sample;
    op.bwd_weight_flops_per_sample = c.bwd_weight_flops_per_sample;
    op.activation_bytes_per_sample = c.activation_bytes_per_sample;
    op.param_bytes = 0;
    for (TensorId t : op.inputs)
      if (t != kNoTensor && tensors[t].role == TensorRole::kWeight && counted.insert(t).second)
        op.param_bytes += tensors[t].static_bytes();
  }
}

int64_t saved_activation_bytes_per_sample(OpGraph const& graph) {
  std::set<TensorId> saved;
  int64_t extra = 0;
  for (Op const& op : graph.ops()) {
    SavedForBackward const s = saved_for_backward(op, graph.tensors());
    saved.insert(s.tensors.begin(), s.tensors.end());
    extra += s.extra_bytes_per_sample;
  }
  int64_t total = extra;
  for (TensorId t : saved) total += graph.tensor(t).bytes_per_sample();
  return total;
}

}  // namespace gp::graph
