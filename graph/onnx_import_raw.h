// The importer's middle form: an ONNX model copied out of protobuf into our own types, before
// pattern fusion, constant folding and shape propagation turn it into an OpGraph. Internal to the
// importer (graph/onnx_import*.cc); nothing else should include it.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "graph/onnx_import.h"
#include "graph/op_graph.h"
#include "core/status.h"

#include "graph/onnx_namespace.h"

namespace ONNX_NAMESPACE {
class ModelProto;
class TensorProto;
}  // namespace ONNX_NAMESPACE

namespace gp::graph::onnx_import {

// The data of an ONNX TensorProto (graph/onnx_import.cc), for the importer and for reading .pb
// tensor files (graph/onnx_tensor_io.cc); `model_dir` resolves external data files, `what` names
// the tensor in errors.
Result<TensorData> read_tensor(onnx::TensorProto const& t, std::string const& model_dir, std::string const& what);

struct RawDim {
  int64_t value = -1;  // < 0: not a fixed number
  std::string param;   // the dim_param, when symbolic
};

// Whether `domain` is ONNX's default one ("" or "ai.onnx"), and the model's opset of it (its last
// entry; 0 when it has none) (graph/onnx_import_functions.cc).
bool is_standard_domain(std::string const& domain);
int64_t standard_opset(onnx::ModelProto const& m);

// A model of opset 24 to 28 made readable by ONNX 1.18's schemas (graph/onnx_import_opsets.cc):
// Swish rewritten as Sigmoid and Mul; Attention's newer inputs and attributes, and the operators
// those opsets added, refused by name. Nothing to do at opset 23 and below. True when a node was
// rewritten or lost an attribute (the file on disk no longer says what the model is).
Result<bool> adapt_newer_opset(onnx::ModelProto& model, int64_t opset);

// Inlines the model-local functions (graph/onnx_import_functions.cc), refusing recursion and an
// expansion past `max_nodes` nodes before ONNX's inliner sees them.
Status inline_local_functions(onnx::ModelProto& model, int64_t max_nodes);

// Standard operators graphpipe has no OpDef for but ONNX defines by a function body (Attention,
// RMSNormalization, RotaryEmbedding, GroupNormalization, Mish, MeanVarianceNormalization, ...):
// each node is replaced by its body for the model's opset, in place, recursively, its attributes
// and defaults substituted (graph/onnx_import_functions.cc). Refuses an expansion past `max_nodes`.
Status expand_function_ops(onnx::ModelProto& model, int64_t max_nodes);

struct RawValueInfo {
  std::string name;
  DType dtype = DType::kFloat32;
  bool has_shape = false;
  std::vector<RawDim> dims;
};

struct RawInitializer {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> dims;
  std::shared_ptr<TensorData const> data;  // null when weights were not loaded
};

struct RawBody;

struct RawNode {
  std::string name, type, domain;
  Attributes attrs;
  std::vector<std::string> inputs, outputs;  // "" for an omitted optional slot
  // An If's then_branch and else_branch (in that order), a Loop's or Scan's body; empty for every
  // other node.
  std::vector<RawBody> bodies;
};

// A subgraph (an If's branch, a Loop's or Scan's body): the names of its inputs (none for an If's
// branch; a Loop's: iteration number, condition, carried values; a Scan's: states, then one
// element of each scanned input), its nodes, its initializers already turned into Constant nodes
// at the front, and the names of the values it outputs. Its nodes read outer values by name.
struct RawBody {
  std::vector<std::string> inputs;
  std::vector<RawNode> nodes;
  std::vector<std::string> outputs;
};

struct RawModel {
  std::string source;  // file name for messages
  std::string name;
  int64_t opset = 0;  // of the default domain
  std::vector<RawNode> nodes;
  std::vector<RawInitializer> initializers;
  std::vector<RawValueInfo> inputs, outputs;       // graph inputs exclude initializers
  std::map<std::string, RawValueInfo> value_info;  // from ONNX shape inference
  // (copy, original) pairs that retie_transposed_copies turned back into Transpose(original).
  std::vector<std::pair<std::string, std::string>> retied;
  // Without ImportOptions::load_weights: the initializers read only because the trainable choice
  // looks at their values (a sinusoidal position table, a transposed copy to retie), so that
  // planning sees the weights training will; their data is dropped once the choice is made.
  std::set<std::string> probed;
  // The PARAMETER targets of the graph signature torch.export records in a dynamo export's graph
  // metadata ("pkg.torch.export.ExportedProgram.graph_signature"); nullopt when the file has none.
  std::optional<std::set<std::string>> exported_parameters;
  // Its BUFFER and CONSTANT_TENSOR targets: tensors torch never trains (BART's final_logits_bias, a
  // zero bias added to the logits), empty when the file has no signature.
  std::set<std::string> exported_buffers;
};

// A float matrix initializer that holds exactly another's transpose becomes Transpose(that one)
// again. The dynamo exporter's optimizer folds a tied weight's Transpose (a language model's output
// projection reading its token embedding, as HF's tie_word_embeddings has it) into a new
// initializer, which would then train apart from the one weight torch trains. Both must be 2-D with
// two or more rows and columns and two or more distinct values, and a square one not symmetric
// (two identity-initialised weights stay apart); the original is the one earlier in the file. A copy that
// options.trainable or options.frozen names stays as it is (the way to train it apart). Each pair goes to model.retied.
void retie_transposed_copies(RawModel& model, ImportOptions const& options);

// Replaces torch-export decompositions with single nodes: the Erf GELU becomes "Gelu", the
// opset<17 LayerNorm chain "LayerNormalization", and a zero Pad before an AveragePool goes into
// the pool's pads (count_include_pad=1), a linear layer's MatMul (+ Add) one Gemm; unless told not
// to, a Relu that is a BatchNormalization's only reader goes into it (BatchNormAttrs::relu).
struct FuseOptions {
  bool batchnorm_relu = true;
};
void fuse_patterns(RawModel& model, FuseOptions const& options = {});

// After lowering (shapes known, which ONNX's shape inference does not always give the raw model):
// a residual block's tail, BatchNormalization -> Add(·, z) -> Relu, the BatchNorm's Relu not fused,
// its y read only by the Add, the Add's output only by the Relu (neither a graph output), z of y's
// shape and dtype, and nothing reading the BatchNorm's running statistics outputs, becomes one
// BatchNormalization with z as input 5 (BatchNormAttrs::residual and relu) writing the Relu's
// output, placed where the Add was (z may be computed after the BatchNorm, as a downsampling
// branch is in torch's exports). y and the Add's output leave the graph. Accounting refilled.
Result<OpGraph> fuse_residual_tails(OpGraph const& graph);

// After lowering (constant folding has turned torch's shape arithmetic for attention's 1/sqrt(d)
// into a constant, and every shape is known), what only feeds a MatMul goes into it (MatMulAttrs),
// which the GEMM applies for free, forward and backward:
// - a Transpose of an operand whose perm p brings the last axis next to last (p[r-2] = r-1:
//   attention's Kᵀ, perm 0,2,3,1 after a head split, 0,1,3,2 or 0,2,1 of K) becomes trans_a or
//   trans_b; the Transpose stays, by p with its last two entries swapped, where that is not the
//   identity (a permutation that keeps the innermost axis, which moves contiguous runs instead of
//   single elements), writing "<its output>_keep_inner";
// - a Mul or Div by a one-element float constant of an operand (before or after such a Transpose)
//   or of the product (its only reader) becomes a factor of alpha.
// Placed where the MatMul (and a kept Transpose) was.
Result<OpGraph> fuse_matmul_operands(OpGraph const& graph);

// The op types without an OpDef that the rewrites below turn into supported ones (CastLike, IsNaN,
// IsInf, DepthToSpace, SpaceToDepth, GlobalMaxPool, GlobalLpPool, LpPool, Upsample), and the
// operators the lowering expands (expanded_by_lowering): function expansion leaves them be.
bool rewritten_at_import(std::string const& type);

// CastLike nodes whose second input's type is known become Cast to that type.
void rewrite_cast_like(RawModel& model);

// IsNaN(x) becomes Not(Equal(x, x)) (NaN is the one value unequal to itself): the dynamo exporter
// guards attention's softmax with Where(IsNaN(p), 0, p).
void rewrite_is_nan(RawModel& model);

// IsInf(x) of float32 or float64 becomes Equal(Abs(x), inf) (Equal(x, +inf) or Equal(x, -inf)
// where one sign is not detected; Equal(x, NaN), false everywhere, where neither is).
void rewrite_is_inf(RawModel& model);

// DepthToSpace (DCR and CRD modes: PixelShuffle) and SpaceToDepth on a 4-D input of known channels,
// height and width are a Reshape to 6 dims, a Transpose and a Reshape back (ONNX's own definition),
// the batch copied by a 0 in both shapes; rewritten so, which both backends run and differentiate.
// A node whose input dims shape inference left unknown, or that do not divide, is an error naming
// it and the reason.
Status rewrite_depth_space(RawModel& model);

// Operators with an equivalent in ones both backends run and differentiate: GlobalMaxPool becomes
// a ReduceMax over the spatial axes (its input's rank known at import), keeping them; LpPool the
// p-th root of AveragePool(|x|^p) (pads counted) times the window's size, GlobalLpPool of
// ReduceSum(|x|^p); Upsample (opsets 7-9) a Resize with asymmetric coordinates (nearest rounding
// down), its scales from the attribute or the second input. A node that cannot be is an error
// naming it and the reason.
Status rewrite_pooling_and_upsample(RawModel& model);

// The model's nodes with every body's nodes (If branches, Loop and Scan bodies, nested ones
// included) after them: what reads an initializer, for the trainable choice, and the names
// rewrites must not hand out again. The rewrites above (CastLike to DepthToSpace, the pooling ones)
// reach into bodies too; the fusions do not (a value a body reads is never fused away).
std::vector<RawNode const*> all_nodes(RawModel const& model);

// Op types the lowering understands (after fusion), sorted; for the unsupported-op message.
std::vector<std::string> const& supported_op_types();

// The operators the lowering resolves into others: the sequence operators (SplitToSequence,
// SequenceAt, SequenceConstruct, SequenceEmpty, SequenceInsert, SequenceErase, SequenceLength,
// ConcatFromSequence; a sequence is the list of its elements' values, never a graph tensor), DFT
// (a MatMul with its matrix) and STFT (a strided Conv with the window times that matrix).
bool expanded_by_lowering(std::string const& type);

// Which initializers train, one entry per initializer in file order, with the rule that decided:
// the weight-slot rules, except buffers (non-finite values; feeding only masks, comparisons or
// indices; mask values; sinusoidal position tables), then options.trainable / options.frozen. Errors name a pattern
// that matches nothing.
Result<std::vector<WeightChoice>> choose_trainable(RawModel const& model, ImportOptions const& options);

// Folds static computations, propagates shapes with the symbolic batch, fills typed attributes,
// roles (kWeight for the trainable `choices`) and accounting.
// Loops and Scans unrolled add at most `max_unrolled_nodes` nodes in all (ImportOptions::max_nodes).
Result<OpGraph> lower(RawModel model, bool first_dim_is_batch, std::vector<WeightChoice> choices,
                      int64_t max_unrolled_nodes);

}  // namespace gp::graph::onnx_import
