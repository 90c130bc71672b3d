#include "graph/ops/registry.h"

#include <stdexcept>

namespace gp::graph::ops {

void define(OpTable& t, std::string const& type, InferFn infer) {
  if (!t.emplace(type, OpDef{infer, {}}).second) throw std::logic_error("op type '" + type + "' is defined twice");
}

OpTable const& op_table() {
  static OpTable const table = [] {
    using Register = void (*)(OpTable&);
    std::pair<char const*, Register> const families[] = {{"linalg", register_linalg_ops},
                                                         {"conv", register_conv_ops},
                                                         {"pool", register_pool_ops},
                                                         {"norm", register_norm_ops},
                                                         {"activation", register_activation_ops},
                                                         {"binary", register_binary_ops},
                                                         {"reduce", register_reduce_ops},
                                                         {"view", register_view_ops},
                                                         {"move", register_move_ops},
                                                         {"index", register_index_ops},
                                                         {"rnn", register_rnn_ops},
                                                         {"loss", register_loss_ops},
                                                         {"logic", register_logic_ops}};
    OpTable t;
    for (auto const& [family, add] : families) {
      add(t);
      for (auto& [type, def] : t)
        if (def.family.empty()) def.family = family;
    }
    // Ops that exist only at import time: folded from static inputs (an error names them otherwise).
    for (char const* folded : {"Constant", "ConstantOfShape", "Range", "Shape", "Size"})
      if (!t.count(folded)) {
        define(t, folded, nullptr);
        t.find(folded)->second.family = "folded";
      }
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
