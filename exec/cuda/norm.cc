// The CUDA backend's norm family: BatchNormalization (training on cuDNN's graphs, or on our
// kernels with GP_CUDA_BATCHNORM=ours; inference through cuDNN graphs, its backward on our
// kernels), LayerNormalization and LRN on our kernels (kernels/cuda/math.h). Same inputs, outputs and
// gradients as the CPU's exec/cpu/norm.cc.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "exec/cuda/cublaslt_gemm.h"
#include "exec/cuda/cudnn_graphs.h"
#include "exec/cuda/gemm_mapping.h"
#include "exec/cuda/ops_common.h"
#include "exec/cuda/ops_shared.h"
#include "exec/op_shared.h"
#include "graph/ops/conv.h"
#include "graph/ops/norm.h"
#include "kernels/cuda/math.h"
#include "exec/cuda/binary.h"
#include "exec/cuda/cuda_ops.h"
#include "exec/cuda/low_precision.h"

namespace gp::exec::cuda {
namespace {

namespace kc = kernels::cuda;
namespace hd = kernels::hd;

// ---- BatchNormalization ----

// 1/sqrt(var + eps) for C channels, on the host: a C-float round trip (inference only), since no
// library call of ours computes a reciprocal square root.
Result<Tensor> inv_std(Tensor const& var, float eps) {
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  std::vector<float> h(static_cast<std::size_t>(var.numel()));
  GP_CUDA_CHECK(cudaMemcpyAsync(h.data(), var.raw(), var.nbytes(), cudaMemcpyDeviceToHost, stream));
  GP_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (float& v : h) v = 1.f / std::sqrt(v + eps);
  ASSIGN_OR_RETURN(Tensor out, empty(var.shape()));
  GP_CUDA_CHECK(cudaMemcpyAsync(out.raw(), h.data(), out.nbytes(), cudaMemcpyHostToDevice, stream));
  GP_CUDA_CHECK(cudaStreamSynchronize(stream));  // h is freed on return
  return out;
}

// Training BatchNorm runs on cuDNN's graphs or on our kernels (kernels/cuda/norm.cu), which split
// each channel over blocks (batchnorm_kernels(), exec/cuda/cudnn_graphs.h). cuDNN refuses some
// shapes outright (no engine config for small channel counts, e.g. x [3,2,2,3]:
// "tunable_params.c % elements_per_ldg != 0") and says so when the plan is built, once per shape;
// those run on our kernels, which take and keep the same tensors as cuDNN's graphs: the saved mean
// and inverse standard deviation.
std::atomic<int>& batchnorm_choice() {
  static std::atomic<int> choice{[] {
    char const* v = std::getenv("GP_CUDA_BATCHNORM");
    return static_cast<int>(v != nullptr && std::string_view(v) == "ours" ? BatchNormKernels::kOurs
                                                                          : BatchNormKernels::kCudnn);
  }()};
  return choice;
}
bool cudnn_batchnorm() { return batchnorm_kernels() == BatchNormKernels::kCudnn; }
bool cudnn_refused(Status const& s) { return s.code() == StatusCode::kUnsupported; }

Result<Tensor> bn_scratch(int64_t batch, int64_t channels, int64_t spatial) {
  return empty({std::max<int64_t>(1, kc::batchnorm_scratch_floats(batch, channels, spatial))});
}

// A fused Relu (BatchNormAttrs::relu), and residual z before it (BatchNormAttrs::residual), where
// the normalisation ran without them (cuDNN's graphs, inference mode): y = max(0, y (+ z)) in
// place, and backward's dy masked by y > 0 (Relu's own kernels).
template <typename T>
Status relu_in_place(Tensor& y, Tensor const* z) {
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  // (Not unary_forward with y as both operands: its pointers are __restrict__.)
  GP_CUDA_CHECK(kc::add_relu_in_place<T>(y.data<T>(), z != nullptr ? z->data<T>() : nullptr, y.numel(), stream));
  return Status::ok();
}
template <typename T>
Result<Tensor> relu_masked(Tensor const& y, Tensor const& dy) {
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  ASSIGN_OR_RETURN(Tensor out, empty(y.shape(), y.dtype()));
  GP_CUDA_CHECK(
      kc::unary_backward<T>(hd::UnaryKind::kRelu, 0.f, y.data<T>(), dy.data<T>(), out.data<T>(), y.numel(), stream));
  return out;
}

template <typename T>
Status own_batchnorm_train(Tensor const& x, std::vector<Tensor> const& in, float eps, float momentum, bool relu,
                           Tensor const* z, BnTrainPtrs const& p) {
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  int64_t const sp = spatial(x.shape());
  ASSIGN_OR_RETURN(Tensor scratch, bn_scratch(x.dim(0), x.dim(1), sp));
  GP_CUDA_CHECK(kc::batchnorm_train_forward<T>(
      x.data<T>(), in[1].data<float>(), in[2].data<float>(), in[3].data<float>(), in[4].data<float>(), x.dim(0),
      x.dim(1), sp, eps, momentum, relu, z ? z->data<T>() : nullptr, static_cast<T*>(p.y), static_cast<float*>(p.mean),
      static_cast<float*>(p.inv_variance), static_cast<float*>(p.next_running_mean),
      static_cast<float*>(p.next_running_var), scratch.data<float>(), stream));
  return Status::ok();
}

Status own_batchnorm_infer(std::vector<int64_t> const& shape, bool relu, BnInferPtrs const& p) {
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::batchnorm_infer_forward<float>(static_cast<float const*>(p.x), static_cast<float const*>(p.scale),
                                                   static_cast<float const*>(p.bias), static_cast<float const*>(p.mean),
                                                   static_cast<float const*>(p.inv_variance), shape.at(0), shape.at(1),
                                                   spatial(shape), relu, static_cast<float*>(p.y), stream));
  return Status::ok();
}

// `y`: a fused Relu's output (masks dy), or null; `dz`: where the masked dy goes (a fused
// residual's gradient), or null.
template <typename T>
Status own_batchnorm_backward(std::vector<int64_t> const& shape, void const* y, void* dz, BnBackwardPtrs const& p) {
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  int64_t const sp = spatial(shape);
  ASSIGN_OR_RETURN(Tensor scratch, bn_scratch(shape.at(0), shape.at(1), sp));
  GP_CUDA_CHECK(kc::batchnorm_train_backward<T>(
      static_cast<T const*>(p.x), static_cast<T const*>(p.dy), static_cast<T const*>(y),
      static_cast<float const*>(p.scale), static_cast<float const*>(p.mean), static_cast<float const*>(p.inv_variance),
      shape.at(0), shape.at(1), sp, static_cast<T*>(p.dx), static_cast<T*>(dz), static_cast<float*>(p.dscale),
      static_cast<float*>(p.dbias), scratch.data<float>(), stream));
  return Status::ok();
}

template <typename T>
Status batchnorm_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  auto const& a = *attrs_of<graph::BatchNormAttrs>(call.op);
  Tensor const& x = in[0];
  if (x.rank() < 2 || x.rank() > 5) return op_error(call, "input " + x.shape_string() + " must have rank 2 to 5");
  int64_t const c = x.dim(1);
  for (std::size_t i = 1; i < 5; ++i)
    if (in.size() <= i || !in[i].defined() || in[i].numel() != c)
      return op_error(call, "input " + std::to_string(i) + " must have " + std::to_string(c) + " elements");
  Tensor const* z = nullptr;  // a fused residual (BatchNormAttrs::residual)
  if (a.residual) {
    if (in.size() <= graph::kBatchNormResidualInput || !in[graph::kBatchNormResidualInput].defined() ||
        in[graph::kBatchNormResidualInput].shape() != x.shape() ||
        in[graph::kBatchNormResidualInput].dtype() != x.dtype())
      return op_error(call, "the fused residual (input 5) must have x's shape " + x.shape_string() + " and dtype");
    z = &in[graph::kBatchNormResidualInput];
  }
  bool const training = call.training;
  // A 16-bit input in inference mode runs the float32 op widened; its saved x is then float32,
  // which backward sees.
  if constexpr (!std::is_same_v<T, float>) {
    if (!training) return widened_forward<batchnorm_forward<float>, convert_float>(call, in, out, saved);
  }
  ASSIGN_OR_RETURN(Tensor y, empty(x.shape(), dtype_of<T>()));
  Tensor mean, inv_var;
  out.assign(std::max<std::size_t>(call.op.outputs.size(), training ? 3 : 1), Tensor());
  if (training) {
    ASSIGN_OR_RETURN(mean, empty({c}));
    ASSIGN_OR_RETURN(inv_var, empty({c}));
    ASSIGN_OR_RETURN(Tensor next_mean, empty({c}));
    ASSIGN_OR_RETURN(Tensor next_var, empty({c}));
    BnTrainPtrs const p{x.raw(), in[1].raw(), in[2].raw(),   in[3].raw(),     in[4].raw(),
                        y.raw(), mean.raw(),  inv_var.raw(), next_mean.raw(), next_var.raw()};
    // Our kernels add a fused residual and apply a fused Relu in their elementwise pass; after
    // cuDNN's graph they are a pass of their own.
    Status s = cudnn_batchnorm() ? batchnorm_train<T>(x.shape(), a.epsilon, 1.f - a.momentum, p)
                                 : own_batchnorm_train<T>(x, in, a.epsilon, a.momentum, a.relu, z, p);
    if (cudnn_batchnorm() && s.is_ok() && a.relu) s = relu_in_place<T>(y, z);
    if (cudnn_batchnorm() && cudnn_refused(s)) s = own_batchnorm_train<T>(x, in, a.epsilon, a.momentum, a.relu, z, p);
    RETURN_IF_ERROR(in_op(call, s));
    out[1] = next_mean;
    out[2] = next_var;
  } else {
    mean = in[3];
    ASSIGN_OR_RETURN(inv_var, inv_std(in[4], a.epsilon));
    BnInferPtrs const p{x.raw(), in[1].raw(), in[2].raw(), mean.raw(), inv_var.raw(), y.raw()};
    Status s = batchnorm_infer<float>(x.shape(), p);
    if (s.is_ok() && a.relu) {
      s = relu_in_place<float>(y, z);
    } else if (cudnn_refused(s)) {  // our kernel clips in its pass; a residual is added after it
      s = own_batchnorm_infer(x.shape(), a.relu && z == nullptr, p);
      if (s.is_ok() && z != nullptr) s = relu_in_place<float>(y, z);
    }
    RETURN_IF_ERROR(in_op(call, s));
    for (std::size_t k = 1; k < out.size() && k < 3; ++k) {
      ASSIGN_OR_RETURN(out[k], copy_of(in[2 + k]));
    }
  }
  out[0] = y;
  // The CPU keeps the variance, this backend cuDNN's inverse standard deviation (same size); with a
  // fused Relu also y, whose sign masks dy.
  if (saved) {
    saved->tensors = {x, in[1], mean, inv_var, shape_tensor({training ? 1 : 0})};
    if (a.relu) saved->tensors.push_back(y);
  }
  return Status::ok();
}

