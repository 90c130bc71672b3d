#include "exec/optimizer.h"

#include <chrono>

namespace gp::exec {

namespace {
Tensor& moment(Backend& backend, std::map<std::string, Tensor>& state, std::string const& key, Tensor const& like) {
  auto it = state.find(key);
  if (it == state.end()) it = state.emplace(key, backend.zeros(like.shape(), like.dtype())).first;
  return it->second;
}
}  // namespace

double state_bytes_per_weight_byte(OptimizerConfig const& config) {
  return 1.0 + moment_count(config);  // the gradient and the moments
}

Result<double> measure_update_seconds_per_byte(Backend& backend, OptimizerConfig const& config) {
  int64_t const n = int64_t{4} << 20;
  Tensor w = backend.zeros({n}), g = backend.zeros({n}), m = backend.zeros({n}), v = backend.zeros({n});
  std::vector<Tensor*> state;
  if (config.kind != OptimizerKind::kSgd)
    state = {&m, &v};
  else if (config.momentum != 0.f)
    state = {&m};
  int const repeats = 3;
  double total = 0;
  for (int r = 0; r <= repeats; ++r) {  // r == 0 warms up (page faults)
    auto const t0 = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(backend.optimizer_update(config, r + 1, w, g, state));
    RETURN_IF_ERROR(backend.synchronize());
    if (r > 0) total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return total / repeats / static_cast<double>(n * 4);
}

Status Optimizer::step(Backend& backend, std::map<std::string, Tensor>& params,
                       std::map<std::string, Tensor> const& grads) {
  for (auto& [name, w] : params) {
    auto git = grads.find(name);
    if (git == grads.end() || !git->second.defined())
      return internal_error("optimizer: no gradient for parameter '" + name + "'");
    Tensor const& g = git->second;
    if (g.shape() != w.shape())
      return internal_error("optimizer: gradient of '" + name + "' has shape " + g.shape_string() + ", parameter " +
                            w.shape_string());
    if (w.dtype() != DType::kFloat32) return unsupported("optimizer: parameter '" + name + "' is not float32");
    for (char const* suffix : {"#momentum", "#m", "#v"}) {
      auto it = state_.find(name + suffix);
      if (it != state_.end() && it->second.shape() != w.shape())
        return invalid_argument("optimizer state '" + it->first + "' has shape " + it->second.shape_string() +
                                " but the parameter has " + w.shape_string());
    }
  }
  ++step_;
  std::vector<Backend::ParamUpdate> updates;
  updates.reserve(params.size());
  for (auto& [name, w] : params) {
    Backend::ParamUpdate u{&w, &grads.at(name), {}};
    if (config_.kind == OptimizerKind::kSgd) {
      if (config_.momentum != 0.f) u.state.push_back(&moment(backend, state_, name + "#momentum", w));
    } else {
      u.state.push_back(&moment(backend, state_, name + "#m", w));
      u.state.push_back(&moment(backend, state_, name + "#v", w));
    }
    updates.push_back(std::move(u));
  }
  return backend.optimizer_update_all(config_, step_, updates);
}

void Optimizer::load_state(std::map<std::string, Tensor> state, int64_t step_count) {
  state_ = std::move(state);
  step_ = step_count;
}

}  // namespace gp::exec
