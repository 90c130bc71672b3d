// Linalg family. Gemm and MatMul (batched, numpy broadcasting) through oneDNN matmul: transposes
// are strided memory descriptors, never copies; weight gradients accumulate in place with a sum
// post-op.
//
// Einsum for one or two operands: exec/einsum.h's plan (shared with the CUDA backend) on host
// strided loops and oneDNN matmul.
#include <algorithm>
#include <cstring>

#include "exec/cpu/cpu_gemm.h"
#include "exec/cpu/cpu_ops.h"
#include "exec/cpu/dnnl_context.h"
#include "exec/einsum.h"
#include "graph/ops/einsum.h"
#include "graph/ops/linalg.h"
#include "kernels/bf16.h"
#include "kernels/move.h"

namespace gp::exec::cpu {
namespace {

// A logical [batch..., rows, cols] view of dense memory.
struct View {
  std::vector<int64_t> dims, strides;
  void const* data = nullptr;
  DType dtype = DType::kFloat32;  // float32, or bfloat16 under mixed precision (float32 accumulation)
};

// Row-major [batch..., r, c] tensor memory viewed as itself, or as its last-two-dims transpose.
View view(Tensor const& t, std::vector<int64_t> shape, bool transpose) {
  std::vector<int64_t> strides = kernels::contiguous_strides(shape);
  std::size_t const n = shape.size();
  if (transpose) {
    std::swap(shape[n - 1], shape[n - 2]);
    std::swap(strides[n - 1], strides[n - 2]);
  }
  // oneDNN wants a non-zero stride on size-1 dims; any value is valid there.
  for (std::size_t i = 0; i < n; ++i)
    if (shape[i] == 1 && strides[i] == 0) strides[i] = 1;
  return {shape, strides, t.raw(), t.dtype()};
}

struct MatmulPrim {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
};

std::vector<int64_t> const kNoDims;

// c (=, or += when accumulate) alpha · a · b (+ bias broadcast over rows when given).
void matmul(View const& a, View const& b, View const& c, float alpha, bool accumulate, View const* bias = nullptr) {
  IntKey const k = dnnl_ctx::key("matmul", static_cast<int>(a.dtype), static_cast<int>(b.dtype),
                                 static_cast<int>(c.dtype), bias ? static_cast<int>(bias->dtype) : -1, a.dims,
                                 a.strides, b.dims, b.strides, c.dims, alpha, accumulate, bias ? bias->dims : kNoDims);
  auto e = dnnl_ctx::cached<MatmulPrim>(k, [&] {
    dnnl::primitive_attr attr;
    if (alpha != 1.f) attr.set_output_scales(0, {alpha});
    if (accumulate) {
      dnnl::post_ops po;
      po.append_sum(1.f);
      attr.set_post_ops(po);
    }
    dnnl::memory::desc const c_md = dnnl_ctx::strided_md(c.dims, c.strides, c.dtype);
    dnnl::matmul::desc d = bias ? dnnl::matmul::desc(dnnl_ctx::strided_md(a.dims, a.strides, a.dtype),
                                                     dnnl_ctx::strided_md(b.dims, b.strides, b.dtype),
                                                     dnnl_ctx::strided_md(bias->dims, bias->strides, bias->dtype), c_md)
                                : dnnl::matmul::desc(dnnl_ctx::strided_md(a.dims, a.strides, a.dtype),
                                                     dnnl_ctx::strided_md(b.dims, b.strides, b.dtype), c_md);
    dnnl::matmul::primitive_desc pd(d, attr, dnnl_ctx::engine());
    return MatmulPrim{pd, dnnl::matmul(pd)};
  });
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, dnnl_ctx::mem(e->pd.src_desc(), a.data)},
                                             {DNNL_ARG_WEIGHTS, dnnl_ctx::mem(e->pd.weights_desc(), b.data)},
                                             {DNNL_ARG_DST, dnnl_ctx::mem(e->pd.dst_desc(), c.data)}};
  if (bias) args.emplace(DNNL_ARG_BIAS, dnnl_ctx::mem(e->pd.bias_desc(), bias->data));
  dnnl_ctx::run(e->prim, args);
}

// ---- Gemm ----
using graph::ops::GemmDims;

Status gemm_dims(OpCall const& call, Tensor const& a, Tensor const& b, GemmDims& d) {
  auto const& at = *attrs_of<graph::GemmAttrs>(call.op);
  Result<GemmDims> const r = graph::ops::gemm_dims(a.shape(), b.shape(), at.trans_a, at.trans_b);
  if (!r) return op_error(call, r.status().message());
  d = *r;
  return Status::ok();
}

}  // namespace

