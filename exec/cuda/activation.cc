// The CUDA backend's activation family (the ops themselves: exec/cuda/activation.h).
#include "exec/cuda/activation.h"
#include "exec/cuda/cuda_ops.h"

namespace gp::exec::cuda {
namespace {

namespace kc = kernels::cuda;
namespace hd = kernels::hd;

}  // namespace

std::vector<KernelEntry> activation_kernels() {
  constexpr DType f32 = DType::kFloat32;
  OpKernels const unary{unary_forward<float>, unary_backward<float>, unary_backward<float>, no_check};
  std::vector<KernelEntry> t;
  for (OpKind u : {OpKind::kRelu, OpKind::kLeakyRelu, OpKind::kSigmoid, OpKind::kTanh, OpKind::kGelu, OpKind::kSqrt,
                   OpKind::kErf, OpKind::kExp, OpKind::kLog, OpKind::kAbs, OpKind::kNeg})
    t.push_back({u, f32, unary, 1});
  return t;
}

}  // namespace gp::exec::cuda