// Inference mode: the running statistics are constants (the CPU's use_global_stats), so the
// gradients are elementwise and per-channel sums (our kernels, kernels/cuda/math.h), not a cuDNN
// graph. Only the gradients wanted are computed.
Status batchnorm_infer_backward(OpCall const& call, Saved const& saved, Tensor const& dy,
                                std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  Tensor const& x = saved.tensors.at(0);
  Tensor const& scale = saved.tensors.at(1);
  float const* mean = saved.tensors.at(2).data<float>();
  float const* inv = saved.tensors.at(3).data<float>();
  int64_t const n = x.dim(0), c = x.dim(1), sp = spatial(x.shape());
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  if (wants(wanted, 0)) {
    ASSIGN_OR_RETURN(Tensor dx, empty(x.shape()));
    GP_CUDA_CHECK(kernels::cuda::batchnorm_infer_backward_input<float>(dy.data<float>(), scale.data<float>(), inv, n, c,
                                                                       sp, dx.data<float>(), stream));
    RETURN_IF_ERROR(emit_grad(call, grads, 0, dx, accumulate));
  }
  if (!(wants(wanted, 1) || wants(wanted, 2))) return Status::ok();
  ASSIGN_OR_RETURN(Tensor dscale, empty({c}));
  ASSIGN_OR_RETURN(Tensor dbias, empty({c}));
  GP_CUDA_CHECK(kernels::cuda::batchnorm_infer_backward_params<float>(
      x.data<float>(), dy.data<float>(), mean, inv, n, c, sp, dscale.data<float>(), dbias.data<float>(), stream));
  if (wants(wanted, 1)) RETURN_IF_ERROR(emit_grad(call, grads, 1, dscale, accumulate));
  if (wants(wanted, 2)) RETURN_IF_ERROR(emit_grad(call, grads, 2, dbias, accumulate));
  return Status::ok();
}