// The bf16 Gemm's C must be a bias row added with alpha = beta = 1 (oneDNN's matmul bias): said
// before training starts, not at the first step.
Status gemm_bf16_check(graph::Op const& op, graph::OpGraph const& graph) {
  RETURN_IF_ERROR(require_attrs<graph::GemmAttrs>(op, graph));
  if (op.inputs.size() < 3 || op.inputs[2] == graph::kNoTensor) return Status::ok();
  auto const& at = *attrs_of<graph::GemmAttrs>(op);
  std::vector<int64_t> const& b = graph.tensor(op.inputs[1]).shape.dims;
  std::vector<int64_t> const& c = graph.tensor(op.inputs[2]).shape.dims;
  int64_t const n = b.size() == 2 ? b[at.trans_b ? 0 : 1] : -1;
  int64_t c_numel = 1;
  for (int64_t d : c) c_numel *= d;
  bool const row = c_numel == n && (c.size() == 1 || (c.size() == 2 && c[0] == 1));
  if (at.alpha != 1.f || at.beta != 1.f || !row)
    return unsupported("Gemm '" + op.name +
                       "' in bfloat16 takes C only as a bias row with alpha = beta = 1 on the "
                       "CPU (train this model with precision fp32, or with --backend cuda)");
  return Status::ok();
}

Status gemm_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  auto const& at = *attrs_of<graph::GemmAttrs>(call.op);
  Tensor const& a = in[0];
  Tensor const& b = in[1];
  GemmDims d;
  RETURN_IF_ERROR(gemm_dims(call, a, b, d));
  Tensor y({d.m, d.n}, a.dtype());
  bool const has_c = in.size() > 2 && in[2].defined() && at.beta != 0.f;
  View const av = view(a, a.shape(), at.trans_a);
  View const bv = view(b, b.shape(), at.trans_b);
  View const yv = view(y, y.shape(), false);
  bool const bias_fast =
      has_c && at.alpha == 1.f && at.beta == 1.f && in[2].numel() == d.n && (in[2].rank() == 1 || in[2].dim(0) == 1);
  if (bias_fast) {
    View const bias{{1, d.n}, {d.n, 1}, in[2].raw(), in[2].dtype()};
    matmul(av, bv, yv, 1.f, false, &bias);
  } else {
    matmul(av, bv, yv, at.alpha, false);
  }
  if (has_c && !bias_fast) {
    if (y.dtype() != DType::kFloat32)
      return op_error(call, "in " + std::string(graph::dtype_name(y.dtype())) +
                                " Gemm takes C only as a bias row with alpha = beta = 1 (train this model with "
                                "precision fp32)");
    std::vector<int64_t> shape;
    if (!kernels::broadcast_shapes(in[2].shape(), y.shape(), shape) || shape != y.shape())
      return op_error(call, "C " + in[2].shape_string() + " does not broadcast to " + y.shape_string());
    Tensor c(y.shape());
    kernels::expand(in[2].data<float>(), in[2].shape(), c.data<float>(), y.shape());
    float* yp = y.data<float>();
    float const* cp = c.data<float>();
    for (int64_t i = 0; i < y.numel(); ++i) yp[i] += at.beta * cp[i];
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {a, b, in.size() > 2 && in[2].defined() ? shape_tensor(in[2].shape()) : Tensor()};
  return Status::ok();
}

Status gemm_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                     std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!gout.at(0).defined()) return Status::ok();
  auto const& at = *attrs_of<graph::GemmAttrs>(call.op);
  Tensor const& a = saved.tensors.at(0);
  Tensor const& b = saved.tensors.at(1);
  Tensor const& dy = gout[0];
  GemmDims d;
  RETURN_IF_ERROR(gemm_dims(call, a, b, d));
  if (wants(wanted, 0)) {
    Tensor& da = grad_slot(grads, 0, a.shape(), accumulate, a.dtype());
    if (!at.trans_a) {  // dA[M,K] = α dY · op(B)ᵀ
      matmul(view(dy, dy.shape(), false), view(b, b.shape(), !at.trans_b), view(da, a.shape(), false), at.alpha,
             accumulate);
    } else {  // dA[K,M] = α op(B) · dYᵀ
      matmul(view(b, b.shape(), at.trans_b), view(dy, dy.shape(), true), view(da, a.shape(), false), at.alpha,
             accumulate);
    }
  }
  if (wants(wanted, 1)) {
    Tensor& db = grad_slot(grads, 1, b.shape(), accumulate, b.dtype());
    if (!at.trans_b) {  // dB[K,N] = α op(A)ᵀ · dY
      matmul(view(a, a.shape(), !at.trans_a), view(dy, dy.shape(), false), view(db, b.shape(), false), at.alpha,
             accumulate);
    } else {  // dB[N,K] = α dYᵀ · op(A)
      matmul(view(dy, dy.shape(), true), view(a, a.shape(), at.trans_a), view(db, b.shape(), false), at.alpha,
             accumulate);
    }
  }
  if (wants(wanted, 2) && saved.tensors.size() > 2 && saved.tensors[2].defined()) {
    std::vector<int64_t> const c_shape = shape_of(saved.tensors[2]);
    Tensor dc(c_shape);
    kernels::reduce_sum_to(convert_float(dy, DType::kFloat32).data<float>(), dy.shape(), dc.data<float>(), c_shape,
                           false);
    if (at.beta != 1.f) {
      float* p = dc.data<float>();
      for (int64_t i = 0; i < dc.numel(); ++i) p[i] *= at.beta;
    }
    RETURN_IF_ERROR(
        emit_grad(call, grads, 2, convert_float(dc, call.graph.tensor(call.op.inputs[2]).dtype), accumulate));
  }
  return Status::ok();
}

