// ONNX → OpGraph. The only public entry to protobuf-backed loading; everything it returns is our
// own types. Runs ONNX's checker and shape inference, folds static shape computations, fuses the
// torch-export patterns (Erf-GELU, decomposed LayerNormalization), fills typed attributes and the
// per-op accounting. Errors name the file and the problem (and every unsupported op, once).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/op_graph.h"
#include "graph/precision.h"
#include "core/status.h"

namespace gp::graph {

struct ImportOptions {
  bool run_checker = true;
  // false: initializers keep dims and dtype but no data (TensorInfo::data == nullptr) and external
  // data files are not opened — for planning paper-size models without their gigabytes of weights.
  bool load_weights = true;
  // Name for the graph's batch dimension when the model's inputs have a fixed first dimension:
  // the first dimension of every graph input is treated as the batch.
  bool first_dim_is_batch = true;
  // Untrusted models: the memory the import may allocate for weights (and that the weights plus one
  // sample's activations may need), 0 for no limit; the CLI's --max-memory, by default the machine's
  // available memory. Over it, the import fails with the figure before anything is allocated.
  int64_t max_memory_bytes = 0;
  // Graphs with more nodes (If/Loop bodies included) or deeper subgraph nesting are refused before
  // ONNX's checker and shape inference walk them.
  int64_t max_nodes = 200'000;
  int max_subgraph_depth = 8;
  // Fuse a Relu that is a BatchNormalization's only reader into it (BatchNormAttrs::relu), and a
  // residual block's BatchNormalization -> Add -> Relu (BatchNormAttrs::residual): on the CUDA
  // backend's own BatchNorm kernels one pass over the activations instead of two or three, forward
  // and backward; and a MatMul's transposed operand (attention's Kᵀ) and constant scale into the
  // MatMul (MatMulAttrs), which the GEMM reads in place and applies as alpha. false keeps them
  // apart (to compare, or to cut a pipeline between them).
  bool fuse = true;
  // Initializer name patterns (glob: `*` any run of characters, `?` one) that override the
  // importer's choice of trainable weights, as the training config's `trainable:` and `frozen:`
  // give them. frozen wins over everything; trainable makes a float initializer with finite
  // values train. A pattern that matches no initializer, or trainable matching a non-float or
  // non-finite one, fails the import with the pattern's name.
  std::vector<std::string> trainable{};
  std::vector<std::string> frozen{};
  // Automatic mixed precision (graph/precision.h): the graph after import is rewritten so matmuls and
  // convolutions compute in bf16 with explicit Casts; fp32 leaves it as imported.
  Precision precision = Precision::kFloat32;
  // Graph inputs fixed at import: name -> a serialized ONNX TensorProto (an input_N.pb of ONNX's
  // node tests). Each such input becomes an initializer, so that what the importer needs static (a
  // Reshape's shape, a Resize's scales) can be a graph input given once. A name that is no graph
  // input, or bytes that are no TensorProto, fail the import.
  std::map<std::string, std::string> fixed_inputs{};
};

// The importer's reason (WeightChoice::reason) for a float initializer in a weight slot that it
// keeps constant because its values are a sinusoidal position table: a rotary embedding's cos/sin
// tables or a fixed sinusoidal encoding, buffers in torch that a folding exporter writes as
// initializers multiplied or added into the activations.
inline constexpr char kPositionTableReason[] =
    "sinusoidal position table (each column a cosine or sine of the position: rotary or fixed position "
    "encoding, a buffer in torch; list it under trainable: to train it)";

// The importer's reason for a float initializer in a weight slot that a dynamo export's graph
// signature does not list as a parameter while it lists every parameter as an initializer: so no
// parameter was folded into it, and it is a constant the exporter computed (a spatial
// transformer's base grid built from arange).
inline constexpr char kNotAParameterReason[] =
    "not a parameter in torch.export's graph signature, which lists every parameter as an initializer: a "
    "constant the exporter computed (list it under trainable: to train it)";

// The importer's reason for a float initializer in a weight slot that a dynamo export's graph
// signature lists as a buffer or constant tensor, which torch never trains (BART's
// final_logits_bias: zeros added to the logits, which look like a learned bias).
inline constexpr char kExportedBufferReason[] =
    "a buffer in torch.export's graph signature, which torch does not train (list it under trainable: to "
    "train it)";

// The importer's reason for a float initializer in a weight slot that it keeps constant because it
// holds a value of magnitude 1e30 or more: a mask (HF's attention masks hold float32's lowest
// value; a fixed-batch export folds one into an initializer), which no learned weight holds.
inline constexpr char kMaskValuesReason[] =
    "mask values (magnitude 1e30 or more, as float32's lowest value in an attention mask)";

// From a .onnx file. External data must lie inside the file's folder: absolute locations, "..",
// and symlinks that lead out are refused, and every declared size is checked against the data
// file's real size before anything is read.
Result<OpGraph> load_onnx(std::string const& path, ImportOptions const& options = {});
// From serialized ModelProto bytes; `source_name` is used in error messages. External data is
// resolved against the folder of `file_path`, the file the bytes were read from (empty: the bytes
// came from no file, and external data is refused).
Result<OpGraph> load_onnx_bytes(std::string const& bytes, std::string const& source_name,
                                ImportOptions const& options = {}, std::string const& file_path = {});
// From ONNX text format (onnx/defs/parser.h), as used inline by tests.
Result<OpGraph> load_onnx_text(std::string const& text, ImportOptions const& options = {});

// The standard operators imported as the function body ONNX defines for them (sorted): no OpDef
// here (graph/ops/registry.h), so each node is replaced by its body at import (Attention,
// RMSNormalization, RotaryEmbedding, GroupNormalization, Mish, MeanVarianceNormalization, ...).
std::vector<std::string> const& function_op_types();

}  // namespace gp::graph
