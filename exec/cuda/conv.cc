// The CUDA backend's conv family: Conv and ConvTranspose through cuDNN graphs (cudnn_graphs.h); cuDNN's weight
// gradients are computed fresh and added. Same inputs, outputs and gradients as the CPU's
// exec/cpu/conv.cc.
#include <algorithm>
#include <cmath>

#include "exec/cuda/cublaslt_gemm.h"
#include "exec/cuda/cudnn_graphs.h"
#include "exec/cuda/gemm_mapping.h"
#include "exec/cuda/ops_common.h"
#include "exec/cuda/ops_shared.h"
#include "graph/ops/conv.h"
#include "kernels/cuda/math.h"
#include "kernels/cuda/move.h"
#include "kernels/hd/move.h"
#include "exec/cuda/cuda_ops.h"
#include "exec/cuda/low_precision.h"

namespace gp::exec::cuda {
namespace {

namespace kc = kernels::cuda;
namespace hd = kernels::hd;

// Copies between a block of dims `block` and the larger tensor of dims `whole` that holds it at
// `offset` (per dim): into the whole (`into_whole`), or the block out of it. What `what` names in
// the error of a layout with too many dims.
template <typename T>
Status copy_block(OpCall const& call, std::vector<int64_t> const& block, std::vector<int64_t> const& whole,
                  std::vector<int64_t> const& offset, T const* from, T* to, bool into_whole, char const* what) {
  std::vector<int64_t> const block_strides = hd::row_major_strides(block), whole_strides = hd::row_major_strides(whole);
  int64_t at = 0;
  for (std::size_t i = 0; i < offset.size(); ++i) at += offset[i] * whole_strides[i];
  hd::StridedParams p;
  if (!hd::make_strided(block, into_whole ? block_strides : whole_strides, into_whole ? whole_strides : block_strides,
                        p))
    return op_error(call, std::string(what) + " " + graph::ops::dims_string(block) + " keeps more than " +
                              std::to_string(hd::kMaxRank) + " dims after merging contiguous ones");
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::strided_copy<T>(into_whole ? from : from + at, into_whole ? to + at : to, p, false, stream));
  return Status::ok();
}

// cuDNN's weight gradient of the conv `s` (x and dy on the device) into a fresh dw, on symmetric
// padding (symmetric_padding: its wgrad engines got dW wrong with more padding at the end than the
// beginning): an asymmetric x is copied into zeros of the grown shape first.
template <typename T>
Status wgrad(OpCall const& call, ConvShape const& s, T const* x, T const* dy, T* dw) {
  std::optional<SymmetricConv> const sym = symmetric_padding(s);
  if (!sym) return in_op(call, conv_wgrad<T>(s, x, dy, dw));
  ASSIGN_OR_RETURN(Tensor grown, zeros(sym->shape.x, dtype_of<T>()));
  RETURN_IF_ERROR(copy_block<T>(call, s.x, sym->shape.x, sym->x_at, x, grown.data<T>(), true, "the padded input"));
  return in_op(call, conv_wgrad<T>(sym->shape, grown.data<T>(), dy, dw));
}

// ---- Conv ----
Result<ConvShape> conv_shape_of(OpCall const& call, Tensor const& x, Tensor const& w) {
  Result<ConvShape> s = conv_shape(x.shape(), w.shape(), *attrs_of<graph::ConvAttrs>(call.op));
  RETURN_IF_ERROR(value_or_op_error(call, s));
  return s;
}

template <typename T>
Status conv_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& x = in[0];
  Tensor const& w = in[1];
  ASSIGN_OR_RETURN(ConvShape s, conv_shape_of(call, x, w));
  ASSIGN_OR_RETURN(Tensor y, empty(s.y, dtype_of<T>()));
  RETURN_IF_ERROR(in_op(call, conv_fprop<T>(s, x.data<T>(), w.data<T>(), y.data<T>())));
  if (has_input(call, 2) && in.size() > 2 && in[2].defined()) {
    // y_n[K,S] += bias[K,1]·ones[1,S] for every n: one strided-batched rank-1 product.
    GemmBuffers const b = forward_buffers(nullptr, nullptr, in[2].raw(), y.raw());
    RETURN_IF_ERROR(in_op(call, run_gemm_plan<T>(conv_bias_forward_plan(s.y[0], s.y[1], spatial(s.y)), b)));
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {x, w};
  return Status::ok();
}

// db[K] = Σ_{n,s} dy[n,K,s]: dy·ones over s into tmp[N,K], then ones·tmp over n (accumulating).
template <typename T>
Status conv_bias_grad(OpCall const& call, ConvShape const& s, Tensor const& dy, Tensor& db, bool accumulate) {
  GemmBuffers const b = backward_buffers(nullptr, nullptr, dy.raw(), nullptr, nullptr, db.raw());
  return in_op(call, run_gemm_plan<T>(conv_bias_grad_plan(s.y[0], s.y[1], spatial(s.y), accumulate), b));
}

// dx into dx_grads[0], dw and db into w_grads[1], w_grads[2] (each set, or added when accumulating).
template <typename T>
Status conv_grads(OpCall const& call, Saved const& saved, Tensor const& dy, bool want_x, bool want_w, bool want_b,
                  std::vector<Tensor>& dx_grads, bool accumulate_x, std::vector<Tensor>& w_grads, bool accumulate_w) {
  Tensor const& x = saved.tensors.at(0);
  Tensor const& w = saved.tensors.at(1);
  ASSIGN_OR_RETURN(ConvShape s, conv_shape_of(call, x, w));
  if (want_x) {
    ASSIGN_OR_RETURN(Tensor dx, empty(s.x, dtype_of<T>()));
    RETURN_IF_ERROR(in_op(call, conv_dgrad<T>(s, dy.data<T>(), w.data<T>(), dx.data<T>())));
    RETURN_IF_ERROR(emit_grad(call, dx_grads, 0, dx, accumulate_x));
  }
  if (want_w) {  // cuDNN's graph API has no output blend: fresh, then added
    ASSIGN_OR_RETURN(Tensor dw, empty(s.w, dtype_of<T>()));
    RETURN_IF_ERROR(wgrad<T>(call, s, x.data<T>(), dy.data<T>(), dw.data<T>()));
    RETURN_IF_ERROR(emit_grad(call, w_grads, 1, dw, accumulate_w));
  }
  if (want_b && has_input(call, 2)) {
    ASSIGN_OR_RETURN(Tensor db, grad_target(call, w_grads, 2, {s.w[0]}, accumulate_w, dtype_of<T>()));
    RETURN_IF_ERROR(conv_bias_grad<T>(call, s, dy, db, accumulate_w));
  }
  return Status::ok();
}

// ---- ConvTranspose: the adjoint convolution's kernels (cudnn_graphs.h, conv_transpose_shape) ----

Result<ConvShape> conv_transpose_shape_of(OpCall const& call, Tensor const& x, Tensor const& w) {
  Result<ConvShape> s = conv_transpose_shape(x.shape(), w.shape(), *attrs_of<graph::ConvTransposeAttrs>(call.op));
  RETURN_IF_ERROR(value_or_op_error(call, s));
  return s;
}

// Copies between the block the conv computes (s.x) and the transpose's output (s.embedding) that
// holds it at s.offset: into the output (forward), or the output gradient's block out (backward).
Status copy_embedded(OpCall const& call, ConvShape const& s, float const* from, float* to, bool into_output) {
  return copy_block<float>(call, s.x, s.embedding, s.offset, from, to, into_output, "the output block");
}

// The transpose's output is the conv's x: [N, M, out...] (or the block of it the conv computes,
// placed into zeros: s.embedding).
Status conv_transpose_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out,
                              Saved* saved) {
  Tensor const& x = in[0];
  Tensor const& w = in[1];
  ASSIGN_OR_RETURN(ConvShape s, conv_transpose_shape_of(call, x, w));
  ASSIGN_OR_RETURN(Tensor y, empty(s.x));
  RETURN_IF_ERROR(in_op(call, conv_dgrad<float>(s, x.data<float>(), w.data<float>(), y.data<float>())));
  if (!s.embedding.empty()) {
    ASSIGN_OR_RETURN(Tensor whole, zeros(s.embedding, DType::kFloat32));
    RETURN_IF_ERROR(copy_embedded(call, s, y.data<float>(), whole.data<float>(), true));
    y = std::move(whole);
  }
  if (has_input(call, 2) && in.size() > 2 && in[2].defined()) {
    GemmBuffers const b = forward_buffers(nullptr, nullptr, in[2].raw(), y.raw());
    RETURN_IF_ERROR(
        in_op(call, run_gemm_plan<float>(conv_bias_forward_plan(y.dim(0), y.dim(1), spatial(y.shape())), b)));
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {x, w};
  return Status::ok();
}

Status conv_transpose_grads(OpCall const& call, Saved const& saved, Tensor const& dy, bool want_x, bool want_w,
                            bool want_b, std::vector<Tensor>& dx_grads, bool accumulate_x, std::vector<Tensor>& w_grads,
                            bool accumulate_w) {
  Tensor const& x = saved.tensors.at(0);
  Tensor const& w = saved.tensors.at(1);
  ASSIGN_OR_RETURN(ConvShape s, conv_transpose_shape_of(call, x, w));
  Tensor block = dy;  // the output gradient where the conv computed the output
  if ((want_x || want_w) && !s.embedding.empty()) {
    ASSIGN_OR_RETURN(block, empty(s.x));
    RETURN_IF_ERROR(copy_embedded(call, s, dy.data<float>(), block.data<float>(), false));
  }
  if (want_x) {
    ASSIGN_OR_RETURN(Tensor dx, empty(s.y));
    RETURN_IF_ERROR(in_op(call, conv_fprop<float>(s, block.data<float>(), w.data<float>(), dx.data<float>())));
    RETURN_IF_ERROR(emit_grad(call, dx_grads, 0, dx, accumulate_x));
  }
  if (want_w) {
    ASSIGN_OR_RETURN(Tensor dw, empty(s.w));
    RETURN_IF_ERROR(wgrad<float>(call, s, block.data<float>(), x.data<float>(), dw.data<float>()));
    RETURN_IF_ERROR(emit_grad(call, w_grads, 1, dw, accumulate_w));
  }
  if (want_b && has_input(call, 2)) {  // over the whole output: the bias reached every position
    ASSIGN_OR_RETURN(Tensor db, grad_target(call, w_grads, 2, {s.x[1]}, accumulate_w));
    GemmBuffers const b = backward_buffers(nullptr, nullptr, dy.raw(), nullptr, nullptr, db.raw());
    RETURN_IF_ERROR(in_op(
        call, run_gemm_plan<float>(conv_bias_grad_plan(dy.dim(0), dy.dim(1), spatial(dy.shape()), accumulate_w), b)));
  }
  return Status::ok();
}

// What runs here, decided from the attributes and the weight's shape before any device is touched.
Status conv_transpose_check(graph::Op const& op, graph::OpGraph const& graph) {
  RETURN_IF_ERROR(require_attrs<graph::ConvTransposeAttrs>(op, graph));
  int const rank = graph.tensor(op.inputs.at(1)).shape.rank();
  std::size_t const sp = rank > 2 ? static_cast<std::size_t>(rank - 2) : 0;
  if (sp < 1 || sp > 3)
    return unsupported("ConvTranspose '" + op.name + "' has " + std::to_string(sp) +
                       " spatial dims (the CUDA backend runs 1 to 3)");
  return Status::ok();
}

// The kernel-table wrappers of a grads function (conv_grads, conv_transpose_grads): backward with
// one accumulate flag for every gradient, and both parts at once (the weights' added, B's fresh).
using ConvGrads = Status (*)(OpCall const&, Saved const&, Tensor const&, bool, bool, bool, std::vector<Tensor>&, bool,
                             std::vector<Tensor>&, bool);

template <ConvGrads Grads>
Status backward_of(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                   std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!gout.at(0).defined()) return Status::ok();
  return Grads(call, saved, gout[0], wants(wanted, 0), wants(wanted, 1), wants(wanted, 2), grads, accumulate, grads,
               accumulate);
}

