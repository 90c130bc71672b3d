#include <cstring>

#include "exec/cpu/cpu_ops.h"
#include "kernels/bf16.h"
#include "kernels/vector_ops.h"

namespace gp::exec::cpu {

void add_into(Tensor& dst, Tensor const& src) {
  kernels::add_inplace(dst.data<float>(), src.data<float>(), dst.numel());
}

Tensor& grad_slot(std::vector<Tensor>& grads, std::size_t i, std::vector<int64_t> const& shape, bool accumulate,
                  DType dtype) {
  if (grads.size() <= i) grads.resize(i + 1);
  if (!accumulate) grads[i] = Tensor(shape, dtype);
  return grads[i];
}

Tensor convert_float(Tensor const& x, DType to) {
  if (x.dtype() == to) return x;
  Tensor y(x.shape(), to);
  if (to == DType::kBFloat16)
    kernels::float_to_bf16(x.data<float>(), x.numel(), y.data<uint16_t>());
  else
    kernels::bf16_to_float(x.data<uint16_t>(), x.numel(), y.data<float>());
  return y;
}

}  // namespace gp::exec::cpu
