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
  for (char const* u : {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Gelu", "Sqrt", "Erf", "Exp", "Log", "Abs", "Neg"})
    t.push_back({u, f32, unary, 1});
  return t;
}

}  // namespace gp::exec::cuda
