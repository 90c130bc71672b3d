#include "graph/ops/registry.h"

#include <stdexcept>

namespace gp::graph::ops {

void define(OpTable& t, std::string const& type, OpDef def) {
  if (!t.emplace(type, std::move(def)).second) throw std::logic_error("op type '" + type + "' is defined twice");
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
                                                         {"logic", register_logic_ops},
                                                         {"folded", register_folded_ops}};
    OpTable t;
    for (auto const& [family, add] : families) {
      add(t);
      for (auto& [type, def] : t)
        if (def.family.empty()) def.family = family;
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
