// Writes a trained model: the original ONNX file with the named initializers' values replaced
// (everything else — nodes, opset, metadata — unchanged), so any ONNX runtime can load it.
#pragma once

#include <map>
#include <string>

#include "graph/op_graph.h"
#include "core/status.h"

namespace gp::graph {

// `values` by initializer name; each must exist in the model with the same dims and dtype, except
// that a float32 initializer may be given a bfloat16 or float16 value (16-bit weights, rounded by the
// caller): it is then stored in that type as "<name>.bf16" / "<name>.fp16", and a Cast to float32 at
// the front of the graph gives "<name>" to its consumers, so any ONNX runtime computes as before from
// the 16-bit values (bfloat16 needs opset 13 or later, Cast's first bfloat16 version).
// Initializers held as external data are inlined. Written atomically (temporary file, rename).
Status export_trained_onnx(std::string const& src_path, std::map<std::string, TensorData> const& values,
                           std::string const& out_path);
// The same from the model's bytes, already read: `src_name` names it in errors, `src_path` is the
// file they came from (external data is resolved against its folder; empty: the current folder).
Status export_trained_onnx_bytes(std::string const& src_bytes, std::string const& src_name, std::string const& src_path,
                                 std::map<std::string, TensorData> const& values, std::string const& out_path);

}  // namespace gp::graph
