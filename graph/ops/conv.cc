// Convolutions: the check every backend runs (graph/ops/conv.h), import-time inference
// (graph/ops/infer.h) and cost (graph/ops/cost.h).
#include "graph/ops/conv.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "graph/ops/common.h"
#include "graph/ops/registry.h"

namespace gp::graph::ops {

Status conv_check(Op const& op, OpGraph const& graph) {
  RETURN_IF_ERROR(require_typed<ConvAttrs>(op));
  auto const& w = graph.tensor(op.inputs.at(1)).shape;
  if (w.rank() < 3 || w.rank() > 5)
    return unsupported("Conv '" + op.name + "' has " + std::to_string(w.rank() - 2) +
                       " spatial dims (1 to 3 supported)");
  return Status::ok();
}

ConvTransposeAxis conv_transpose_axis(int64_t in, int64_t kernel, int64_t stride, int64_t dilation, int64_t pad_begin,
                                      int64_t pad_end, int64_t output_padding) {
  ConvTransposeAxis a;
  int64_t const full = stride * (in - 1) + (kernel - 1) * dilation + 1;  // every position a weight reaches
  a.out = full + output_padding - pad_begin - pad_end;
  // The libraries compute (full - pads) + r for 0 <= r < stride (the remainder their floor
  // division drops), with pads >= 0.
  a.embedded = pad_begin < 0 || pad_end < 0 || output_padding >= stride;
  a.pad_begin = a.embedded ? std::max<int64_t>(pad_begin, 0) : pad_begin;
  a.pad_end = a.embedded ? std::max<int64_t>(pad_end - output_padding, 0) : pad_end;
  a.computed = a.embedded ? full - a.pad_begin - a.pad_end : a.out;
  a.offset = a.pad_begin - pad_begin;
  return a;
}

namespace {

// A per-spatial-dim attribute's value, or `fallback` where it is not given.
int64_t at_or(std::vector<int64_t> const& v, std::size_t i, int64_t fallback) { return i < v.size() ? v[i] : fallback; }

Status conv_operands_check(std::vector<int64_t> const& x, std::vector<int64_t> const& w,
                           std::vector<int64_t> const& kernel, std::vector<int64_t> const& pads) {
  if (x.size() < 3 || x.size() > 5 || w.size() != x.size())
    return invalid_argument("input " + dims_string(x) + " and weight " + dims_string(w) +
                            " must have the same rank, 3 to 5");
  std::size_t const sp = x.size() - 2;
  if (!kernel.empty() && kernel != std::vector<int64_t>(w.begin() + 2, w.end()))
    return invalid_argument("kernel_shape " + dims_string(kernel) + " differs from the weight's " + dims_string(w));
  if (!pads.empty() && pads.size() != 2 * sp)
    return invalid_argument(std::to_string(pads.size()) + " pads for " + std::to_string(sp) + " spatial dims");
  return Status::ok();
}

}  // namespace

Result<ConvWindow> conv_window(ConvAttrs const& a, std::vector<int64_t> const& x, std::vector<int64_t> const& w) {
  RETURN_IF_ERROR(conv_operands_check(x, w, a.kernel, a.pads));
  if (a.group < 1 || x[1] != w[1] * a.group || w[0] % a.group != 0)
    return invalid_argument("input channels " + std::to_string(x[1]) + " do not match weight " + dims_string(w) +
                            " with group " + std::to_string(a.group));
  std::size_t const sp = x.size() - 2;
  ConvWindow r;
  r.group = a.group;
  r.out_shape = {x[0], w[0]};
  for (std::size_t i = 0; i < sp; ++i) {
    int64_t const s = at_or(a.strides, i, 1), d = at_or(a.dilations, i, 1);
    int64_t const pb = at_or(a.pads, i, 0), pe = at_or(a.pads, i + sp, 0);
    if (s < 1 || d < 1)
      return invalid_argument("strides " + dims_string(a.strides) + " and dilations " + dims_string(a.dilations) +
                              " must be positive");
    int64_t const out = window_outputs(x[2 + i], w[2 + i], s, d, pb, pe);
    if (out <= 0) return invalid_argument("kernel larger than the padded input " + dims_string(x));
    r.out_shape.push_back(out);
    r.strides.push_back(s), r.dilations.push_back(d), r.pads_begin.push_back(pb), r.pads_end.push_back(pe);
    r.computed.push_back(out), r.offset.push_back(0);
  }
  return r;
}

Result<ConvWindow> conv_transpose_window(ConvTransposeAttrs const& a, std::vector<int64_t> const& x,
                                         std::vector<int64_t> const& w) {
  RETURN_IF_ERROR(conv_operands_check(x, w, a.kernel, a.pads));
  if (a.group < 1 || x[1] != w[0] || w[0] % a.group != 0)
    return invalid_argument("input channels " + std::to_string(x[1]) + " do not match weight " + dims_string(w) +
                            " with group " + std::to_string(a.group));
  std::size_t const sp = x.size() - 2;
  ConvWindow r;
  r.group = a.group;
  r.out_shape = {x[0], w[1] * a.group};
  for (std::size_t i = 0; i < sp; ++i) {
    int64_t const s = at_or(a.strides, i, 1), d = at_or(a.dilations, i, 1), op = at_or(a.output_padding, i, 0);
    if (s < 1 || d < 1 || op < 0)
      return invalid_argument("strides " + dims_string(a.strides) + " and dilations " + dims_string(a.dilations) +
                              " must be positive, output_padding " + dims_string(a.output_padding) + " not negative");
    ConvTransposeAxis const axis =
        conv_transpose_axis(x[2 + i], w[2 + i], s, d, at_or(a.pads, i, 0), at_or(a.pads, i + sp, 0), op);
    if (axis.out <= 0 || axis.computed <= 0)
      return invalid_argument("the pads " + dims_string(a.pads) + " leave no output");
    r.out_shape.push_back(axis.out);
    r.strides.push_back(s), r.dilations.push_back(d);
    r.pads_begin.push_back(axis.pad_begin), r.pads_end.push_back(axis.pad_end);
    r.computed.push_back(axis.computed), r.offset.push_back(axis.offset);
    r.embedded = r.embedded || axis.embedded;
  }
  return r;
}

namespace {

Result<Inferred> infer_conv(InferContext const& c) {
  Inferred k;
  Dims const& x = c.dims(0);
  Dims const& wd = c.dims(1);
  if (x.size() < 3 || wd.size() != x.size())
    return invalid_argument("Conv needs N,C,spatial input and a matching weight");
  std::size_t const sp = x.size() - 2;
  ConvAttrs a;
  a.kernel = c.attr_ints("kernel_shape").value_or(Dims(wd.begin() + 2, wd.end()));
  a.strides = c.attr_ints("strides").value_or(Dims(sp, 1));
  a.dilations = c.attr_ints("dilations").value_or(Dims(sp, 1));
  a.group = c.attr_int("group", 1);
  a.has_bias = c.has(2);
  if (x[1] != wd[1] * a.group)
    return invalid_argument("input has " + dim_str(x[1]) + " channels but the weight expects " +
                            std::to_string(wd[1] * a.group));
  ASSIGN_OR_RETURN(Window w, sliding_window(c, Dims(x.begin() + 2, x.end()), a.kernel, a.strides, a.dilations, false));
  a.pads = w.pads;
  ASSIGN_OR_RETURN(ConvWindow const cw, conv_window(a, x, wd));
  k.typed = a;
  k.data_inputs = all_slots(c);
  k.outs.push_back({c.dtype(0), cw.out_shape});
  return k;
}

// Floor division (Python's //): ONNX derives pads from output_shape with it, so a negative total
// padding (an output larger than the full transposed convolution) extends the end, not the start.
int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// ConvTranspose: X [N, C, spatial...], W [C, M/group, k...], optional B [M]. Pads come from
// `pads`, from auto_pad (output = input * stride), or from output_shape; they may be negative
// when output_shape asks for more than the full output (the kernels then pad with zeros).
Result<Inferred> infer_conv_transpose(InferContext const& c) {
  Inferred k;
  Dims const& x = c.dims(0);
  Dims const& wd = c.dims(1);
  if (x.size() < 3 || wd.size() != x.size())
    return invalid_argument("ConvTranspose needs an N,C,spatial input and a weight of the same rank, got " +
                            dims_str(x) + " and " + dims_str(wd));
  std::size_t const sp = x.size() - 2;
  ConvTransposeAttrs a;
  a.kernel = c.attr_ints("kernel_shape").value_or(Dims(wd.begin() + 2, wd.end()));
  a.strides = c.attr_ints("strides").value_or(Dims(sp, 1));
  a.dilations = c.attr_ints("dilations").value_or(Dims(sp, 1));
  a.output_padding = c.attr_ints("output_padding").value_or(Dims(sp, 0));
  a.group = c.attr_int("group", 1);
  a.has_bias = c.has(2);
  if (a.kernel.size() != sp || a.strides.size() != sp || a.dilations.size() != sp || a.output_padding.size() != sp)
    return invalid_argument(
        "kernel_shape, strides, dilations and output_padding need one value per spatial dimension (" +
        std::to_string(sp) + ")");
  if (a.group <= 0 || wd[0] % a.group != 0)
    return invalid_argument("group " + std::to_string(a.group) + " does not divide the weight's " +
                            std::to_string(wd[0]) + " input channels");
  if (x[1] != wd[0])
    return invalid_argument("input has " + dim_str(x[1]) + " channels but the weight expects " + std::to_string(wd[0]));
  for (std::size_t i = 0; i < sp; ++i) {
    if (x[2 + i] < 0) return unsupported("a transposed convolution over the batch dimension");
    if (a.kernel[i] != wd[2 + i])
      return invalid_argument("kernel_shape " + dims_str(a.kernel) + " differs from the weight's " + dims_str(wd));
    if (a.strides[i] <= 0 || a.dilations[i] <= 0 || a.output_padding[i] < 0)
      return invalid_argument("strides and dilations must be positive, output_padding not negative");
    if (a.output_padding[i] >= std::max(a.strides[i], a.dilations[i]))
      return invalid_argument("output_padding " + dims_str(a.output_padding) +
                              " must be smaller than the stride or the dilation");
  }
  std::string const auto_pad = c.attr_string("auto_pad", "NOTSET");
  std::optional<Dims> out_shape = c.attr_ints("output_shape");
  if (out_shape && out_shape->size() == sp + 2) out_shape = Dims(out_shape->begin() + 2, out_shape->end());
  if (out_shape && out_shape->size() != sp)
    return invalid_argument("output_shape " + dims_str(*out_shape) + " needs one value per spatial dimension (" +
                            std::to_string(sp) + ")");
  bool const same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  a.pads = c.attr_ints("pads").value_or(Dims(2 * sp, 0));
  if (a.pads.size() != 2 * sp) return invalid_argument("pads has " + std::to_string(a.pads.size()) + " values");
  for (std::size_t i = 0; i < sp; ++i) {
    if (out_shape || same) {
      int64_t const full = a.strides[i] * (x[2 + i] - 1) + a.output_padding[i] + (a.kernel[i] - 1) * a.dilations[i] + 1;
      int64_t const want = out_shape ? (*out_shape)[i] : x[2 + i] * a.strides[i];
      int64_t const total = full - want;
      int64_t const half = floor_div(total, 2);
      a.pads[i] = auto_pad == "SAME_UPPER" ? half : total - half;
      a.pads[i + sp] = total - a.pads[i];
    } else if (auto_pad == "VALID") {
      a.pads[i] = a.pads[i + sp] = 0;
    }
  }
  ASSIGN_OR_RETURN(ConvWindow const cw, conv_transpose_window(a, x, wd));
  Dims const& out = cw.out_shape;
  if (a.has_bias && (c.rank(2) != 1 || c.dims(2)[0] != out[1]))
    return invalid_argument("bias " + dims_str(c.dims(2)) + " must have " + dim_str(out[1]) + " elements");
  k.typed = a;
  k.data_inputs = all_slots(c);
  k.outs.push_back({c.dtype(0), out});
  return k;
}

// A Conv output element gathers, a ConvTranspose input element scatters, a (channels / group) x
// kernel window: the weight's dims after the first. `window_elems`: the elements that do.
OpCost conv_cost_over(CostContext const& c, double window_elems) {
  OpCost r;
  TensorId const x = c.input(0), w = c.input(1);
  double const out_e = c.elems(c.output0());
  double const macs = window_elems * static_cast<double>(abs_product(c.tensors[w].shape.dims, 1));
  bool const bias = c.input(2) != kNoTensor;
  r.fwd_flops_per_sample = 2 * macs + (bias ? out_e : 0);
  double const in_grad = c.needs_input_grad(x) ? 2 * macs : 0;
  double const w_grad = c.needs_weight_grad(w) ? 2 * macs + (bias ? out_e : 0) : 0;
  r.bwd_flops_per_sample = in_grad + w_grad;
  r.bwd_weight_flops_per_sample = w_grad;
  return r;
}

Result<std::vector<Dims>> conv_run_shape(OpGraph const&, Op const& op, std::vector<Dims> const& in, int64_t) {
  RETURN_IF_ERROR(require_typed<ConvAttrs>(op));
  Result<ConvWindow> w = conv_window(std::get<ConvAttrs>(op.typed), in.at(0), in.at(1));
  if (!w) return op_error(op, w.status().message());
  return std::vector<Dims>{std::move(w->out_shape)};
}

Result<std::vector<Dims>> conv_transpose_run_shape(OpGraph const&, Op const& op, std::vector<Dims> const& in, int64_t) {
  RETURN_IF_ERROR(require_typed<ConvTransposeAttrs>(op));
  Result<ConvWindow> w = conv_transpose_window(std::get<ConvTransposeAttrs>(op.typed), in.at(0), in.at(1));
  if (!w) return op_error(op, w.status().message());
  return std::vector<Dims>{std::move(w->out_shape)};
}

OpCost conv_cost(CostContext const& c) { return conv_cost_over(c, c.elems(c.output0())); }
OpCost conv_transpose_cost(CostContext const& c) { return conv_cost_over(c, c.elems(c.input(0))); }

}  // namespace

void register_conv_ops(OpTable& t) {
  define(t, "Conv", {.infer = infer_conv, .cost = conv_cost, .saved = save_input0, .run_shape = conv_run_shape});
  define(t, "ConvTranspose",
         {.infer = infer_conv_transpose,
          .cost = conv_transpose_cost,
          .saved = save_input0,
          .run_shape = conv_transpose_run_shape});
}

}  // namespace gp::graph::ops