namespace {

using graph::ops::MatMulShapes;

Status matmul_shapes(OpCall const& call, std::vector<int64_t> a, std::vector<int64_t> b, MatMulShapes& s) {
  graph::MatMulAttrs const at = graph::ops::matmul_attrs(call.op);
  Result<MatMulShapes> r = graph::ops::matmul_shapes(std::move(a), std::move(b), at.trans_a, at.trans_b);
  if (!r.is_ok()) return op_error(call, r.status().message());
  s = std::move(r).value();
  return Status::ok();
}

int64_t prod(std::vector<int64_t> const& v, std::size_t from, std::size_t to) {
  int64_t p = 1;
  for (std::size_t i = from; i < to; ++i) p *= v[i];
  return p;
}

// Computes a full-batch product into a temporary and sums it down to `target` (a broadcast operand).
void matmul_reduce(View const& x, View const& w, float alpha, std::vector<int64_t> const& full, Tensor& dst,
                   std::vector<int64_t> const& target, bool accumulate) {
  if (full == target) {
    matmul(x, w, view(dst, full, false), alpha, accumulate);
    return;
  }
  // The sum runs in float32 (a bfloat16 product is widened first, and the result rounded once).
  Tensor tmp(full, dst.dtype());
  matmul(x, w, view(tmp, full, false), alpha, false);
  if (dst.dtype() == DType::kFloat32) {
    kernels::reduce_sum_to(tmp.data<float>(), full, dst.data<float>(), target, accumulate);
    return;
  }
  Tensor sum(target);
  kernels::reduce_sum_to(convert_float(tmp, DType::kFloat32).data<float>(), full, sum.data<float>(), target, false);
  Tensor const narrow = convert_float(sum, dst.dtype());
  if (accumulate)
    kernels::add_inplace_bf16(dst.data<uint16_t>(), narrow.data<uint16_t>(), dst.numel());
  else
    std::memcpy(dst.raw(), narrow.raw(), dst.nbytes());
}

}  // namespace

// Y = alpha · op(A) · op(B) (graph::MatMulAttrs); a transposed operand is read through a
// transposed view of its memory.
Status matmul_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& a = in[0];
  Tensor const& b = in[1];
  MatMulShapes s;
  RETURN_IF_ERROR(matmul_shapes(call, a.shape(), b.shape(), s));
  float const alpha = graph::ops::matmul_attrs(call.op).alpha;
  Tensor y(s.out, a.dtype());
  if (y.numel() > 0) {
    if (s.fold) {
      int64_t const rows = prod(s.a, 0, s.a.size() - 1);
      matmul(view(a, {rows, s.a.back()}, false), view(b, b.shape(), s.trans_b), view(y, {rows, s.b.back()}, false),
             alpha, false);
    } else {
      matmul(view(a, s.stored_a(), s.trans_a), view(b, s.stored_b(), s.trans_b), view(y, s.y, false), alpha, false);
    }
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {a, b};
  return Status::ok();
}

