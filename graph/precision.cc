#include "graph/precision.h"

#include <map>
#include <set>
#include <utility>
#include <vector>

#include "graph/accounting.h"
#include "graph/ops/infer.h"
#include "graph/ops/registry.h"

namespace gp::graph {
namespace {

using ops::OpKind;

bool is_float(DType d) {
  return d == DType::kFloat32 || d == DType::kBFloat16 || d == DType::kFloat16 || d == DType::kFloat64;
}

// The policy table: PyTorch's autocast lists restricted to what graphpipe's backends run in the low
// precision. Ops not listed run in float32. Changing a row is changing the policy for every
// backend, planner and simulator at once; `graphpipe ops` prints it.
std::map<OpKind, AmpRule> const& policy_table() {
  static std::map<OpKind, AmpRule> const table = [] {
    std::map<OpKind, AmpRule> t;
    // Matrix products and convolutions: the low precision, float32 accumulation.
    for (OpKind k : {OpKind::kConv, OpKind::kGemm, OpKind::kMatMul}) t[k] = {AmpPolicy::kLow, 0};
    // Ops that keep a low-precision activation low: ReLU and GELU (autocast runs both in their
    // input's dtype; the kernels compute each element in float32), pooling, residual additions of
    // two low tensors, views, transposes and splits (attention's q/k/v split and head permutations
    // between matmuls), and batch normalisation of a low input (its scale, bias and statistics
    // float32, as autocast runs it; cuDNN's 16-bit BatchNorm computes in float32; the CPU's bf16
    // entry widens around its float32 kernel, oneDNN 2.6's bf16 one being 3.5x slower there).
    for (OpKind k : {OpKind::kRelu, OpKind::kGelu, OpKind::kMaxPool, OpKind::kAveragePool, OpKind::kGlobalAveragePool,
                     OpKind::kReshape, OpKind::kFlatten, OpKind::kSqueeze, OpKind::kUnsqueeze, OpKind::kIdentity,
                     OpKind::kTranspose, OpKind::kSplit, OpKind::kBatchNormalization})
      t[k] = {AmpPolicy::kFollow, 1};
    t[OpKind::kSplit].low_outputs = kAllOutputs;
    t[OpKind::kBatchNormalization].with_deciding = static_cast<int>(kBatchNormResidualInput);
    t[OpKind::kAdd] = {AmpPolicy::kFollow, 2};
    return t;
  }();
  return table;
}

std::string dtype_suffix(DType d) { return d == DType::kFloat32 ? "fp32" : d == DType::kBFloat16 ? "bf16" : "fp16"; }

class Rewriter {
 public:
  Rewriter(OpGraph const& g, DType low) : g_(g), low_(low), tensors_(g.tensors()), current_(g.tensors().size()) {
    for (std::size_t t = 0; t < tensors_.size(); ++t) current_[t] = static_cast<TensorId>(t);
    for (TensorId t : g.outputs()) graph_outputs_.insert(t);
  }

  Result<OpGraph> run() {
    for (OpId id : g_.topo_order()) rewrite(g_.op(id));
    fill_accounting(ops_, tensors_);
    OpGraph out;
    out.set_name(g_.name());
    out.set_weight_choices(g_.weight_choices());
    for (TensorInfo t : tensors_) {
      t.producer = kNoOp;
      t.consumers.clear();
      out.add_tensor(std::move(t));
    }
    for (Op& op : ops_) out.add_op(std::move(op));
    for (TensorId t : g_.inputs()) out.mark_input(t);
    for (TensorId t : g_.outputs()) out.mark_output(t);
    RETURN_IF_ERROR(out.finalize());
    return out;
  }

 private:
  TensorId add_tensor(TensorInfo info, std::string name, DType dtype) {
    info.name = std::move(name);
    info.dtype = dtype;
    info.role = TensorRole::kActivation;
    info.data = nullptr;
    info.producer = kNoOp;
    info.consumers.clear();
    info.id = static_cast<TensorId>(tensors_.size());
    tensors_.push_back(std::move(info));
    return tensors_.back().id;
  }

  void add_cast(TensorId from, TensorId to, std::string name) {
    Op cast;
    cast.name = std::move(name);
    cast.type = "Cast";
    int64_t const onnx = ops::onnx_of_dtype(tensors_[to].dtype);
    cast.attrs["to"] = onnx;
    cast.typed = CastAttrs{static_cast<int32_t>(onnx)};
    cast.inputs = {from};
    cast.outputs = {to};
    cast.def = ops::find_op("Cast");
    cast.id = static_cast<OpId>(ops_.size());
    ops_.push_back(std::move(cast));
  }

  // The tensor holding `t`'s value in dtype `d`: itself, or a Cast's output (one per tensor and
  // dtype, made before its first consumer).
  TensorId in_dtype(TensorId t, DType d) {
    TensorId const cur = current_[t];
    if (tensors_[cur].dtype == d) return cur;
    auto const key = std::make_pair(t, d);
    if (auto it = casts_.find(key); it != casts_.end()) return it->second;
    std::string const name = tensors_[t].name + ".to_" + dtype_suffix(d);
    TensorId const out = add_tensor(tensors_[t], name, d);
    add_cast(cur, out, name);
    casts_.emplace(key, out);
    return out;
  }

