// Pooling: the window every backend shares (graph/ops/pool.h), import-time inference
// (graph/ops/infer.h) and cost (graph/ops/cost.h).
#include "graph/ops/pool.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "graph/ops/registry.h"

namespace gp::graph::ops {

Status pool_check(Op const& op, OpGraph const& graph) {
  RETURN_IF_ERROR(require_typed<PoolAttrs>(op));
  int64_t const rank = graph.tensor(op.inputs.at(0)).shape.rank();
  if (rank < 3 || rank > 5)
    return unsupported(op.type + " '" + op.name + "' has " + std::to_string(rank - 2) +
                       " spatial dims (1 to 3 supported)");
  return Status::ok();
}

Result<PoolWindow> pool_window(Op const& op, std::vector<int64_t> const& x_shape) {
  auto const& a = std::get<PoolAttrs>(op.typed);
  std::string const input = " (input " + dims_string(x_shape) + ")";
  if (x_shape.size() < 3 || x_shape.size() > 5)
    return op_error(op, "needs an input of rank 3 to 5 (N, C, 1 to 3 spatial dims)" + input);
  std::size_t const sp = x_shape.size() - 2;
  bool const global = a.kind == PoolKind::kGlobalAverage;
  if (!global && a.kernel.size() < sp) return op_error(op, "kernel_shape has fewer entries than spatial dims" + input);
  PoolWindow w;
  w.out_shape = {x_shape[0], x_shape[1]};
  for (std::size_t i = 0; i < sp; ++i) {
    int64_t const in = x_shape[2 + i];
    int64_t const k = global ? in : a.kernel[i];
    int64_t const s = global ? 1 : (i < a.strides.size() ? a.strides[i] : 1);
    int64_t const d = global ? 1 : (i < a.dilations.size() ? a.dilations[i] : 1);
    int64_t const pl = !global && i < a.pads.size() / 2 ? a.pads[i] : 0;
    int64_t const pr = !global && i < a.pads.size() / 2 ? a.pads[i + a.pads.size() / 2] : 0;
    if (s <= 0 || k <= 0 || d <= 0) return op_error(op, "kernel, strides and dilations must be positive" + input);
    int64_t const out = window_outputs(in, k, s, d, pl, pr, a.ceil_mode && !global);
    if (out <= 0) return op_error(op, "kernel larger than the padded input" + input);
    w.out_shape.push_back(out);
    w.kernel.push_back(k);
    w.strides.push_back(s);
    w.dilations.push_back(d);
    w.pads_begin.push_back(pl);
    w.pads_end.push_back(window_end_pad(in, k, s, d, pl, out));
    w.counted_pads_end.push_back(pr);
  }
  return w;
}

// ---- import-time inference ----
namespace {

Result<Inferred> infer_pool(InferContext const& c) {
  Inferred k;
  Dims const& x = c.dims(0);
  std::size_t const sp = x.size() - 2;
  PoolAttrs a;
  a.kind = c.type == "MaxPool" ? PoolKind::kMax : PoolKind::kAverage;
  auto kernel = c.attr_ints("kernel_shape");
  if (!kernel) return invalid_argument("kernel_shape is missing");
  a.kernel = *kernel;
  a.strides = c.attr_ints("strides").value_or(Dims(sp, 1));
  Dims const dil = c.attr_ints("dilations").value_or(Dims(sp, 1));
  if (std::any_of(dil.begin(), dil.end(), [](int64_t d) { return d != 1; })) a.dilations = dil;
  a.ceil_mode = c.attr_int("ceil_mode", 0) != 0;
  a.count_include_pad = c.attr_int("count_include_pad", 0) != 0;
  ASSIGN_OR_RETURN(Window w, sliding_window(c, Dims(x.begin() + 2, x.end()), a.kernel, a.strides, dil, a.ceil_mode));
  a.pads = w.pads;
  Dims out = {x[0], x[1]};
  out.insert(out.end(), w.out.begin(), w.out.end());
  k.typed = a;
  k.data_inputs = {0};
  k.outs.push_back({c.dtype(0), out});
  // MaxPool's Indices (torch's return_indices; MaxUnpool scatters by them): each output's arg-max
  // as an index into the whole input flattened, int64, computed forward only.
  // storage_order 1 counts the spatial position column-major (the first spatial dim fastest).
  if (a.kind == PoolKind::kMax && c.outputs.size() > 1 && !c.outputs[1].empty()) {
    std::get<PoolAttrs>(k.typed).indices_column_major = c.attr_int("storage_order", 0) != 0;
    k.outs.push_back({DType::kInt64, out});
  }
  return k;
}

Result<Inferred> infer_global_pool(InferContext const& c) {
  Inferred k;
  Dims const& x = c.dims(0);
  PoolAttrs a;
  a.kind = PoolKind::kGlobalAverage;
  a.kernel.assign(x.begin() + 2, x.end());
  a.strides.assign(x.size() - 2, 1);
  a.pads.assign(2 * (x.size() - 2), 0);
  Dims out = {x[0], x[1]};
  out.resize(x.size(), 1);
  k.typed = a;
  k.data_inputs = {0};
  k.outs.push_back({c.dtype(0), out});
  return k;
}

Result<std::vector<Dims>> pool_run_shape(OpGraph const&, Op const& op, std::vector<Dims> const& in, int64_t) {
  ASSIGN_OR_RETURN(PoolWindow w, pool_window(op, in.at(0)));
  std::vector<Dims> out(std::max<std::size_t>(op.outputs.size(), 1), w.out_shape);  // MaxPool's Indices too
  return out;
}

// The kernel volume per output element forward.
double window_flops(CostContext const& c) {
  auto const* p = std::get_if<PoolAttrs>(&c.op.typed);
  double kernel = 1;
  if (p)
    for (int64_t k : p->kernel) kernel *= static_cast<double>(k);
  return c.elems(c.output0()) * kernel;
}

// Backward routes each output gradient to its window's maximum: once per input element.
OpCost max_pool_cost(CostContext const& c) {
  OpCost r;
  r.fwd_flops_per_sample = window_flops(c);
  r.bwd_flops_per_sample = c.elems(c.input(0));
  return r;
}

OpCost average_pool_cost(CostContext const& c) {
  OpCost r;
  r.fwd_flops_per_sample = window_flops(c);
  r.bwd_flops_per_sample = window_flops(c);
  return r;
}

}  // namespace

void register_pool_ops(OpTable& t) {
  // Its Indices output (1) carries no gradient.
  define(t, "MaxPool",
         {.infer = infer_pool,
          .cost = max_pool_cost,
          .saved = save_input0,
          .run_shape = pool_run_shape,
          .differentiable_outputs = 1});
  define(t, "AveragePool", {.infer = infer_pool, .cost = average_pool_cost, .run_shape = pool_run_shape});
  define(
      t, "GlobalAveragePool",
      {.infer = infer_global_pool, .cost = cost_per_input_element, .per_element = {1, 1}, .run_shape = pool_run_shape});
}

}  // namespace gp::graph::ops
