// RawModel -> OpGraph: walks the nodes in file order (ONNX requires topological order), folds
// what is static, keeps the rest as operators with typed attributes and shapes computed by our
// own rules (with the symbolic batch: dims < 0 are multiples of N), then fills the accounting.
#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <unordered_map>

#include "graph/accounting.h"
#include "graph/onnx_import_fold.h"
#include "graph/onnx_import_raw.h"

namespace gp::graph::onnx_import {
namespace {

using Dims = std::vector<int64_t>;

std::string dim_str(int64_t d) {
  if (d == kBatch) return "N";
  if (d < 0) return std::to_string(-d) + "N";
  return std::to_string(d);
}

std::string dims_str(Dims const& d) { return Shape{d}.to_string(); }

Result<int64_t> mul_dims(int64_t a, int64_t b) {
  if (a < 0 && b < 0) return unsupported("a shape multiplies the batch size by itself");
  if (a < 0 || b < 0) return -(std::abs(a) * std::abs(b));
  return a * b;
}

Result<int64_t> prod_dims(Dims const& d, std::size_t from, std::size_t to) {
  int64_t p = 1;
  for (std::size_t k = from; k < to; ++k) {
    ASSIGN_OR_RETURN(p, mul_dims(p, d[k]));
  }
  return p;
}

int64_t norm_axis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

Result<DType> dtype_of_onnx(int64_t t) {
  switch (t) {
    case 1:
      return DType::kFloat32;
    case 10:
      return DType::kFloat16;
    case 16:
      return DType::kBFloat16;
    case 11:
      return DType::kFloat64;
    case 7:
      return DType::kInt64;
    case 6:
      return DType::kInt32;
    case 3:
      return DType::kInt8;
    case 2:
      return DType::kUInt8;
    case 9:
      return DType::kBool;
    default:
      break;
  }
  return unsupported("Cast to ONNX element type " + std::to_string(t) + " is not supported");
}

bool is_view_op(std::string const& t) {
  return t == "Transpose" || t == "Identity" || t == "Cast" || t == "Reshape" || t == "Unsqueeze" || t == "Squeeze" ||
         t == "Flatten";
}

// Float initializers that feed a trainable slot, directly or through a view (Transpose of a
// weight, as torch exports nn.Linear on 3-D inputs).
std::set<std::string> trainable_initializers(RawModel const& m) {
  std::unordered_map<std::string, std::string> root;
  for (auto const& init : m.initializers)
    if (is_float_dtype(init.dtype)) root[init.name] = init.name;
  std::unordered_map<std::string, std::string> producer_type;
  std::set<std::string> out;
  auto mark = [&](RawNode const& n, std::size_t k) {
    if (k >= n.inputs.size()) return;
    auto it = root.find(n.inputs[k]);
    if (it != root.end()) out.insert(it->second);
  };
  auto produced_by_linear = [&](std::string const& name) {
    auto it = producer_type.find(name);
    return it != producer_type.end() && (it->second == "MatMul" || it->second == "Gemm" || it->second == "Conv");
  };
  for (auto const& n : m.nodes) {
    std::string const& t = n.type;
    if (is_view_op(t) && !n.inputs.empty() && root.count(n.inputs[0]))
      for (auto const& o : n.outputs) root[o] = root[n.inputs[0]];
    if (t == "Conv" || t == "BatchNormalization" || t == "LayerNormalization") {
      mark(n, 1);
      mark(n, 2);
    } else if (t == "Gemm" || t == "MatMul") {
      mark(n, 0);
      mark(n, 1);
      mark(n, 2);
    } else if (t == "Gather") {
      mark(n, 0);
    } else if ((t == "Add" || t == "Sub") && n.inputs.size() == 2) {
      if (produced_by_linear(n.inputs[0])) mark(n, 1);
      if (produced_by_linear(n.inputs[1])) mark(n, 0);
    }
    for (auto const& o : n.outputs) producer_type[o] = t;
  }
  return out;
}

struct Val {
  DType dtype = DType::kFloat32;
  Dims dims;
  std::optional<SymArray> folded;          // a static value (folded, Constant, or read from an initializer)
  std::shared_ptr<TensorData const> data;  // an initializer's data
  bool initializer = false;
  bool trainable = false;
  TensorId tensor = kNoTensor;  // set once it is a graph tensor

  bool is_static() const { return !trainable && (folded || initializer); }
};

// What a kept node becomes: typed attributes, which inputs stay operator inputs, and its outputs.
struct Kept {
  OpAttrs typed;
  std::vector<std::size_t> data_inputs;
  std::vector<std::pair<DType, Dims>> outs;
};

class Lowering {
 public:
  Lowering(RawModel model, bool first_dim_is_batch) : m_(std::move(model)), first_dim_is_batch_(first_dim_is_batch) {}

  Result<OpGraph> run();

 private:
  Status add_inputs();
  Status lower_node(RawNode const& n);
  Status keep(RawNode const& n, std::vector<Val*> const& ins);
  Result<Kept> rule(RawNode const& n, std::vector<Val*> const& ins);
  Result<SymArray const*> sym(Val& v, std::string const& name);
  Result<SymArray const*> static_input(RawNode const& n, std::vector<Val*> const& ins, std::size_t k,
                                       std::string const& what);
  Result<std::vector<int64_t>> static_ints(RawNode const& n, std::vector<Val*> const& ins, std::size_t k,
                                           std::string const& what);
  Result<TensorId> materialize(std::string const& name, Val& v);
  std::string op_name(RawNode const& n);
  Status check_against_onnx(std::string const& name, Dims const& dims) const;

