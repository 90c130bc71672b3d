// The operator DAG: vertices are operators, edges are tensors (producer op -> consumer op).
// Built once (by the ONNX importer or by hand in tests), finalized, then immutable.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include <boost/graph/adjacency_list.hpp>

#include "graph/op_attrs.h"
#include "graph/ops/op_kind.h"
#include "core/status.h"

namespace gp::graph {

namespace ops {
struct OpDef;  // graph/ops/registry.h
}

using OpId = int32_t;
using TensorId = int32_t;
inline constexpr TensorId kNoTensor = -1;  // an omitted optional input
inline constexpr OpId kNoOp = -1;

enum class DType : uint8_t { kFloat32, kFloat16, kBFloat16, kFloat64, kInt64, kInt32, kInt8, kUInt8, kBool };
std::size_t dtype_size(DType dtype);
char const* dtype_name(DType dtype);

// The symbolic batch dimension inside Shape::dims.
inline constexpr int64_t kBatch = -1;

struct Shape {
  // kBatch marks the batch dimension (at most one). A dimension -k (k > 1) is k*N: the batch
  // merged with another axis, as torch's attention exports do with Reshape([S, N*H, d]).
  std::vector<int64_t> dims;

  bool has_batch() const;
  int batch_axis() const;  // -1 when there is none
  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  // Product of every dimension except the batch one (the whole size if there is no batch).
  int64_t elements_per_sample() const;
  // Dimensions with the batch dimension set to `batch`.
  std::vector<int64_t> concrete(int64_t batch) const;
  std::string to_string() const;  // "[N,3,224,224]"
  bool operator==(Shape const&) const = default;
};

// Raw host data of an initializer or a folded constant (row-major, concrete dims).
struct TensorData {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> dims;
  std::vector<std::byte> bytes;

  int64_t numel() const;
  template <typename T>
  T const* as() const {
    return reinterpret_cast<T const*>(bytes.data());
  }
  template <typename T>
  T* as_mut() {
    return reinterpret_cast<T*>(bytes.data());
  }
  static TensorData from_floats(std::vector<int64_t> dims, std::vector<float> const& values);
  static TensorData from_int64s(std::vector<int64_t> dims, std::vector<int64_t> const& values);
  // Values converted to double / int64 whatever the stored dtype (for attributes and folding).
  std::vector<double> to_doubles() const;
  std::vector<int64_t> to_int64s() const;
};

enum class TensorRole : uint8_t {
  kActivation,  // produced by an operator
  kInput,       // a graph input (fed with data)
  kWeight,      // an initializer: trainable when it feeds a trainable slot
  kConstant,    // a constant (folded Constant/Shape/... output, or a non-trainable initializer)
};
char const* tensor_role_name(TensorRole role);

struct TensorInfo {
  TensorId id = kNoTensor;
  std::string name;
  DType dtype = DType::kFloat32;
  Shape shape;
  TensorRole role = TensorRole::kActivation;
  OpId producer = kNoOp;
  std::vector<OpId> consumers{};             // in op-id order, one entry per consuming op
  std::shared_ptr<TensorData const> data{};  // weights and constants; may be null for shape-only graphs

  // Bytes per sample of a batched tensor; for a tensor without batch dim, 0.
  int64_t bytes_per_sample() const;
  // Bytes of a tensor without batch dim (weights, constants); for batched tensors, per sample.
  int64_t static_bytes() const;
  int64_t bytes(int64_t batch) const;
};

using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>,
                               std::vector<std::string>, TensorData>;
using Attributes = std::map<std::string, AttrValue>;

struct Op {
  OpId id = kNoOp;
  std::string name;    // unique in the graph (the importer names unnamed nodes "<Type>_<k>")
  std::string type;    // ONNX op type, e.g. "Conv"
  std::string domain;  // "" for the default ONNX domain
  // The op table's entry for `type`, resolved once (by the importer, else by OpGraph::add_op):
  // its shape, fold and cost rules. Null for a type the table lacks (hand-built test graphs).
  ops::OpDef const* def = nullptr;
  // The op's identity as a value (def's kind; for an op built without a def, its type's kind,
  // kUnknown when the table lacks it): what code outside the importer compares to pick behaviour,
  // instead of `type`.
  ops::OpKind kind() const;
  Attributes attrs;              // every attribute as given (for export and for ops without typed attrs)
  OpAttrs typed;                 // the typed attribute struct of this op type (see op_attrs.h)
  std::vector<TensorId> inputs;  // kNoTensor for an omitted optional input
  std::vector<TensorId> outputs;

