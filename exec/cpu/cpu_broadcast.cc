#include "exec/cpu/cpu_broadcast.h"

#include "kernels/move.h"

namespace gp::exec::cpu {
namespace {

using dnnl::algorithm;

struct BinaryPrim {
  dnnl::binary::primitive_desc pd;
  dnnl::binary prim;
};

}  // namespace

// dst = a ∘ b where a has the output shape and b broadcasts to it.
Tensor binary_full(algorithm alg, Tensor const& a, Tensor const& b) {
  std::vector<int64_t> const shape = a.shape();
  std::vector<int64_t> const b_shape = kernels::pad_shape(b.shape(), shape.size());
  Tensor y(shape);
  if (y.numel() == 0) return y;
  auto e = dnnl_ctx::cached<BinaryPrim>(dnnl_ctx::key("binary", static_cast<int>(alg), shape, b_shape), [&] {
    dnnl::binary::desc d(alg, dnnl_ctx::plain_md(shape), dnnl_ctx::plain_md(b_shape), dnnl_ctx::plain_md(shape));
    dnnl::binary::primitive_desc pd(d, dnnl_ctx::engine());
    return BinaryPrim{pd, dnnl::binary(pd)};
  });
  dnnl_ctx::run(e->prim, {{DNNL_ARG_SRC_0, dnnl_ctx::mem(dnnl_ctx::plain_md(shape), a.raw())},
                          {DNNL_ARG_SRC_1, dnnl_ctx::mem(dnnl_ctx::plain_md(b_shape), b.raw())},
                          {DNNL_ARG_DST, dnnl_ctx::mem(dnnl_ctx::plain_md(shape), y.raw())}});
  return y;
}

Tensor expanded(Tensor const& x, std::vector<int64_t> const& shape) {
  if (x.shape() == shape) return x;
  Tensor y(shape);
  kernels::expand(x.data<float>(), x.shape(), y.data<float>(), shape);
  return y;
}

}  // namespace gp::exec::cpu
