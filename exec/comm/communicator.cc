#include "exec/comm/communicator.h"

#include <atomic>
#include <sstream>

namespace gp::exec {

namespace {
std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");
}  // namespace

void request_stop() { g_stop.store(true); }
bool stop_requested() { return g_stop.load(); }

std::string MessageKey::to_string() const {
  std::ostringstream os;
  os << "step " << step << ' ' << (gradient ? 'g' : 'e') << edge << " m" << micro_batch << " d" << src << "->d" << dst;
  return os.str();
}

std::string TensorMeta::to_string() const {
  std::ostringstream os;
  os << graph::dtype_name(dtype) << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) os << (i ? "," : "") << shape[i];
  os << ']';
  return os.str();
}

TensorMeta meta_of(Tensor const& t) { return {t.dtype(), t.shape()}; }

Status check_header(MessageKey const& key, std::vector<TensorMeta> const& expected,
                    std::vector<TensorMeta> const& got) {
  if (expected.size() != got.size())
    return invalid_argument("message " + key.to_string() + ": the receiver expects " + std::to_string(expected.size()) +
                            " tensors, the sender sent " + std::to_string(got.size()) +
                            " (plan or schedule differs between the two devices?)");
  for (std::size_t i = 0; i < expected.size(); ++i)
    if (!(expected[i] == got[i]))
      return invalid_argument("message " + key.to_string() + ": tensor " + std::to_string(i) + " is " +
                              got[i].to_string() + " from d" + std::to_string(key.src) + " but d" +
                              std::to_string(key.dst) + " expects " + expected[i].to_string() +
                              " (a plan or model mismatch between the two devices)");
  return Status::ok();
}

std::string CollectiveKey::to_string() const {
  std::string const what = stage >= 0                   ? "s" + std::to_string(stage)
                           : stage == kStepLossStage    ? std::string("of the step's loss")
                           : stage == kFoundInfStage    ? std::string("of the found-inf flags")
                           : stage == kTiedWeightsStage ? "of tied weights (group " + std::to_string(part) + ")"
                                                        : "s" + std::to_string(stage);
  return "step " + std::to_string(step) + " ALLREDUCE " + what;
}

}  // namespace gp::exec
