// Gemm, MatMul, Einsum: MatMul's shape rule (graph/ops/linalg.h), import-time inference
// (graph/ops/infer.h) and cost (graph/ops/cost.h).
#include "graph/ops/linalg.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "graph/ops/einsum.h"
#include "graph/ops/registry.h"

namespace gp::graph::ops {

namespace {
std::vector<int64_t> swap_last_two(std::vector<int64_t> v) {
  std::swap(v[v.size() - 1], v[v.size() - 2]);
  return v;
}
}  // namespace

std::vector<int64_t> MatMulShapes::stored_a() const { return trans_a ? swap_last_two(a) : a; }
std::vector<int64_t> MatMulShapes::stored_b() const { return trans_b ? swap_last_two(b) : b; }

Result<MatMulShapes> matmul_shapes(std::vector<int64_t> a, std::vector<int64_t> b, bool trans_a, bool trans_b) {
  if (a.empty() || b.empty()) return invalid_argument("MatMul operands must have rank >= 1");
  if ((trans_a && a.size() < 2) || (trans_b && b.size() < 2))
    return invalid_argument("a transposed MatMul operand must have rank >= 2, got " + dims_str(trans_a ? a : b));
  if (trans_a) a = swap_last_two(std::move(a));
  if (trans_b) b = swap_last_two(std::move(b));
  bool const a1 = a.size() == 1, b1 = b.size() == 1;
  if (a1) a.insert(a.begin(), 1);
  if (b1) b.push_back(1);
  if (a.back() != b[b.size() - 2])
    return invalid_argument("inner dimensions differ: " + dims_str(a) + " x " + dims_str(b));
  MatMulShapes s;
  s.fold = b.size() == 2 && !b1 && !trans_a;
  s.trans_a = trans_a;
  s.trans_b = trans_b;
  std::size_t const rank = std::max(a.size(), b.size());
  a.insert(a.begin(), rank - a.size(), 1);
  b.insert(b.begin(), rank - b.size(), 1);
  std::vector<int64_t> batch(rank - 2);
  for (std::size_t i = 0; i + 2 < rank; ++i) {
    if (a[i] != b[i] && a[i] != 1 && b[i] != 1)
      return invalid_argument("batch dims do not broadcast: " + dims_str(a) + " x " + dims_str(b));
    batch[i] = a[i] == 1 ? b[i] : a[i];
  }
  s.a = a;
  s.b = b;
  s.y = batch;
  s.y.push_back(a[rank - 2]);
  s.y.push_back(b[rank - 1]);
  s.out = batch;
  if (!a1) s.out.push_back(a[rank - 2]);
  if (!b1) s.out.push_back(b[rank - 1]);
  return s;
}

Result<GemmDims> gemm_dims(std::vector<int64_t> const& a, std::vector<int64_t> const& b, bool trans_a, bool trans_b) {
  if (a.size() != 2 || b.size() != 2)
    return invalid_argument("A and B must be 2-D, got " + dims_string(a) + " and " + dims_string(b));
  GemmDims d;
  d.m = trans_a ? a[1] : a[0];
  d.k = trans_a ? a[0] : a[1];
  d.n = trans_b ? b[0] : b[1];
  if ((trans_b ? b[1] : b[0]) != d.k)
    return invalid_argument("inner dimensions differ: A " + dims_string(a) + ", B " + dims_string(b));
  return d;
}

namespace {

Result<Inferred> infer_gemm(InferContext const& c) {
  Inferred k;
  GemmAttrs a;
  a.alpha = static_cast<float>(c.attr_float("alpha", 1.0));
  a.beta = static_cast<float>(c.attr_float("beta", 1.0));
  a.trans_a = c.attr_int("transA", 0) != 0;
  a.trans_b = c.attr_int("transB", 0) != 0;
  a.has_bias = c.has(2);
  ASSIGN_OR_RETURN(GemmDims const d, gemm_dims(c.dims(0), c.dims(1), a.trans_a, a.trans_b));
  k.typed = a;
  k.data_inputs = all_slots(c);
  k.outs.push_back({c.dtype(0), {d.m, d.n}});
  return k;
}

Result<Inferred> infer_matmul(InferContext const& c) {
  Inferred k;
  MatMulAttrs a;
  a.trans_a = c.attr_int(kMatMulTransAAttr, 0) != 0;
  a.trans_b = c.attr_int(kMatMulTransBAttr, 0) != 0;
  a.alpha = static_cast<float>(c.attr_float(kMatMulAlphaAttr, 1.0));
  ASSIGN_OR_RETURN(MatMulShapes const s, matmul_shapes(c.dims(0), c.dims(1), a.trans_a, a.trans_b));
  k.typed = a;
  k.data_inputs = all_slots(c);
  k.outs.push_back({c.dtype(0), s.out});
  return k;
}

Result<Inferred> infer_einsum(InferContext const& c) {
  EinsumAttrs a;
  for (char ch : c.attr_string("equation", ""))
    if (ch != ' ') a.equation += ch;
  if (a.equation.empty()) return invalid_argument("Einsum needs an 'equation' attribute");
  std::vector<int64_t> ranks;
  std::vector<Dims> dims;
  for (std::size_t k = 0; k < c.inputs.size(); ++k) {
    if (!c.has(k)) return invalid_argument("Einsum: operand " + std::to_string(k) + " is missing");
    if (!is_float_dtype(c.dtype(k))) return unsupported("Einsum: only float operands are supported");
    ranks.push_back(c.rank(k));
    dims.push_back(c.dims(k));
  }
  ASSIGN_OR_RETURN(EinsumSpec spec, parse_einsum(a.equation, ranks));
  ASSIGN_OR_RETURN(std::vector<int64_t> size, einsum_label_sizes(spec, dims));
  Dims out;
  for (int l : spec.output) out.push_back(size[static_cast<std::size_t>(l)]);
  for (int l = 0; l < spec.num_labels; ++l)
    if (size[static_cast<std::size_t>(l)] < 0 &&
        std::find(spec.output.begin(), spec.output.end(), l) == spec.output.end())
      return unsupported("Einsum '" + a.equation +
                         "' sums over the batch dimension; keep the batch label in the output and reduce afterwards");
  Inferred k;
  k.typed = a;
  k.data_inputs = all_slots(c);
  k.outs.push_back({c.dtype(0), out});
  return k;
}

Result<std::vector<Dims>> gemm_run_shape(OpGraph const&, Op const& op, std::vector<Dims> const& in, int64_t) {
  RETURN_IF_ERROR(require_typed<GemmAttrs>(op));
  GemmAttrs const& a = std::get<GemmAttrs>(op.typed);
  Result<GemmDims> d = gemm_dims(in.at(0), in.at(1), a.trans_a, a.trans_b);
  if (!d) return op_error(op, d.status().message());
  return std::vector<Dims>{{d->m, d->n}};
}

Result<std::vector<Dims>> matmul_run_shape(OpGraph const&, Op const& op, std::vector<Dims> const& in, int64_t) {
  MatMulAttrs const a = matmul_attrs(op);
  ASSIGN_OR_RETURN(MatMulShapes s, matmul_shapes(in.at(0), in.at(1), a.trans_a, a.trans_b));
  return std::vector<Dims>{std::move(s.out)};
}

// ---- cost: 2 * output elements * K forward; backward the same per operand that needs a gradient,
// weight-grad for an operand without the batch dimension ----

OpCost product_cost(CostContext const& c, int64_t k, double fwd_extra_per_output) {
  OpCost r;
  double const out_e = c.elems(c.output0());
  if (k < 0) k = -k;
  double const mm = 2 * out_e * static_cast<double>(k);
  r.fwd_flops_per_sample = mm + fwd_extra_per_output * out_e;
  for (TensorId operand : {c.input(0), c.input(1)}) {
    if (c.needs_input_grad(operand)) {
      r.bwd_flops_per_sample += mm;
    } else if (c.needs_weight_grad(operand)) {
      r.bwd_flops_per_sample += mm;
      r.bwd_weight_flops_per_sample += mm;
    }
  }
  return r;
}

// Plus the bias (or C scaled by beta): an addition per output element, and its gradient.
OpCost gemm_cost(CostContext const& c) {
  auto const& a = c.tensors[c.input(0)].shape.dims;
  auto const* g = std::get_if<GemmAttrs>(&c.op.typed);
  OpCost r = product_cost(c, (g && g->trans_a) ? a[0] : a[1], 1);
  if (c.needs_weight_grad(c.input(2))) {
    double const out_e = c.elems(c.output0());
    r.bwd_flops_per_sample += out_e;
    r.bwd_weight_flops_per_sample += out_e;
  }
  return r;
}

OpCost matmul_cost(CostContext const& c) {
  auto const& a = c.tensors[c.input(0)].shape.dims;
  bool const trans_a = matmul_attrs(c.op).trans_a && a.size() >= 2;
  return product_cost(c, trans_a ? a[a.size() - 2] : a.back(), 0);
}

// 2 x the product of every label's size (the batch label counts once per sample); backward twice that.
OpCost einsum_cost(CostContext const& c) {
  OpCost r;
  auto const* a = std::get_if<EinsumAttrs>(&c.op.typed);
  std::vector<std::vector<int64_t>> dims;
  std::vector<int64_t> ranks;
  for (TensorId in : c.op.inputs)
    if (in != kNoTensor) {
      dims.push_back(c.tensors[in].shape.dims);
      ranks.push_back(static_cast<int64_t>(dims.back().size()));
    }
  if (a == nullptr) return r;
  auto spec = parse_einsum(a->equation, ranks);
  auto sizes = spec.is_ok() ? einsum_label_sizes(*spec, dims) : Result<std::vector<int64_t>>(spec.status());
  if (sizes.is_ok()) {
    double p = 1;
    for (int64_t d : *sizes) p *= d < 0 ? static_cast<double>(-d) : static_cast<double>(d);
    r.fwd_flops_per_sample = (dims.size() > 1 ? 2 : 1) * p;
    r.bwd_flops_per_sample = 2 * r.fwd_flops_per_sample;
  }
  return r;
}

}  // namespace

void register_linalg_ops(OpTable& t) {
  define(t, "Gemm", {.infer = infer_gemm, .cost = gemm_cost, .saved = save_inputs01, .run_shape = gemm_run_shape});
  define(t, "MatMul",
         {.infer = infer_matmul, .cost = matmul_cost, .saved = save_inputs01, .run_shape = matmul_run_shape});
  define(t, "Einsum", {.infer = infer_einsum, .cost = einsum_cost, .saved = save_input0});
}

}  // namespace gp::graph::ops