template <typename T>
Status batchnorm_backward_op(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                             std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  auto const& a = *attrs_of<graph::BatchNormAttrs>(call.op);
  bool const want_z = a.residual && wants(wanted, graph::kBatchNormResidualInput);
  if (!(wants(wanted, 0) || wants(wanted, 1) || wants(wanted, 2) || want_z) || !gout.at(0).defined())
    return Status::ok();
  Tensor const& x = saved.tensors.at(0);
  if constexpr (!std::is_same_v<T, float>) {
    // The forward ran widened (inference mode): so does backward.
    if (x.dtype() == DType::kFloat32)
      return widened_backward<batchnorm_backward_op<float>, convert_float>(call, saved, gout, wanted, grads,
                                                                           accumulate);
  }
  bool const training = shape_of(saved.tensors.at(4)).at(0) != 0;
  // A fused Relu: our training kernels mask dy by y as they read it (and write the fused residual's
  // gradient, the masked dy, beside dx); the other paths get it masked first, which is z's gradient.
  Tensor dy = gout[0];
  bool const own = training && !cudnn_batchnorm();
  if (a.relu && !own) {
    ASSIGN_OR_RETURN(dy, relu_masked<T>(saved.tensors.at(5), gout[0]));
  }
  if (!training) {
    RETURN_IF_ERROR(batchnorm_infer_backward(call, saved, dy, wanted, grads, accumulate));
    return want_z ? emit_grad(call, grads, graph::kBatchNormResidualInput, dy, accumulate) : Status::ok();
  }
  int64_t const c = x.dim(1);
  ASSIGN_OR_RETURN(Tensor dx, empty(x.shape(), x.dtype()));
  ASSIGN_OR_RETURN(Tensor dscale, empty({c}));
  ASSIGN_OR_RETURN(Tensor dbias, empty({c}));
  Tensor dz;
  if (own && want_z) {
    ASSIGN_OR_RETURN(dz, empty(x.shape(), x.dtype()));
  }
  BnBackwardPtrs const p{dy.raw(),
                         x.raw(),
                         saved.tensors.at(1).raw(),
                         saved.tensors.at(2).raw(),
                         saved.tensors.at(3).raw(),
                         dx.raw(),
                         dscale.raw(),
                         dbias.raw()};
  Status s = own ? own_batchnorm_backward<T>(x.shape(), a.relu ? saved.tensors.at(5).raw() : nullptr,
                                             want_z ? dz.raw() : nullptr, p)
                 : batchnorm_backward<T>(x.shape(), p);
  if (!own && cudnn_refused(s)) s = own_batchnorm_backward<T>(x.shape(), nullptr, nullptr, p);  // dy masked
  RETURN_IF_ERROR(in_op(call, s));
  if (wants(wanted, 0)) RETURN_IF_ERROR(emit_grad(call, grads, 0, dx, accumulate));
  if (wants(wanted, 1)) RETURN_IF_ERROR(emit_grad(call, grads, 1, dscale, accumulate));
  if (wants(wanted, 2)) RETURN_IF_ERROR(emit_grad(call, grads, 2, dbias, accumulate));
  if (want_z) RETURN_IF_ERROR(emit_grad(call, grads, graph::kBatchNormResidualInput, own ? dz : dy, accumulate));
  return Status::ok();
}

}  // namespace