  RawModel m_;
  bool first_dim_is_batch_;
  int64_t fixed_batch_ = 0;  // the inputs' first dimension when the file fixes it
  std::unordered_map<std::string, Val> vals_;
  std::set<std::string> trainable_;
  std::set<std::string> used_;            // names read by some node or listed as graph outputs
  std::set<std::string> op_names_;        // claimed so far
  std::set<std::string> reserved_names_;  // every explicit node name: generated names avoid them
  std::map<std::string, int> unnamed_count_;
  std::vector<TensorInfo> tensors_;
  std::vector<Op> ops_;
  std::vector<TensorId> inputs_;
};

std::string Lowering::op_name(RawNode const& n) {
  if (!n.name.empty() && !op_names_.count(n.name)) {
    op_names_.insert(n.name);
    return n.name;
  }
  std::string const base = n.name.empty() ? n.type : n.name;
  std::string name;
  do {
    name = base + "_" + std::to_string(unnamed_count_[base]++);
  } while (op_names_.count(name) || reserved_names_.count(name));
  op_names_.insert(name);
  return name;
}

Result<SymArray const*> Lowering::sym(Val& v, std::string const& name) {
  if (v.folded) return &*v.folded;
  if (!v.data)
    return unsupported("value '" + name +
                       "' is needed at import time but its data was not loaded (load the "
                       "weights, or keep shape constants inside the model file)");
  ASSIGN_OR_RETURN(SymArray a, SymArray::from_data(*v.data));
  v.folded = std::move(a);
  return &*v.folded;
}

Result<SymArray const*> Lowering::static_input(RawNode const& n, std::vector<Val*> const& ins, std::size_t k,
                                               std::string const& what) {
  if (k >= ins.size() || !ins[k]) return static_cast<SymArray const*>(nullptr);
  if (!ins[k]->is_static())
    return unsupported(n.type + " '" + n.name + "': its " + what + " ('" + n.inputs[k] +
                       "') is computed at run time; graphpipe needs static shapes and attributes (only the first, "
                       "batch dimension of the inputs may be dynamic)");
  return sym(*ins[k], n.inputs[k]);
}

Result<std::vector<int64_t>> Lowering::static_ints(RawNode const& n, std::vector<Val*> const& ins, std::size_t k,
                                                   std::string const& what) {
  ASSIGN_OR_RETURN(SymArray const* a, static_input(n, ins, k, what));
  if (!a) return std::vector<int64_t>{};
  if (a->has_batch()) return unsupported(n.type + " '" + n.name + "': its " + what + " depends on the batch size");
  if (a->is_float()) {
    std::vector<int64_t> v;
    for (double x : a->f) v.push_back(static_cast<int64_t>(x));
    return v;
  }
  return a->i;
}

Result<TensorId> Lowering::materialize(std::string const& name, Val& v) {
  if (v.tensor != kNoTensor) return v.tensor;
  TensorInfo t;
  t.name = name;
  t.dtype = v.dtype;
  t.shape.dims = v.dims;
  if (v.trainable) {
    t.role = TensorRole::kWeight;
    t.data = v.data;
  } else if (v.initializer && !v.folded) {
    t.role = TensorRole::kConstant;
    t.data = v.data;
  } else {
    t.role = TensorRole::kConstant;
    ASSIGN_OR_RETURN(TensorData d, v.folded->to_data(name));
    t.data = std::make_shared<TensorData const>(std::move(d));
  }
  t.id = static_cast<TensorId>(tensors_.size());
  tensors_.push_back(std::move(t));
  v.tensor = tensors_.back().id;
  return v.tensor;
}

Status Lowering::check_against_onnx(std::string const& name, Dims const& dims) const {
  auto it = m_.value_info.find(name);
  if (it == m_.value_info.end() || !it->second.has_shape) return Status::ok();
  auto const& theirs = it->second.dims;
  if (theirs.size() != dims.size())
    return internal_error("tensor '" + name + "': graphpipe computes shape " + dims_str(dims) +
                          " but ONNX shape inference gives rank " + std::to_string(theirs.size()));
  for (std::size_t k = 0; k < dims.size(); ++k)
    if (dims[k] >= 0 && theirs[k].value >= 0 && theirs[k].value != dims[k])
      return internal_error("tensor '" + name + "': graphpipe computes shape " + dims_str(dims) +
                            " but ONNX shape inference gives dimension " + std::to_string(k) + " = " +
                            std::to_string(theirs[k].value));
  return Status::ok();
}

Status Lowering::add_inputs() {
  for (auto const& init : m_.initializers) {
    Val v;
    v.dtype = init.dtype;
    v.dims = init.dims;
    v.data = init.data;
    v.initializer = true;
    v.trainable = trainable_.count(init.name) > 0;
    vals_[init.name] = std::move(v);
  }
  for (auto const& in : m_.inputs) {
    if (!in.has_shape) return unsupported("input '" + in.name + "' has no shape; export the model with input shapes");
    Val v;
    v.dtype = in.dtype;
    for (std::size_t k = 0; k < in.dims.size(); ++k) {
      RawDim const& d = in.dims[k];
      if (k == 0 && first_dim_is_batch_) {
        v.dims.push_back(kBatch);
        if (d.value > 0) fixed_batch_ = d.value;
      } else if (d.value >= 0) {
        v.dims.push_back(d.value);
      } else {
        return unsupported("input '" + in.name + "' has a dynamic dimension " + std::to_string(k) +
                           (d.param.empty() ? std::string(" (unknown size)") : " ('" + d.param + "')") +
                           "; only the first (batch) dimension may be dynamic: export the model with a fixed size "
                           "for that dimension");
      }
    }
    TensorInfo t;
    t.name = in.name;
    t.dtype = in.dtype;
    t.shape.dims = v.dims;
    t.role = TensorRole::kInput;
    t.id = static_cast<TensorId>(tensors_.size());
    tensors_.push_back(t);
    v.tensor = t.id;
    inputs_.push_back(t.id);
    vals_[in.name] = std::move(v);
  }
  return Status::ok();
}

Status Lowering::lower_node(RawNode const& n) {
  std::vector<Val*> ins;
  for (auto const& name : n.inputs) {
    if (name.empty()) {
      ins.push_back(nullptr);
      continue;
    }
    auto it = vals_.find(name);
    if (it == vals_.end())
      return invalid_argument("node '" + n.name + "' (" + n.type + ") reads '" + name + "', which nothing produces");
    ins.push_back(&it->second);
  }
  if (n.type == "Identity") {
    vals_[n.outputs[0]] = *ins[0];
    return Status::ok();
  }
  if (n.type == "Shape") {
    Dims d = ins[0]->dims;
    int64_t const r = static_cast<int64_t>(d.size());
    int64_t start = std::clamp<int64_t>(norm_axis(attr_int(n, "start", 0), r), 0, r);
    int64_t end = std::clamp<int64_t>(norm_axis(attr_int(n, "end", r), r), 0, r);
    Val v;
    v.dtype = DType::kInt64;
    v.folded = SymArray::from_dims(Dims(d.begin() + start, d.begin() + std::max(start, end)));
    v.dims = v.folded->dims;
    vals_[n.outputs[0]] = std::move(v);
    return Status::ok();
  }
  bool all_static = true;
  for (Val* v : ins) all_static &= !v || v->is_static();
  if (all_static) {
    std::vector<SymArray const*> syms;
    bool have_data = true;
    for (std::size_t k = 0; k < ins.size(); ++k) {
      if (!ins[k]) {
        syms.push_back(nullptr);
        continue;
      }
      if (!ins[k]->folded && !ins[k]->data) {
        have_data = false;
        break;
      }
      ASSIGN_OR_RETURN(SymArray const* s, sym(*ins[k], n.inputs[k]));
      syms.push_back(s);
    }
    if (have_data) {
      auto folded = fold_node(n, syms, m_.opset);
      if (!folded.is_ok()) return folded.status().with_context(n.type + " '" + n.name + "'");
      if (*folded) {
        auto& outs = **folded;
        for (std::size_t k = 0; k < outs.size() && k < n.outputs.size(); ++k) {
          Val v;
          v.dtype = outs[k].dtype;
          v.dims = outs[k].dims;
          v.folded = std::move(outs[k]);
          vals_[n.outputs[k]] = std::move(v);
        }
        return Status::ok();
      }
    }
  }
  if (n.type == "Constant" || n.type == "ConstantOfShape" || n.type == "Range") {
    for (std::size_t k = 0; k < ins.size(); ++k)
      if (ins[k] && !ins[k]->is_static())
        return unsupported(n.type + " '" + n.name + "': its input '" + n.inputs[k] +
                           "' is computed at run time, so its output shape is dynamic; only the first (batch) "
                           "dimension of the inputs may be dynamic");
    return unsupported(n.type + " '" + n.name +
                       "' cannot be folded (its value is too large or of an unsupported type)");
  }
  return keep(n, ins);
}

Status Lowering::keep(RawNode const& n, std::vector<Val*> const& ins) {
  auto kept = rule(n, ins);
  if (!kept.is_ok()) return kept.status().with_context(n.type + " '" + n.name + "'");
  for (std::size_t k = kept->outs.size(); k < n.outputs.size(); ++k)
    if (!n.outputs[k].empty() && used_.count(n.outputs[k]))
      return unsupported(n.type + " '" + n.name + "': output " + std::to_string(k) + " ('" + n.outputs[k] +
                         "') is used, but graphpipe only computes this operator's first " +
                         std::to_string(kept->outs.size()) + " output(s)");
  Op op;
  op.name = op_name(n);
  op.type = n.type;
  op.domain = n.domain;
  op.attrs = n.attrs;
  op.typed = kept->typed;
  for (std::size_t k : kept->data_inputs) {
    if (k >= n.inputs.size() || n.inputs[k].empty()) {
      op.inputs.push_back(kNoTensor);
      continue;
    }
    ASSIGN_OR_RETURN(TensorId t, materialize(n.inputs[k], *ins[k]));
    op.inputs.push_back(t);
  }
  for (std::size_t k = 0; k < kept->outs.size(); ++k) {
    auto const& [dtype, dims] = kept->outs[k];
    RETURN_IF_ERROR(check_against_onnx(n.outputs[k], dims));
    int batch_axes = 0;
    for (int64_t d : dims) batch_axes += d < 0;
    if (batch_axes > 1)
      return unsupported(n.type + " '" + n.name + "': output '" + n.outputs[k] + "' would have shape " +
                         dims_str(dims) + " with the batch in more than one dimension");
    TensorInfo t;
    t.name = n.outputs[k];
    t.dtype = dtype;
    t.shape.dims = dims;
    t.role = TensorRole::kActivation;
    t.id = static_cast<TensorId>(tensors_.size());
    tensors_.push_back(t);
    Val v;
    v.dtype = dtype;
    v.dims = dims;
    v.tensor = t.id;
    vals_[n.outputs[k]] = std::move(v);
    op.outputs.push_back(t.id);
  }
  op.id = static_cast<OpId>(ops_.size());
  ops_.push_back(std::move(op));
  return Status::ok();
}

// Explicit pads (begin..., end...) and output sizes of a sliding window over `in` spatial dims.
struct Window {
  Dims pads, out;
};

Result<Window> window(RawNode const& n, Dims const& in, Dims const& kernel, Dims const& strides, Dims const& dil,
                      bool ceil_mode) {
  std::size_t const sp = in.size();
  if (kernel.size() != sp || strides.size() != sp || dil.size() != sp)
    return invalid_argument("kernel_shape, strides and dilations need one value per spatial dimension (" +
                            std::to_string(sp) + ")");
  Window w;
  w.pads = attr_ints(n, "pads").value_or(Dims(2 * sp, 0));
  if (w.pads.size() != 2 * sp) return invalid_argument("pads has " + std::to_string(w.pads.size()) + " values");
  std::string const auto_pad = attr_string(n, "auto_pad", "NOTSET");
  for (std::size_t i = 0; i < sp; ++i) {
    if (in[i] < 0) return unsupported("a sliding window over the batch dimension");
    if (kernel[i] <= 0 || strides[i] <= 0 || dil[i] <= 0)
      return invalid_argument("kernel_shape, strides and dilations must be positive");
    int64_t const eff = (kernel[i] - 1) * dil[i] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      int64_t const out = (in[i] + strides[i] - 1) / strides[i];
      int64_t const total = std::max<int64_t>(0, (out - 1) * strides[i] + eff - in[i]);
      int64_t const small = total / 2;
      w.pads[i] = auto_pad == "SAME_UPPER" ? small : total - small;
      w.pads[i + sp] = total - w.pads[i];
    } else if (auto_pad == "VALID") {
      w.pads[i] = w.pads[i + sp] = 0;
    }
    int64_t const span = in[i] + w.pads[i] + w.pads[i + sp] - eff;
    if (span < 0) return invalid_argument("the window is larger than the padded input");
    int64_t out = (ceil_mode ? (span + strides[i] - 1) / strides[i] : span / strides[i]) + 1;
    if (ceil_mode && (out - 1) * strides[i] >= in[i] + w.pads[i]) --out;  // the last window must start inside
    w.out.push_back(out);
  }
  return w;
}

Result<Kept> Lowering::rule(RawNode const& n, std::vector<Val*> const& ins) {
  std::string const& t = n.type;
  Kept k;
  auto in_dims = [&](std::size_t i) -> Dims const& { return ins.at(i)->dims; };
  auto all_inputs = [&] {
    for (std::size_t i = 0; i < n.inputs.size(); ++i) k.data_inputs.push_back(i);
  };
  auto same_as_input = [&] { k.outs.push_back({ins[0]->dtype, ins[0]->dims}); };
  for (std::size_t i = 0; i < ins.size(); ++i)
    if (!ins[i] && i == 0) return invalid_argument("the first input is missing");
  int64_t const r0 = static_cast<int64_t>(ins[0]->dims.size());

  if (t == "Conv") {
    Dims const& x = in_dims(0);
    Dims const& wd = in_dims(1);
    if (x.size() < 3 || wd.size() != x.size())
      return invalid_argument("Conv needs N,C,spatial input and a matching weight");
    std::size_t const sp = x.size() - 2;
    ConvAttrs a;
    a.kernel = attr_ints(n, "kernel_shape").value_or(Dims(wd.begin() + 2, wd.end()));
    a.strides = attr_ints(n, "strides").value_or(Dims(sp, 1));
    a.dilations = attr_ints(n, "dilations").value_or(Dims(sp, 1));
    a.group = attr_int(n, "group", 1);
    a.has_bias = n.inputs.size() > 2 && !n.inputs[2].empty();
    if (x[1] != wd[1] * a.group)
      return invalid_argument("input has " + dim_str(x[1]) + " channels but the weight expects " +
                              std::to_string(wd[1] * a.group));
    ASSIGN_OR_RETURN(Window w, window(n, Dims(x.begin() + 2, x.end()), a.kernel, a.strides, a.dilations, false));
    a.pads = w.pads;
    Dims out = {x[0], wd[0]};
    out.insert(out.end(), w.out.begin(), w.out.end());
    k.typed = a;
    all_inputs();
    k.outs.push_back({ins[0]->dtype, out});
  } else if (t == "MaxPool" || t == "AveragePool") {
    Dims const& x = in_dims(0);
    std::size_t const sp = x.size() - 2;
    PoolAttrs a;
    a.kind = t == "MaxPool" ? PoolKind::kMax : PoolKind::kAverage;
    auto kernel = attr_ints(n, "kernel_shape");
    if (!kernel) return invalid_argument("kernel_shape is missing");
    a.kernel = *kernel;
    a.strides = attr_ints(n, "strides").value_or(Dims(sp, 1));
    Dims const dil = attr_ints(n, "dilations").value_or(Dims(sp, 1));
    if (std::any_of(dil.begin(), dil.end(), [](int64_t d) { return d != 1; }))
      return unsupported("dilated pooling is not supported");
    a.ceil_mode = attr_int(n, "ceil_mode", 0) != 0;
    a.count_include_pad = attr_int(n, "count_include_pad", 0) != 0;
    ASSIGN_OR_RETURN(Window w, window(n, Dims(x.begin() + 2, x.end()), a.kernel, a.strides, dil, a.ceil_mode));
    a.pads = w.pads;
    Dims out = {x[0], x[1]};
    out.insert(out.end(), w.out.begin(), w.out.end());
    k.typed = a;
    k.data_inputs = {0};
    k.outs.push_back({ins[0]->dtype, out});
  } else if (t == "GlobalAveragePool") {
    Dims const& x = in_dims(0);
    PoolAttrs a;
    a.kind = PoolKind::kGlobalAverage;
    a.kernel.assign(x.begin() + 2, x.end());
    a.strides.assign(x.size() - 2, 1);
    a.pads.assign(2 * (x.size() - 2), 0);
    Dims out = {x[0], x[1]};
    out.resize(x.size(), 1);
    k.typed = a;
    k.data_inputs = {0};
    k.outs.push_back({ins[0]->dtype, out});
  } else if (t == "BatchNormalization") {
    BatchNormAttrs a;
    a.epsilon = static_cast<float>(attr_float(n, "epsilon", 1e-5));
    a.momentum = static_cast<float>(attr_float(n, "momentum", 0.9));
    std::size_t named_outputs = 0;
    for (auto const& o : n.outputs) named_outputs += !o.empty();
    a.training = m_.opset >= 14 ? attr_int(n, "training_mode", 0) != 0 : named_outputs > 1;
    k.typed = a;
    all_inputs();
    same_as_input();
  } else if (t == "Relu" || t == "Sigmoid" || t == "Tanh" || t == "Sqrt") {
    k.data_inputs = {0};
    same_as_input();
  } else if (t == "LeakyRelu") {
    k.typed = LeakyReluAttrs{static_cast<float>(attr_float(n, "alpha", 0.01))};
    k.data_inputs = {0};
    same_as_input();
  } else if (t == "Gelu") {
    k.typed = GeluAttrs{attr_string(n, "approximate", "none") == "tanh"};
    k.data_inputs = {0};
    same_as_input();
  } else if (t == "Softmax") {
    ASSIGN_OR_RETURN(int64_t const axis, checked_axis(attr_int(n, "axis", m_.opset < 13 ? 1 : -1), r0));
    if (m_.opset < 13 && axis != r0 - 1)
      return unsupported("Softmax before opset 13 normalises over all axes from " + std::to_string(axis) +
                         " together; graphpipe supports one axis: re-export with opset 13 or later");
    k.typed = SoftmaxAttrs{axis};
    k.data_inputs = {0};
    same_as_input();
  } else if (t == "LayerNormalization") {
    LayerNormAttrs a;
    ASSIGN_OR_RETURN(a.axis, checked_axis(attr_int(n, "axis", -1), r0));
    a.epsilon = static_cast<float>(attr_float(n, "epsilon", 1e-5));
    a.has_bias = n.inputs.size() > 2 && !n.inputs[2].empty();
    for (int64_t d = a.axis; d < r0; ++d)
      if (in_dims(0)[d] < 0) return unsupported("normalising over the batch dimension");
    k.typed = a;
    all_inputs();
    same_as_input();
  } else if (t == "Flatten") {
    ASSIGN_OR_RETURN(int64_t const axis, checked_axis(attr_int(n, "axis", 1), r0, /*split_point=*/true));
    ASSIGN_OR_RETURN(int64_t a, prod_dims(in_dims(0), 0, static_cast<std::size_t>(axis)));
    ASSIGN_OR_RETURN(int64_t b, prod_dims(in_dims(0), static_cast<std::size_t>(axis), in_dims(0).size()));
    k.typed = FlattenAttrs{axis};
    k.data_inputs = {0};
    k.outs.push_back({ins[0]->dtype, {a, b}});
  } else if (t == "Reshape") {
    ASSIGN_OR_RETURN(SymArray const* s, static_input(n, ins, 1, "shape"));
    if (!s) return invalid_argument("the shape input is missing");
    bool const allowzero = attr_int(n, "allowzero", 0) != 0;
    Dims const& x = in_dims(0);
    Dims out;
    int infer = -1;
    for (std::size_t i = 0; i < s->i.size(); ++i) {
      int64_t const b = s->has_batch() ? s->b[i] : 0;
      int64_t const v = s->i[i];
      if (b != 0) {
        if (v != 0) return unsupported("a reshape dimension is the batch size plus a number");
        out.push_back(-b);
      } else if (v == 0 && !allowzero) {
        if (i >= x.size())
          return invalid_argument("shape copies dimension " + std::to_string(i) + " that the input lacks");
        out.push_back(x[i]);
      } else if (v == -1) {
        infer = static_cast<int>(i);
        out.push_back(1);
      } else {
        out.push_back(v);
      }
    }
    // A model exported with a fixed batch size B spells the batch as the number B (or a
    // multiple of it) in its first reshape dimension.
    bool const out_has_batch = std::any_of(out.begin(), out.end(), [](int64_t d) { return d < 0; });
    if (!out_has_batch && fixed_batch_ > 0 && !out.empty() && infer != 0 && out[0] > 0 && out[0] % fixed_batch_ == 0 &&
        std::any_of(x.begin(), x.end(), [](int64_t d) { return d < 0; }))
      out[0] = -(out[0] / fixed_batch_);
    static constexpr int64_t kTooLarge = int64_t{1}
                                         << 50;  // elements no real tensor has; keeps the products below exact
    auto split = [](Dims const& d) {             // (batch coefficient, static product), each capped at kTooLarge
      int64_t b = 0, p = 1;
      for (int64_t v : d) {
        if (v < 0)
          b = v < -kTooLarge ? kTooLarge : -v;
        else if (__builtin_mul_overflow(p, v, &p) || p > kTooLarge)
          p = kTooLarge;
      }
      return std::pair{b, p};
    };
    auto [ib, ip] = split(x);
    auto [ob, op] = split(out);
    if (ib == kTooLarge || ip == kTooLarge || ob == kTooLarge || op == kTooLarge)
      return invalid_argument("cannot reshape " + dims_str(x) + " to " + dims_str(out) + ": too many elements");
    if (infer >= 0) {
      int64_t const in_total = ip * std::max<int64_t>(ib, 1), out_total = op * std::max<int64_t>(ob, 1);
      if (ib > 0 && ob == 0) {
        if (op == 0 || in_total % op) return invalid_argument("cannot infer the -1 dimension of " + dims_str(out));
        out[infer] = -(in_total / op);
      } else if (ib == 0 && ob > 0) {
        return invalid_argument("the shape puts the batch size into a tensor that has none");
      } else {
        if (out_total == 0 || in_total % out_total)
          return invalid_argument("cannot infer the -1 dimension of " + dims_str(out) + " from " + dims_str(x));
        out[infer] = in_total / out_total;
      }
      std::tie(ob, op) = split(out);
    }
    if ((ib > 0) != (ob > 0) || ip * std::max<int64_t>(ib, 1) != op * std::max<int64_t>(ob, 1))
      return invalid_argument("cannot reshape " + dims_str(x) + " to " + dims_str(out));
    k.typed = ReshapeAttrs{out, allowzero};
    k.data_inputs = {0};
    k.outs.push_back({ins[0]->dtype, out});
  } else if (t == "Transpose") {
    Dims perm(static_cast<std::size_t>(r0));
    std::iota(perm.rbegin(), perm.rend(), 0);
    if (auto p = attr_ints(n, "perm")) perm = *p;
    if (static_cast<int64_t>(perm.size()) != r0) return invalid_argument("perm does not match the input rank");
    Dims out;
    for (int64_t& p : perm) {
      ASSIGN_OR_RETURN(p, checked_axis(p, r0));
    }
    for (int64_t p : perm) out.push_back(in_dims(0)[static_cast<std::size_t>(p)]);
    k.typed = TransposeAttrs{perm};
    k.data_inputs = {0};
    k.outs.push_back({ins[0]->dtype, out});
  } else if (t == "Concat") {
    ASSIGN_OR_RETURN(int64_t const axis, checked_axis(attr_int(n, "axis", 0), r0));
    Dims out = in_dims(0);
    for (std::size_t i = 0; i < ins.size(); ++i) {
      if (!ins[i]) continue;
      Dims const& d = in_dims(i);
      if (d.size() != out.size()) return invalid_argument("inputs have different ranks");
      if (d[axis] < 0) return unsupported("concatenation along the batch dimension");
      for (std::size_t j = 0; j < d.size(); ++j)
        if (static_cast<int64_t>(j) != axis && d[j] != out[j])
          return invalid_argument("input " + std::to_string(i) + " has shape " + dims_str(d) + ", not matching " +
                                  dims_str(out));
      if (i > 0) out[axis] += d[axis];
    }
    k.typed = ConcatAttrs{axis};
    all_inputs();
    k.outs.push_back({ins[0]->dtype, out});
  } else if (t == "Split") {
    ASSIGN_OR_RETURN(int64_t const axis, checked_axis(attr_int(n, "axis", 0), r0));
    Dims sizes;
    if (m_.opset >= 13) {
      ASSIGN_OR_RETURN(sizes, static_ints(n, ins, 1, "split sizes"));
    } else {
      sizes = attr_ints(n, "split").value_or(Dims{});
    }
    int64_t const d = in_dims(0)[axis];
    if (d < 0) return unsupported("splitting the batch dimension");
    if (sizes.empty()) {
      int64_t const parts = static_cast<int64_t>(n.outputs.size());
      if (d % parts)
        return invalid_argument("dimension " + std::to_string(d) + " does not split into " + std::to_string(parts) +
                                " equal parts");
      sizes.assign(static_cast<std::size_t>(parts), d / parts);
    }
    if (sizes.size() != n.outputs.size() || std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) != d)
      return invalid_argument("split sizes do not add up to dimension " + std::to_string(d));
    k.typed = SplitAttrs{axis, sizes};
    k.data_inputs = {0};
    for (int64_t s : sizes) {
      Dims out = in_dims(0);
      out[axis] = s;
      k.outs.push_back({ins[0]->dtype, out});
    }
  } else if (t == "Slice") {
    SliceAttrs a;
    Dims starts, ends, axes, steps;
    if (m_.opset < 10) {
      starts = attr_ints(n, "starts").value_or(Dims{});
      ends = attr_ints(n, "ends").value_or(Dims{});
      axes = attr_ints(n, "axes").value_or(Dims{});
    } else {
      ASSIGN_OR_RETURN(starts, static_ints(n, ins, 1, "starts"));
      ASSIGN_OR_RETURN(ends, static_ints(n, ins, 2, "ends"));
      ASSIGN_OR_RETURN(axes, static_ints(n, ins, 3, "axes"));
      ASSIGN_OR_RETURN(steps, static_ints(n, ins, 4, "steps"));
    }
    if (axes.empty())
      for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
      return invalid_argument("starts, ends, axes and steps differ in length");
    Dims out = in_dims(0);
    for (std::size_t i = 0; i < starts.size(); ++i) {
      ASSIGN_OR_RETURN(int64_t const ax, checked_axis(axes[i], r0));
      int64_t const d = out.at(static_cast<std::size_t>(ax));
      int64_t s = starts[i], e = ends[i], st = steps[i];
      if (st == 0) return invalid_argument("a step is 0");
      if (d < 0) {
        if (s == 0 && st == 1 && e >= std::numeric_limits<int32_t>::max()) {
          a.starts.push_back(0);
          a.ends.push_back(std::numeric_limits<int64_t>::max());
          a.axes.push_back(ax);
          a.steps.push_back(1);
          continue;
        }
        return unsupported("slicing the batch dimension");
      }
      if (s < 0) s += d;
      if (e < 0) e += d;
      int64_t len;
      if (st > 0) {
        s = std::clamp<int64_t>(s, 0, d);
        e = std::clamp<int64_t>(e, 0, d);
        len = std::max<int64_t>(0, (e - s + st - 1) / st);
      } else {
        s = std::clamp<int64_t>(s, 0, d - 1);
        e = std::clamp<int64_t>(e, -1, d - 1);
        len = std::max<int64_t>(0, (s - e - st - 1) / (-st));
      }
      out[static_cast<std::size_t>(ax)] = len;
      a.starts.push_back(s);
      a.ends.push_back(e);
      a.axes.push_back(ax);
      a.steps.push_back(st);
    }
    k.typed = a;
    k.data_inputs = {0};
    k.outs.push_back({ins[0]->dtype, out});
  } else if (t == "Gather") {
    ASSIGN_OR_RETURN(int64_t const axis, checked_axis(attr_int(n, "axis", 0), r0));
    Dims const& x = in_dims(0);
    if (x.at(static_cast<std::size_t>(axis)) < 0) return unsupported("gathering along the batch dimension");
    Dims out(x.begin(), x.begin() + axis);
    out.insert(out.end(), in_dims(1).begin(), in_dims(1).end());
    out.insert(out.end(), x.begin() + axis + 1, x.end());
    k.typed = GatherAttrs{axis};
    k.data_inputs = {0, 1};
    k.outs.push_back({ins[0]->dtype, out});
  } else if (t == "Gemm") {
    GemmAttrs a;
    a.alpha = static_cast<float>(attr_float(n, "alpha", 1.0));
    a.beta = static_cast<float>(attr_float(n, "beta", 1.0));
    a.trans_a = attr_int(n, "transA", 0) != 0;
    a.trans_b = attr_int(n, "transB", 0) != 0;
    a.has_bias = n.inputs.size() > 2 && !n.inputs[2].empty();
    Dims const& A = in_dims(0);
    Dims const& B = in_dims(1);
    if (A.size() != 2 || B.size() != 2) return invalid_argument("Gemm needs 2-D inputs");
    int64_t const m = a.trans_a ? A[1] : A[0], ka = a.trans_a ? A[0] : A[1];
    int64_t const kb = a.trans_b ? B[1] : B[0], nn = a.trans_b ? B[0] : B[1];
    if (ka != kb) return invalid_argument("inner dimensions differ: " + dims_str(A) + " x " + dims_str(B));
    k.typed = a;
    all_inputs();
    k.outs.push_back({ins[0]->dtype, {m, nn}});
  } else if (t == "MatMul") {
    Dims a = in_dims(0), b = in_dims(1);
    bool const a1 = a.size() == 1, b1 = b.size() == 1;
    if (a1) a.insert(a.begin(), 1);
    if (b1) b.push_back(1);
    if (a.back() != b[b.size() - 2])
      return invalid_argument("inner dimensions differ: " + dims_str(in_dims(0)) + " x " + dims_str(in_dims(1)));
    ASSIGN_OR_RETURN(Dims out, broadcast_dims(Dims(a.begin(), a.end() - 2), Dims(b.begin(), b.end() - 2)));
    if (!a1) out.push_back(a[a.size() - 2]);
    if (!b1) out.push_back(b.back());
    k.typed = MatMulAttrs{};
    all_inputs();
    k.outs.push_back({ins[0]->dtype, out});
  } else if (t == "Add" || t == "Sub" || t == "Mul" || t == "Div" || t == "Pow" || t == "Equal" || t == "Where") {
    Dims out;
    for (std::size_t i = 0; i < ins.size(); ++i) {
      ASSIGN_OR_RETURN(out, broadcast_dims(out, in_dims(i)));
    }
    DType const dt = t == "Equal" ? DType::kBool : t == "Where" ? ins[1]->dtype : ins[0]->dtype;
    all_inputs();
    k.outs.push_back({dt, out});
  } else if (t == "ReduceMean" || t == "ReduceSum") {
    ReduceAttrs a;
    a.keepdims = attr_int(n, "keepdims", 1) != 0;
    Dims axes;
    if (auto v = attr_ints(n, "axes"))
      axes = *v;
    else {
      ASSIGN_OR_RETURN(axes, static_ints(n, ins, 1, "axes"));
    }
    if (axes.empty()) {
      if (attr_int(n, "noop_with_empty_axes", 0) != 0) return unsupported("noop_with_empty_axes=1");
      axes.resize(static_cast<std::size_t>(r0));
      std::iota(axes.begin(), axes.end(), 0);
    }
    for (int64_t& ax : axes) {
      ASSIGN_OR_RETURN(ax, checked_axis(ax, r0));
    }
    std::sort(axes.begin(), axes.end());
    Dims out;
    for (int64_t i = 0; i < r0; ++i) {
      bool const reduced = std::binary_search(axes.begin(), axes.end(), i);
      if (!reduced)
        out.push_back(in_dims(0)[i]);
      else if (a.keepdims)
        out.push_back(1);
    }
    a.axes = axes;
    k.typed = a;
    k.data_inputs = {0};
    k.outs.push_back({ins[0]->dtype, out});
  } else if (t == "Dropout") {
    DropoutAttrs a;
    a.ratio = static_cast<float>(attr_float(n, "ratio", 0.5));
    if (m_.opset >= 12) {
      ASSIGN_OR_RETURN(SymArray const* ratio, static_input(n, ins, 1, "ratio"));
      if (ratio) a.ratio = static_cast<float>(ratio->is_float() ? ratio->f.at(0) : static_cast<double>(ratio->i.at(0)));
      ASSIGN_OR_RETURN(SymArray const* mode, static_input(n, ins, 2, "training_mode"));
      if (mode) a.training = (mode->is_float() ? mode->f.at(0) != 0 : mode->i.at(0) != 0);
    } else {
      a.training = n.outputs.size() > 1 && !n.outputs[1].empty();
    }
    k.typed = a;
    k.data_inputs = {0};
    same_as_input();
  } else if (t == "Unsqueeze" || t == "Squeeze") {
    Dims axes;
    if (auto v = attr_ints(n, "axes"))
      axes = *v;
    else {
      ASSIGN_OR_RETURN(axes, static_ints(n, ins, 1, "axes"));
    }
    Dims out;
    if (t == "Unsqueeze") {
      int64_t const r = r0 + static_cast<int64_t>(axes.size());
      for (int64_t& ax : axes) {
        ASSIGN_OR_RETURN(ax, checked_axis(ax, r));
      }
      std::sort(axes.begin(), axes.end());
      out = in_dims(0);
      for (int64_t ax : axes) out.insert(out.begin() + std::min<int64_t>(ax, static_cast<int64_t>(out.size())), 1);
      k.typed = UnsqueezeAttrs{axes};
    } else {
      for (int64_t& ax : axes) {
        ASSIGN_OR_RETURN(ax, checked_axis(ax, r0));
      }
      if (axes.empty())
        for (int64_t i = 0; i < r0; ++i)
          if (in_dims(0)[i] == 1) axes.push_back(i);
      std::sort(axes.begin(), axes.end());
      for (int64_t i = 0; i < r0; ++i) {
        if (!std::binary_search(axes.begin(), axes.end(), i))
          out.push_back(in_dims(0)[i]);
        else if (in_dims(0)[i] != 1)
          return invalid_argument("squeezing dimension " + std::to_string(i) + " of size " + dim_str(in_dims(0)[i]));
      }
      k.typed = SqueezeAttrs{axes};
    }
    k.data_inputs = {0};
    k.outs.push_back({ins[0]->dtype, out});
  } else if (t == "Cast") {
    int64_t const to = attr_int(n, "to", 1);
    ASSIGN_OR_RETURN(DType dt, dtype_of_onnx(to));
    k.typed = CastAttrs{static_cast<int32_t>(to)};
    k.data_inputs = {0};
    k.outs.push_back({dt, in_dims(0)});
  } else if (t == "Expand") {
    ASSIGN_OR_RETURN(SymArray const* s, static_input(n, ins, 1, "shape"));
    if (!s) return invalid_argument("the shape input is missing");
    Dims shape;
    for (std::size_t i = 0; i < s->i.size(); ++i) {
      int64_t const b = s->has_batch() ? s->b[i] : 0;
      if (b != 0 && s->i[i] != 0) return unsupported("an Expand dimension is the batch size plus a number");
      shape.push_back(b != 0 ? -b : s->i[i]);
    }
    ASSIGN_OR_RETURN(Dims out, broadcast_dims(in_dims(0), shape));
    k.typed = ExpandAttrs{out};
    k.data_inputs = {0};
    k.outs.push_back({ins[0]->dtype, out});
  } else {
    return unsupported("no shape rule for this operator");
  }
  return k;
}

