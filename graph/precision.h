// Automatic mixed precision as a graph rewrite. `precision: bf16` (or fp16) means what PyTorch's
// autocast means: float32 master weights, optimizer state, losses, softmax, normalisation
// statistics and reductions; matmul and convolution in the low precision (float32 accumulation
// inside the kernels); the ops in between follow their inputs where a backend runs them in the low
// precision. The rule of each op type is one row of an explicit policy table (amp_rule below,
// printed by `graphpipe ops`), and the rewrite makes every change of an activation's dtype an
// explicit Cast op, so the planner, the simulator, the profiler and every backend see the same
// graph: low-precision tensors count 2 bytes an element in memory and on links, and a Cast's
// backward casts the gradient back. Weights stay float32 tensors: a low op's kernel rounds them per
// call and returns their gradients in float32, so no stage boundary ever carries a weight's copy.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"
#include "graph/op_graph.h"
#include "graph/ops/op_kind.h"

namespace gp::graph {

enum class Precision : uint8_t { kFloat32, kBFloat16, kFloat16 };

// "fp32", "bf16", "fp16" (also "float32", "bfloat16", "float16"); anything else is an error naming
// the choices.
Result<Precision> parse_precision(std::string_view text);
char const* precision_name(Precision p);  // "fp32", "bf16", "fp16"
DType low_dtype(Precision p);             // the dtype of the low-precision compute (float32 for fp32)

// What an op type does under mixed precision (PyTorch's autocast lists, CPU and CUDA alike).
enum class AmpPolicy : uint8_t {
  kFloat32,  // runs in float32: low-precision inputs are cast up (losses, softmax, LayerNorm, ...)
  kLow,      // runs in the low precision: its data input and float activations are cast down, its
             // weights stay float32 and its kernel rounds them per call (Conv, Gemm, MatMul)
  kFollow,   // runs in the low precision when its first `follow_inputs` float inputs all are,
             // else in float32 (inputs cast up): pointwise ops, pooling, BatchNorm, views
};
struct AmpRule {
  AmpPolicy policy = AmpPolicy::kFloat32;
  // kFollow: the leading inputs whose dtype decides (BatchNorm: 1, its scale, bias and statistics
  // stay float32; Add: 2). Inputs past them are passed as they are.
  int follow_inputs = 0;
  // How many leading float32 outputs a low op writes in the low precision (Split: all its parts;
  // BatchNorm: only y, its running statistics stay float32).
  int low_outputs = 1;
  // An input past the deciding ones that computes with them, cast to the op's dtype either way
  // (BatchNorm's fused residual z, input 5); -1: none.
  int with_deciding = -1;
};
inline constexpr int kAllOutputs = 1 << 20;
AmpRule amp_rule(ops::OpKind kind);
char const* amp_policy_name(AmpPolicy p);  // "low", "fp32", "follow"

// The graph with `precision` applied: for fp32, a copy of `graph`; for bf16 and fp16, every op
// computes in the dtype its rule gives and a Cast op (named "<tensor>.to_bf16" / ".to_fp16" /
// ".to_fp32", shared by every consumer) sits wherever a tensor's dtype differs from the one its
// consumer computes in. Op and tensor names of `graph` keep their meaning; graph outputs keep their
// names and stay float32. fp16 graphs run where a backend has float16 kernels (CUDA; the CPU's
// oneDNN 2.6 has no float16 convolution or matmul and refuses them by name) and want loss scaling
// (exec/loss_scale.h), which training turns on by default for fp16. `graph` must be finalized.
Result<OpGraph> apply_precision(OpGraph const& graph, Precision precision);

// The precision a graph was rewritten for: bf16 (fp16) when a tensor computed by an op is bfloat16
// (float16).
Precision graph_precision(OpGraph const& graph);

}  // namespace gp::graph
