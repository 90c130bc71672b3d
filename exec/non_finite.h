// Where a non-finite loss comes from. Looked for only once a loss is inf/NaN, so the normal path
// checks nothing: the first weight holding inf/NaN (an update that overflowed, or a buffer such as
// a -inf mask trained as if it were a weight), else the first activation of the micro-batch's
// forward, rerun op by op, and the op that produced it.
#pragma once

#include <cstdint>
#include <string>

#include "exec/stage_executor.h"
#include "exec/tensor.h"

namespace gp::exec {

// The worst value a float tensor (any device) holds: NaN or +inf (kBad) over -inf (kNegInf, which a
// mask adds to attention scores on purpose) over none; kNone for other dtypes.
enum class NonFinite : uint8_t { kNone, kNegInf, kBad };
NonFinite non_finite_kind(Tensor const& t);
inline bool has_non_finite(Tensor const& t) { return non_finite_kind(t) != NonFinite::kNone; }

// The cause for the error of a non-finite loss, e.g. "the first non-finite tensor is weight 'mask'
// (read by Add 'add'), made so by the update of step 1; ...": a weight of `ex` (made non-finite by
// the update of step `steps_done`, or already in the model when no step has run), else, when
// `inputs` is given, the first stage input or op output of the micro-batch's forward rerun with
// `rng_seed`.
std::string explain_non_finite(StageExecutor& ex, TensorMap const* inputs, uint64_t rng_seed, int64_t steps_done);

}  // namespace gp::exec