Result<OpGraph> Lowering::run() {
  trainable_ = trainable_initializers(m_);
  for (auto const& n : m_.nodes)
    for (auto const& in : n.inputs) used_.insert(in);
  for (auto const& o : m_.outputs) used_.insert(o.name);
  for (auto const& n : m_.nodes)
    if (!n.name.empty()) reserved_names_.insert(n.name);
  RETURN_IF_ERROR(add_inputs());
  for (auto const& n : m_.nodes) RETURN_IF_ERROR(lower_node(n));

  std::vector<TensorId> outputs;
  for (auto const& o : m_.outputs) {
    auto it = vals_.find(o.name);
    if (it == vals_.end()) return invalid_argument("graph output '" + o.name + "' is never produced");
    ASSIGN_OR_RETURN(TensorId t, materialize(o.name, it->second));
    outputs.push_back(t);
  }
  fill_accounting(ops_, tensors_);

  OpGraph g;
  g.set_name(m_.name);
  for (auto& t : tensors_) g.add_tensor(std::move(t));
  for (auto& op : ops_) g.add_op(std::move(op));
  for (TensorId t : inputs_) g.mark_input(t);
  for (TensorId t : outputs) g.mark_output(t);
  RETURN_IF_ERROR(g.finalize());
  return g;
}

}  // namespace