  void rewrite(Op const& src) {
    Op op = src;
    AmpRule const rule = amp_rule(op.kind());
    auto const deciding = [&](std::size_t i) {
      return rule.policy == AmpPolicy::kLow ||
             (rule.policy == AmpPolicy::kFollow && static_cast<int>(i) < rule.follow_inputs);
    };
    // The dtype the op computes in: low for kLow; for kFollow, low when its deciding float inputs
    // all are.
    bool low = rule.policy == AmpPolicy::kLow;
    if (rule.policy == AmpPolicy::kFollow) {
      bool any = false, all = true;
      for (std::size_t i = 0; i < op.inputs.size() && deciding(i); ++i) {
        TensorId const t = op.inputs[i];
        if (t == kNoTensor || !is_float(tensors_[current_[t]].dtype)) continue;
        any = true;
        all = all && tensors_[current_[t]].dtype == low_;
      }
      low = any && all;
    }
    for (std::size_t i = 0; i < op.inputs.size(); ++i) {
      TensorId const t = op.inputs[i];
      if (t == kNoTensor) continue;
      DType const d = tensors_[current_[t]].dtype;
      // A low op casts its float32 deciding inputs down and passes the others as they are
      // (BatchNorm's float32 statistics); a float32 op casts low inputs up (float64 stays). A
      // kLow op's weights and constants stay float32 (the master weights): its kernels round them
      // per call, so that no weight's copy is a tensor a planner could put on another stage.
      bool const initializer = tensors_[t].role == TensorRole::kWeight || tensors_[t].role == TensorRole::kConstant;
      DType want = d;
      bool const along = static_cast<int>(i) == rule.with_deciding;
      if (low && (deciding(i) || along) && d == DType::kFloat32 &&
          !(rule.policy == AmpPolicy::kLow && i > 0 && initializer))
        want = low_;
      if (!low && d == low_) want = DType::kFloat32;
      op.inputs[i] = in_dtype(t, want);
    }
    op.id = static_cast<OpId>(ops_.size());
    std::vector<std::pair<TensorId, TensorId>> restore;  // (low output, graph output it is cast to)
    for (std::size_t k = 0; low && k < op.outputs.size() && static_cast<int>(k) < rule.low_outputs; ++k) {
      TensorId const y = op.outputs[k];
      if (y == kNoTensor || tensors_[y].dtype != DType::kFloat32) continue;
      if (graph_outputs_.count(y) > 0) {
        // A graph output keeps its name and float32: the op writes "<name>.<low>", a Cast the output.
        TensorId const low_y = add_tensor(tensors_[y], tensors_[y].name + "." + dtype_suffix(low_), low_);
        op.outputs[k] = low_y;
        current_[y] = low_y;
        casts_.emplace(std::make_pair(y, DType::kFloat32), y);
        restore.emplace_back(low_y, y);
      } else {
        tensors_[y].dtype = low_;
      }
    }
    ops_.push_back(std::move(op));
    for (auto const& [low_y, y] : restore) add_cast(low_y, y, tensors_[y].name + ".to_fp32");
  }

  OpGraph const& g_;
  DType const low_;
  std::vector<TensorInfo> tensors_;
  std::vector<TensorId> current_;  // by original id: the tensor its producer writes
  std::set<TensorId> graph_outputs_;
  std::map<std::pair<TensorId, DType>, TensorId> casts_;
  std::vector<Op> ops_;
};

}  // namespace

Result<Precision> parse_precision(std::string_view text) {
  if (text == "fp32" || text == "float32") return Precision::kFloat32;
  if (text == "bf16" || text == "bfloat16") return Precision::kBFloat16;
  if (text == "fp16" || text == "float16") return Precision::kFloat16;
  return invalid_argument("precision '" + std::string(text) + "' is not one of fp32, bf16, fp16");
}

char const* precision_name(Precision p) {
  switch (p) {
    case Precision::kBFloat16:
      return "bf16";
    case Precision::kFloat16:
      return "fp16";
    default:
      return "fp32";
  }
}

DType low_dtype(Precision p) {
  switch (p) {
    case Precision::kBFloat16:
      return DType::kBFloat16;
    case Precision::kFloat16:
      return DType::kFloat16;
    default:
      return DType::kFloat32;
  }
}

AmpRule amp_rule(ops::OpKind kind) {
  auto const& t = policy_table();
  auto it = t.find(kind);
  return it == t.end() ? AmpRule{} : it->second;
}

char const* amp_policy_name(AmpPolicy p) {
  switch (p) {
    case AmpPolicy::kLow:
      return "low";
    case AmpPolicy::kFollow:
      return "follow";
    default:
      return "fp32";
  }
}

Result<OpGraph> apply_precision(OpGraph const& graph, Precision precision) {
  if (!graph.finalized()) return internal_error("apply_precision: the graph is not finalized");
  if (precision == Precision::kFloat32) return graph;
  for (TensorInfo const& t : graph.tensors())
    if (t.producer != kNoOp && (t.dtype == DType::kBFloat16 || t.dtype == DType::kFloat16))
      return unsupported("the model already computes in " + std::string(dtype_name(t.dtype)) + " (tensor '" + t.name +
                         "'): mixed precision rewrites float32 models; export the model in float32");
  Rewriter r(graph, low_dtype(precision));
  return r.run();
}

Precision graph_precision(OpGraph const& graph) {
  for (TensorInfo const& t : graph.tensors()) {
    if (t.producer == kNoOp) continue;
    if (t.dtype == DType::kBFloat16) return Precision::kBFloat16;
    if (t.dtype == DType::kFloat16) return Precision::kFloat16;
  }
  return Precision::kFloat32;
}

}  // namespace gp::graph
