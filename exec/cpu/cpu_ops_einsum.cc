// Einsum on the CPU for one or two operands. Each operand is first reduced to the labels the
// contraction needs (diagonals and sums: one odometer loop), then the pair is permuted to
// [batch, M, K] · [batch, K, N] and multiplied with oneDNN matmul. The backward pass is the same
// machinery with the output gradient as an operand, then the reduction's transpose.
#include <algorithm>

#include "exec/cpu/cpu_gemm.h"
#include "exec/cpu/cpu_ops_einsum.h"
#include "graph/ops/einsum.h"
#include "kernels/strided.h"

namespace gp::exec::cpu {
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
  std::vector<int64_t> const st = kernels::contiguous_strides(shape);
  std::vector<int64_t> out(space.size(), 0);
  for (std::size_t i = 0; i < dims.size(); ++i)
    out[static_cast<std::size_t>(std::find(space.begin(), space.end(), dims[i]) - space.begin())] += st[i];
  return out;
}

// Forward: y[ly] = Σ x[lx] over the labels of lx not in ly (repeated labels: diagonals). Backward
// (the transpose): x[lx] = dy[ly] spread over those labels, zero off the diagonals. ly ⊆ lx.
Tensor reduce_labels(Tensor const& src, Labels const& from, Labels const& to, std::vector<int64_t> const& size,
                     bool backward) {
  Labels const space = unique(backward ? to : from);
  Labels const& xl = backward ? to : from;
  Labels const& yl = backward ? from : to;
  std::vector<int64_t> const x_shape = shape_for(xl, size), y_shape = shape_for(yl, size);
  if (!backward && from == to) return src;
  if (!backward && space.size() == from.size() && to.size() == from.size()) {  // a transpose
    Tensor out(y_shape);
    kernels::strided_copy(src.data<float>(), label_strides(from, x_shape, to), out.data<float>(),
                          kernels::contiguous_strides(y_shape), y_shape);
    return out;
  }
  Tensor out = Tensor::zeros(backward ? x_shape : y_shape);
  std::vector<int64_t> const space_shape = shape_for(space, size);
  std::vector<int64_t> const xs = label_strides(xl, x_shape, space), ys = label_strides(yl, y_shape, space);
  // Both walks as one strided add over label space: dst[idx · dst_strides] += src[idx · src_strides].
  if (backward)
    kernels::strided_add(src.data<float>(), ys, out.data<float>(), xs, space_shape);
  else
    kernels::strided_add(src.data<float>(), xs, out.data<float>(), ys, space_shape);
  return out;
}

// out[lo] = Σ a[la] · b[lb] over the labels not in lo; every label of lo is in la or lb.
Tensor contract(Tensor const& a, Labels const& la, Tensor const& b, Labels const& lb, Labels const& lo,
                std::vector<int64_t> const& size) {
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
  Tensor const ap = reduce_labels(reduce_labels(a, la, ra, size, false), ra, a_order, size, false);
  Tensor const bp = reduce_labels(reduce_labels(b, lb, rb, size, false), rb, b_order, size, false);
  auto prod = [&](Labels const& l) {
    int64_t p = 1;
    for (int x : l) p *= size[static_cast<std::size_t>(x)];
    return p;
  };
  int64_t const nb = prod(batch), nm = prod(m), nk = prod(k), nn = prod(n);
  Tensor c(shape_for(c_order, size));
  gemm(batched(ap.raw(), nb, nm, nk), batched(bp.raw(), nb, nk, nn), batched(c.raw(), nb, nm, nn), false);
  return reduce_labels(c, c_order, lo, size, false);
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

Status einsum_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  EinsumSpec spec;
  std::vector<int64_t> size;
  RETURN_IF_ERROR(einsum_setup(call, in, spec, size));
  Tensor y = in.size() == 1 ? reduce_labels(in[0], spec.inputs[0], spec.output, size, false)
                            : contract(in[0], spec.inputs[0], in[1], spec.inputs[1], spec.output, size);
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y.raw() == in[0].raw() ? y.clone() : y;
  if (saved) saved->tensors = in;
  return Status::ok();
}

Status einsum_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                       std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (gout.empty() || !gout[0].defined()) return Status::ok();
  std::vector<Tensor> const& in = saved.tensors;
  EinsumSpec spec;
  std::vector<int64_t> size;
  RETURN_IF_ERROR(einsum_setup(call, in, spec, size));
  Tensor const& dy = gout[0];
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (!wants(wanted, i)) continue;
    Labels const& li = spec.inputs[i];
    Tensor g;
    if (in.size() == 1) {
      g = reduce_labels(dy, spec.output, li, size, true);
    } else {
      std::size_t const o = 1 - i;
      Labels const& lo = spec.inputs[o];
      // The other operand reduced as in forward; its gradient contraction yields this operand's
      // kept labels, which the reduction's transpose spreads back over li.
      Labels ri, ro;
      for (int x : unique(li))
        if (has(lo, x) || has(spec.output, x)) ri.push_back(x);
      for (int x : unique(lo))
        if (has(li, x) || has(spec.output, x)) ro.push_back(x);
      Tensor const other = reduce_labels(in[o], lo, ro, size, false);
      g = reduce_labels(contract(dy, spec.output, other, ro, ri, size), ri, li, size, true);
    }
    RETURN_IF_ERROR(emit_grad(call, grads, i, g, accumulate));
  }
  return Status::ok();
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

}  // namespace

CpuKernelEntry einsum_kernel_entry() { return {{einsum_forward, einsum_backward, einsum_backward, einsum_check}, 1}; }

}  // namespace gp::exec::cpu