BatchNormKernels batchnorm_kernels() { return static_cast<BatchNormKernels>(batchnorm_choice().load()); }
void set_batchnorm_kernels(BatchNormKernels k) { batchnorm_choice().store(static_cast<int>(k)); }

namespace {

// ---- LayerNormalization ----

bool layernorm_has_bias(OpCall const& call) {
  return call.op.inputs.size() > 2 && call.op.inputs[2] != graph::kNoTensor;
}

template <typename T>
Status layernorm_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  auto const& a = *attrs_of<graph::LayerNormAttrs>(call.op);
  Tensor const& x = in[0];
  ASSIGN_OR_RETURN(graph::ops::LayerNormSplit const v, graph::ops::layer_norm_split(call.op, x.shape()));
  bool const bias = layernorm_has_bias(call) && in.size() > 2 && in[2].defined();
  if (in[1].numel() != v.cols || (bias && in[2].numel() != v.cols))
    return op_error(call, "scale/bias must have " + std::to_string(v.cols) + " elements");
  std::vector<int64_t> const& stat_shape = v.stat_shape;
  ASSIGN_OR_RETURN(Tensor y, empty(x.shape(), x.dtype()));
  ASSIGN_OR_RETURN(Tensor mean, empty(stat_shape, DType::kFloat32));
  ASSIGN_OR_RETURN(Tensor rstd, empty(stat_shape, DType::kFloat32));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::layernorm_forward<T>(x.data<T>(), in[1].data<T>(), bias ? in[2].data<T>() : nullptr, v.rows, v.cols,
                                         a.epsilon, y.data<T>(), mean.data<float>(), rstd.data<float>(), stream));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (out.size() > 1) out[1] = mean;
  if (out.size() > 2) out[2] = rstd;
  if (saved) saved->tensors = {x, in[1], mean, rstd};
  return Status::ok();
}

