// The CUDA backend's index family: Trilu (any of float32, int64, int32, bool; its gradient is the
// same mask on the output gradient), as the CPU's exec/cpu/index.cc computes it (the mask is
// kernels/hd/index.h's trilu_keeps). Pad, Tile, Resize, GatherElements, GatherND, Scatter and
// ScatterElements run on the CPU only for now.
#include "exec/cuda/cuda_ops.h"
#include "exec/cuda/ops_common.h"
#include "kernels/cuda/move.h"

namespace gp::exec::cuda {
namespace {

namespace kc = kernels::cuda;

template <typename T>
Result<Tensor> trilu_mask(OpCall const& call, Tensor const& x) {
  auto const& a = *attrs_of<graph::TriluAttrs>(call.op);
  if (x.rank() < 2) return op_error(call, "input " + x.shape_string() + " has rank below 2");
  int64_t const r = x.rank();
  int64_t const rows = x.dim(static_cast<int>(r - 2)), cols = x.dim(static_cast<int>(r - 1));
  int64_t const mats = rows * cols == 0 ? 0 : x.numel() / (rows * cols);
  ASSIGN_OR_RETURN(Tensor y, empty(x.shape(), x.dtype()));
  ASSIGN_OR_RETURN(cudaStream_t stream, compute_stream());
  GP_CUDA_CHECK(kc::trilu(x.data<T>(), mats, rows, cols, a.k, a.upper, y.data<T>(), stream));
  return y;
}

template <typename T>
Status trilu_forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) {
  ASSIGN_OR_RETURN(Tensor y, trilu_mask<T>(call, in[0]));
  out.assign(call.op.outputs.size(), Tensor());
  out[0] = y;
  if (saved) saved->tensors = {shape_tensor(in[0].shape())};
  return Status::ok();
}

Status trilu_backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                      std::vector<bool> const& wanted, std::vector<Tensor>& grads, bool accumulate) {
  if (!wants(wanted, 0)) return Status::ok();
  std::vector<int64_t> const in_shape = shape_of(saved.tensors.at(0));
  ASSIGN_OR_RETURN(Tensor dx, trilu_mask<float>(call, grad_or_zeros(call, gout, 0, in_shape)));
  return emit_grad(call, grads, 0, dx, accumulate);
}

Status trilu_check(graph::Op const& op, graph::OpGraph const& graph) {
  RETURN_IF_ERROR(require_attrs<graph::TriluAttrs>(op, graph));
  if (graph.tensor(op.inputs.at(0)).shape.dims.size() < 2)
    return invalid_argument("input " + graph.tensor(op.inputs.at(0)).shape.to_string() + " has rank below 2");
  return Status::ok();
}

}  // namespace

std::vector<KernelEntry> index_kernels() {
  std::vector<KernelEntry> t;
  t.push_back({OpKind::kTrilu, DType::kFloat32, {trilu_forward<float>, trilu_backward, trilu_backward, trilu_check}, 1});
  // Masks and ids: never differentiated.
  t.push_back({OpKind::kTrilu, DType::kInt64, {trilu_forward<int64_t>, no_gradient, no_gradient, trilu_check}, 1});
  t.push_back({OpKind::kTrilu, DType::kInt32, {trilu_forward<int32_t>, no_gradient, no_gradient, trilu_check}, 1});
  t.push_back({OpKind::kTrilu, DType::kBool, {trilu_forward<uint8_t>, no_gradient, no_gradient, trilu_check}, 1});
  return t;
}

}  // namespace gp::exec::cuda
