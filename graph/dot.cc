#include "graph/dot.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/file_io.h"

namespace gp::graph {
namespace {

std::string quoted(std::string const& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string edge_label(TensorInfo const& t) {
  std::string label = t.shape.to_string();
  if (t.dtype != DType::kFloat32) label += std::string(" ") + dtype_name(t.dtype);
  return label;
}

}  // namespace

std::string to_dot(OpGraph const& graph) {
  std::ostringstream os;
  os << "digraph " << quoted(graph.name().empty() ? "graph" : graph.name()) << " {\n";
  os << "  node [shape=box, style=rounded, fontsize=10];\n  edge [fontsize=9];\n";
  for (TensorId t : graph.inputs())
    os << "  in" << t << " [shape=ellipse, label=" << quoted(graph.tensor(t).name + "\n" + edge_label(graph.tensor(t)))
       << "];\n";
  for (Op const& op : graph.ops()) os << "  op" << op.id << " [label=" << quoted(op.type + "\n" + op.name) << "];\n";
  for (TensorId t : graph.outputs())
    os << "  out" << t << " [shape=ellipse, label=" << quoted(graph.tensor(t).name) << "];\n";
  for (Op const& op : graph.ops()) {
    for (std::size_t k = 0; k < op.inputs.size(); ++k) {
      TensorId const t = op.inputs[k];
      if (t == kNoTensor || std::find(op.inputs.begin(), op.inputs.begin() + k, t) != op.inputs.begin() + k) continue;
      TensorInfo const& info = graph.tensor(t);
      if (info.producer != kNoOp)
        os << "  op" << info.producer << " -> op" << op.id << " [label=" << quoted(edge_label(info)) << "];\n";
      else if (info.role == TensorRole::kInput)
        os << "  in" << t << " -> op" << op.id << ";\n";
    }
  }
  for (TensorId t : graph.outputs()) {
    TensorInfo const& info = graph.tensor(t);
    if (info.producer != kNoOp)
      os << "  op" << info.producer << " -> out" << t << " [label=" << quoted(edge_label(info)) << "];\n";
    else if (info.role == TensorRole::kInput)
      os << "  in" << t << " -> out" << t << ";\n";
  }
  os << "}\n";
  return os.str();
}

Status write_dot(OpGraph const& graph, std::string const& path) {
  return write_file_atomic(path, to_dot(graph), "DOT file");
}

}  // namespace gp::graph
