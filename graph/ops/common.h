// What the shape functions of every op family (graph/ops/*.h) share: the error form every backend
// reports op errors in, the typed-attribute requirement, and small shape arithmetic.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "graph/op_graph.h"

namespace gp::graph::ops {

// "<type> '<name>': what" (kInvalidArgument).
Status op_error(Op const& op, std::string const& what);
// An error `s` of running `op`, named as op_error names it: "<type> '<name>': " in front, unless the
// message already begins with "<type> '<name>'" (an op_error from inside the kernel, or a message
// such as "Transpose 't' on cuda runs float16 data, got float32"). OK stays OK. A backend that
// names the op around every kernel's error (the CUDA backend) wraps with this, once.
Status in_op(Status s, Op const& op);

// kUnsupported unless the importer filled Op::typed with an A.
template <typename A>
Status require_typed(Op const& op) {
  if (std::get_if<A>(&op.typed) == nullptr)
    return unsupported(op.type + " '" + op.name + "' has no typed attributes (the importer must fill Op::typed)");
  return Status::ok();
}

using ::gp::dims_string;  // "[2,3]" (core/units.h)
int64_t numel_of(std::vector<int64_t> const& shape);
// The concrete shape of a symbolic one (a negative dim -k is k times the batch) for `batch` samples;
// nullopt when it has batch dims and batch <= 0.
std::optional<std::vector<int64_t>> concrete_shape(std::vector<int64_t> const& symbolic, int64_t batch);
// The batch size a concrete shape implies for its symbolic shape (concrete[axis] / k at the batch
// dim -k); 0 when the symbolic shape has no batch dim or the two do not match.
int64_t batch_of(std::vector<int64_t> const& symbolic, std::vector<int64_t> const& concrete);
inline int64_t normalised_axis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }
// How many positions a sliding window takes along an axis of `in` elements padded by pad_begin and
// pad_end: a kernel of `kernel` taps `dilation` apart, moved by `stride`; with ceil_mode also a last
// partial window, if it starts inside the input or its begin padding. 0 when the dilated kernel is
// larger than the padded input. The one output-size rule of Conv, pooling and their inference.
int64_t window_outputs(int64_t in, int64_t kernel, int64_t stride, int64_t dilation, int64_t pad_begin, int64_t pad_end,
                       bool ceil_mode = false);
// The end padding that the last of `outputs` such windows reaches (past the attribute's when
// ceil_mode added a window, less when the windows leave some of it unread).
inline int64_t window_end_pad(int64_t in, int64_t kernel, int64_t stride, int64_t dilation, int64_t pad_begin,
                              int64_t outputs) {
  return (outputs - 1) * stride + (kernel - 1) * dilation + 1 - in - pad_begin;
}
// A boolean tensor's dtype: kBool, or kUInt8 (one byte per element, as Dropout's mask).
inline bool is_boolean(DType d) { return d == DType::kBool || d == DType::kUInt8; }

}  // namespace gp::graph::ops
