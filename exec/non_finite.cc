#include "exec/non_finite.h"

#include <cmath>
#include <cstring>

#include "graph/ops/common.h"

namespace gp::exec {

namespace {

std::string op_label(graph::Op const& op) { return op.type + " '" + op.name + "'"; }

}  // namespace

NonFinite non_finite_kind(Tensor const& t) {
  if (!t.defined()) return NonFinite::kNone;
  graph::DType const d = t.dtype();
  if (d != graph::DType::kFloat32 && d != graph::DType::kFloat64 && d != graph::DType::kFloat16 &&
      d != graph::DType::kBFloat16)
    return NonFinite::kNone;
  Tensor const host = t.device().kind == DeviceKind::kCpu ? t : t.clone_to(process_cpu_allocator());
  std::size_t const n = static_cast<std::size_t>(host.numel());
  NonFinite worst = NonFinite::kNone;
  auto see = [&](double v) {
    if (std::isnan(v) || v > 0) return true;  // only called for non-finite values: NaN or +inf
    worst = NonFinite::kNegInf;
    return false;
  };
  if (d == graph::DType::kFloat32 || d == graph::DType::kFloat64) {
    for (std::size_t i = 0; i < n; ++i) {
      double const v = d == graph::DType::kFloat32 ? host.data<float>()[i] : host.data<double>()[i];
      if (!std::isfinite(v) && see(v)) return NonFinite::kBad;
    }
    return worst;
  }
  // Half precision: an all-ones exponent is inf (mantissa 0) or NaN.
  uint16_t const exponent = d == graph::DType::kFloat16 ? 0x7C00 : 0x7F80;
  auto const* bytes = static_cast<unsigned char const*>(host.raw());
  for (std::size_t i = 0; i < n; ++i) {
    uint16_t bits = 0;
    std::memcpy(&bits, bytes + 2 * i, 2);
    if ((bits & exponent) != exponent) continue;
    bool const nan = (bits & ~exponent & 0x7FFF) != 0, negative = (bits & 0x8000) != 0;
    if (see(nan ? std::nan("") : negative ? -HUGE_VAL : HUGE_VAL)) return NonFinite::kBad;
  }
  return worst;
}

std::string StageExecutor::first_non_finite_weight() const {
  for (graph::TensorId t : plan_.weights) {
    auto it = params_.find(graph_.tensor(t).name);
    if (it != params_.end() && has_non_finite(it->second)) return it->first;
  }
  return {};
}

Result<std::string> StageExecutor::first_non_finite_activation(TensorMap const& inputs, uint64_t rng_seed) {
  MicroBatch state;
  state.rng_seed = rng_seed;
  // The first NaN or +inf ends the search; a -inf is remembered (a mask adds it on purpose) and
  // reported only when nothing worse follows.
  std::string found, neg_inf;
  TensorMap values;
  for (graph::TensorId t : plan_.stage_inputs) {
    auto it = inputs.find(t);
    if (it == inputs.end() || !it->second.defined())
      return invalid_argument("forward: missing stage input '" + graph_.tensor(t).name + "'");
    auto const& info = graph_.tensor(t);
    NonFinite const kind = non_finite_kind(it->second);
    std::string const what =
        "input '" + info.name + "'" +
        (info.producer == graph::kNoOp ? std::string(" of the micro-batch (check the data)")
                                       : " from " + op_label(graph_.op(info.producer)) + " on another stage");
    if (kind == NonFinite::kBad) return what + " (NaN or +inf)";
    if (kind == NonFinite::kNegInf && neg_inf.empty()) neg_inf = what + " (-inf)";
    values.emplace(t, it->second);
    if (state.batch == 0) state.batch = graph::ops::batch_of(info.shape.dims, it->second.shape());
  }
  AfterOp const check = [&](graph::Op const& op, std::vector<Tensor> const& outs) {
    for (std::size_t k = 0; k < outs.size() && k < op.outputs.size(); ++k) {
      if (op.outputs[k] == graph::kNoTensor) continue;
      NonFinite const kind = non_finite_kind(outs[k]);
      if (kind == NonFinite::kNone) continue;
      std::string const what = "activation '" + graph_.tensor(op.outputs[k]).name + "', the output of " + op_label(op);
      if (kind == NonFinite::kBad) {
        found = what + " (NaN or +inf; its inputs hold neither)";
        return true;
      }
      if (neg_inf.empty()) neg_inf = what + " (-inf)";
    }
    return false;
  };
  RETURN_IF_ERROR(run_forward(std::move(values), state, /*training=*/true, /*keep_saved=*/false,
                              /*update_stats=*/false, nullptr, &check)
                      .with_context("rerunning the forward to find the first non-finite tensor"));
  return found.empty() ? neg_inf : found;
}

std::string explain_non_finite(StageExecutor& ex, TensorMap const* inputs, uint64_t rng_seed, int64_t steps_done) {
  graph::OpGraph const& g = ex.graph();
  std::string const weight = ex.first_non_finite_weight();
  if (!weight.empty()) {
    std::string reader;
    if (auto t = g.find_tensor(weight); t && !g.tensor(*t).consumers.empty())
      reader = " (read by " + op_label(g.op(g.tensor(*t).consumers.front())) + ")";
    std::string const when = steps_done > 0 ? ", made so by the optimizer update of step " + std::to_string(steps_done)
                                            : ", already in the model before any update";
    return "the first non-finite tensor is weight '" + weight + "'" + reader + when +
           "; if it is a buffer (a mask, a constant), keep it out of training with frozen: [\"" + weight +
           "\"] in the config, else lower 'lr'";
  }
  if (!inputs) return "every weight of this stage is finite";
  auto found = ex.first_non_finite_activation(*inputs, rng_seed);
  if (!found.is_ok()) return "every weight is finite; " + found.status().message();
  if (found->empty())
    return "every weight and activation is finite: the loss itself overflows (lower 'lr' or check the labels)";
  return "the first non-finite tensor is " + *found;
}

}  // namespace gp::exec
