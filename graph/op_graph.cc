#include "graph/op_graph.h"

#include <algorithm>
#include <cstring>
#include <queue>
#include <sstream>
#include <stdexcept>

#include <boost/range/iterator_range.hpp>

#include "graph/ops/registry.h"

namespace gp::graph {

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return 4;
    case DType::kFloat16:
      return 2;
    case DType::kBFloat16:
      return 2;
    case DType::kFloat64:
      return 8;
    case DType::kInt64:
      return 8;
    case DType::kInt32:
      return 4;
    case DType::kInt8:
      return 1;
    case DType::kUInt8:
      return 1;
    case DType::kBool:
      return 1;
  }
  return 0;
}

char const* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat64:
      return "float64";
    case DType::kInt64:
      return "int64";
    case DType::kInt32:
      return "int32";
    case DType::kInt8:
      return "int8";
    case DType::kUInt8:
      return "uint8";
    case DType::kBool:
      return "bool";
  }
  return "?";
}

char const* tensor_role_name(TensorRole role) {
  switch (role) {
    case TensorRole::kActivation:
      return "activation";
    case TensorRole::kInput:
      return "input";
    case TensorRole::kWeight:
      return "weight";
    case TensorRole::kConstant:
      return "constant";
  }
  return "?";
}

// ---- Shape -------------------------------------------------------------------

bool Shape::has_batch() const { return batch_axis() >= 0; }

int Shape::batch_axis() const {
  for (std::size_t i = 0; i < dims.size(); ++i)
    if (dims[i] < 0) return static_cast<int>(i);
  return -1;
}

int64_t Shape::elements_per_sample() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d < 0 ? -d : d;
  return n;
}

std::vector<int64_t> Shape::concrete(int64_t batch) const {
  std::vector<int64_t> out = dims;
  for (int64_t& d : out)
    if (d < 0) d = -d * batch;
  return out;
}

std::string Shape::to_string() const {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) os << ',';
    if (dims[i] == kBatch)
      os << 'N';
    else if (dims[i] < 0)  // negated as unsigned: a malformed file's INT64_MIN has no int64 negation
      os << (uint64_t{0} - static_cast<uint64_t>(dims[i])) << 'N';
    else
      os << dims[i];
  }
  os << ']';
  return os.str();
}

// ---- TensorData ----------------------------------------------------------------

int64_t TensorData::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

