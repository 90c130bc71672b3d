// Builds ONNX models from our own types (the model zoo and tests use it; protobuf stays inside
// graph/onnx_builder.cc). Weights are described by a rule and materialised only when a model is
// serialized with data, from a per-initializer seed: the same (seed, name, rule) always gives the
// same bytes, whatever the order of construction. Paper-size models never materialise anything in
// shape-only mode: initializers become external-data references to a file that is never written.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "graph/onnx_import.h"
#include "graph/op_graph.h"
#include "core/status.h"

namespace gp::graph {

// How an initializer's values are drawn.
struct InitRule {
  enum class Kind : uint8_t { kZeros, kOnes, kUniform, kNormal };
  Kind kind = Kind::kZeros;
  double scale = 0;  // uniform: values in [-scale, scale); normal: standard deviation

  static InitRule zeros() { return {Kind::kZeros, 0}; }
  static InitRule ones() { return {Kind::kOnes, 0}; }
  static InitRule uniform(double bound) { return {Kind::kUniform, bound}; }
  static InitRule normal(double stddev) { return {Kind::kNormal, stddev}; }
};

struct SaveOptions {
  enum class ExternalData : uint8_t { kAuto, kAlways, kNever };
  // kAuto: weights go to an external data file when they exceed auto_threshold_bytes (a single
  // protobuf cannot exceed 2 GiB).
  ExternalData external_data = ExternalData::kAuto;
  int64_t auto_threshold_bytes = int64_t{1} << 30;
  // Initializers keep dims and dtype but no values: they refer to external data that is never
  // computed. save() creates the data file sparse (right length, no blocks written) so that the
  // file passes ONNX's checker; its values read as zeros. For planning and simulation only.
  bool shape_only = false;
};

class OnnxModelBuilder {
 public:
  explicit OnnxModelBuilder(std::string graph_name, int64_t opset = 17, uint64_t seed = 0);
  ~OnnxModelBuilder();
  OnnxModelBuilder(OnnxModelBuilder&&) noexcept;
  OnnxModelBuilder& operator=(OnnxModelBuilder&&) noexcept;

  std::string const& name() const;
  int64_t opset() const;
  void set_opset(int64_t opset);  // 13..18; checked when the model is written
  uint64_t seed() const;
  void set_seed(uint64_t seed);
  void set_doc_string(std::string doc);
  void add_metadata(std::string key, std::string value);

  // Each add_* returns the tensor name. Construction errors (a duplicate name, an input used before
  // it is defined) are recorded: the first one is returned by status(), serialize(), save(), ...
  // dims use kBatch for the batch dimension (written as the symbolic dimension "N").
  std::string add_input(std::string name, std::vector<int64_t> dims, DType dtype = DType::kFloat32);
  std::string add_output(std::string name, std::vector<int64_t> dims, DType dtype = DType::kFloat32);
  // A float32 initializer drawn from `rule`. trainable=false for running statistics.
  std::string add_initializer(std::string name, std::vector<int64_t> dims, InitRule rule, bool trainable = true);
  // An initializer with explicit values (any dtype), e.g. integer shapes or indices.
  std::string add_initializer(std::string name, TensorData data, bool trainable);
  // A Constant node producing `data` (how torch exports scalars, axes and shapes).
  std::string add_constant(std::string name, TensorData data);
  // A node; `name` defaults to "<op_type>_<k>". Empty strings in `inputs` are omitted optional inputs.
  void add_node(std::string op_type, std::vector<std::string> inputs, std::vector<std::string> outputs,
                Attributes attrs = {}, std::string name = {});
  // A tensor name not used yet: prefix, or prefix_<k>.
  std::string fresh_name(std::string_view prefix);

  Status status() const;
  int64_t param_count() const;        // elements of trainable initializers
  int64_t initializer_bytes() const;  // bytes of all initializers

  // The ModelProto bytes with every weight inline (or, shape_only, external references to
  // "<graph name>.data"). Fails when inline weights would exceed protobuf's 2 GiB limit.
  Result<std::string> serialize(SaveOptions const& options = {}) const;
  // Writes `path` (and "<path>.data" for external data) atomically: temporary files, then rename.
  Status save(std::string const& path, SaveOptions const& options = {}) const;
  // ONNX's checker and strict shape inference on the model, without materialising weights
  // (initializers are presented as graph inputs with their shapes).
  Status check() const;
  // Imports through graph::load_onnx_bytes. load_weights=false never materialises weights: the
  // model goes over in shape-only form and, when run_checker is set, check() stands in for the
  // importer's checker (which would reject the missing external data).
  Result<OpGraph> to_graph(ImportOptions const& options = {}) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gp::graph