template <ConvGrads Grads>
Status backward_both_of(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                        std::vector<bool> const& needs_grad, std::vector<Tensor>& grad_inputs,
                        std::vector<Tensor>& weight_grads) {
  grad_inputs.assign(call.op.inputs.size(), Tensor());
  if (!gout.at(0).defined()) return Status::ok();
  bool const want_w = weight_grads.size() > 1 && weight_grads[1].defined();
  bool const want_b = weight_grads.size() > 2 && weight_grads[2].defined();
  return Grads(call, saved, gout[0], wants(needs_grad, 0), want_w, want_b, grad_inputs, false, weight_grads, true);
}

}  // namespace

std::vector<KernelEntry> conv_kernels() {
  std::vector<KernelEntry> t;
  t.push_back({OpKind::kConv,
               DType::kFloat32,
               {conv_forward<float>, backward_of<conv_grads<float>>, backward_of<conv_grads<float>>,
                graph::ops::conv_check, backward_both_of<conv_grads<float>>},
               2});
  // Mixed precision: 16-bit cuDNN convolutions with float32 compute; float32 weights rounded per call.
  auto low = [&t]<typename T>() {
    t.push_back({OpKind::kConv, dtype_of<T>(),
                 low_precision_kernels<conv_forward<T>, backward_of<conv_grads<T>>, backward_of<conv_grads<T>>>(
                     graph::ops::conv_check),
                 2});
  };
  low.operator()<__nv_bfloat16>();
  low.operator()<__half>();
  t.push_back({OpKind::kConvTranspose,
               DType::kFloat32,
               {conv_transpose_forward, backward_of<conv_transpose_grads>, backward_of<conv_transpose_grads>,
                conv_transpose_check, backward_both_of<conv_transpose_grads>},
               2});
  return t;
}

}  // namespace gp::exec::cuda
