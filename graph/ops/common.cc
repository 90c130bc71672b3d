#include "graph/ops/common.h"

namespace gp::graph::ops {

Status op_error(Op const& op, std::string const& what) {
  return invalid_argument(op.type + " '" + op.name + "': " + what);
}

Status in_op(Status s, Op const& op) {
  if (s.is_ok()) return s;
  std::string const prefix = op.type + " '" + op.name + "'";
  if (s.message().starts_with(prefix + ":") || s.message().starts_with(prefix + " ")) return s;
  return s.with_context(prefix);
}

int64_t window_outputs(int64_t in, int64_t kernel, int64_t stride, int64_t dilation, int64_t pad_begin, int64_t pad_end,
                       bool ceil_mode) {
  int64_t const span = in + pad_begin + pad_end - ((kernel - 1) * dilation + 1);
  if (span < 0 || stride <= 0) return 0;
  if (!ceil_mode) return span / stride + 1;
  int64_t out = (span + stride - 1) / stride + 1;
  if ((out - 1) * stride >= in + pad_begin) --out;  // the last window must start inside
  return out;
}

int64_t numel_of(std::vector<int64_t> const& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::optional<std::vector<int64_t>> concrete_shape(std::vector<int64_t> const& symbolic, int64_t batch) {
  std::vector<int64_t> out = symbolic;
  for (int64_t& d : out) {
    if (d >= 0) continue;
    if (batch <= 0) return std::nullopt;
    d = -d * batch;
  }
  return out;
}

int64_t batch_of(std::vector<int64_t> const& symbolic, std::vector<int64_t> const& concrete) {
  if (symbolic.size() != concrete.size()) return 0;
  for (std::size_t i = 0; i < symbolic.size(); ++i)
    if (symbolic[i] < 0) return concrete[i] % -symbolic[i] == 0 ? concrete[i] / -symbolic[i] : 0;
  return 0;
}

}  // namespace gp::graph::ops
