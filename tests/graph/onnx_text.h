// Helpers for writing small ONNX models inline in the text format (onnx/defs/parser.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gp::graph {

// "float[2,3] name = {v, v, ...}": an initializer filled with `value`.
inline std::string zeros(std::string const& name, std::vector<int64_t> const& dims, double value = 0.0,
                         std::string const& type = "float") {
  int64_t n = 1;
  std::string s = type;
  if (!dims.empty()) {  // a scalar has no brackets
    s += "[";
    for (std::size_t i = 0; i < dims.size(); ++i) {
      s += (i ? "," : "") + std::to_string(dims[i]);
      n *= dims[i];
    }
    s += "]";
  }
  s += " " + name + " = {";
  std::string const v = type == "float" ? std::to_string(value) : std::to_string(static_cast<int64_t>(value));
  for (int64_t i = 0; i < n; ++i) s += (i ? "," : "") + v;
  return s + "}";
}

// A whole model: opset, graph inputs and outputs (comma separated), initializers, node lines.
inline std::string model_text(std::string const& inputs, std::string const& outputs,
                              std::vector<std::string> const& initializers, std::string const& body, int opset = 13) {
  std::string s = "<ir_version: 8, opset_import: [\"\" : " + std::to_string(opset) + "]>\nnet (" + inputs + ") => (" +
                  outputs + ")";
  if (!initializers.empty()) {
    s += " <";
    for (std::size_t i = 0; i < initializers.size(); ++i) s += (i ? ", " : "") + initializers[i];
    s += ">";
  }
  return s + " {\n" + body + "\n}\n";
}

}  // namespace gp::graph
