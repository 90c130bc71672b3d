// What the shape functions of every op family (graph/ops/*.h) share: the error form every backend
// reports op errors in, the typed-attribute requirement, and small shape arithmetic.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "core/status.h"
#include "graph/op_graph.h"

namespace gp::graph::ops {

// "<type> '<name>': what" (kInvalidArgument).
Status op_error(Op const& op, std::string const& what);

// kUnsupported unless the importer filled Op::typed with an A.
template <typename A>
Status require_typed(Op const& op) {
  if (std::get_if<A>(&op.typed) == nullptr)
    return unsupported(op.type + " '" + op.name + "' has no typed attributes (the importer must fill Op::typed)");
  return Status::ok();
}

std::string dims_string(std::vector<int64_t> const& dims);  // "[2,3]"
int64_t numel_of(std::vector<int64_t> const& shape);
inline int64_t normalised_axis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

}  // namespace gp::graph::ops