TensorData TensorData::from_floats(std::vector<int64_t> dims, std::vector<float> const& values) {
  TensorData t;
  t.dtype = DType::kFloat32;
  t.dims = std::move(dims);
  t.bytes.resize(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

TensorData TensorData::from_int64s(std::vector<int64_t> dims, std::vector<int64_t> const& values) {
  TensorData t;
  t.dtype = DType::kInt64;
  t.dims = std::move(dims);
  t.bytes.resize(values.size() * sizeof(int64_t));
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

namespace {
template <typename Out>
std::vector<Out> convert_all(TensorData const& t) {
  int64_t const n = static_cast<int64_t>(t.bytes.size() / dtype_size(t.dtype));
  std::vector<Out> out(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    switch (t.dtype) {
      case DType::kFloat32:
        out[i] = static_cast<Out>(t.as<float>()[i]);
        break;
      case DType::kFloat64:
        out[i] = static_cast<Out>(t.as<double>()[i]);
        break;
      case DType::kInt64:
        out[i] = static_cast<Out>(t.as<int64_t>()[i]);
        break;
      case DType::kInt32:
        out[i] = static_cast<Out>(t.as<int32_t>()[i]);
        break;
      case DType::kInt8:
        out[i] = static_cast<Out>(t.as<int8_t>()[i]);
        break;
      case DType::kUInt8:
        out[i] = static_cast<Out>(t.as<uint8_t>()[i]);
        break;
      case DType::kBool:
        out[i] = static_cast<Out>(t.as<uint8_t>()[i] != 0);
        break;
      case DType::kFloat16:
      case DType::kBFloat16:
        out[i] = Out{};
        break;  // not converted: callers reject these dtypes
    }
  }
  return out;
}
}  // namespace

std::vector<double> TensorData::to_doubles() const { return convert_all<double>(*this); }
std::vector<int64_t> TensorData::to_int64s() const { return convert_all<int64_t>(*this); }

// ---- TensorInfo ------------------------------------------------------------------

int64_t TensorInfo::bytes_per_sample() const {
  if (!shape.has_batch()) return 0;
  return shape.elements_per_sample() * static_cast<int64_t>(dtype_size(dtype));
}

int64_t TensorInfo::static_bytes() const {
  return shape.elements_per_sample() * static_cast<int64_t>(dtype_size(dtype));
}

int64_t TensorInfo::bytes(int64_t batch) const {
  return shape.has_batch() ? bytes_per_sample() * batch : static_bytes();
}

// ---- OpGraph -----------------------------------------------------------------------

TensorId OpGraph::add_tensor(TensorInfo info) {
  assert(!finalized_);
  info.id = static_cast<TensorId>(tensors_.size());
  tensor_by_name_.emplace(info.name, info.id);
  tensors_.push_back(std::move(info));
  return tensors_.back().id;
}

OpId OpGraph::add_op(Op op) {
  assert(!finalized_);
  op.id = static_cast<OpId>(ops_.size());
  if (op.def == nullptr) op.def = ops::find_op(op.type);
  op_by_name_.emplace(op.name, op.id);
  ops_.push_back(std::move(op));
  return ops_.back().id;
}

void OpGraph::mark_input(TensorId t) { inputs_.push_back(t); }
void OpGraph::mark_output(TensorId t) { outputs_.push_back(t); }

Status OpGraph::finalize() {
  if (finalized_) return Status::ok();
  if (op_by_name_.size() != ops_.size()) return invalid_argument("operator names are not unique");
  if (tensor_by_name_.size() != tensors_.size()) return invalid_argument("tensor names are not unique");
  int const nt = static_cast<int>(tensors_.size());
  for (auto& t : tensors_) {
    t.producer = kNoOp;
    t.consumers.clear();
  }
  for (auto const& op : ops_) {
    for (TensorId t : op.outputs) {
      if (t < 0 || t >= nt) return internal_error("operator '" + op.name + "' has an invalid output id");
      if (tensors_[t].producer != kNoOp)
        return invalid_argument("tensor '" + tensors_[t].name + "' is produced by both '" +
                                ops_[tensors_[t].producer].name + "' and '" + op.name + "'");
      tensors_[t].producer = op.id;
    }
  }
  for (auto const& op : ops_) {
    for (TensorId t : op.inputs) {
      if (t == kNoTensor) continue;
      if (t < 0 || t >= nt) return internal_error("operator '" + op.name + "' has an invalid input id");
      auto& cons = tensors_[t].consumers;
      if (std::find(cons.begin(), cons.end(), op.id) == cons.end()) cons.push_back(op.id);
    }
  }
  for (TensorId t : outputs_)
    if (t < 0 || t >= nt) return internal_error("graph output id out of range");

  std::size_t const n = ops_.size();
  bgl_ = BoostGraph(n);
  for (std::size_t v = 0; v < n; ++v) bgl_[v].op = static_cast<OpId>(v);
  for (auto const& t : tensors_) {
    if (t.producer == kNoOp) continue;
    for (OpId c : t.consumers) {
      if (c == t.producer) return invalid_argument("operator '" + ops_[c].name + "' consumes its own output");
      auto e = boost::add_edge(t.producer, c, bgl_).first;
      bgl_[e].tensor = t.id;
    }
  }
  // Kahn's algorithm, smallest ready id first, counting every edge (parallel ones included).
  std::vector<std::size_t> indeg(n);
  for (std::size_t v = 0; v < n; ++v) indeg[v] = boost::in_degree(v, bgl_);
  std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready;
  for (std::size_t v = 0; v < n; ++v)
    if (indeg[v] == 0) ready.push(v);
  topo_.clear();
  while (!ready.empty()) {
    std::size_t const v = ready.top();
    ready.pop();
    topo_.push_back(static_cast<OpId>(v));
    for (std::size_t s : boost::make_iterator_range(boost::adjacent_vertices(v, bgl_)))
      if (--indeg[s] == 0) ready.push(s);
  }
  // What is left lies on a cycle or behind one; name the smallest id still waiting.
  for (std::size_t v = 0; v < n; ++v)
    if (indeg[v] > 0) return invalid_argument("the operator graph has a cycle through '" + ops_[v].name + "'");
  finalized_ = true;
  return Status::ok();
}

namespace {
template <typename Range>
std::vector<OpId> sorted_distinct(Range range) {
  std::vector<OpId> out;
  for (auto v : range) out.push_back(static_cast<OpId>(v));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::size_t checked_vertex(OpId id, BoostGraph const& g) {
  if (id < 0 || static_cast<std::size_t>(id) >= boost::num_vertices(g))
    throw std::out_of_range("op id " + std::to_string(id) + " is not in the finalized graph");
  return static_cast<std::size_t>(id);
}
}  // namespace

std::vector<OpId> OpGraph::predecessors(OpId id) const {
  return sorted_distinct(boost::make_iterator_range(boost::inv_adjacent_vertices(checked_vertex(id, bgl_), bgl_)));
}

std::vector<OpId> OpGraph::successors(OpId id) const {
  return sorted_distinct(boost::make_iterator_range(boost::adjacent_vertices(checked_vertex(id, bgl_), bgl_)));
}

ops::OpKind Op::kind() const { return def ? def->kind : ops::op_kind(type); }

std::optional<OpId> OpGraph::find_op(std::string const& name) const {
  auto it = op_by_name_.find(name);
  if (it == op_by_name_.end()) return std::nullopt;
  return it->second;
}

std::optional<TensorId> OpGraph::find_tensor(std::string const& name) const {
  auto it = tensor_by_name_.find(name);
  if (it == tensor_by_name_.end()) return std::nullopt;
  return it->second;
}

std::vector<TensorId> OpGraph::weights() const {
  std::vector<TensorId> out;
  for (auto const& t : tensors_)
    if (t.role == TensorRole::kWeight) out.push_back(t.id);
  return out;
}

double OpGraph::fwd_flops_per_sample() const {
  double s = 0;
  for (auto const& op : ops_) s += op.fwd_flops_per_sample;
  return s;
}

double OpGraph::bwd_flops_per_sample() const {
  double s = 0;
  for (auto const& op : ops_) s += op.bwd_flops_per_sample;
  return s;
}

int64_t OpGraph::param_bytes() const {
  int64_t s = 0;
  for (auto const& t : tensors_)
    if (t.role == TensorRole::kWeight) s += t.static_bytes();
  return s;
}

int64_t OpGraph::param_count() const {
  int64_t s = 0;
  for (auto const& t : tensors_)
    if (t.role == TensorRole::kWeight) s += t.shape.elements_per_sample();
  return s;
}

int64_t OpGraph::activation_bytes_per_sample() const {
  int64_t s = 0;
  for (auto const& op : ops_) s += op.activation_bytes_per_sample;
  return s;
}

}  // namespace gp::graph
