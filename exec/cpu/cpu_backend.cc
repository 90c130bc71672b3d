#include "exec/cpu/cpu_backend.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include <spdlog/spdlog.h>

#include "exec/cpu/cpu_ops.h"
#include "exec/cpu/dnnl_context.h"
#include "exec/low_precision_kernel.h"
#include "exec/op_shared.h"
#include "exec/kernel_table.h"
#include "graph/ops/conv.h"
#include "graph/ops/pool.h"
#include "graph/ops/view.h"

namespace gp::exec {
namespace {

using namespace cpu;

using Entry = CpuKernelEntry;
using Table = KernelTable<Entry>;

constexpr DType kAllDTypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kInt64,
                                DType::kInt32,   DType::kInt8,    DType::kUInt8,    DType::kBool};

// The kernel table: every operator the CPU backend runs, in one place. A float entry is keyed by
// float32; an entry that handles dtypes itself by every dtype. Built twice: with bf16 on oneDNN's
// primitives (`native`) and with bf16 emulated around the float32 kernels (CpuBf16).
Table build_table(bool native) {
  OpKernels const unary{unary_forward, unary_backward, unary_backward, no_check};
  OpKernels const binary{binary_forward, binary_backward, binary_backward, binary_check};
  OpKernels const view{reshape_forward, reshape_backward, reshape_backward, graph::ops::view_check};
  OpKernels const pool{pool_forward, pool_backward, pool_backward, graph::ops::pool_check};
  CpuKernelFamily t;
  t.push_back(
      {OpKind::kConv,
       {{conv_forward, conv_backward_data, conv_backward_weights, graph::ops::conv_check, conv_backward_both}, 2}});
  for (OpKind p : {OpKind::kMaxPool, OpKind::kAveragePool, OpKind::kGlobalAveragePool}) t.push_back({p, {pool, 1}});
  t.push_back({OpKind::kGemm, {{gemm_forward, gemm_backward, gemm_backward, require_attrs<graph::GemmAttrs>}, 2}});
  t.push_back({OpKind::kMatMul, {{matmul_forward, matmul_backward, matmul_backward, no_check}, 2}});
  t.push_back({OpKind::kBatchNormalization,
               {{batchnorm_forward, batchnorm_backward, batchnorm_backward, require_attrs<graph::BatchNormAttrs>,
                 fresh_then_add<batchnorm_backward>},
                5}});
  t.push_back({OpKind::kLayerNormalization,
               {{layernorm_forward, layernorm_backward, layernorm_backward, require_attrs<graph::LayerNormAttrs>,
                 fresh_then_add<layernorm_backward>},
                2}});
  t.push_back({OpKind::kInstanceNormalization,
               {{instnorm_forward, instnorm_backward, instnorm_backward, require_attrs<graph::InstanceNormAttrs>,
                 fresh_then_add<instnorm_backward>},
                3}});
  t.push_back({OpKind::kLRN, {{lrn_forward, lrn_backward, lrn_backward, require_attrs<graph::LrnAttrs>}, 1}});
  t.push_back({OpKind::kSoftmax, {{softmax_forward, softmax_backward, softmax_backward, no_check}, 1}});
  for (OpKind u : {OpKind::kRelu, OpKind::kLeakyRelu, OpKind::kSigmoid, OpKind::kTanh, OpKind::kGelu, OpKind::kSqrt,
                   OpKind::kErf, OpKind::kExp, OpKind::kLog, OpKind::kAbs, OpKind::kNeg})
    t.push_back({u, {unary, 1}});
  t.push_back({OpKind::kPow, {{pow_forward, pow_backward, pow_backward, pow_check}, 1}});
  for (OpKind b : {OpKind::kAdd, OpKind::kSub, OpKind::kMul, OpKind::kDiv}) t.push_back({b, {binary, 2}});
  t.push_back({OpKind::kDropout, {{dropout_forward, dropout_backward, dropout_backward, no_check}, 1}});
  // Views only reinterpret the bytes: any dtype (an int64 target unsqueezed for a loss).
  for (OpKind v : {OpKind::kReshape, OpKind::kFlatten, OpKind::kSqueeze, OpKind::kUnsqueeze, OpKind::kIdentity})
    t.push_back({v, {view, 1, false}});
  // Expand also copies masks and indices (a causal mask broadcast over the micro-batch).
  t.push_back({OpKind::kExpand,
               {{expand_forward, expand_backward, expand_backward, require_attrs<graph::ExpandAttrs>}, 1, false}});
  t.push_back({OpKind::kTranspose,
               {{transpose_forward, transpose_backward, transpose_backward, require_attrs<graph::TransposeAttrs>}, 1}});
  // ... and ids and masks (XLNet transposes its ids to [T, N]), copied by element size.
  t.push_back({OpKind::kTranspose,
               {{transpose_forward, no_gradient, no_gradient, require_attrs<graph::TransposeAttrs>},
                1,
                false,
                0,
                {DType::kInt64, DType::kInt32, DType::kBool, DType::kUInt8}}});
  // Concat reads every input as float data; Gather only its data (its indices are integers).
  t.push_back(
      {OpKind::kConcat,
       {{concat_forward, concat_backward, concat_backward, require_attrs<graph::ConcatAttrs>}, 1, true, kEveryInput}});
  // ... and integer and bool inputs (index pairs), copied as bytes.
  t.push_back({OpKind::kConcat,
               {{concat_bytes_forward, no_gradient, no_gradient, concat_bytes_check},
                1,
                false,
                0,
                {DType::kInt64, DType::kInt32, DType::kBool, DType::kUInt8}}});
  t.push_back({OpKind::kSplit, {{split_forward, split_backward, split_backward, require_attrs<graph::SplitAttrs>}, 1}});
  t.push_back({OpKind::kSlice, {{slice_forward, slice_backward, slice_backward, require_attrs<graph::SliceAttrs>}, 1}});
  // ... and index arithmetic (MaxPool's indices sliced), copied as bytes.
  t.push_back({OpKind::kSlice,
               {{slice_bytes_forward, no_gradient, no_gradient, require_attrs<graph::SliceAttrs>},
                1,
                false,
                0,
                {DType::kInt64, DType::kInt32, DType::kBool, DType::kUInt8}}});
  t.push_back({OpKind::kGather,
               {{gather_forward, gather_backward, gather_backward, require_attrs<graph::GatherAttrs>}, 2, true, 1}});
  // ... and masks and indices (HF's causal mask gathered by computed positions), never differentiated.
  t.push_back({OpKind::kGather,
               {{gather_forward, no_gradient, no_gradient, require_attrs<graph::GatherAttrs>},
                2,
                false,
                0,
                {DType::kInt64, DType::kInt32, DType::kBool, DType::kUInt8}}});
  for (auto family : {linalg_kernels, activation_kernels, reduce_kernels, index_kernels, rnn_kernels, loss_kernels,
                      logic_kernels, deconv_kernels, view_kernels, binary_int_kernels})
    for (auto& entry : family()) t.push_back(std::move(entry));
  // The float kernels that also run bfloat16 (mixed precision, graph/precision.h): oneDNN's
  // bf16 eltwise and pooling, and Transpose's and Split's bit moves. Add's bf16 kernel
  // is its own entry (binary.cc); views run any dtype.
  for (auto& [kind, entry] : t) {
    if (!entry.float_inputs || !entry.dtypes.empty()) continue;
    switch (kind) {
      case OpKind::kRelu:
      case OpKind::kMaxPool:
      case OpKind::kAveragePool:
      case OpKind::kGlobalAveragePool:
        if (!native) {  // keyed by float32 alone, as natively; the bf16 entries are emulated below
          entry.dtypes = {DType::kFloat32};
          break;
        }
        [[fallthrough]];
      case OpKind::kTranspose:
      case OpKind::kSplit:
        entry.dtypes = {DType::kFloat32, DType::kBFloat16};
        break;
      default:
        break;
    }
  }
  if (!native) {  // without oneDNN's bf16: the float32 kernels between widening and rounding
    t.push_back({OpKind::kRelu, widened_entry<unary_forward, unary_backward, unary_backward>(no_check, 1)});
    for (OpKind p : {OpKind::kMaxPool, OpKind::kAveragePool, OpKind::kGlobalAveragePool})
      t.push_back({p, widened_entry<pool_forward, pool_backward, pool_backward>(graph::ops::pool_check, 1)});
  }
  // Batch normalisation follows a bf16 input (graph/precision.h) but computes in float32 here:
  // oneDNN 2.6's bf16 batch normalisation on our plain layouts measured 3.5x float32's time on
  // ResNet-18, so the bf16 entry widens x and dy, runs the float32 kernel and narrows y and dx.
  {
    CpuKernelEntry bn = widened_entry<batchnorm_forward, batchnorm_backward, batchnorm_backward>(
        require_attrs<graph::BatchNormAttrs>, 5);
    bn.kernels.backward_both = widened_both<fresh_then_add<batchnorm_backward>, convert_float_fn>;
    bn.low_inputs = 1;
    bn.converts = true;  // a fused residual (input 5) follows x: bf16, widened like x
    t.push_back({OpKind::kBatchNormalization, std::move(bn)});
  }
  // GELU follows a bf16 input too, and also computes in float32 here. bench_train --bf16 --only
  // transformer, bf16/fp32 per run on a noisy 2-core machine: oneDNN 2.6's bf16 GELU 1.09-1.62x
  // over 7 runs (median 1.24); float32 GELU behind casts 0.91-1.29x over 6 (four at 1.27-1.29).
  t.push_back({OpKind::kGelu, widened_entry<unary_forward, unary_backward, unary_backward>(no_check, 1)});
  // Convolution and matrix products in bf16 with float32 weights (the low_precision_entry
  // wrapper rounds them per call and widens their gradients). Emulated: the rounded weights and
  // the bf16 activations widened again for the float32 kernel, its outputs and gradients rounded
  // to bf16 (the values native bf16 gives at the op's boundary, summed in another order).
  if (native) {
    t.push_back({OpKind::kConv, low_precision_entry<conv_forward, conv_backward_data, conv_backward_weights>(
                                    graph::ops::conv_check, 2)});
    t.push_back({OpKind::kGemm, low_precision_entry<gemm_forward, gemm_backward, gemm_backward>(gemm_bf16_check, 2)});
    t.push_back({OpKind::kMatMul, low_precision_entry<matmul_forward, matmul_backward, matmul_backward>(no_check, 2)});
  } else {
    t.push_back({OpKind::kConv, low_precision_entry<widened_forward<conv_forward, convert_float_fn>,
                                                    emulated_backward<conv_backward_data, convert_float_fn>,
                                                    emulated_backward<conv_backward_weights, convert_float_fn>>(
                                    graph::ops::conv_check, 2)});
    t.push_back(
        {OpKind::kGemm, low_precision_entry<widened_forward<gemm_forward, convert_float_fn>,
                                            emulated_backward<gemm_backward, convert_float_fn>,
                                            emulated_backward<gemm_backward, convert_float_fn>>(gemm_bf16_check, 2)});
    t.push_back(
        {OpKind::kMatMul, low_precision_entry<widened_forward<matmul_forward, convert_float_fn>,
                                              emulated_backward<matmul_backward, convert_float_fn>,
                                              emulated_backward<matmul_backward, convert_float_fn>>(no_check, 2)});
  }
  Table table;
  for (auto const& [kind, entry] : t) {
    if (!entry.dtypes.empty()) {
      for (DType d : entry.dtypes) table.add(kind, d, entry);
    } else if (entry.float_inputs) {
      table.add(kind, DType::kFloat32, entry);
    } else {
      for (DType d : kAllDTypes) table.add(kind, d, entry);
    }
  }
  return table;
}

std::atomic<int> bf16_choice{-1};  // -1: not chosen yet (GP_CPU_BF16, else what oneDNN has)

// Only the mode in use is built (a test that switches modes builds the other on its first lookup).
Table const& kernel_table() {
  if (cpu_bf16() == CpuBf16::kNative) {
    static Table const native = build_table(true);
    return native;
  }
  static Table const emulated = build_table(false);
  return emulated;
}

std::string describe(graph::Op const& op, graph::OpGraph const& graph) {
  std::string dtype = "?";
  if (!op.inputs.empty() && op.inputs[0] != graph::kNoTensor)
    dtype = graph::dtype_name(graph.tensor(op.inputs[0]).dtype);
  return "op type '" + op.type + "' (node '" + op.name + "', dtype " + dtype + ")";
}

// Every input the entry reads as float data must have the key's dtype (float32, or bfloat16 and,
// past the entry's low_inputs, float32).
Status check_dtypes(graph::Op const& op, graph::OpGraph const& graph, Entry const& e) {
  std::size_t const count = e.float_count == 0 ? e.min_inputs : e.float_count;
  std::size_t const n = std::min(op.inputs.size(), std::max(count, e.low_inputs > 0 ? op.inputs.size() : 0));
  DType const key = data_dtype(op, graph) == DType::kBFloat16 ? DType::kBFloat16 : DType::kFloat32;
  for (std::size_t i = 0; i < n; ++i) {
    if (op.inputs[i] == graph::kNoTensor) continue;
    DType const want = key == DType::kBFloat16 && e.low_inputs > 0 && i >= e.low_inputs ? DType::kFloat32 : key;
    DType const d = graph.tensor(op.inputs[i]).dtype;
    if (d != want && !(e.converts && i >= e.low_inputs && d == DType::kBFloat16))
      return unsupported("input " + std::to_string(i) + " has dtype " + graph::dtype_name(d) + " (expected " +
                         graph::dtype_name(want) + ")");
  }
  return Status::ok();
}

Result<Entry const*> checked_entry(graph::Op const& op, graph::OpGraph const& graph) {
  auto miss = [&](std::string const& why) {
    return unsupported(describe(op, graph) + " is not supported by backend 'cpu': " + why);
  };
  if (!kernel_table().runs(op)) return miss("no kernel for this op type");
  Entry const* e = kernel_table().find(op, graph);
  auto const no_dtype = [&] {
    DType const d = data_dtype(op, graph);
    if (d == DType::kFloat16)  // mixed precision fp16 (graph/precision.h)
      return miss("no float16 kernel (precision fp16 runs on CUDA only; use --precision bf16 on the CPU)");
    return miss("no kernel for dtype " + std::string(graph::dtype_name(d)));
  };
  // The table has the op for float32 only: say which input is not. An entry keyed by a list of
  // dtypes runs those alone.
  if (e == nullptr) {
    e = kernel_table().find(def_of(op), DType::kFloat32);
    if (e != nullptr && !e->dtypes.empty()) return no_dtype();
    if (e != nullptr && e->float_inputs && data_dtype(op, graph) == DType::kFloat16) return no_dtype();
  }
  if (e == nullptr) return no_dtype();
  if (op.inputs.size() < e->min_inputs)
    return miss("needs at least " + std::to_string(e->min_inputs) + " inputs, has " + std::to_string(op.inputs.size()));
  for (std::size_t i = 0; i < e->min_inputs; ++i)
    if (op.inputs[i] == graph::kNoTensor) return miss("input " + std::to_string(i) + " is missing");
  if (e->float_inputs)
    if (Status s = check_dtypes(op, graph, *e); !s) return miss(s.message());
  if (Status s = e->kernels.check(op, graph); !s) return miss(s.message());
  return e;
}

}  // namespace

