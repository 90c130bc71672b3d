#include "exec/cpu/cpu_gemm.h"

#include <utility>

#include "exec/cpu/dnnl_context.h"

namespace gp::exec::cpu {
namespace {

struct GemmPrim {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
};

// oneDNN wants a non-zero stride on size-1 dims; any value is valid there.
std::vector<int64_t> fixed_strides(MatView const& v) {
  std::vector<int64_t> s = v.strides;
  for (std::size_t i = 0; i < s.size(); ++i)
    if (v.dims[i] == 1 && s[i] == 0) s[i] = 1;
  return s;
}

}  // namespace

MatView mat(void const* data, int64_t rows, int64_t cols, int64_t ld) { return {data, {rows, cols}, {ld, 1}}; }

MatView batched(void const* data, int64_t batch, int64_t rows, int64_t cols) {
  return {data, {batch, rows, cols}, {rows * cols, cols, 1}};
}

MatView transposed(MatView v) {
  std::size_t const n = v.dims.size();
  std::swap(v.dims[n - 1], v.dims[n - 2]);
  std::swap(v.strides[n - 1], v.strides[n - 2]);
  return v;
}

void gemm(MatView const& a, MatView const& b, MatView const& c, bool accumulate) {
  std::size_t const n = c.dims.size();
  int64_t cells = 1;
  for (int64_t d : c.dims) cells *= d;
  if (cells == 0) return;
  if (a.dims[n - 1] == 0) {  // empty inner dimension: the product is zero
    if (accumulate) return;
    float* p = static_cast<float*>(const_cast<void*>(c.data));
    int64_t const batch = n == 3 ? c.dims[0] : 1, bs = n == 3 ? c.strides[0] : 0;
    for (int64_t q = 0; q < batch; ++q)
      for (int64_t i = 0; i < c.dims[n - 2]; ++i)
        for (int64_t j = 0; j < c.dims[n - 1]; ++j) p[q * bs + i * c.strides[n - 2] + j * c.strides[n - 1]] = 0.f;
    return;
  }
  std::vector<int64_t> const as = fixed_strides(a), bs = fixed_strides(b), cs = fixed_strides(c);
  IntKey const k = dnnl_ctx::key("gemm_view", a.dims, as, b.dims, bs, c.dims, cs, accumulate);
  auto e = dnnl_ctx::cached<GemmPrim>(k, [&] {
    dnnl::primitive_attr attr;
    if (accumulate) {
      dnnl::post_ops po;
      po.append_sum(1.f);
      attr.set_post_ops(po);
    }
    dnnl::matmul::desc d(dnnl_ctx::strided_md(a.dims, as), dnnl_ctx::strided_md(b.dims, bs),
                         dnnl_ctx::strided_md(c.dims, cs));
    dnnl::matmul::primitive_desc pd(d, attr, dnnl_ctx::engine());
    return GemmPrim{pd, dnnl::matmul(pd)};
  });
  dnnl_ctx::run(e->prim, {{DNNL_ARG_SRC, dnnl_ctx::mem(e->pd.src_desc(), a.data)},
                          {DNNL_ARG_WEIGHTS, dnnl_ctx::mem(e->pd.weights_desc(), b.data)},
                          {DNNL_ARG_DST, dnnl_ctx::mem(e->pd.dst_desc(), c.data)}});
}

}  // namespace gp::exec::cpu
