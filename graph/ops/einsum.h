// Einsum's equation as labels per operand dim: the one parser the importer's shape rule and every
// backend's kernel share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace gp::graph::ops {

// Labels are numbered 0..num_labels-1 in order of first use in the operands; the dims an ellipsis
// stands for get one label each, aligned from the right across operands.
struct EinsumSpec {
  std::vector<std::vector<int>> inputs;  // one label per dim of each operand
  std::vector<int> output;               // one label per output dim (no repeats)
  int num_labels = 0;                    // every label occurs in some operand
};

// Parses `equation` ("bij,bjk->bik", implicit "ij,jk", "...ii->...i"; spaces are ignored) for
// operands of the given ranks. The implicit output is the ellipsis dims, then the letters that
// occur once, in alphabetical order.
Result<EinsumSpec> parse_einsum(std::string const& equation, std::vector<int64_t> const& ranks);

// The size of every label (index: label), checked equal wherever it occurs. Sizes may be symbolic
// batch dims (negative); they must then match exactly.
Result<std::vector<int64_t>> einsum_label_sizes(EinsumSpec const& spec,
                                                std::vector<std::vector<int64_t>> const& operand_dims);

}  // namespace gp::graph::ops
