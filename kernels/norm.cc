#include "kernels/norm.h"

#include "kernels/optim.h"  // kParallelMin

namespace gp::kernels {

void lrn_forward(float const* x, hd::LrnParams const& p, int64_t n, float* y, float* d) {
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) hd::lrn_forward_at(x, p, y, d, i);
}

void lrn_backward(float const* x, float const* d, float const* dy, hd::LrnParams const& p, int64_t n, float* dx) {
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) hd::lrn_backward_at(x, d, dy, p, dx, i);
}

}  // namespace gp::kernels
