// Pad, Tile, Trilu, OneHot, GatherElements, GatherND, ScatterElements, ScatterND, Resize, GridSample, Col2Im:
// import-time inference (graph/ops/infer.h), the output shapes every backend shares (graph/ops/index.h), cost
// (graph/ops/cost.h) and the folding of GatherElements and ScatterND (graph/ops/fold.h).
#include "graph/ops/index.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>

#include "graph/ops/common.h"
#include "graph/ops/registry.h"

namespace gp::graph::ops {

Result<std::vector<int64_t>> pad_output_shape(PadAttrs const& a, std::vector<int64_t> const& in) {
  std::size_t const r = in.size();
  if (a.pads.size() != 2 * r)
    return invalid_argument("pads has " + std::to_string(a.pads.size()) + " entries for an input of rank " +
                            std::to_string(r) + " (expected " + std::to_string(2 * r) + ")");
  std::vector<int64_t> out = in;
  for (std::size_t d = 0; d < r; ++d) {
    int64_t const b = a.pads[d], e = a.pads[d + r];
    if (in[d] < 0) {
      if (b != 0 || e != 0) return unsupported("padding the batch dimension (axis " + std::to_string(d) + ")");
      continue;
    }
    out[d] = in[d] + b + e;
    if (out[d] < 0)
      return invalid_argument("pads " + std::to_string(b) + ", " + std::to_string(e) + " crop axis " +
                              std::to_string(d) + " of size " + std::to_string(in[d]) + " below zero");
  }
  return out;
}

Result<std::vector<int64_t>> grid_sample_output_shape(std::vector<int64_t> const& x, std::vector<int64_t> const& grid) {
  std::size_t const rank = x.size();
  if ((rank != 4 && rank != 5) || grid.size() != rank || grid[rank - 1] != static_cast<int64_t>(rank - 2))
    return unsupported("GridSample of x " + dims_str(x) + " at grid " + dims_str(grid) +
                       ": only x [N,C,H,W] with grid [N,Ho,Wo,2] or x [N,C,D,H,W] with grid [N,Do,Ho,Wo,3] is "
                       "supported");
  if (x[0] != grid[0])
    return invalid_argument("GridSample: x " + dims_str(x) + " and grid " + dims_str(grid) +
                            " disagree on the batch (their first dims must be equal)");
  for (std::size_t d = 1; d < rank; ++d)
    if (x[d] < 0 || grid[d] < 0)
      return unsupported("GridSample of x " + dims_str(x) + " at grid " + dims_str(grid) +
                         ": the batch size past the first dim");
  std::vector<int64_t> out{x[0], x[1]};
  out.insert(out.end(), grid.begin() + 1, grid.end() - 1);
  return out;
}

Result<Col2ImShape> col2im_shape(Col2ImAttrs const& a, std::vector<int64_t> const& x) {
  std::size_t const sp = a.image.size();
  if (sp < 1 || sp > 3) return unsupported("Col2Im over " + std::to_string(sp) + " spatial dims (1 to 3 supported)");
  if (a.block.size() != sp || a.dilations.size() != sp || a.strides.size() != sp || a.pads.size() != 2 * sp)
    return invalid_argument("Col2Im: block_shape, dilations and strides need " + std::to_string(sp) +
                            " values and pads " + std::to_string(2 * sp) + ", one per dim of image_shape " +
                            dims_str(a.image));
  if (x.size() != 3) return invalid_argument("Col2Im needs an input [N, C*K, L], got " + dims_str(x));
  Col2ImShape s;
  int64_t k = 1, l = 1;
  for (std::size_t i = 0; i < sp; ++i) {
    if (a.image[i] <= 0 || a.block[i] <= 0 || a.dilations[i] <= 0 || a.strides[i] <= 0 || a.pads[i] < 0 ||
        a.pads[sp + i] < 0)
      return invalid_argument("Col2Im: image_shape " + dims_str(a.image) + ", block_shape " + dims_str(a.block) +
                              ", dilations and strides must be positive and pads not negative");
    int64_t const b =
        window_outputs(a.image[i], a.block[i], a.strides[i], a.dilations[i], a.pads[i], a.pads[sp + i], false);
    if (b <= 0)
      return invalid_argument("Col2Im: block_shape " + dims_str(a.block) + " does not fit the padded image " +
                              dims_str(a.image));
    s.blocks.push_back(b);
    k *= a.block[i];
    l *= b;
  }
  if (x[1] < 0 || x[2] < 0) return unsupported("Col2Im of " + dims_str(x) + ": the batch size past the first dim");
  if (x[1] % k != 0 || x[2] != l)
    return invalid_argument("Col2Im of " + dims_str(x) + ": image_shape " + dims_str(a.image) + " and block_shape " +
                            dims_str(a.block) + " make " + std::to_string(l) + " blocks of " + std::to_string(k) +
                            " values, so the input must be [N, C*" + std::to_string(k) + ", " + std::to_string(l) +
                            "]");
  s.out = {x[0], x[1] / k};
  s.out.insert(s.out.end(), a.image.begin(), a.image.end());
  return s;
}

Result<OneHotShape> one_hot_output_shape(OneHotAttrs const& a, std::vector<int64_t> const& indices) {
  if (a.axis < 0 || a.axis > static_cast<int64_t>(indices.size()))
    return invalid_argument("OneHot axis " + std::to_string(a.axis) + " is outside the indices' rank " +
                            std::to_string(indices.size()));
  OneHotShape s;
  s.out = indices;
  s.out.insert(s.out.begin() + a.axis, a.depth);
  for (std::size_t d = static_cast<std::size_t>(a.axis); d < indices.size(); ++d) s.inner *= indices[d];
  return s;
}

Result<std::vector<int64_t>> gather_nd_output_shape(std::vector<int64_t> const& data,
                                                    std::vector<int64_t> const& indices) {
  if (indices.empty()) return invalid_argument("GatherND indices must have rank 1 or more");
  int64_t const k = indices.back();
  if (k < 1 || k > static_cast<int64_t>(data.size()))
    return invalid_argument("GatherND indices " + dims_string(indices) + " address " + std::to_string(k) +
                            " axes of data " + dims_string(data) + " (1 to its rank)");
  std::vector<int64_t> out(indices.begin(), indices.end() - 1);
  out.insert(out.end(), data.begin() + k, data.end());
  return out;
}

Result<std::vector<int64_t>> tile_output_shape(TileAttrs const& a, std::vector<int64_t> const& in, int64_t batch) {
  if (a.repeats.size() != in.size())
    return invalid_argument("repeats has " + std::to_string(a.repeats.size()) + " entries for an input of rank " +
                            std::to_string(in.size()));
  std::vector<int64_t> out = in;
  for (std::size_t d = 0; d < in.size(); ++d) {
    if (in[d] < 0 && a.repeats[d] != 1)
      return unsupported("tiling the batch dimension (axis " + std::to_string(d) + ") " + std::to_string(a.repeats[d]) +
                         " times: tile only the other axes (repeat 1 on the batch)");
    if (a.repeats[d] < 0) {  // k times the batch size: a static dim tiled to the batch
      if (batch > 0)
        out[d] = in[d] * -a.repeats[d] * batch;
      else
        out[d] = -(in[d] * -a.repeats[d]);
      continue;
    }
    out[d] = in[d] * a.repeats[d];
  }
  int batch_dims = 0;
  for (int64_t d : out) batch_dims += d < 0;
  if (batch_dims > 1) return unsupported("the tiled shape would hold the batch size in two dimensions");
  return out;
}

Result<std::vector<int64_t>> resize_output_shape(ResizeAttrs const& a, std::vector<int64_t> const& in) {
  bool const by_sizes = !a.sizes.empty();
  std::size_t const n = by_sizes ? a.sizes.size() : a.scales.size();
  if (n != in.size())
    return invalid_argument(std::string(by_sizes ? "sizes" : "scales") + " has " + std::to_string(n) +
                            " entries for an input of rank " + std::to_string(in.size()));
  std::vector<int64_t> out = in;
  for (std::size_t d = 0; d < in.size(); ++d) {
    if (in[d] < 0) continue;  // the batch keeps its size (the importer checked scale 1)
    if (by_sizes) {
      if (a.sizes[d] >= 0) out[d] = a.sizes[d];
    } else {
      out[d] = static_cast<int64_t>(std::floor(static_cast<double>(in[d]) * static_cast<double>(a.scales[d])));
    }
  }
  return out;
}

namespace {

Status missing(std::string const& what) { return invalid_argument("the " + what + " input is missing"); }

Result<Inferred> infer_pad(InferContext const& c) {
  PadAttrs a;
  std::string const mode = c.attr_string("mode", "constant");
  if (mode == "constant")
    a.mode = PadMode::kConstant;
  else if (mode == "reflect")
    a.mode = PadMode::kReflect;
  else if (mode == "edge")
    a.mode = PadMode::kEdge;
  else if (mode == "wrap")
    a.mode = PadMode::kWrap;
  else
    return invalid_argument("mode '" + mode + "' is not one of constant, reflect, edge, wrap");
  int64_t const r = c.rank(0);
  Dims pads, axes;
  double value = 0;
  if (c.opset < 11) {
    pads = c.attr_ints("pads").value_or(Dims{});
    value = c.attr_float("value", 0.0);
  } else {
    if (!c.has(1)) return missing("pads");
    ASSIGN_OR_RETURN(pads, c.static_ints(1, "pads"));
    ASSIGN_OR_RETURN(value, c.static_scalar(2, "constant_value", 0.0));
    ASSIGN_OR_RETURN(axes, c.static_ints(3, "axes"));
  }
  if (axes.empty()) {
    axes.resize(static_cast<std::size_t>(r));
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (pads.size() != 2 * axes.size())
    return invalid_argument("pads has " + std::to_string(pads.size()) + " entries, expected " +
                            std::to_string(2 * axes.size()) + " (begin and end for each of " +
                            std::to_string(axes.size()) + " axes)");
  a.pads.assign(static_cast<std::size_t>(2 * r), 0);
  std::vector<bool> seen(static_cast<std::size_t>(r), false);
  for (std::size_t k = 0; k < axes.size(); ++k) {
    ASSIGN_OR_RETURN(int64_t const ax, checked_axis(axes[k], r));
    if (seen[ax]) return invalid_argument("axis " + std::to_string(ax) + " is listed twice in axes");
    seen[ax] = true;
    a.pads[ax] = pads[k];
    a.pads[ax + r] = pads[k + axes.size()];
  }
  a.value = static_cast<float>(value);
  for (int64_t d = 0; d < r; ++d) {
    bool const grows = a.pads[d] > 0 || a.pads[d + r] > 0;
    if (a.mode != PadMode::kConstant && grows && c.dims(0)[d] == 0)
      return invalid_argument("mode '" + mode + "' cannot pad axis " + std::to_string(d) + " of size 0");
  }
  ASSIGN_OR_RETURN(Dims out, pad_output_shape(a, c.dims(0)));
  Inferred k;
  k.typed = a;
  k.data_inputs = {0};
  k.outs.push_back({c.dtype(0), out});
  return k;
}

Result<Inferred> infer_tile(InferContext const& c) {
  if (!c.has(1)) return missing("repeats");
  TileAttrs a;
  ASSIGN_OR_RETURN(StaticValue const* r, c.static_input(1, "repeats"));
  if (r->dims.size() != 1)
    return invalid_argument("its repeats must be a 1-D tensor, got rank " + std::to_string(r->dims.size()));
  for (std::size_t i = 0; i < r->i.size(); ++i) {  // a repeat may be k times the batch size (encoded -k)
    int64_t const b = r->has_batch() ? r->b[i] : 0;
    if (b != 0 && r->i[i] != 0) return unsupported("a Tile repeat is the batch size plus a number");
    int64_t const v = r->is_float() ? static_cast<int64_t>(r->f.at(i)) : r->i[i];
    if (b == 0 && v < 0) return invalid_argument("repeat " + std::to_string(v) + " is negative");
    a.repeats.push_back(b != 0 ? -b : v);
  }
  ASSIGN_OR_RETURN(Dims out, tile_output_shape(a, c.dims(0), 0));
  Inferred k;
  k.typed = a;
  k.data_inputs = {0};
  k.outs.push_back({c.dtype(0), out});
  return k;
}

// Tile of a value known at import (TorchScript's torch.tensor_split and chunk compute their split
// sizes as Tile([size], count) of shape values): folded when the repeats are plain numbers; over
// repeats that hold the batch size it runs per micro-batch.
Result<Folded> fold_tile(FoldContext const& c) {
  if (c.in(1) == nullptr) return Folded{};
  if (c.in(1)->dims.size() != 1)
    return invalid_argument(c.where() + ": its repeats must be a 1-D tensor, got rank " +
                            std::to_string(c.in(1)->dims.size()));
  if (c.in(1)->has_batch()) return Folded{};
  SymArray const& a = *c.in(0);
  ASSIGN_OR_RETURN(Dims const repeats, plain_ints(c.in(1), "Tile repeats"));
  if (repeats.size() != a.dims.size())
    return invalid_argument(c.where() + ": " + std::to_string(repeats.size()) + " repeats for an input of rank " +
                            std::to_string(a.dims.size()));
  Dims dims(a.dims.size());
  for (std::size_t k = 0; k < dims.size(); ++k) {
    if (repeats[k] < 0) return invalid_argument(c.where() + ": repeat " + std::to_string(repeats[k]) + " is negative");
    if (a.dims[k] < 0) return Folded{};  // a batch-sized input: runs per micro-batch
    dims[k] = a.dims[k] * repeats[k];
  }
  if (fold_numel(dims) > kMaxFoldElements) return Folded{};
  Dims const src_strides = row_major_strides(a.dims);
  auto const r = dims.size();
  Dims idx, pos(r, 0);
  for (int64_t e = 0, n = fold_numel(dims); e < n; ++e) {
    int64_t flat = 0;
    for (std::size_t k = 0; k < r; ++k) flat += pos[k] % a.dims[k] * src_strides[k];
    idx.push_back(flat);
    for (std::size_t k = r; k-- > 0;) {
      if (++pos[k] < dims[k]) break;
      pos[k] = 0;
    }
  }
  return folded_one(take(a, dims, idx));
}

Result<Inferred> infer_trilu(InferContext const& c) {
  int64_t const r = c.rank(0);
  if (r < 2) return invalid_argument("the input has rank " + std::to_string(r) + "; Trilu needs rank 2 or more");
  Dims const& x = c.dims(0);
  if (x[r - 2] < 0 || x[r - 1] < 0)
    return unsupported("the batch is one of the matrix dimensions " + dims_str(x) +
                       "; the mask would depend on the row index, which micro-batching changes");
  TriluAttrs a;
  a.upper = c.attr_int("upper", 1) != 0;
  ASSIGN_OR_RETURN(Dims const kv, c.static_ints(1, "k"));
  if (kv.size() > 1) return invalid_argument("k must hold one value, has " + std::to_string(kv.size()));
  a.k = kv.empty() ? 0 : kv[0];
  Inferred k;
  k.typed = a;
  k.data_inputs = {0};
  k.outs.push_back({c.dtype(0), x});
  return k;
}

Status check_index_dtype(InferContext const& c, std::size_t i) {
  if (c.dtype(i) != DType::kInt64 && c.dtype(i) != DType::kInt32)
    return unsupported("indices have dtype " + std::string(dtype_name(c.dtype(i))) + "; use int64 or int32");
  return Status::ok();
}

// OneHot (F.one_hot, label smoothing, MoE routers): indices (int64, int32, or float32 truncated, as
// ONNX says) with a depth axis inserted at `axis`; depth and the (off, on) values must be known at
// import. The depth axis may not come before the batch (it would move the batch out of the first
// dimension).
Result<Inferred> infer_one_hot(InferContext const& c) {
  if (c.dtype(0) != DType::kFloat32) RETURN_IF_ERROR(check_index_dtype(c, 0));  // float indices are truncated
  ASSIGN_OR_RETURN(StaticValue const* depth, c.static_input(1, "depth"));
  ASSIGN_OR_RETURN(StaticValue const* values, c.static_input(2, "values"));
  if (depth == nullptr || depth->numel() != 1 || depth->has_batch())
    return invalid_argument("depth must be one number known at import");
  if (values == nullptr || values->numel() != 2) return invalid_argument("values must hold two numbers (off, on)");
  OneHotAttrs a;
  a.depth = depth->is_float() ? static_cast<int64_t>(depth->f[0]) : depth->i[0];
  if (a.depth < 1 || a.depth > (int64_t{1} << 24))
    return invalid_argument("depth " + std::to_string(a.depth) + " (it must be between 1 and 2^24)");
  if (values->dtype != DType::kFloat32 && values->dtype != DType::kInt64 && values->dtype != DType::kInt32)
    return unsupported("values of dtype " + std::string(dtype_name(values->dtype)) + " (float32, int64 or int32 only)");
  a.off = values->is_float() ? values->f[0] : static_cast<double>(values->i[0]);
  a.on = values->is_float() ? values->f[1] : static_cast<double>(values->i[1]);
  Dims const& x = c.dims(0);
  ASSIGN_OR_RETURN(a.axis, checked_axis(c.attr_int("axis", -1), c.rank(0) + 1));
  if (a.axis == 0 && !x.empty() && x[0] < 0)
    return unsupported("OneHot at axis 0 would move the batch out of the first dimension of " + dims_str(x));
  ASSIGN_OR_RETURN(OneHotShape const shape, one_hot_output_shape(a, x));
  Inferred k;
  k.typed = a;
  k.data_inputs = {0};
  k.outs.push_back({values->dtype, shape.out});
  return k;
}

// GatherElements and ScatterElements: indices of data's rank; `axis` (normalised) may not be the
// batch; along the other axes an index dim may not exceed data's, and the batch must sit in the
// same place in both (`batch_in_axis`: indices may carry the batch along `axis` alone).
Status check_element_indices(InferContext const& c, int64_t axis, bool batch_in_axis) {
  Dims const& x = c.dims(0);
  Dims const& i = c.dims(1);
  if (i.size() != x.size())
    return invalid_argument("indices " + dims_str(i) + " and data " + dims_str(x) + " differ in rank");
  if (x[axis] < 0)
    return unsupported("indexing along the batch dimension (axis " + std::to_string(axis) +
                       "): micro-batching would change the indices' meaning");
  for (std::size_t d = 0; d < x.size(); ++d) {
    if (static_cast<int64_t>(d) == axis) {
      if (i[d] < 0 && !batch_in_axis)
        return unsupported("indices " + dims_str(i) + " carry the batch along the scatter axis but data " +
                           dims_str(x) + " does not");
      continue;
    }
    if ((x[d] < 0) != (i[d] < 0) || (x[d] < 0 && x[d] != i[d]))
      return unsupported("indices " + dims_str(i) + " and data " + dims_str(x) +
                         " do not hold the batch in the same dimension");
    if (i[d] > x[d])
      return invalid_argument("indices " + dims_str(i) + " exceed data " + dims_str(x) + " along axis " +
                              std::to_string(d));
  }
  return Status::ok();
}

Result<Inferred> infer_gather_elements(InferContext const& c) {
  if (!c.has(1)) return missing("indices");
  RETURN_IF_ERROR(check_index_dtype(c, 1));
  ASSIGN_OR_RETURN(int64_t const axis, checked_axis(c.attr_int("axis", 0), c.rank(0)));
  RETURN_IF_ERROR(check_element_indices(c, axis, true));
  Inferred k;
  k.typed = GatherElementsAttrs{axis};
  k.data_inputs = {0, 1};
  k.outs.push_back({c.dtype(0), c.dims(1)});
  return k;
}

// GatherND with batch_dims 0 (HF GPT-2 sequence classification picks each row's last token: indices
// [N, 2] of (row, position) into logits [N, T, C]). Indices that address the batch axis must carry the
// batch themselves, computed per micro-batch (as Range over the batch is), so that they index the
// micro-batch's own rows; the output may hold the batch in one dimension only.
Result<Inferred> infer_gather_nd(InferContext const& c) {
  if (!c.has(1)) return missing("indices");
  RETURN_IF_ERROR(check_index_dtype(c, 1));
  if (int64_t const b = c.attr_int("batch_dims", 0); b != 0)
    return unsupported("GatherND with batch_dims " + std::to_string(b) + " (graphpipe supports 0)");
  Dims const& x = c.dims(0);
  Dims const& i = c.dims(1);
  if (!i.empty() && i.back() < 0) return unsupported("GatherND indices whose last dimension is the batch size");
  ASSIGN_OR_RETURN(Dims out, gather_nd_output_shape(x, i));
  bool const indices_batched = std::any_of(i.begin(), i.end(), [](int64_t d) { return d < 0; });
  for (int64_t d = 0; d < i.back(); ++d)
    if (x[d] < 0 && !indices_batched)
      return unsupported("GatherND indices " + dims_str(i) + " address the batch axis of data " + dims_str(x) +
                         " but do not follow the micro-batch: micro-batching would change their meaning");
  if (std::count_if(out.begin(), out.end(), [](int64_t d) { return d < 0; }) > 1)
    return unsupported("GatherND output " + dims_str(out) + " would hold the batch size in two dimensions");
  Inferred k;
  k.typed = GatherNDAttrs{0};
  k.data_inputs = {0, 1};
  k.outs.push_back({c.dtype(0), out});
  return k;
}

// ScatterND over values known at import time (torchvision Swin's shifted-window mask, built by
// slice assignments into zeros of the padded window size). Reductions none, add, mul, max and min; indices
// [..., K] address data's first K axes, updates hold one slice of data's axes from K on per tuple.
Result<Folded> fold_scatter_nd(FoldContext const& c) {
  SymArray const* data = c.in(0);
  SymArray const* upd = c.in(2);
  if (!data || !c.in(1) || !upd) return invalid_argument(c.where() + ": an input is missing");
  if (data->has_batch() || upd->has_batch() || data->is_float() != upd->is_float())
    return unsupported(c.where() + ": ScatterND over values that hold the batch size or mix dtypes");
  std::string const name = attr_string(c.attrs, "reduction", "none");
  std::optional<ScatterReduction> const named = scatter_reduction_named(name);
  if (!named)
    return unsupported(c.where() + ": ScatterND reduction '" + name + "' (none, add, mul, max and min are supported)");
  ScatterReduction const reduction = *named;
  ASSIGN_OR_RETURN(Dims const indices, plain_ints(c.in(1), "ScatterND indices"));
  Dims const& x = data->dims;
  Dims const& i = c.in(1)->dims;
  if (i.empty() || i.back() < 1 || i.back() > static_cast<int64_t>(x.size()))
    return invalid_argument(c.where() + ": indices " + dims_str(i) + " do not address data " + dims_str(x));
  std::size_t const k = static_cast<std::size_t>(i.back());
  int64_t slice = 1;
  for (std::size_t d = k; d < x.size(); ++d) slice *= x[d];
  int64_t const tuples = static_cast<int64_t>(indices.size()) / static_cast<int64_t>(k);
  if (upd->numel() != tuples * slice)
    return invalid_argument(c.where() + ": updates " + dims_str(upd->dims) + " do not fit indices " + dims_str(i) +
                            " into data " + dims_str(x));
  Dims const xs = row_major_strides(x);
  SymArray out = *data;
  auto reduce = [reduction](auto old, auto update) {
    switch (reduction) {
      case ScatterReduction::kAdd:
        return old + update;
      case ScatterReduction::kMul:
        return old * update;
      case ScatterReduction::kMax:
        return std::max(old, update);
      case ScatterReduction::kMin:
        return std::min(old, update);
      case ScatterReduction::kNone:
        break;
    }
    return update;
  };
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = 0;
    for (std::size_t d = 0; d < k; ++d) {
      int64_t v = indices[static_cast<std::size_t>(t) * k + d];
      if (v < -x[d] || v >= x[d]) return invalid_argument(c.where() + ": index " + std::to_string(v) + " out of range");
      off += (v < 0 ? v + x[d] : v) * xs[d];
    }
    for (int64_t e = 0; e < slice; ++e) {
      auto const dst = static_cast<std::size_t>(off + e), src = static_cast<std::size_t>(t * slice + e);
      if (out.is_float())
        out.f[dst] = reduce(out.f[dst], upd->f[src]);
      else
        out.i[dst] = reduce(out.i[dst], upd->i[src]);
    }
  }
  return folded_one(std::move(out));
}

// ScatterND (opset 11; reduction add and mul 16, max and min 18): data with the updates' slices
// combined in at the index tuples, indices [..., K] addressing data's first K axes and updates
// [indices' dims but the last, data's from K on] (GatherND's output shape). What torch exports for
// slice and index assignment (`x[:, idx] = v`, `index_put`): the dynamo exporter moves the indexed
// axes to the front, so the tuples address static axes and the batch rides in the slices; the
// TorchScript exporter and `index_put` over every axis build tuples that address the batch axis
// from a Range over the batch, so they follow the micro-batch. As for GatherND, tuples that address
// data's batch axis must follow the micro-batch themselves, and tuples that follow it must address it.
Result<Inferred> infer_scatter_nd(InferContext const& c) {
  if (!c.has(1)) return missing("indices");
  if (!c.has(2)) return missing("updates");
  RETURN_IF_ERROR(check_index_dtype(c, 1));
  Dims const& x = c.dims(0);
  Dims const& i = c.dims(1);
  if (!i.empty() && i.back() < 0) return unsupported("ScatterND indices whose last dimension is the batch size");
  ASSIGN_OR_RETURN(Dims const expected, gather_nd_output_shape(x, i));
  if (c.dims(2) != expected)
    return invalid_argument("updates " + dims_str(c.dims(2)) + " do not fit indices " + dims_str(i) + " into data " +
                            dims_str(x) + " (expected " + dims_str(expected) + ")");
  bool const indices_batched = std::any_of(i.begin(), i.end(), [](int64_t d) { return d < 0; });
  bool addresses_batch = false;
  for (int64_t d = 0; d < i.back(); ++d) addresses_batch |= x[static_cast<std::size_t>(d)] < 0;
  if (addresses_batch && !indices_batched)
    return unsupported("ScatterND indices " + dims_str(i) + " address the batch axis of data " + dims_str(x) +
                       " but do not follow the micro-batch: micro-batching would change their meaning");
  if (indices_batched && !addresses_batch)
    return unsupported("ScatterND indices " + dims_str(i) + " follow the batch but address data " + dims_str(x) +
                       " outside its batch axis: each micro-batch would scatter into the same elements");
  if (std::count_if(expected.begin(), expected.end(), [](int64_t d) { return d < 0; }) > 1)
    return unsupported("ScatterND updates " + dims_str(expected) + " would hold the batch size in two dimensions");
  if (c.dtype(2) != c.dtype(0))
    return invalid_argument("updates of " + std::string(dtype_name(c.dtype(2))) + " into data of " +
                            std::string(dtype_name(c.dtype(0))));
  std::string const red = c.attr_string("reduction", "none");
  std::optional<ScatterReduction> const reduction = scatter_reduction_named(red);
  if (!reduction) return invalid_argument("reduction '" + red + "' is not one of none, add, mul, max, min");
  Inferred k;
  k.typed = ScatterNDAttrs{*reduction};
  k.data_inputs = {0, 1, 2};
  k.outs.push_back({c.dtype(0), x});
  return k;
}

// The backward reads the indices, and with reductions mul, max and min the data and updates too.
void save_scatter_nd(CostContext const& c, SavedForBackward& s) {
  c.save(s, c.input(1));
  auto const* a = std::get_if<ScatterNDAttrs>(&c.op.typed);
  if (a && a->reduction != ScatterReduction::kNone && a->reduction != ScatterReduction::kAdd) {
    c.save(s, c.input(0));
    c.save(s, c.input(2));
  }
}

// GatherElements over values known at import time (HF BERT's token_type_ids buffer sliced to the
// sequence length).
// OneHot of indices known at import (DeepSeek-V3's TorchScript export builds a Tile's repeats from
// one: a one-hot row of the experts' token counts), as the kernels compute it (hd::one_hot_at):
// negative indices count from the end, and one outside [-depth, depth) sets no position.
Result<Folded> fold_one_hot(FoldContext const& c) {
  SymArray const *indices = c.in(0), *depth = c.in(1), *values = c.in(2);
  if (indices == nullptr || depth == nullptr || values == nullptr || indices->has_batch() || depth->numel() != 1 ||
      depth->has_batch() || values->numel() != 2)
    return Folded{};  // the inference's checks name what is wrong
  int64_t const n = depth->is_float() ? static_cast<int64_t>(depth->f[0]) : depth->i[0];
  if (n < 1 || n > (int64_t{1} << 24)) return Folded{};
  auto const rank = static_cast<int64_t>(indices->dims.size());
  ASSIGN_OR_RETURN(int64_t const axis, checked_axis(c.attr_int("axis", -1), rank + 1));
  SymArray out;
  out.dtype = values->dtype;
  out.dims = indices->dims;
  out.dims.insert(out.dims.begin() + axis, n);
  int64_t const count = fold_numel(out.dims);
  if (count > kMaxFoldElements) return Folded{};
  int64_t inner = 1;
  for (std::size_t d = static_cast<std::size_t>(axis); d < indices->dims.size(); ++d) inner *= indices->dims[d];
  for (int64_t e = 0; e < count; ++e) {
    int64_t const o = e / (n * inner), at = (e / inner) % n, j = e % inner;
    std::size_t const src = static_cast<std::size_t>(o * inner + j);
    int64_t v = indices->is_float() ? to_int_saturating(indices->f[src]) : indices->i[src];
    if (v < 0) v += n;
    bool const hit = v == at;
    if (values->is_float())
      out.f.push_back(values->f[hit ? 1 : 0]);
    else
      out.i.push_back(values->i[hit ? 1 : 0]);
  }
  return folded_one(std::move(out));
}

Result<Folded> fold_gather_elements(FoldContext const& c) {
  SymArray const* data = c.in(0);
  if (!data || !c.in(1)) return invalid_argument(c.where() + ": an input is missing");
  ASSIGN_OR_RETURN(Dims const indices, plain_ints(c.in(1), "GatherElements indices"));
  Dims const& x = data->dims;
  Dims const& i = c.in(1)->dims;
  int64_t const r = static_cast<int64_t>(x.size());
  if (static_cast<int64_t>(i.size()) != r) return invalid_argument(c.where() + ": indices and data differ in rank");
  ASSIGN_OR_RETURN(int64_t const axis, checked_axis(c.attr_int("axis", 0), r));
  for (int64_t d = 0; d < r; ++d)
    if (d != axis && i[d] > x[d])
      return invalid_argument(c.where() + ": indices exceed data along axis " + std::to_string(d));
  Dims const xs = row_major_strides(x);
  Dims pos(static_cast<std::size_t>(r), 0);
  Dims idx;
  idx.reserve(indices.size());
  for (int64_t g : indices) {
    int64_t const gi = g < 0 ? g + x[axis] : g;
    if (gi < 0 || gi >= x[axis]) return invalid_argument(c.where() + ": index out of range");
    int64_t flat = 0;
    for (int64_t d = 0; d < r; ++d) flat += (d == axis ? gi : pos[d]) * xs[d];
    idx.push_back(flat);
    for (int64_t d = r - 1; d >= 0; --d) {
      if (++pos[d] < i[d]) break;
      pos[d] = 0;
    }
  }
  return folded_one(take(*data, i, idx));
}

Result<Inferred> infer_scatter_elements(InferContext const& c) {
  if (!c.has(1)) return missing("indices");
  if (!c.has(2)) return missing("updates");
  RETURN_IF_ERROR(check_index_dtype(c, 1));
  ASSIGN_OR_RETURN(int64_t const axis, checked_axis(c.attr_int("axis", 0), c.rank(0)));
  RETURN_IF_ERROR(check_element_indices(c, axis, false));
  if (c.dims(2) != c.dims(1))
    return invalid_argument("updates " + dims_str(c.dims(2)) + " and indices " + dims_str(c.dims(1)) +
                            " differ in shape");
  std::string const red = c.attr_string("reduction", "none");
  std::optional<ScatterReduction> const reduction = scatter_reduction_named(red);
  if (!reduction) return invalid_argument("reduction '" + red + "' is not one of none, add, mul, max, min");
  ScatterElementsAttrs const a{axis, *reduction};
  Inferred k;
  k.typed = a;
  k.data_inputs = {0, 1, 2};
  k.outs.push_back({c.dtype(0), c.dims(0)});
  return k;
}

Result<Inferred> infer_resize(InferContext const& c) {
  // Opset 10's Resize(X, scales) is not read; the importer's rewrite of Upsample (opsets 7-9) writes
  // opset 11's form, Resize(X, roi, scales), its coordinate mode and rounding explicit.
  if (c.opset < 11 && c.inputs.size() < 3)
    return unsupported("Resize before opset 11 (fixed asymmetric coordinates): re-export with opset 11 or later");
  ResizeAttrs a;
  std::string const mode = c.attr_string("mode", "nearest");
  if (mode == "nearest")
    a.mode = ResizeMode::kNearest;
  else if (mode == "linear")
    a.mode = ResizeMode::kLinear;
  else if (mode == "cubic")
    a.mode = ResizeMode::kCubic;
  else
    return invalid_argument("mode '" + mode + "' is not one of nearest, linear, cubic");
  std::string const coord = c.attr_string("coordinate_transformation_mode", "half_pixel");
  if (coord == "half_pixel")
    a.coord = ResizeCoord::kHalfPixel;
  else if (coord == "pytorch_half_pixel")
    a.coord = ResizeCoord::kPytorchHalfPixel;
  else if (coord == "align_corners")
    a.coord = ResizeCoord::kAlignCorners;
  else if (coord == "asymmetric")
    a.coord = ResizeCoord::kAsymmetric;
  else if (coord == "half_pixel_symmetric")
    a.coord = ResizeCoord::kHalfPixelSymmetric;
  else if (coord == "tf_crop_and_resize" || coord == "tf_half_pixel_for_nn")
    return unsupported("coordinate_transformation_mode '" + coord +
                       "' (use half_pixel, half_pixel_symmetric, pytorch_half_pixel, align_corners or asymmetric)");
  else
    return invalid_argument("coordinate_transformation_mode '" + coord + "' is unknown");
  std::string const nearest = c.attr_string("nearest_mode", "round_prefer_floor");
  if (nearest == "round_prefer_floor")
    a.nearest = ResizeNearest::kRoundPreferFloor;
  else if (nearest == "round_prefer_ceil")
    a.nearest = ResizeNearest::kRoundPreferCeil;
  else if (nearest == "floor")
    a.nearest = ResizeNearest::kFloor;
  else if (nearest == "ceil")
    a.nearest = ResizeNearest::kCeil;
  else
    return invalid_argument("nearest_mode '" + nearest +
                            "' is not one of round_prefer_floor, round_prefer_ceil, "
                            "floor, ceil");
  a.cubic_coeff_a = static_cast<float>(c.attr_float("cubic_coeff_a", -0.75));
  a.exclude_outside = c.attr_int("exclude_outside", 0) != 0;
  a.extrapolation_value = static_cast<float>(c.attr_float("extrapolation_value", 0.0));

  a.antialias = c.attr_int("antialias", 0) != 0;
  Dims const& x = c.dims(0);
  std::size_t const r = x.size();
  ASSIGN_OR_RETURN(StaticValue const* scales, c.static_input(2, "scales"));
  ASSIGN_OR_RETURN(StaticValue const* sizes, c.static_input(3, "sizes"));
  bool const has_scales = scales && scales->numel() > 0, has_sizes = sizes && sizes->numel() > 0;
  if (has_scales == has_sizes)
    return invalid_argument(has_scales ? "both scales and sizes are given; give one of them"
                                       : "neither scales nor sizes is given; give one of them");
  // Opset 18: scales or sizes may cover only `axes`; the other axes keep their size.
  Dims axes(r);
  std::iota(axes.begin(), axes.end(), 0);
  if (auto listed = c.attr_ints("axes")) {
    axes.clear();
    std::vector<bool> seen(r, false);
    for (int64_t ax : *listed) {
      ASSIGN_OR_RETURN(int64_t const d, checked_axis(ax, static_cast<int64_t>(r)));
      if (seen[d]) return invalid_argument("axis " + std::to_string(d) + " is listed twice in axes");
      seen[d] = true;
      axes.push_back(d);
    }
  }
  StaticValue const& given = has_scales ? *scales : *sizes;
  if (static_cast<std::size_t>(given.numel()) != axes.size())
    return invalid_argument(std::string(has_scales ? "scales" : "sizes") + " has " + std::to_string(given.numel()) +
                            " entries for " + std::to_string(axes.size()) + " axes");
  if (has_sizes && sizes->is_float()) return invalid_argument("sizes must be int64");
  // Per axis: a scale, or a size as batch multiple `b` (of N) plus a fixed part `v`.
  std::vector<double> scale(r, 1.0);
  Dims size_v(r, 0), size_b(r, 0);
  for (std::size_t d = 0; d < r; ++d) (x[d] < 0 ? size_b[d] : size_v[d]) = x[d] < 0 ? -x[d] : x[d];
  for (std::size_t k = 0; k < axes.size(); ++k) {
    auto const d = static_cast<std::size_t>(axes[k]);
    if (has_scales) {
      scale[d] = scales->is_float() ? scales->f[k] : static_cast<double>(scales->i[k]);
    } else {
      size_b[d] = sizes->has_batch() ? sizes->b[k] : 0;
      size_v[d] = sizes->i[k];
    }
  }
  std::string const policy = c.attr_string("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
    return invalid_argument("keep_aspect_ratio_policy '" + policy + "' is not one of stretch, not_larger, not_smaller");
  std::optional<double> one;  // the one scale of every listed axis under a keep_aspect_ratio_policy
  if (has_sizes && policy != "stretch") {
    // The smallest (not_larger) or largest (not_smaller) ratio; sizes round from it.
    for (int64_t d : axes) {
      if (x[d] <= 0 || size_b[d] != 0)
        return unsupported("keep_aspect_ratio_policy '" + policy + "' over the batch dimension");
      double const ratio = static_cast<double>(size_v[d]) / static_cast<double>(x[d]);
      one = !one ? ratio : policy == "not_larger" ? std::min(*one, ratio) : std::max(*one, ratio);
    }
    for (int64_t d : axes) size_v[d] = static_cast<int64_t>(std::round(*one * static_cast<double>(x[d])));
  }
  if (has_scales) {
    for (std::size_t d = 0; d < r; ++d) {
      double const s = scale[d];
      if (!(s > 0))
        return invalid_argument("scale " + std::to_string(s) + " of axis " + std::to_string(d) + " is not positive");
      if (x[d] < 0 && s != 1.0)
        return unsupported("resizing the batch dimension (axis " + std::to_string(d) + ", scale " + std::to_string(s) +
                           "): its scale must be 1");
      a.scales.push_back(static_cast<float>(s));
    }
  } else {
    for (std::size_t d = 0; d < r; ++d) {
      int64_t const b = size_b[d];
      int64_t const v = size_v[d];
      if (x[d] < 0) {
        bool const same = (b == -x[d] && v == 0) || (b == 0 && c.fixed_batch > 0 && v == -x[d] * c.fixed_batch);
        if (!same)
          return unsupported("resizing the batch dimension (axis " + std::to_string(d) +
                             "): sizes must keep the batch size");
        a.sizes.push_back(-1);
        a.scales.push_back(1.f);
        continue;
      }
      if (b != 0) return unsupported("sizes of axis " + std::to_string(d) + " depends on the batch size");
      if (v <= 0)
        return invalid_argument("size " + std::to_string(v) + " of axis " + std::to_string(d) + " is not positive");
      a.sizes.push_back(v);
      bool const listed = std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end();
      a.scales.push_back(static_cast<float>(one && listed ? *one : static_cast<double>(v) / static_cast<double>(x[d])));
    }
  }
  ASSIGN_OR_RETURN(Dims out, resize_output_shape(a, x));
  for (std::size_t d = 0; d < r; ++d)
    if (x[d] == 0 && out[d] > 0)
      return invalid_argument("axis " + std::to_string(d) + " of size 0 cannot be resized to " +
                              std::to_string(out[d]));
  Inferred k;
  k.typed = a;
  k.data_inputs = {0};
  k.outs.push_back({c.dtype(0), out});
  return k;
}

template <typename A>
A const* typed_attrs(Op const& op) {
  return std::get_if<A>(&op.typed);
}

Result<std::vector<Dims>> pad_run_shape(OpGraph const&, Op const& op, std::vector<Dims> const& in, int64_t) {
  RETURN_IF_ERROR(require_typed<PadAttrs>(op));
  ASSIGN_OR_RETURN(Dims out, pad_output_shape(*typed_attrs<PadAttrs>(op), in.at(0)));
  return std::vector<Dims>{std::move(out)};
}

Result<std::vector<Dims>> tile_run_shape(OpGraph const&, Op const& op, std::vector<Dims> const& in, int64_t batch) {
  RETURN_IF_ERROR(require_typed<TileAttrs>(op));
  ASSIGN_OR_RETURN(Dims out, tile_output_shape(*typed_attrs<TileAttrs>(op), in.at(0), batch));
  return std::vector<Dims>{std::move(out)};
}

Result<std::vector<Dims>> resize_run_shape(OpGraph const&, Op const& op, std::vector<Dims> const& in, int64_t) {
  RETURN_IF_ERROR(require_typed<ResizeAttrs>(op));
  ASSIGN_OR_RETURN(Dims out, resize_output_shape(*typed_attrs<ResizeAttrs>(op), in.at(0)));
  return std::vector<Dims>{std::move(out)};
}

Result<std::vector<Dims>> one_hot_run_shape(OpGraph const&, Op const& op, std::vector<Dims> const& in, int64_t) {
  RETURN_IF_ERROR(require_typed<OneHotAttrs>(op));
  ASSIGN_OR_RETURN(OneHotShape s, one_hot_output_shape(*typed_attrs<OneHotAttrs>(op), in.at(0)));
  return std::vector<Dims>{std::move(s.out)};
}

Result<std::vector<Dims>> gather_nd_run_shape(OpGraph const&, Op const&, std::vector<Dims> const& in, int64_t) {
  ASSIGN_OR_RETURN(Dims out, gather_nd_output_shape(in.at(0), in.at(1)));
  return std::vector<Dims>{std::move(out)};
}

// The backward scatters into data's shape by the indices.
void save_gather_nd(CostContext const& c, SavedForBackward& s) { c.save(s, c.input(1)); }

// GridSample (opset 16: 4-D, modes bilinear, nearest, bicubic; opset 20 names them linear, nearest,
// cubic and allows N-D): linear and nearest, 4-D and 5-D, and cubic, 4-D, each with every padding
// mode and align_corners.
Result<Inferred> infer_grid_sample(InferContext const& c) {
  if (!c.has(1)) return invalid_argument("GridSample needs inputs X and grid");
  for (std::size_t k = 0; k < 2; ++k)
    if (c.dtype(k) != DType::kFloat32)
      return unsupported("GridSample of " + std::string(dtype_name(c.dtype(k))) + " " + (k ? "grid" : "data") +
                         " (float32 only)");
  GridSampleAttrs a;
  std::string const mode = c.attr_string("mode", c.opset >= 20 ? "linear" : "bilinear");
  if (mode == "linear" || mode == "bilinear") {
    a.mode = GridSampleMode::kLinear;
  } else if (mode == "nearest") {
    a.mode = GridSampleMode::kNearest;
  } else if (mode == "cubic" || mode == "bicubic") {
    a.mode = GridSampleMode::kCubic;
    if (c.dims(0).size() != 4)
      return unsupported("GridSample mode '" + mode + "' samples 4-D x [N,C,H,W] only (x " + dims_str(c.dims(0)) +
                         "; linear and nearest sample volumes)");
  } else {
    return invalid_argument("GridSample mode '" + mode + "' is not one of linear, bilinear, nearest, cubic");
  }
  std::string const padding = c.attr_string("padding_mode", "zeros");
  if (padding == "zeros") {
    a.padding = GridSamplePadding::kZeros;
  } else if (padding == "border") {
    a.padding = GridSamplePadding::kBorder;
  } else if (padding == "reflection") {
    a.padding = GridSamplePadding::kReflection;
  } else {
    return invalid_argument("GridSample padding_mode '" + padding + "' is not one of zeros, border, reflection");
  }
  a.align_corners = c.attr_int("align_corners", 0) != 0;
  ASSIGN_OR_RETURN(Dims out, grid_sample_output_shape(c.dims(0), c.dims(1)));
  Inferred k;
  k.typed = a;
  k.data_inputs = {0, 1};
  k.outs.push_back({DType::kFloat32, out});
  return k;
}

// Col2Im (opset 18): image_shape and block_shape static.
Result<Inferred> infer_col2im(InferContext const& c) {
  if (!c.has(1) || !c.has(2)) return invalid_argument("Col2Im needs inputs input, image_shape and block_shape");
  if (c.dtype(0) != DType::kFloat32)
    return unsupported("Col2Im of " + std::string(dtype_name(c.dtype(0))) + " data (float32 only)");
  Col2ImAttrs a;
  ASSIGN_OR_RETURN(a.image, c.static_ints(1, "image_shape"));
  ASSIGN_OR_RETURN(a.block, c.static_ints(2, "block_shape"));
  std::size_t const sp = a.image.size();
  a.dilations = c.attr_ints("dilations").value_or(Dims(sp, 1));
  a.strides = c.attr_ints("strides").value_or(Dims(sp, 1));
  a.pads = c.attr_ints("pads").value_or(Dims(2 * sp, 0));
  ASSIGN_OR_RETURN(Col2ImShape shape, col2im_shape(a, c.dims(0)));
  Inferred k;
  k.typed = a;
  k.data_inputs = {0};
  k.outs.push_back({DType::kFloat32, shape.out});
  return k;
}

Result<std::vector<Dims>> col2im_run_shape(OpGraph const&, Op const& op, std::vector<Dims> const& in, int64_t) {
  RETURN_IF_ERROR(require_typed<Col2ImAttrs>(op));
  ASSIGN_OR_RETURN(Col2ImShape shape, col2im_shape(*typed_attrs<Col2ImAttrs>(op), in.at(0)));
  return std::vector<Dims>{std::move(shape.out)};
}

Result<std::vector<Dims>> grid_sample_run_shape(OpGraph const&, Op const&, std::vector<Dims> const& in, int64_t) {
  ASSIGN_OR_RETURN(Dims out, grid_sample_output_shape(in.at(0), in.at(1)));
  return std::vector<Dims>{std::move(out)};
}

// GridSample keeps x and the grid.
void grid_sample_saved(CostContext const& c, SavedForBackward& s) {
  c.save(s, c.input(0));
  c.save(s, c.input(1));
}

}  // namespace

void register_index_ops(OpTable& t) {
  // Pads, pad value, repeats, k, indices, roi/scales/sizes get no gradient; OneHot none at all.
  OpDef pad = elementwise_op(infer_pad, {1, 1});
  pad.run_shape = pad_run_shape;
  pad.grad_free = inputs_after_first();
  define(t, "Pad", std::move(pad));
  OpDef tile = elementwise_op(infer_tile, {1, 1});
  tile.run_shape = tile_run_shape;
  tile.fold = fold_tile;
  tile.grad_free = inputs_after_first();
  define(t, "Tile", std::move(tile));
  define(t, "Trilu", with_grad_free(elementwise_op(infer_trilu, {1, 1}), inputs_after_first()));
  OpDef one_hot = elementwise_op(infer_one_hot, {1, 0}, nullptr, fold_one_hot);
  one_hot.run_shape = one_hot_run_shape;
  one_hot.grad_free = every_input();
  define(t, "OneHot", std::move(one_hot));
  define(t, "GatherElements",
         with_grad_free(elementwise_op(infer_gather_elements, {1, 1}, nullptr, fold_gather_elements),
                        inputs_after_first()));
  OpDef gather_nd = elementwise_op(infer_gather_nd, {1, 1}, save_gather_nd);
  gather_nd.run_shape = gather_nd_run_shape;
  gather_nd.grad_free = inputs_after_first();
  define(t, "GatherND", std::move(gather_nd));
  // The indices (slot 1) get none; the updates (slot 2) are data.
  define(t, "ScatterElements", with_grad_free(elementwise_op(infer_scatter_elements, {1, 1}), input_slots({1})));
  // Folded over static inputs (torchvision Swin's shifted-window mask), run otherwise.
  OpDef scatter_nd = elementwise_op(infer_scatter_nd, {1, 1}, save_scatter_nd, fold_scatter_nd);
  scatter_nd.grad_free = input_slots({1});
  define(t, "ScatterND", std::move(scatter_nd));
  // The opset 9-10 name of ScatterElements without reduction.
  define(t, "Scatter", with_grad_free(elementwise_op(infer_scatter_elements, {1, 1}), input_slots({1})));
  OpDef resize = elementwise_op(infer_resize, {8, 8});
  resize.run_shape = resize_run_shape;
  resize.grad_free = inputs_after_first();
  define(t, "Resize", std::move(resize));
  // Per output element: four reads and weights forward; backward the scatter and the grid's slopes.
  // The grid gets a gradient (a spatial transformer learns it; ONNX declares it non-differentiable).
  OpDef grid_sample = elementwise_op(infer_grid_sample, {12, 30}, grid_sample_saved);
  grid_sample.run_shape = grid_sample_run_shape;
  define(t, "GridSample", std::move(grid_sample));
  // Per output element the column entries landing on its pixel; backward one read per entry.
  OpDef col2im = elementwise_op(infer_col2im, {4, 1});
  col2im.run_shape = col2im_run_shape;
  col2im.grad_free = inputs_after_first();
  define(t, "Col2Im", std::move(col2im));
}

std::optional<ScatterReduction> scatter_reduction_named(std::string const& name) {
  static std::map<std::string, ScatterReduction, std::less<>> const named = {{"none", ScatterReduction::kNone},
                                                                             {"add", ScatterReduction::kAdd},
                                                                             {"mul", ScatterReduction::kMul},
                                                                             {"max", ScatterReduction::kMax},
                                                                             {"min", ScatterReduction::kMin}};
  auto const found = named.find(name);
  if (found == named.end()) return std::nullopt;
  return found->second;
}

}  // namespace gp::graph::ops
