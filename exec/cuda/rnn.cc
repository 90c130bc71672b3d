// The CUDA backend's rnn family: LSTM, GRU and RNN as exec/rnn_plan.h's sequencing on cuBLASLt (one
// product per step and direction, strided views of the gate blocks) and kernels/cuda/rnn.cu's step
// kernels. Same inputs, outputs and gradients as the CPU's exec/cpu/rnn.cc.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "exec/cuda/cublaslt_gemm.h"
#include "exec/cuda/gemm_mapping.h"
#include "exec/cuda/ops_common.h"
#include "exec/cuda/ops_shared.h"
#include "exec/rnn_plan.h"
#include "kernels/cuda/move.h"
#include "kernels/cuda/rnn.h"
#include "kernels/hd/move.h"

namespace gp::exec::cuda {
namespace {

namespace kc = kernels::cuda;
namespace hd = kernels::hd;
using graph::RnnAttrs;
using graph::RnnKind;

Status rnn_gemm(RnnMat const& a, RnnMat const& b, float* c, int64_t ldc, bool accumulate) {
  if (a.rows == 0 || b.cols == 0) return Status::ok();
  if (a.cols == 0) {  // an empty sum: c is zero, or unchanged when accumulating
    if (accumulate) return Status::ok();
    ASSIGN_OR_RETURN(cudaStream_t s, compute_stream());
    std::size_t const row = static_cast<std::size_t>(b.cols) * sizeof(float);
    GP_CUDA_CHECK(cudaMemset2DAsync(c, static_cast<std::size_t>(ldc) * sizeof(float), 0, row,
                                    static_cast<std::size_t>(a.rows), s));
    return Status::ok();
  }
  GemmPlan plan;
  plan.calls.push_back(
      strided_rowmajor_call(Buf::kA, a.t, a.ld, Buf::kB, b.t, b.ld, Buf::kY, ldc, a.rows, b.cols, a.cols, accumulate));
  GemmBuffers buf;
  buf.set(Buf::kA, a.p);
  buf.set(Buf::kB, b.p);
  buf.set(Buf::kY, c);
  return run_gemm_plan<float>(plan, buf);
}

Result<Tensor> rnn_permute(Tensor const& x, std::vector<int64_t> const& perm) {
  std::vector<int64_t> const in_strides = hd::row_major_strides(x.shape());
  std::vector<int64_t> shape, strides;
  for (int64_t p : perm) {
    shape.push_back(x.shape()[static_cast<std::size_t>(p)]);
    strides.push_back(in_strides[static_cast<std::size_t>(p)]);
  }
  hd::StridedParams p;
  if (!hd::make_strided(shape, strides, hd::row_major_strides(shape), p))
    return internal_error("rnn: a permutation of more than " + std::to_string(hd::kMaxRank) + " dims");
  ASSIGN_OR_RETURN(Tensor y, empty(shape));
  if (y.numel() == 0) return y;
  ASSIGN_OR_RETURN(cudaStream_t s, compute_stream());
  GP_CUDA_CHECK(kc::strided_copy(x.data<float>(), y.data<float>(), p, false, s));
  return y;
}

Status rnn_copy(float const* src, float* dst, int64_t n) {
  if (n == 0) return Status::ok();
  ASSIGN_OR_RETURN(cudaStream_t s, compute_stream());
  GP_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(n) * sizeof(float), cudaMemcpyDeviceToDevice, s));
  return Status::ok();
}

// sequence_lens is small: one synchronising read, as the index ops' range check.
Result<std::vector<int64_t>> rnn_host_ints(Tensor const& lens) {
  std::vector<int64_t> v(static_cast<std::size_t>(lens.numel()));
  if (v.empty()) return v;
  ASSIGN_OR_RETURN(cudaStream_t s, compute_stream());
  if (lens.dtype() == DType::kInt64) {
    GP_CUDA_CHECK(cudaMemcpyAsync(v.data(), lens.raw(), lens.nbytes(), cudaMemcpyDeviceToHost, s));
    GP_CUDA_CHECK(cudaStreamSynchronize(s));
    return v;
  }
  std::vector<int32_t> v32(v.size());
  GP_CUDA_CHECK(cudaMemcpyAsync(v32.data(), lens.raw(), lens.nbytes(), cudaMemcpyDeviceToHost, s));
  GP_CUDA_CHECK(cudaStreamSynchronize(s));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = v32[i];
  return v;
}

// A step kernel's launcher as a primitive: on the compute stream, its launch error as a Status.
template <typename Step>
auto on_stream(cudaError_t (*launch)(Step const&, cudaStream_t)) {
  return [launch](Step const& st) -> Status {
    ASSIGN_OR_RETURN(cudaStream_t s, compute_stream());
    GP_CUDA_CHECK(launch(st, s));
    return Status::ok();
  };
}

RnnPrimitives const& cuda_rnn_primitives() {
  static RnnPrimitives const prims = [] {
    RnnPrimitives p;
    p.gemm = rnn_gemm;
    p.zeros = [](std::vector<int64_t> const& shape) { return zeros(shape); };
    p.permute = rnn_permute;
    p.copy = rnn_copy;
    p.host_ints = rnn_host_ints;
    p.lstm_forward = on_stream(kc::lstm_forward_step);
    p.lstm_backward = on_stream(kc::lstm_backward_step);
    p.lstm_peephole_grad = [](hd::LstmBackStep const& st, float* dp) -> Status {
      ASSIGN_OR_RETURN(cudaStream_t s, compute_stream());
      GP_CUDA_CHECK(kc::lstm_peephole_grad_step(st, dp, s));
      return Status::ok();
    };
    p.gru_gates = on_stream(kc::gru_gates_step);
    p.gru_output = on_stream(kc::gru_output_step);
    p.gru_backward = on_stream(kc::gru_backward_step);
    p.gru_reset_grad = on_stream(kc::gru_reset_grad_step);
    p.rnn_forward = on_stream(kc::rnn_forward_step);
    p.rnn_backward = on_stream(kc::rnn_backward_step);
    p.col_sums = [](float const* src, int64_t rows, int64_t cols, int64_t ld, float* dst) -> Status {
      ASSIGN_OR_RETURN(cudaStream_t s, compute_stream());
      GP_CUDA_CHECK(kc::rnn_col_sums(src, rows, cols, ld, dst, s));
      return Status::ok();
    };
    return p;
  }();
  return prims;
}

Status rnn_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  return rnn_plan_forward(call, in, out, saved, cuda_rnn_primitives());
}

Status rnn_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                    std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  std::vector<Tensor> g;
  RETURN_IF_ERROR(rnn_plan_grads(call, saved, gout, wanted, g, cuda_rnn_primitives()));
  for (std::size_t i = 0; i < g.size(); ++i)
    if (g[i].defined()) RETURN_IF_ERROR(emit_grad(call, grads, i, g[i], accumulate));
  return Status::ok();
}

}  // namespace

std::vector<KernelEntry> rnn_kernels() {
  // One pass through time computes every gradient: B's set, W's added (fresh_then_add).
  OpKernels const rnn{rnn_forward, rnn_backward, rnn_backward, rnn::check, fresh_then_add<rnn_backward>};
  return {{OpKind::kLSTM, DType::kFloat32, rnn, 3},
          {OpKind::kGRU, DType::kFloat32, rnn, 3},
          {OpKind::kRNN, DType::kFloat32, rnn, 3}};
}

}  // namespace gp::exec::cuda
