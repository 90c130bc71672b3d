#include "graph/onnx_import_fold.h"

namespace gp::graph::onnx_import {

Result<ops::Folded> fold_node(RawNode const& n, ops::OpDef const& def, std::vector<SymArray const*> const& ins,
                              std::vector<ops::Dims> dims, int64_t opset, std::vector<DType> dtypes) {
  if (def.fold == nullptr) return ops::Folded{};
  if (!def.folds_from_shape)
    for (auto const* in : ins)
      if (in && (in->numel() > ops::kMaxFoldElements || in->dtype == DType::kFloat16 || in->dtype == DType::kBFloat16))
        return ops::Folded{};
  ops::FoldContext const c{.type = n.type,
                           .name = n.name,
                           .opset = opset,
                           .attrs = n.attrs,
                           .ins = ins,
                           .dims = std::move(dims),
                           .dtypes = std::move(dtypes)};
  return def.fold(c);
}

}  // namespace gp::graph::onnx_import
