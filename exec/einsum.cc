#include "exec/einsum.h"

#include <algorithm>

#include "kernels/hd/move.h"

namespace gp::exec {
namespace {

using Labels = std::vector<int>;
using graph::ops::EinsumSpec;

bool has(Labels const& l, int x) { return std::find(l.begin(), l.end(), x) != l.end(); }

Labels unique(Labels const& l) {
  Labels u;
  for (int x : l)
    if (!has(u, x)) u.push_back(x);
  return u;
}

std::vector<int64_t> shape_for(Labels const& l, std::vector<int64_t> const& size) {
  std::vector<int64_t> s;
  for (int x : l) s.push_back(size[static_cast<std::size_t>(x)]);
  return s;
}

// Strides over label space: for each label the sum of the strides of the dims that carry it.
std::vector<int64_t> label_strides(Labels const& dims, std::vector<int64_t> const& shape, Labels const& space) {
  std::vector<int64_t> const st = kernels::hd::row_major_strides(shape);
  std::vector<int64_t> out(space.size(), 0);
  for (std::size_t i = 0; i < dims.size(); ++i)
    out[static_cast<std::size_t>(std::find(space.begin(), space.end(), dims[i]) - space.begin())] += st[i];
  return out;
}

// Forward: y[ly] = Σ x[lx] over the labels of lx not in ly (repeated labels: diagonals). Backward
// (the transpose): x[lx] = dy[ly] spread over those labels, zero off the diagonals. ly ⊆ lx.
Result<Tensor> reduce_labels(Tensor const& src, Labels const& from, Labels const& to, std::vector<int64_t> const& size,
                             bool backward, EinsumPrimitives const& ops) {
  Labels const space = unique(backward ? to : from);
  Labels const& xl = backward ? to : from;
  Labels const& yl = backward ? from : to;
  std::vector<int64_t> const x_shape = shape_for(xl, size), y_shape = shape_for(yl, size);
  if (!backward && from == to) return src;
  if (!backward && space.size() == from.size() && to.size() == from.size())  // a transpose
    return ops.permute(src, label_strides(from, x_shape, to), y_shape);
  std::vector<int64_t> const space_shape = shape_for(space, size);
  std::vector<int64_t> const xs = label_strides(xl, x_shape, space), ys = label_strides(yl, y_shape, space);
  if (backward) return ops.strided_sum(src, ys, xs, space_shape, x_shape);
  return ops.strided_sum(src, xs, ys, space_shape, y_shape);
}

// out[lo] = Σ a[la] · b[lb] over the labels not in lo; every label of lo is in la or lb.
Result<Tensor> contract(Tensor const& a, Labels const& la, Tensor const& b, Labels const& lb, Labels const& lo,
                        std::vector<int64_t> const& size, EinsumPrimitives const& ops) {
  Labels ra, rb;  // the labels each operand keeps: those the other operand or the output needs
  for (int x : unique(la))
    if (has(lb, x) || has(lo, x)) ra.push_back(x);
  for (int x : unique(lb))
    if (has(la, x) || has(lo, x)) rb.push_back(x);
  Labels batch, m, k, n;
  for (int x : ra) (has(rb, x) ? (has(lo, x) ? batch : k) : m).push_back(x);
  for (int x : rb)
    if (!has(ra, x)) n.push_back(x);
  auto cat = [](std::initializer_list<Labels const*> parts) {
    Labels l;
    for (Labels const* p : parts) l.insert(l.end(), p->begin(), p->end());
    return l;
  };
  Labels const a_order = cat({&batch, &m, &k}), b_order = cat({&batch, &k, &n}), c_order = cat({&batch, &m, &n});
  ASSIGN_OR_RETURN(Tensor const ar, reduce_labels(a, la, ra, size, false, ops));
  ASSIGN_OR_RETURN(Tensor const ap, reduce_labels(ar, ra, a_order, size, false, ops));
  ASSIGN_OR_RETURN(Tensor const br, reduce_labels(b, lb, rb, size, false, ops));
  ASSIGN_OR_RETURN(Tensor const bp, reduce_labels(br, rb, b_order, size, false, ops));
  auto prod = [&](Labels const& l) {
    int64_t p = 1;
    for (int x : l) p *= size[static_cast<std::size_t>(x)];
    return p;
  };
  ASSIGN_OR_RETURN(Tensor c, ops.batched_gemm(ap, bp, prod(batch), prod(m), prod(k), prod(n)));
  c = c.reshaped(shape_for(c_order, size));
  return reduce_labels(c, c_order, lo, size, false, ops);
}

}  // namespace

bool einsum_sum_plan(std::vector<int64_t> const& src_strides, std::vector<int64_t> const& out_strides,
                     std::vector<int64_t> const& space, EinsumSumPlan& plan) {
  std::vector<int64_t> kept, kept_src, kept_out, summed, summed_src;
  for (std::size_t i = 0; i < space.size(); ++i) {
    if (out_strides[i] != 0) {
      kept.push_back(space[i]), kept_src.push_back(src_strides[i]), kept_out.push_back(out_strides[i]);
    } else {
      summed.push_back(space[i]), summed_src.push_back(src_strides[i]);
    }
  }
  plan = EinsumSumPlan{};
  plan.targets = kernels::hd::numel_of(kept);
  plan.copy_only = summed.empty();
  if (plan.copy_only) return kernels::hd::make_strided(kept, kept_src, kept_out, plan.copy);
  plan.reduce.reduced_count = kernels::hd::numel_of(summed);
  return kernels::hd::make_strided(kept, kept_src, kept_out, plan.reduce.out) &&
         kernels::hd::make_strided(summed, summed_src, std::vector<int64_t>(summed.size(), 0), plan.reduce.reduced);
}

Status einsum_check(graph::Op const& op, graph::OpGraph const& graph) {
  RETURN_IF_ERROR(require_attrs<graph::EinsumAttrs>(op, graph));
  if (op.inputs.empty() || op.inputs.size() > 2)
    return unsupported("Einsum with " + std::to_string(op.inputs.size()) +
                       " operands (one or two are supported; chain two-operand Einsums)");
  for (graph::TensorId t : op.inputs) {
    if (t == graph::kNoTensor) return unsupported("an operand is missing");
    if (graph.tensor(t).dtype != DType::kFloat32)
      return unsupported(std::string("an operand has dtype ") + graph::dtype_name(graph.tensor(t).dtype) +
                         " (only float32)");
  }
  return Status::ok();
}

Status einsum_setup(OpCall const& call, std::vector<Tensor> const& in, EinsumSpec& spec, std::vector<int64_t>& size) {
  auto const& at = *attrs_of<graph::EinsumAttrs>(call.op);
  std::vector<int64_t> ranks;
  std::vector<std::vector<int64_t>> dims;
  for (Tensor const& t : in) {
    ranks.push_back(t.rank());
    dims.push_back(t.shape());
  }
  auto parsed = graph::ops::parse_einsum(at.equation, ranks);
  if (!parsed.is_ok()) return op_error(call, parsed.status().message());
  spec = *parsed;
  auto sizes = graph::ops::einsum_label_sizes(spec, dims);
  if (!sizes.is_ok()) return op_error(call, sizes.status().message());
  size = *sizes;
  return Status::ok();
}

Result<Tensor> einsum_forward(std::vector<Tensor> const& in, EinsumSpec const& spec, std::vector<int64_t> const& size,
                              EinsumPrimitives const& ops) {
  if (in.size() == 1) return reduce_labels(in[0], spec.inputs[0], spec.output, size, false, ops);
  return contract(in[0], spec.inputs[0], in[1], spec.inputs[1], spec.output, size, ops);
}

Result<Tensor> einsum_gradient(std::vector<Tensor> const& in, std::size_t i, Tensor const& dy, EinsumSpec const& spec,
                               std::vector<int64_t> const& size, EinsumPrimitives const& ops) {
  Labels const& li = spec.inputs[i];
  if (in.size() == 1) return reduce_labels(dy, spec.output, li, size, true, ops);
  std::size_t const o = 1 - i;
  Labels const& lo = spec.inputs[o];
  // The other operand reduced as in forward; its gradient contraction yields this operand's kept
  // labels, which the reduction's transpose spreads back over li.
  Labels ri, ro;
  for (int x : unique(li))
    if (has(lo, x) || has(spec.output, x)) ri.push_back(x);
  for (int x : unique(lo))
    if (has(li, x) || has(spec.output, x)) ro.push_back(x);
  ASSIGN_OR_RETURN(Tensor const other, reduce_labels(in[o], lo, ro, size, false, ops));
  ASSIGN_OR_RETURN(Tensor const g, contract(dy, spec.output, other, ro, ri, size, ops));
  return reduce_labels(g, ri, li, size, true, ops);
}

}  // namespace gp::exec
