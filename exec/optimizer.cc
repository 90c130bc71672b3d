#include "exec/optimizer.h"

#include "kernels/optim.h"

namespace gp::exec {

namespace {
Tensor& moment(std::map<std::string, Tensor>& state, std::string const& key, Tensor const& like) {
  auto it = state.find(key);
  if (it == state.end()) it = state.emplace(key, Tensor::zeros(like.shape())).first;
  return it->second;
}
}  // namespace

Status Optimizer::step(std::map<std::string, Tensor>& params, std::map<std::string, Tensor> const& grads) {
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
  for (auto& [name, w] : params) {
    Tensor const& g = grads.at(name);
    int64_t const n = w.numel();
    switch (config_.kind) {
      case OptimizerKind::kSgd: {
        float* buf = nullptr;
        if (config_.momentum != 0.f) buf = moment(state_, name + "#momentum", w).data<float>();
        kernels::sgd_update(w.data<float>(), g.data<float>(), buf, n, config_.lr, config_.momentum,
                            config_.weight_decay);
        break;
      }
      case OptimizerKind::kAdam:
      case OptimizerKind::kAdamW: {
        kernels::AdamParams p;
        p.lr = config_.lr;
        p.beta1 = config_.beta1;
        p.beta2 = config_.beta2;
        p.eps = config_.eps;
        p.weight_decay = config_.weight_decay;
        p.decoupled = config_.kind == OptimizerKind::kAdamW;
        p.step = step_;
        Tensor& m = moment(state_, name + "#m", w);
        Tensor& v = moment(state_, name + "#v", w);
        kernels::adam_update(w.data<float>(), g.data<float>(), m.data<float>(), v.data<float>(), n, p);
        break;
      }
    }
  }
  return Status::ok();
}

void Optimizer::load_state(std::map<std::string, Tensor> state, int64_t step_count) {
  state_ = std::move(state);
  step_ = step_count;
}

}  // namespace gp::exec