// Only the gradients wanted: B (input) and W (scale, bias) calls do not repeat each other's work.
template <typename T>
Status layernorm_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                          std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  bool const bias = layernorm_has_bias(call);
  bool const want_params = wants(wanted, 1) || (bias && wants(wanted, 2));
  if (!(wants(wanted, 0) || want_params) || !gout.at(0).defined()) return Status::ok();
  Tensor const& x = saved.tensors.at(0);
  Tensor const& scale = saved.tensors.at(1);
  float const* mean = saved.tensors.at(2).data<float>();
  float const* rstd = saved.tensors.at(3).data<float>();
  ASSIGN_OR_RETURN(graph::ops::LayerNormSplit const v, graph::ops::layer_norm_split(call.op, x.shape()));
  T const* dy = gout[0].data<T>();
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  if (wants(wanted, 0)) {
    ASSIGN_OR_RETURN(Tensor dx, empty(x.shape(), x.dtype()));
    GP_CUDA_CHECK(kc::layernorm_backward_input<T>(x.data<T>(), scale.data<T>(), mean, rstd, dy, v.rows, v.cols,
                                                  dx.data<T>(), stream));
    RETURN_IF_ERROR(emit_grad(call, grads, 0, dx, accumulate));
  }
  if (!want_params) return Status::ok();
  ASSIGN_OR_RETURN(Tensor scratch, empty({kc::layernorm_params_scratch(v.rows, v.cols)}, DType::kFloat32));
  ASSIGN_OR_RETURN(Tensor dscale, empty(scale.shape(), scale.dtype()));
  Tensor dbias;
  if (bias) {
    ASSIGN_OR_RETURN(dbias, empty(scale.shape(), scale.dtype()));
  }
  GP_CUDA_CHECK(kc::layernorm_backward_params<T>(x.data<T>(), mean, rstd, dy, v.rows, v.cols, scratch.data<float>(),
                                                 dscale.data<T>(), bias ? dbias.data<T>() : nullptr, stream));
  if (wants(wanted, 1)) RETURN_IF_ERROR(emit_grad(call, grads, 1, dscale, accumulate));
  if (bias && wants(wanted, 2)) RETURN_IF_ERROR(emit_grad(call, grads, 2, dbias, accumulate));
  return Status::ok();
}

