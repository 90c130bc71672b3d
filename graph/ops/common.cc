#include "graph/ops/common.h"

namespace gp::graph::ops {

Status op_error(Op const& op, std::string const& what) {
  return invalid_argument(op.type + " '" + op.name + "': " + what);
}

std::string dims_string(std::vector<int64_t> const& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

int64_t numel_of(std::vector<int64_t> const& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace gp::graph::ops
