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
  Dims out = {x[0], wd[0]};
  out.insert(out.end(), w.out.begin(), w.out.end());
  k.typed = a;
  k.data_inputs = all_slots(c);
  k.outs.push_back({c.dtype(0), out});
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
  Dims out = {x[0], wd[1] * a.group};
  for (std::size_t i = 0; i < sp; ++i) {
    int64_t const full = a.strides[i] * (x[2 + i] - 1) + a.output_padding[i] + (a.kernel[i] - 1) * a.dilations[i] + 1;
    if (out_shape || same) {
      int64_t const want = out_shape ? (*out_shape)[i] : x[2 + i] * a.strides[i];
      int64_t const total = full - want;
      int64_t const half = floor_div(total, 2);
      a.pads[i] = auto_pad == "SAME_UPPER" ? half : total - half;
      a.pads[i + sp] = total - a.pads[i];
    } else if (auto_pad == "VALID") {
      a.pads[i] = a.pads[i + sp] = 0;
    }
    int64_t const o = full - a.pads[i] - a.pads[i + sp];
    if (o <= 0) return invalid_argument("the pads " + dims_str(a.pads) + " leave no output");
    out.push_back(o);
  }
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

OpCost conv_cost(CostContext const& c) { return conv_cost_over(c, c.elems(c.output0())); }
OpCost conv_transpose_cost(CostContext const& c) { return conv_cost_over(c, c.elems(c.input(0))); }

}  // namespace

void register_conv_ops(OpTable& t) {
  define(t, "Conv", {.infer = infer_conv, .cost = conv_cost, .saved = save_input0});
  define(t, "ConvTranspose", {.infer = infer_conv_transpose, .cost = conv_transpose_cost, .saved = save_input0});
}

}  // namespace gp::graph::ops