// ---- InstanceNormalization: our BatchNorm kernels over x as [1, N*C, spatial] (one channel per
// (sample, channel) pair), as the CPU runs oneDNN's batch normalisation over that view ----

// scale or bias [C] repeated for each of n samples: [n*C].
Result<Tensor> tiled(OpCall const& call, Tensor const& v, int64_t n) {
  int64_t const c = v.numel();
  ASSIGN_OR_RETURN(Tensor t, broadcast_to<float>(call, v, {n, c}, 1.f, {1, c}));
  return t.reshaped({n * c});
}

// Saved: {x, scale, mean, inv_std} (per (sample, channel)).
Status instnorm_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  auto const& a = *attrs_of<graph::InstanceNormAttrs>(call.op);
  Tensor const& x = in[0];
  if (x.rank() < 3) return op_error(call, "input " + x.shape_string() + " needs N, C and spatial dims");
  int64_t const n = x.dim(0), c = x.dim(1), s = spatial(x.shape());
  for (std::size_t i = 1; i < 3; ++i)
    if (in[i].numel() != c)
      return op_error(call, "input " + std::to_string(i) + " must have " + std::to_string(c) + " elements, has " +
                                std::to_string(in[i].numel()));
  ASSIGN_OR_RETURN(Tensor y, empty(x.shape(), DType::kFloat32));
  ASSIGN_OR_RETURN(Tensor mean, empty({n * c}, DType::kFloat32));
  ASSIGN_OR_RETURN(Tensor inv, empty({n * c}, DType::kFloat32));
  if (x.numel() > 0) {
    ASSIGN_OR_RETURN(Tensor const scale, tiled(call, in[1], n));
    ASSIGN_OR_RETURN(Tensor const shift, tiled(call, in[2], n));
    // The kernel also updates running statistics, which InstanceNormalization has none of: zeros
    // in, the result unused.
    ASSIGN_OR_RETURN(Tensor running, empty({2, n * c}, DType::kFloat32));
    ASSIGN_OR_RETURN(Tensor next, empty({2, n * c}, DType::kFloat32));
    ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
    GP_CUDA_CHECK(kc::fill_value<float>(running.data<float>(), running.numel(), 0.f, stream));
    ASSIGN_OR_RETURN(Tensor scratch, bn_scratch(1, n * c, s));
    GP_CUDA_CHECK(kc::batchnorm_train_forward<float>(
        x.data<float>(), scale.data<float>(), shift.data<float>(), running.data<float>(), running.data<float>() + n * c,
        1, n * c, s, a.epsilon, 0.f, /*relu=*/false, /*z=*/nullptr, y.data<float>(), mean.data<float>(),
        inv.data<float>(), next.data<float>(), next.data<float>() + n * c, scratch.data<float>(), stream));
  }
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {x, in[1], mean, inv};
  return Status::ok();
}

Status instnorm_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                         std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!(wants(wanted, 0) || wants(wanted, 1) || wants(wanted, 2)) || !gout.at(0).defined()) return Status::ok();
  Tensor const& x = saved.tensors.at(0);
  if (gout[0].shape() != x.shape()) return op_error(call, "output gradient has shape " + gout[0].shape_string());
  int64_t const n = x.dim(0), c = x.dim(1), s = spatial(x.shape());
  ASSIGN_OR_RETURN(Tensor dx, empty(x.shape(), DType::kFloat32));
  ASSIGN_OR_RETURN(Tensor ds, empty({n, c}, DType::kFloat32));
  ASSIGN_OR_RETURN(Tensor db, empty({n, c}, DType::kFloat32));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  if (x.numel() > 0) {
    ASSIGN_OR_RETURN(Tensor const scale, tiled(call, saved.tensors.at(1), n));
    ASSIGN_OR_RETURN(Tensor scratch, bn_scratch(1, n * c, s));
    GP_CUDA_CHECK(kc::batchnorm_train_backward<float>(
        x.data<float>(), gout[0].data<float>(), /*y=*/nullptr, scale.data<float>(), saved.tensors.at(2).data<float>(),
        saved.tensors.at(3).data<float>(), 1, n * c, s, dx.data<float>(), /*dz=*/nullptr, ds.data<float>(),
        db.data<float>(), scratch.data<float>(), stream));
  } else {
    GP_CUDA_CHECK(kc::fill_value<float>(ds.data<float>(), ds.numel(), 0.f, stream));
    GP_CUDA_CHECK(kc::fill_value<float>(db.data<float>(), db.numel(), 0.f, stream));
  }
  if (wants(wanted, 0)) RETURN_IF_ERROR(emit_grad(call, grads, 0, dx, accumulate));
  std::vector<int64_t> const param_shape = saved.tensors.at(1).shape();
  for (std::size_t i : {std::size_t{1}, std::size_t{2}}) {
    if (!wants(wanted, i)) continue;
    ASSIGN_OR_RETURN(Tensor g, sum_down<float>(call, i == 1 ? ds : db, {1, c}, 1.f));
    RETURN_IF_ERROR(emit_grad(call, grads, i, g.reshaped(param_shape), accumulate));
  }
  return Status::ok();
}

