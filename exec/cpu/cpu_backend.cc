#include "exec/cpu/cpu_backend.h"

#include <map>
#include <stdexcept>

#include "exec/cpu/cpu_ops.h"
#include "graph/ops/conv.h"
#include "graph/ops/pool.h"
#include "graph/ops/view.h"

namespace gp::exec {
namespace {

using namespace cpu;

using Entry = CpuKernelEntry;

// The kernel table: every operator the CPU backend runs, in one place.
std::map<std::string, Entry> const& kernel_table() {
  static std::map<std::string, Entry> const table = [] {
    OpKernels const unary{unary_forward, unary_backward, unary_backward, no_check};
    OpKernels const binary{binary_forward, binary_backward, binary_backward, binary_check};
    OpKernels const view{reshape_forward, reshape_backward, reshape_backward, graph::ops::view_check};
    OpKernels const pool{pool_forward, pool_backward, pool_backward, graph::ops::pool_check};
    std::map<std::string, Entry> t;
    t["Conv"] = {{conv_forward, conv_backward_data, conv_backward_weights, graph::ops::conv_check, conv_backward_both},
                 2};
    t["MaxPool"] = {pool, 1};
    t["AveragePool"] = {pool, 1};
    t["GlobalAveragePool"] = {pool, 1};
    t["Gemm"] = {{gemm_forward, gemm_backward, gemm_backward, require_attrs<graph::GemmAttrs>}, 2};
    t["MatMul"] = {{matmul_forward, matmul_backward, matmul_backward, no_check}, 2};
    t["BatchNormalization"] = {{batchnorm_forward, batchnorm_backward, batchnorm_backward,
                                require_attrs<graph::BatchNormAttrs>, fresh_then_add<batchnorm_backward>},
                               5};
    t["LayerNormalization"] = {{layernorm_forward, layernorm_backward, layernorm_backward,
                                require_attrs<graph::LayerNormAttrs>, fresh_then_add<layernorm_backward>},
                               2};
    t["InstanceNormalization"] = {{instnorm_forward, instnorm_backward, instnorm_backward,
                                   require_attrs<graph::InstanceNormAttrs>, fresh_then_add<instnorm_backward>},
                                  3};
    t["Softmax"] = {{softmax_forward, softmax_backward, softmax_backward, no_check}, 1};
    for (char const* u : {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Gelu", "Sqrt", "Erf", "Exp", "Log", "Abs", "Neg"})
      t[u] = {unary, 1};
    t["Pow"] = {{pow_forward, pow_backward, pow_backward, pow_check}, 1};
    for (char const* b : {"Add", "Sub", "Mul", "Div"}) t[b] = {binary, 2};
    t["Dropout"] = {{dropout_forward, dropout_backward, dropout_backward, no_check}, 1};
    // Views only reinterpret the bytes: any dtype (an int64 target unsqueezed for a loss).
    for (char const* v : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"}) t[v] = {view, 1, false};
    t["Cast"] = {{reshape_forward, reshape_backward, reshape_backward, graph::ops::cast_check}, 1};
    t["Expand"] = {{expand_forward, expand_backward, expand_backward, require_attrs<graph::ExpandAttrs>}, 1};
    t["Transpose"] = {{transpose_forward, transpose_backward, transpose_backward, require_attrs<graph::TransposeAttrs>},
                      1};
    t["Concat"] = {{concat_forward, concat_backward, concat_backward, require_attrs<graph::ConcatAttrs>}, 1};
    t["Split"] = {{split_forward, split_backward, split_backward, require_attrs<graph::SplitAttrs>}, 1};
    t["Slice"] = {{slice_forward, slice_backward, slice_backward, require_attrs<graph::SliceAttrs>}, 1};
    t["Gather"] = {{gather_forward, gather_backward, gather_backward, require_attrs<graph::GatherAttrs>}, 2};
    for (auto family : {linalg_kernels, activation_kernels, reduce_kernels, index_kernels, rnn_kernels, loss_kernels,
                        logic_kernels, deconv_kernels})
      for (auto& [type, entry] : family())
        if (!t.emplace(type, entry).second) throw std::logic_error("CPU kernel for '" + type + "' listed twice");
    return t;
  }();
  return table;
}

std::string describe(graph::Op const& op, graph::OpGraph const& graph) {
  std::string dtype = "?";
  if (!op.inputs.empty() && op.inputs[0] != graph::kNoTensor)
    dtype = graph::dtype_name(graph.tensor(op.inputs[0]).dtype);
  return "op type '" + op.type + "' (node '" + op.name + "', dtype " + dtype + ")";
}

Entry const* find(graph::Op const& op) {
  auto it = kernel_table().find(op.type);
  return it == kernel_table().end() ? nullptr : &it->second;
}

// Every input the kernels read as float data must be float32 (Gather's indices are integers).
Status check_dtypes(graph::Op const& op, graph::OpGraph const& graph, std::size_t min_inputs) {
  bool const all_float = op.type == "Concat";
  std::size_t const n = all_float ? op.inputs.size() : std::min(op.inputs.size(), op.type == "Gather" ? 1 : min_inputs);
  for (std::size_t i = 0; i < n; ++i) {
    if (op.inputs[i] == graph::kNoTensor) continue;
    DType const d = graph.tensor(op.inputs[i]).dtype;
    if (d != DType::kFloat32)
      return unsupported("input " + std::to_string(i) + " has dtype " + graph::dtype_name(d) + " (only float32)");
  }
  return Status::ok();
}

}  // namespace

std::vector<std::string> CpuBackend::op_types() {
  std::vector<std::string> out;
  for (auto const& [type, entry] : kernel_table()) out.push_back(type);
  return out;
}

Status CpuBackend::supports(graph::Op const& op, graph::OpGraph const& graph) const {
  auto miss = [&](std::string const& why) {
    return unsupported(describe(op, graph) + " is not supported by backend 'cpu': " + why);
  };
  Entry const* e = find(op);
  if (e == nullptr) return miss("no kernel for this op type");
  if (op.inputs.size() < e->min_inputs)
    return miss("needs at least " + std::to_string(e->min_inputs) + " inputs, has " + std::to_string(op.inputs.size()));
  for (std::size_t i = 0; i < e->min_inputs; ++i)
    if (op.inputs[i] == graph::kNoTensor) return miss("input " + std::to_string(i) + " is missing");
  if (e->float_inputs)
    if (Status s = check_dtypes(op, graph, e->min_inputs); !s) return miss(s.message());
  if (Status s = e->kernels.check(op, graph); !s) return miss(s.message());
  return Status::ok();
}

Status CpuBackend::forward(OpCall const& call, std::vector<Tensor> const& inputs, std::vector<Tensor>& outputs,
                           Saved* saved) {
  Entry const* e = find(call.op);
  if (e == nullptr) return supports(call.op, call.graph);
  if (inputs.size() < e->min_inputs)
    return invalid_argument(call.op.type + " '" + call.op.name + "': given " + std::to_string(inputs.size()) +
                            " inputs, needs " + std::to_string(e->min_inputs));
  for (std::size_t i = 0; i < e->min_inputs; ++i)
    if (!inputs[i].defined())
      return invalid_argument(call.op.type + " '" + call.op.name + "': input " + std::to_string(i) + " is undefined");
  if (saved) saved->tensors.clear();
  return e->kernels.forward(bound_to(call, *this), inputs, outputs, saved);
}

Status CpuBackend::backward_input(OpCall const& call, Saved const& saved, std::vector<Tensor> const& grad_outputs,
                                  std::vector<bool> const& needs_grad, std::vector<Tensor>& grad_inputs) {
  Entry const* e = find(call.op);
  if (e == nullptr) return supports(call.op, call.graph);
  grad_inputs.assign(call.op.inputs.size(), Tensor());
  return e->kernels.backward_input(bound_to(call, *this), saved, grad_outputs, needs_grad, grad_inputs, false);
}

Status CpuBackend::backward_weight(OpCall const& call, Saved const& saved, std::vector<Tensor> const& grad_outputs,
                                   std::vector<Tensor>& weight_grads) {
  Entry const* e = find(call.op);
  if (e == nullptr) return supports(call.op, call.graph);
  std::vector<bool> wanted(weight_grads.size(), false);
  bool any = false;
  for (std::size_t i = 0; i < weight_grads.size(); ++i) {
    wanted[i] = weight_grads[i].defined();
    any = any || wanted[i];
  }
  if (!any) return Status::ok();
  return e->kernels.backward_weight(bound_to(call, *this), saved, grad_outputs, wanted, weight_grads, true);
}

Status CpuBackend::backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& grad_outputs,
                            std::vector<bool> const& needs_grad, std::vector<Tensor>& grad_inputs,
                            std::vector<Tensor>& weight_grads) {
  Entry const* e = find(call.op);
  if (e == nullptr) return supports(call.op, call.graph);
  if (e->kernels.backward_both == nullptr)
    return Backend::backward(call, saved, grad_outputs, needs_grad, grad_inputs, weight_grads);
  return e->kernels.backward_both(bound_to(call, *this), saved, grad_outputs, needs_grad, grad_inputs, weight_grads);
}

}  // namespace gp::exec
