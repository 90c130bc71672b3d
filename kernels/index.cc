#include "kernels/index.h"

#include "kernels/optim.h"  // kParallelMin

namespace gp::kernels {

void grid_sample_forward(float const* x, float const* grid, hd::GridSampleParams const& p, float* y) {
  int64_t const n = p.n * p.c * p.dout * p.ho * p.wo;
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t e = 0; e < n; ++e) hd::grid_sample_forward_at(x, grid, p, y, e);
}

void grid_sample_backward(float const* x, float const* grid, float const* dy, hd::GridSampleParams const& p, float* dx,
                          float* dgrid) {
  int64_t const planes = p.n * p.c, points = p.n * p.dout * p.ho * p.wo;
  // A plane's scatter stays in that plane: planes run in parallel, each in order (deterministic).
  if (dx) {
#pragma omp parallel for schedule(static) if (planes * p.dout * p.ho * p.wo >= kParallelMin)
    for (int64_t nc = 0; nc < planes; ++nc) hd::grid_sample_input_grad_plane(grid, dy, p, dx, nc);
  }
  if (dgrid) {
#pragma omp parallel for schedule(static) if (points * p.c >= kParallelMin)
    for (int64_t e = 0; e < points; ++e) hd::grid_sample_grid_grad_at(x, grid, dy, p, dgrid, e);
  }
}

void col2im(float const* x, hd::Col2ImParams const& p, float* y) {
  int64_t const n = p.n * p.c * hd::col2im_plane(p);
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t e = 0; e < n; ++e) hd::col2im_at(x, p, y, e);
}

void im2col(float const* dy, hd::Col2ImParams const& p, float* dx, bool accumulate) {
  int64_t const n = p.n * p.c * hd::col2im_taps(p) * hd::col2im_blocks(p);
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t e = 0; e < n; ++e) hd::im2col_at(dy, p, dx, e, accumulate);
}

}  // namespace gp::kernels
