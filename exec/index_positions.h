// The host side of the position-addressed index ops (GatherElements, ScatterElements and Scatter,
// GatherND, ScatterND) that both backends share: the checks their kernel tables run, and the parameter
// structs of kernels/hd/index.h's per-element math (hd::element_position, hd::nd_offset) built
// from the shapes, with the CPU's errors.
#pragma once

#include <cstdint>
#include <vector>

#include "exec/op_kernels.h"
#include "kernels/hd/index.h"

namespace gp::exec {

// Indices int64 or int32 (GatherElements, GatherND: data of any dtype is gathered).
Status gather_elements_check(graph::Op const& op, graph::OpGraph const& graph);
Status gather_nd_check(graph::Op const& op, graph::OpGraph const& graph);
// Also: data and updates float32 (ScatterElements and Scatter, ScatterND).
Status scatter_elements_check(graph::Op const& op, graph::OpGraph const& graph);
Status scatter_nd_check(graph::Op const& op, graph::OpGraph const& graph);

// The updates' shape each scatter requires, or the error naming the shapes: ScatterElements' (and
// Scatter's) equal to the indices', ScatterND's the indices' dims but the last, then data's from K on.
Status scatter_elements_updates_check(OpCall const& call, std::vector<int64_t> const& indices,
                                      std::vector<int64_t> const& updates);
Status scatter_nd_updates_check(OpCall const& call, std::vector<int64_t> const& data,
                                std::vector<int64_t> const& indices, std::vector<int64_t> const& updates);

// What a scatter's backward reads: `idx` (the indices, on the backend's device) and data's shape
// (in[0]'s), and with reductions mul, max and min the data and updates (in[0], in[2]).
void save_scatter(Tensor const& idx, std::vector<Tensor> const& in, graph::ScatterReduction r, Saved* saved);

// GatherElements/ScatterElements: indices of `ishape` into data of `data_shape` along `axis`.
Result<kernels::hd::ElementIndex> element_index(OpCall const& call, std::vector<int64_t> const& data_shape,
                                                std::vector<int64_t> const& ishape, int64_t axis);
// GatherND (batch_dims 0) and ScatterND: indices of `ishape` ([..., K], K from 1 to kMaxRank) into data.
Result<kernels::hd::NdIndex> nd_index(OpCall const& call, std::vector<int64_t> const& data_shape,
                                      std::vector<int64_t> const& ishape);

}  // namespace gp::exec
