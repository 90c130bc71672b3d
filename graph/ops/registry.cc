#include "graph/ops/registry.h"

#include <map>
#include <stdexcept>
#include <vector>

namespace gp::graph::ops {

namespace {

struct KindNames {
  std::map<std::string_view, OpKind, std::less<>> by_name;
  std::vector<std::string_view> names;  // indexed by the kind's value
};

KindNames const& kind_names() {
  static KindNames const k = [] {
    KindNames n;
    n.names.push_back("");
#define GP_OP_KIND_NAME(name)                                    \
  n.by_name.emplace(#name, static_cast<OpKind>(n.names.size())); \
  n.names.push_back(#name);
    GP_OP_KINDS(GP_OP_KIND_NAME)
#undef GP_OP_KIND_NAME
    return n;
  }();
  return k;
}

}  // namespace

OpKind op_kind(std::string_view type) {
  auto const& by_name = kind_names().by_name;
  auto it = by_name.find(type);
  return it == by_name.end() ? OpKind::kUnknown : it->second;
}

std::string_view op_kind_name(OpKind kind) {
  auto const& names = kind_names().names;
  auto const i = static_cast<std::size_t>(kind);
  return i < names.size() ? names[i] : std::string_view();
}

void define(OpTable& t, std::string const& type, OpDef def) {
  def.kind = op_kind(type);
  if (def.kind == OpKind::kUnknown)
    throw std::logic_error("op type '" + type + "' has no OpKind: add it to GP_OP_KINDS in graph/ops/op_kind.h");
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
