// cuDNN graphs (through cudnn-frontend) for Conv fprop/dgrad/wgrad and BatchNormalization, fp32
// NCHW-contiguous. cudnn_graphs.cc is the only translation unit that includes cudnn_frontend.h
// (~30 s to compile): this header holds our own types only.
//
// Each graph is validated, lowered, given plans from heuristics A then FALLBACK, checked, built
// and its workspace sized once per key (op, dims, strides, dtype, conv parameters, epsilon and
// momentum, device), in a thread_local cache (plans are not promised to be thread-safe), and,
// with a plan cache folder (GP_CUDNN_PLAN_CACHE; on by default, "off" disables it), stored on disk, from where the
// next run on the same GPU model and library versions loads it instead of building it.
//
// When cuDNN cannot run a graph (build_operation_graph, create_execution_plans, check_support or
// build_plans fails: "not supported", no engine config for the shape) the call returns
// kUnsupported naming the graph and cuDNN's message. That answer is cached like a plan, so cuDNN
// is asked once per key and thread, and the refusal is logged then, at debug level. Conv has no
// fallback (the backend reports the op as unsupported at its first run, with that reason);
// BatchNormalization's caller (exec/cuda/norm.cc) runs our own kernels instead. Any other
// failure (execute, workspace) is kInternal.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "exec/cuda/conv_shape.h"

namespace gp::exec::cuda {

// Builds the conv fprop graph for `s` (its y is ignored) and runs validate() only: cuDNN's
// inferred output dims. Works without a GPU (no handle is made).
Result<std::vector<int64_t>> cudnn_conv_output_dims(ConvShape const& s);

// Enqueued on the current context's compute stream; outputs are overwritten.
template <typename T>
Status conv_fprop(ConvShape const& s, T const* x, T const* w, T* y);
template <typename T>
Status conv_dgrad(ConvShape const& s, T const* dy, T const* w, T* dx);
template <typename T>
Status conv_wgrad(ConvShape const& s, T const* x, T const* dy, T* dw);

// BatchNormalization on x [N,C,...] (rank 2 to 5); per-channel vectors have C elements.
struct BnTrainPtrs {
  void const *x, *scale, *bias, *running_mean, *running_var;
  void *y, *mean, *inv_variance, *next_running_mean, *next_running_var;
};
struct BnInferPtrs {
  void const *x, *scale, *bias, *mean, *inv_variance;
  void* y;
};
struct BnBackwardPtrs {
  void const *dy, *x, *scale, *mean, *inv_variance;
  void *dx, *dscale, *dbias;
};
// exp_avg_factor is cuDNN's: next = (1 - f)·running + f·batch statistic (ONNX momentum = 1 - f).
template <typename T>
Status batchnorm_train(std::vector<int64_t> const& x_shape, float epsilon, float exp_avg_factor, BnTrainPtrs const& p);
template <typename T>
Status batchnorm_infer(std::vector<int64_t> const& x_shape, BnInferPtrs const& p);
template <typename T>
Status batchnorm_backward(std::vector<int64_t> const& x_shape, BnBackwardPtrs const& p);

// Plans kept across runs (exec/cuda/plan_disk_cache.h): the folder, by default the environment's
// (GP_CUDNN_PLAN_CACHE: a folder; unset or "on" for $GP_CACHE_DIR or $HOME/.cache/graphpipe,
// /cudnn-plans; "off": none); empty: none.
void set_cudnn_plan_cache_folder(std::string folder);
// GP_CUDNN_DETERMINISTIC=1 in the environment: every CUDA backend of the process uses deterministic
// cuDNN engines (CudaBackendOptions::deterministic; part of every plan's key).
bool deterministic_from_environment();
// Plans built with cuDNN's heuristics, loaded from disk, and stored to disk, by this process.
struct CudnnPlanCounts {
  int64_t built = 0, loaded = 0, stored = 0;
};
CudnnPlanCounts cudnn_plan_counts();
// Drops the calling thread's plans from memory (tests: the next call loads or builds again).
void clear_cudnn_plans_of_this_thread();

// Tests only: while set, the three BatchNormalization calls above answer kUnsupported without
// asking cuDNN, as cuDNN does for a shape it refuses, so that the fallback runs on any shape.
void refuse_cudnn_batchnorm_for_testing(bool refuse);

// Which kernels train BatchNormalization (exec/cuda/norm.cc): cuDNN's graphs above (the default),
// falling back to ours where cuDNN refuses a shape, or ours for every shape (kernels/cuda/norm.cu:
// each channel split over blocks; host-tested, not yet run on a GPU). The environment variable
// GP_CUDA_BATCHNORM=ours picks ours at start (bin/gpu-check and bench/gpu compare the two); tests
// set it.
enum class BatchNormKernels { kOurs, kCudnn };
BatchNormKernels batchnorm_kernels();
void set_batchnorm_kernels(BatchNormKernels k);

}  // namespace gp::exec::cuda