// dop(A) = alpha · dY · op(B)ᵀ and dop(B) = alpha · op(A)ᵀ · dY, written as stored (transposed back
// where the operand is), summed over the batch dims where the operand was broadcast.
Status matmul_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                       std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!gout.at(0).defined()) return Status::ok();
  Tensor const& a = saved.tensors.at(0);
  Tensor const& b = saved.tensors.at(1);
  Tensor const& dy = gout[0];
  MatMulShapes s;
  RETURN_IF_ERROR(matmul_shapes(call, a.shape(), b.shape(), s));
  float const alpha = graph::ops::matmul_attrs(call.op).alpha;
  if (s.fold) {  // A is not transposed here
    int64_t const rows = prod(s.a, 0, s.a.size() - 1);
    int64_t const k = s.a.back(), n = s.b.back();
    if (wants(wanted, 0)) {  // dA = dY · op(B)ᵀ
      Tensor& da = grad_slot(grads, 0, a.shape(), accumulate, a.dtype());
      matmul(view(dy, {rows, n}, false), view(b, b.shape(), !s.trans_b), view(da, {rows, k}, false), alpha, accumulate);
    }
    if (wants(wanted, 1)) {  // dB = Aᵀ · dY over all rows (transposed: dYᵀ · A)
      Tensor& db = grad_slot(grads, 1, b.shape(), accumulate, b.dtype());
      if (s.trans_b)
        matmul(view(dy, {rows, n}, true), view(a, {rows, k}, false), view(db, {n, k}, false), alpha, accumulate);
      else
        matmul(view(a, {rows, k}, true), view(dy, {rows, n}, false), view(db, {k, n}, false), alpha, accumulate);
    }
    return Status::ok();
  }
  std::size_t const r = s.y.size();
  std::vector<int64_t> const batch(s.y.begin(), s.y.end() - 2);
  auto full = [&](std::vector<int64_t> const& stored) {
    std::vector<int64_t> f = batch;
    f.push_back(stored[r - 2]);
    f.push_back(stored[r - 1]);
    return f;
  };
  std::vector<int64_t> const sa = s.stored_a(), sb = s.stored_b();
  if (wants(wanted, 0)) {
    Tensor& da = grad_slot(grads, 0, a.shape(), accumulate, a.dtype());
    if (s.trans_a)  // A stored [K, M]: dA = op(B) · dYᵀ
      matmul_reduce(view(b, sb, s.trans_b), view(dy, s.y, true), alpha, full(sa), da, sa, accumulate);
    else
      matmul_reduce(view(dy, s.y, false), view(b, sb, !s.trans_b), alpha, full(sa), da, sa, accumulate);
  }
  if (wants(wanted, 1)) {
    Tensor& db = grad_slot(grads, 1, b.shape(), accumulate, b.dtype());
    if (s.trans_b)  // B stored [N, K]: dB = dYᵀ · op(A)
      matmul_reduce(view(dy, s.y, true), view(a, sa, s.trans_a), alpha, full(sb), db, sb, accumulate);
    else
      matmul_reduce(view(a, sa, !s.trans_a), view(dy, s.y, false), alpha, full(sb), db, sb, accumulate);
  }
  return Status::ok();
}

// ---- Einsum: exec/einsum.h's plan on host loops and oneDNN matmul ----

namespace {

using graph::ops::EinsumSpec;

EinsumPrimitives const& cpu_einsum_primitives() {
  static EinsumPrimitives const ops{
      [](Tensor const& x, std::vector<int64_t> const& x_strides,
         std::vector<int64_t> const& y_shape) -> Result<Tensor> {
        Tensor out(y_shape);
        kernels::strided_copy(x.data<float>(), x_strides, out.data<float>(), kernels::contiguous_strides(y_shape),
                              y_shape);
        return out;
      },
      [](Tensor const& src, std::vector<int64_t> const& src_strides, std::vector<int64_t> const& out_strides,
         std::vector<int64_t> const& space, std::vector<int64_t> const& out_shape) -> Result<Tensor> {
        Tensor out = Tensor::zeros(out_shape);
        kernels::strided_add(src.data<float>(), src_strides, out.data<float>(), out_strides, space);
        return out;
      },
      [](Tensor const& a, Tensor const& b, int64_t nb, int64_t nm, int64_t nk, int64_t nn) -> Result<Tensor> {
        Tensor c({nb, nm, nn});
        gemm(batched(a.raw(), nb, nm, nk), batched(b.raw(), nb, nk, nn), batched(c.raw(), nb, nm, nn), false);
        return c;
      }};
  return ops;
}

Status einsum_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  EinsumSpec spec;
  std::vector<int64_t> size;
  RETURN_IF_ERROR(einsum_setup(call, in, spec, size));
  ASSIGN_OR_RETURN(Tensor y, exec::einsum_forward(in, spec, size, cpu_einsum_primitives()));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y.raw() == in[0].raw() ? y.clone() : y;
  if (saved) saved->tensors = in;
  return Status::ok();
}

Status einsum_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                       std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (gout.empty() || !gout[0].defined()) return Status::ok();
  std::vector<Tensor> const& in = saved.tensors;
  EinsumSpec spec;
  std::vector<int64_t> size;
  RETURN_IF_ERROR(einsum_setup(call, in, spec, size));
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (!wants(wanted, i)) continue;
    ASSIGN_OR_RETURN(Tensor g, exec::einsum_gradient(in, i, gout[0], spec, size, cpu_einsum_primitives()));
    RETURN_IF_ERROR(emit_grad(call, grads, i, g, accumulate));
  }
  return Status::ok();
}

}  // namespace

CpuKernelFamily linalg_kernels() {
  return {{OpKind::kEinsum, {{einsum_forward, einsum_backward, einsum_backward, einsum_check}, 1}}};
}

}  // namespace gp::exec::cpu