// ---- LRN: saves x and the denominator d, as the CPU's exec/cpu/norm.cc ----

Status lrn_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  Tensor const& x = in[0];
  ASSIGN_OR_RETURN(hd::LrnParams const p, lrn_params(call, x.shape()));
  ASSIGN_OR_RETURN(Tensor y, empty(x.shape(), DType::kFloat32));
  ASSIGN_OR_RETURN(Tensor d, empty(x.shape(), DType::kFloat32));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::lrn_forward(x.data<float>(), p, x.numel(), y.data<float>(), d.data<float>(), stream));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {x, d};
  return Status::ok();
}

Status lrn_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                    std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0)) return Status::ok();
  ASSIGN_OR_RETURN(hd::LrnParams const p, lrn_backward_params(call, saved, gout));
  Tensor const& x = saved.tensors[0];
  ASSIGN_OR_RETURN(Tensor dx, empty(x.shape(), DType::kFloat32));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::lrn_backward(x.data<float>(), saved.tensors[1].data<float>(), gout[0].data<float>(), p, x.numel(),
                                 dx.data<float>(), stream));
  return emit_grad(call, grads, 0, dx, accumulate);
}

}  // namespace

std::vector<KernelEntry> norm_kernels() {
  constexpr DType f32 = DType::kFloat32;
  std::vector<KernelEntry> t;
  t.push_back({OpKind::kBatchNormalization,
               f32,
               {batchnorm_forward<float>, batchnorm_backward_op<float>, batchnorm_backward_op<float>,
                require_attrs<graph::BatchNormAttrs>, fresh_then_add<batchnorm_backward_op<float>>},
               5});
  // Mixed precision: BatchNorm follows a 16-bit input (cuDNN's 16-bit graphs, float32 statistics and
  // compute; scale, bias and running statistics float32).
  t.push_back(
      {OpKind::kBatchNormalization,
       DType::kBFloat16,
       {batchnorm_forward<__nv_bfloat16>, batchnorm_backward_op<__nv_bfloat16>, batchnorm_backward_op<__nv_bfloat16>,
        require_attrs<graph::BatchNormAttrs>, fresh_then_add<batchnorm_backward_op<__nv_bfloat16>>},
       5});
  t.push_back({OpKind::kBatchNormalization,
               DType::kFloat16,
               {batchnorm_forward<__half>, batchnorm_backward_op<__half>, batchnorm_backward_op<__half>,
                require_attrs<graph::BatchNormAttrs>, fresh_then_add<batchnorm_backward_op<__half>>},
               5});
  t.push_back({OpKind::kInstanceNormalization,
               f32,
               {instnorm_forward, instnorm_backward, instnorm_backward, require_attrs<graph::InstanceNormAttrs>},
               3});
  t.push_back({OpKind::kLRN, f32, {lrn_forward, lrn_backward, lrn_backward, require_attrs<graph::LrnAttrs>}, 1});
  t.push_back({OpKind::kLayerNormalization,
               f32,
               {layernorm_forward<float>, layernorm_backward<float>, layernorm_backward<float>,
                require_attrs<graph::LayerNormAttrs>},
               2});
  return t;
}

}  // namespace gp::exec::cuda
