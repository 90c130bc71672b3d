#include "graph/ops/registry.h"

#include <stdexcept>

namespace gp::graph::ops {

void define(OpTable& t, std::string const& type, InferFn infer) {
  if (!t.emplace(type, OpDef{infer}).second) throw std::logic_error("op type '" + type + "' is defined twice");
}

OpTable const& op_table() {
  static OpTable const table = [] {
    OpTable t;
    for (auto family : {register_linalg_ops, register_conv_ops, register_pool_ops, register_norm_ops,
                        register_activation_ops, register_binary_ops, register_reduce_ops, register_view_ops,
                        register_move_ops, register_index_ops, register_rnn_ops, register_loss_ops, register_logic_ops})
      family(t);
    // Ops that exist only at import time: folded from static inputs (an error names them otherwise).
    for (char const* folded : {"Constant", "ConstantOfShape", "Range", "Shape"}) define(t, folded, nullptr);
    return t;
  }();
  return table;
}

OpDef const* find_op(std::string_view type) {
  auto it = op_table().find(type);
  return it == op_table().end() ? nullptr : &it->second;
}

std::vector<std::string> op_types() {
  std::vector<std::string> v;
  for (auto const& [type, def] : op_table()) v.push_back(type);
  return v;
}

}  // namespace gp::graph::ops