CpuBf16 cpu_bf16() {
  int c = bf16_choice.load();
  if (c < 0) {
    bool const native = dnnl_ctx::has_bf16_primitives();
    c = native ? 0 : 1;
    if (char const* env = std::getenv("GP_CPU_BF16"); env != nullptr && *env != '\0') {
      if (std::strcmp(env, "emulated") == 0) {
        c = 1;
      } else if (std::strcmp(env, "native") != 0) {
        spdlog::warn("GP_CPU_BF16={} is neither native nor emulated: ignored", env);
      } else if (!native) {
        spdlog::warn(
            "GP_CPU_BF16=native: oneDNN has no bf16 primitives on this CPU (they need AVX512), so bf16 is "
            "emulated");
      }
    }
    int unset = -1;
    bf16_choice.compare_exchange_strong(unset, c);
    c = bf16_choice.load();
  }
  return c == 0 ? CpuBf16::kNative : CpuBf16::kEmulated;
}

CpuBf16 set_cpu_bf16(CpuBf16 mode) {
  bf16_choice = mode == CpuBf16::kNative && dnnl_ctx::has_bf16_primitives() ? 0 : 1;
  return cpu_bf16();
}

char const* cpu_bf16_name(CpuBf16 mode) { return mode == CpuBf16::kNative ? "native" : "emulated"; }