  // Accounting, filled by the importer (graph/accounting.h).
  double fwd_flops_per_sample = 0;
  double bwd_flops_per_sample = 0;          // input-grad + weight-grad
  double bwd_weight_flops_per_sample = 0;   // the weight-grad part (Conv, Gemm, MatMul)
  int64_t param_bytes = 0;                  // bytes of trainable weights consumed by this op
  int64_t activation_bytes_per_sample = 0;  // bytes this op saves for its backward, per sample
};

// The importer's choice for one initializer: trained or not, and the rule that decided it (what
// `graphpipe inspect` lists), e.g. "weight of MatMul 'fc1'", "non-finite values",
// "feeds only masks, comparisons or indices", "single number", "frozen by pattern '*.mask'".
struct WeightChoice {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> dims;
  bool trainable = false;
  std::string reason;
  // A caution for whoever trains the model (logged when it loads for training, printed by
  // `inspect`): a weight the exporter seems to have merged from several; empty when none.
  std::string warning;
};

struct OpVertex {
  OpId op = kNoOp;
};
struct TensorEdge {
  TensorId tensor = kNoTensor;
};
using BoostGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, OpVertex, TensorEdge>;

class OpGraph {
 public:
  OpGraph() = default;

  // ---- building (before finalize) ----
  TensorId add_tensor(TensorInfo info);  // id assigned; name must be unique
  OpId add_op(Op op);                    // id assigned; inputs/outputs must exist; def resolved from type if unset
  void mark_input(TensorId t);
  void mark_output(TensorId t);
  void set_name(std::string name) { name_ = std::move(name); }
  void set_weight_choices(std::vector<WeightChoice> choices) { weight_choices_ = std::move(choices); }
  // Checks names, producers, acyclicity; builds the Boost graph and topological order.
  Status finalize();
  bool finalized() const { return finalized_; }

  // ---- queries (after finalize) ----
  std::string const& name() const { return name_; }
  std::vector<Op> const& ops() const { return ops_; }
  std::vector<TensorInfo> const& tensors() const { return tensors_; }
  Op const& op(OpId id) const { return ops_.at(id); }
  TensorInfo const& tensor(TensorId id) const { return tensors_.at(id); }
  std::optional<OpId> find_op(std::string const& name) const;
  std::optional<TensorId> find_tensor(std::string const& name) const;
  std::vector<TensorId> const& inputs() const { return inputs_; }  // data inputs (no weights)
  std::vector<TensorId> const& outputs() const { return outputs_; }
  std::vector<TensorId> weights() const;  // role kWeight
  // Every initializer of an imported model, in file order, with the importer's choice (empty for
  // graphs built by hand).
  std::vector<WeightChoice> const& weight_choices() const { return weight_choices_; }
  std::size_t num_ops() const { return ops_.size(); }

  // Kahn's algorithm over the Boost graph, smallest ready id first: deterministic, close to the
  // file's node order, and relied on by plans (boost::topological_sort's DFS order is not this).
  std::vector<OpId> const& topo_order() const { return topo_; }
  // Read from the Boost graph (one edge per tensor read), as distinct, sorted op ids.
  std::vector<OpId> predecessors(OpId id) const;
  std::vector<OpId> successors(OpId id) const;
  // Vertex i is op i; edge bundles name the tensor (parallel edges when an op reads several).
  BoostGraph const& boost_graph() const { return bgl_; }

  // Totals over all ops.
  double fwd_flops_per_sample() const;
  double bwd_flops_per_sample() const;
  int64_t param_bytes() const;
  int64_t param_count() const;
  int64_t activation_bytes_per_sample() const;

 private:
  std::string name_;
  std::vector<Op> ops_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, OpId> op_by_name_;
  std::unordered_map<std::string, TensorId> tensor_by_name_;
  std::vector<TensorId> inputs_, outputs_;
  std::vector<OpId> topo_;
  std::vector<WeightChoice> weight_choices_;
  BoostGraph bgl_;
  bool finalized_ = false;
};

}  // namespace gp::graph