std::vector<std::string> const& supported_op_types() {
  static std::vector<std::string> const types = [] {
    std::vector<std::string> v = {"Add",
                                  "AveragePool",
                                  "BatchNormalization",
                                  "Cast",
                                  "Concat",
                                  "Constant",
                                  "ConstantOfShape",
                                  "Conv",
                                  "Div",
                                  "Dropout",
                                  "Equal",
                                  "Expand",
                                  "Flatten",
                                  "Gather",
                                  "Gelu",
                                  "Gemm",
                                  "GlobalAveragePool",
                                  "Identity",
                                  "LayerNormalization",
                                  "LeakyRelu",
                                  "MatMul",
                                  "MaxPool",
                                  "Mul",
                                  "Pow",
                                  "Range",
                                  "ReduceMean",
                                  "ReduceSum",
                                  "Relu",
                                  "Reshape",
                                  "Shape",
                                  "Sigmoid",
                                  "Slice",
                                  "Softmax",
                                  "Split",
                                  "Sqrt",
                                  "Squeeze",
                                  "Sub",
                                  "Tanh",
                                  "Transpose",
                                  "Unsqueeze",
                                  "Where"};
    std::sort(v.begin(), v.end());
    return v;
  }();
  return types;
}

Result<OpGraph> lower(RawModel model, bool first_dim_is_batch) {
  Lowering l(std::move(model), first_dim_is_batch);
  return l.run();
}

}  // namespace gp::graph::onnx_import