std::vector<std::string> CpuBackend::op_types() { return kernel_table().op_types(); }

bool CpuBackend::runs(graph::ops::OpKind kind, DType dtype) {
  return kernel_table().find(&op_def(kind), dtype) != nullptr;
}

Status CpuBackend::supports(graph::Op const& op, graph::OpGraph const& graph) const {
  return checked_entry(op, graph).status();
}

Result<ResolvedKernel> CpuBackend::resolve(graph::Op const& op, graph::OpGraph const& graph) const {
  ASSIGN_OR_RETURN(Entry const* e, checked_entry(op, graph));
  return ResolvedKernel{this, e};
}

Status CpuBackend::forward(OpCall const& call, std::vector<Tensor> const& inputs, std::vector<Tensor>& outputs,
                           Saved* saved) {
  Entry const* e = kernel_table().entry_for(*this, call);
  if (e == nullptr) return supports(call.op, call.graph);
  RETURN_IF_ERROR(check_forward_inputs(call, e->min_inputs, inputs));
  if (saved) saved->tensors.clear();
  return e->kernels.forward(bound_to(call, *this), inputs, outputs, saved);
}

Status CpuBackend::backward_input(OpCall const& call, Saved const& saved, std::vector<Tensor> const& grad_outputs,
                                  std::vector<bool> const& needs_grad, std::vector<Tensor>& grad_inputs) {
  Entry const* e = kernel_table().entry_for(*this, call);
  if (e == nullptr) return supports(call.op, call.graph);
  grad_inputs.assign(call.op.inputs.size(), Tensor());
  return e->kernels.backward_input(bound_to(call, *this), saved, grad_outputs, needs_grad, grad_inputs, false);
}

Status CpuBackend::backward_weight(OpCall const& call, Saved const& saved, std::vector<Tensor> const& grad_outputs,
                                   std::vector<Tensor>& weight_grads) {
  Entry const* e = kernel_table().entry_for(*this, call);
  if (e == nullptr) return supports(call.op, call.graph);
  std::vector<bool> const wanted = wanted_weight_grads(weight_grads);
  if (wanted.empty()) return Status::ok();
  return e->kernels.backward_weight(bound_to(call, *this), saved, grad_outputs, wanted, weight_grads, true);
}

Status CpuBackend::backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& grad_outputs,
                            std::vector<bool> const& needs_grad, std::vector<Tensor>& grad_inputs,
                            std::vector<Tensor>& weight_grads) {
  Entry const* e = kernel_table().entry_for(*this, call);
  if (e == nullptr) return supports(call.op, call.graph);
  if (e->kernels.backward_both == nullptr)
    return Backend::backward(call, saved, grad_outputs, needs_grad, grad_inputs, weight_grads);
  return e->kernels.backward_both(bound_to(call, *this), saved, grad_outputs, needs_grad, grad_inputs, weight_grads);
}

}  // namespace gp::exec
