// Shared by the runtime tests: zoo models as graphs, plans from the real planners or by hand,
// single-device reference training, and a tolerant weight comparison.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exec/cpu/cpu_backend.h"
#include "exec/runtime/runtime.h"
#include "exec/trainer.h"
#include "graph/cost_model.h"
#include "models/zoo.h"
#include "partition/cluster.h"
#include "partition/from_graph.h"
#include "partition/planner.h"
#include "schedule/build.h"

namespace gp::exec::testing {

inline TrainConfig config_for(models::Task task, int64_t batch, int64_t micro_batches, int64_t steps = 3) {
  TrainConfig c;
  c.loss = task == models::Task::kRegression ? LossKind::kMse : LossKind::kCrossEntropy;
  c.batch = batch;
  c.micro_batches = micro_batches;
  c.steps = steps;
  c.seed = 5;
  c.optimizer.lr = 0.05f;
  c.optimizer.momentum = 0.9f;
  c.log_interval = 1000;
  c.data.samples = 64;
  return c;
}

// Weights and BatchNorm statistics after `config.steps` single-device steps.
inline std::map<std::string, Tensor> train_single(graph::OpGraph const& g, TrainConfig const& c,
                                                  std::vector<double>* losses = nullptr) {
  CpuBackend be;
  auto data = make_data_source(c.data, g, c.loss, c.seed);
  EXPECT_TRUE(data.is_ok()) << data.status().message();
  auto t = Trainer::create(c, g, be, std::move(data).value());
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  Status s = (*t)->run(nullptr);
  EXPECT_TRUE(s.is_ok()) << s.message();
  if (losses) *losses = (*t)->losses();
  std::map<std::string, Tensor> out;
  for (auto const& [n, x] : (*t)->trained_tensors()) out.emplace(n, x.clone());
  return out;
}

inline Result<partition::Plan> make_plan(std::shared_ptr<graph::OpGraph const> g, std::string const& planner,
                                         int devices, TrainConfig const& c, bool replication) {
  auto cost = std::make_shared<graph::AnalyticCostModel>();
  ASSIGN_OR_RETURN(partition::Problem p, partition::problem_from_graph(
                                             g, cost, partition::Cluster::uniform(devices, int64_t{1} << 34), c.batch));
  p.micro_batch_candidates = {c.micro_batch_size()};
  p.allow_replication = replication;
  RETURN_IF_ERROR(p.finalize());
  return partition::plan_with(planner, p);
}

// |a - b| <= atol + rtol |b| for every element of every tensor; returns the largest relative error.
inline double expect_close(std::map<std::string, Tensor> const& got, std::map<std::string, Tensor> const& want,
                           double rtol, double atol, std::string const& what) {
  EXPECT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  for (auto const& [n, t] : want) {
    auto it = got.find(n);
    if (it == got.end()) {
      ADD_FAILURE() << what << ": no tensor " << n;
      continue;
    }
    auto x = it->second.to_vector(), y = t.to_vector();
    if (x.size() != y.size()) {
      ADD_FAILURE() << what << ": " << n << " sizes differ";
      continue;
    }
    for (std::size_t i = 0; i < x.size(); ++i) {
      double const err = std::abs(double(x[i]) - double(y[i]));
      worst = std::max(worst, err / (std::abs(double(y[i])) + 1e-6));
      if (err > atol + rtol * std::abs(double(y[i]))) {
        ADD_FAILURE() << what << ": " << n << "[" << i << "] = " << x[i] << ", single device " << y[i];
        return worst;
      }
    }
  }
  return worst;
}

}  // namespace gp::exec::testing
