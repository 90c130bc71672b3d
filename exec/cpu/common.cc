#include <cstring>

#include "exec/cpu/cpu_ops.h"
#include "kernels/vector_ops.h"

namespace gp::exec::cpu {

void add_into(Tensor& dst, Tensor const& src) {
  kernels::add_inplace(dst.data<float>(), src.data<float>(), dst.numel());
}

Tensor& grad_slot(std::vector<Tensor>& grads, std::size_t i, std::vector<int64_t> const& shape, bool accumulate) {
  if (grads.size() <= i) grads.resize(i + 1);
  if (!accumulate) grads[i] = Tensor(shape);
  return grads[i];
}

}  // namespace gp::exec::cpu
