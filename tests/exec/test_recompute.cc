// Recompute mode of the StageExecutor: a model cut into two stages runs 5 micro-batches in 1F1B
// order (3 in flight) with and without recomputation in both stages; forward outputs, the
// gradients sent upstream, the weight gradients and the BatchNorm running statistics must be
// bitwise equal (the recompute forward reruns the same kernels on the same inputs with the same
// seed), for whole and for split (B, later W) backward. Memory: with recompute a micro-batch in
// flight holds exactly its stage inputs.
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "exec/cpu/cpu_backend.h"
#include "exec/stage_executor.h"
#include "tests/exec/tiny_models.h"

namespace gp::exec {
namespace {

constexpr int64_t kBatch = 4;

// 1F1B with at most 3 micro-batches in flight; W runs one forward after its B (split only).
struct Event {
  char kind;  // 'F', 'B', 'W'
  int mb;
};
std::vector<Event> one_f_one_b() {
  return {{'F', 0}, {'F', 1}, {'F', 2}, {'B', 0}, {'F', 3}, {'W', 0}, {'B', 1}, {'F', 4},
          {'W', 1}, {'B', 2}, {'W', 2}, {'B', 3}, {'W', 3}, {'B', 4}, {'W', 4}};
}

struct Outcome {
  std::map<std::string, std::vector<float>> values;  // "what/name" -> contents
  int64_t saved_at_three = -1;                       // per stage, summed: saved bytes with 3 in flight
  int64_t stash_at_three = 0;                        // the stage inputs' bytes of those 3
  int64_t peak_saved = 0;
};

struct RunOptions {
  bool recompute = false;
  bool split = false;
  uint64_t seed_offset = 0;  // a different rng seed (the comparison must notice)
};

class TwoStages {
 public:
  explicit TwoStages(graph::OnnxModelBuilder const& builder) {
    auto g = builder.to_graph();
    EXPECT_TRUE(g.is_ok()) << g.status().message();
    graph_ = std::move(g).value();
  }

  Outcome run(RunOptions const& o) {
    Outcome out;
    auto const& topo = graph_.topo_order();
    std::size_t const cut = topo.size() / 2;
    std::vector<graph::OpId> const ops[2] = {{topo.begin(), topo.begin() + cut}, {topo.begin() + cut, topo.end()}};
    std::unique_ptr<StageExecutor> ex[2];
    for (int s = 0; s < 2; ++s) {
      auto made = StageExecutor::create(graph_, backend_, ops[s]);
      EXPECT_TRUE(made.is_ok()) << made.status().message();
      if (!made.is_ok()) return out;
      ex[s] = std::move(made).value();
      ex[s]->set_recompute(o.recompute);
    }
    EXPECT_FALSE(ex[1]->plan().input_grads.empty()) << "the cut sends no gradient upstream";
    graph::TensorId const y = graph_.outputs()[0];
    std::map<int, TensorMap> stage_inputs[2];
    for (Event const& e : one_f_one_b()) {
      int const mb = e.mb;
      uint64_t const seed = 1000 + mb + o.seed_offset;
      if (e.kind == 'F') {
        TensorMap in0, out0, out1;
        for (graph::TensorId t : graph_.inputs())
          in0.emplace(t, testing::normal_tensor(graph_.tensor(t).shape.concrete(kBatch), 7 + 13 * mb));
        EXPECT_TRUE(ex[0]->forward(mb, in0, out0, true, seed).is_ok());
        TensorMap in1 = in0;
        for (auto const& [t, v] : out0) in1[t] = v;
        EXPECT_TRUE(ex[1]->forward(mb, in1, out1, true, seed + 77).is_ok());
        record(out, "y m" + std::to_string(mb), out1.at(y));
        stage_inputs[0][mb] = in0;
        stage_inputs[1][mb] = in1;
        if (mb == 2) {
          out.saved_at_three = ex[0]->saved_bytes() + ex[1]->saved_bytes();
          for (int s = 0; s < 2; ++s)
            for (auto const& [m, inputs] : stage_inputs[s])
              for (graph::TensorId t : ex[s]->plan().stage_inputs) out.stash_at_three += inputs.at(t).nbytes();
          EXPECT_EQ(ex[0]->in_flight(), 3);
        }
      } else if (e.kind == 'B') {
        TensorMap g1, g0;
        Tensor const probe = testing::normal_tensor(graph_.tensor(y).shape.concrete(kBatch), 500 + mb);
        Status s1 = o.split ? ex[1]->backward_input(mb, {{y, probe}}, g1) : ex[1]->backward(mb, {{y, probe}}, g1);
        EXPECT_TRUE(s1.is_ok()) << s1.message();
        for (auto const& [t, g] : g1) record(out, "dx m" + std::to_string(mb) + " " + graph_.tensor(t).name, g);
        Status s0 = o.split ? ex[0]->backward_input(mb, g1, g0) : ex[0]->backward(mb, g1, g0);
        EXPECT_TRUE(s0.is_ok()) << s0.message();
        stage_inputs[0].erase(mb);
        stage_inputs[1].erase(mb);
      } else if (o.split) {
        for (auto& x : ex) EXPECT_TRUE(x->backward_weight(mb).is_ok());
      }
    }
    for (auto& x : ex) {
      EXPECT_EQ(x->in_flight(), 0);
      EXPECT_EQ(x->saved_bytes(), 0);
      out.peak_saved += x->peak_saved_bytes();
      for (auto const& [name, g] : x->gradients()) record(out, "grad " + name, g);
      for (auto const& [name, b] : x->buffers()) record(out, "buffer " + name, b);
    }
    return out;
  }

 private:
  static void record(Outcome& out, std::string const& key, Tensor const& t) { out.values[key] = t.to_vector(); }

  graph::OpGraph graph_;
  CpuBackend backend_;
};

// Empty when every tensor is bitwise equal, else the first difference.
std::string first_difference(Outcome const& got, Outcome const& want) {
  if (got.values.size() != want.values.size())
    return std::to_string(got.values.size()) + " tensors recorded, expected " + std::to_string(want.values.size());
  for (auto const& [key, w] : want.values) {
    auto it = got.values.find(key);
    if (it == got.values.end()) return "no " + key;
    auto const& g = it->second;
    if (g.size() != w.size()) return key + ": sizes differ";
    for (std::size_t i = 0; i < g.size(); ++i)
      if (std::memcmp(&g[i], &w[i], sizeof(float)) != 0)
        return key + "[" + std::to_string(i) + "] = " + std::to_string(g[i]) + ", expected " + std::to_string(w[i]);
  }
  return "";
}

struct RecomputeCase {
  std::string name;
  std::function<graph::OnnxModelBuilder()> builder;
};

std::vector<RecomputeCase> cases() {
  return {{"mlp", [] { return testing::tiny_mlp(); }},
          {"dropout_mlp", [] { return testing::tiny_dropout_mlp(); }},
          {"cnn_batchnorm", [] { return testing::tiny_cnn(); }},
          {"conv_stack_batchnorm", [] { return testing::tiny_conv_stack(); }},
          {"attention", [] { return testing::tiny_attention(); }}};
}

TEST(Recompute, SameGradientsAndStatisticsAsKeepingActivations) {
  for (auto const& c : cases()) {
    TwoStages model(c.builder());
    for (bool split : {false, true}) {
      std::string const what = c.name + (split ? " split B/W" : " whole backward");
      Outcome const keep = model.run({false, split, 0});
      Outcome const recompute = model.run({true, split, 0});
      ASSERT_FALSE(keep.values.empty()) << what;
      EXPECT_EQ(first_difference(recompute, keep), "") << what;
      // Memory: 3 in flight hold exactly their stage inputs, less than their activations.
      EXPECT_EQ(recompute.saved_at_three, recompute.stash_at_three) << what;
      EXPECT_LT(recompute.saved_at_three, keep.saved_at_three) << what;
      EXPECT_LT(recompute.peak_saved, keep.peak_saved) << what;
    }
  }
}

TEST(Recompute, BatchNormStatisticsAreUpdatedOncePerMicroBatch) {
  TwoStages model(testing::tiny_cnn());
  Outcome const keep = model.run({false, false, 0});
  Outcome const recompute = model.run({true, false, 0});
  int buffers = 0;
  for (auto const& [key, v] : keep.values) {
    if (key.rfind("buffer ", 0) != 0) continue;
    ++buffers;
    EXPECT_EQ(recompute.values.at(key), v) << key;
  }
  EXPECT_EQ(buffers, 2);  // bn.mean, bn.var
}

// The comparison notices a different Dropout mask: the same run with other seeds differs.
TEST(Recompute, TheComparisonCatchesOtherDropoutMasks) {
  TwoStages model(testing::tiny_dropout_mlp());
  Outcome const want = model.run({true, false, 0});
  Outcome const other = model.run({true, false, 1});
  std::string const diff = first_difference(other, want);
  EXPECT_NE(diff, "");
  // Weight gradients differ too, not only the outputs.
  Outcome a = want, b = other;
  std::erase_if(a.values, [](auto const& kv) { return kv.first.rfind("grad ", 0) != 0; });
  std::erase_if(b.values, [](auto const& kv) { return kv.first.rfind("grad ", 0) != 0; });
  EXPECT_NE(first_difference(b, a), "");
}

TEST(Recompute, InferenceKeepsNothingAndBackwardNeedsAForward) {
  auto g = testing::tiny_mlp().to_graph();
  ASSERT_TRUE(g.is_ok());
  CpuBackend be;
  auto ex = StageExecutor::create(*g, be);
  ASSERT_TRUE(ex.is_ok());
  (*ex)->set_recompute(true);
  EXPECT_TRUE((*ex)->recompute());
  TensorMap in, out, grads;
  graph::TensorId const x = g->inputs()[0];
  in.emplace(x, testing::normal_tensor(g->tensor(x).shape.concrete(kBatch), 3));
  ASSERT_TRUE((*ex)->forward(0, in, out, false).is_ok());
  EXPECT_EQ((*ex)->in_flight(), 0);
  EXPECT_EQ((*ex)->saved_bytes(), 0);
  Status s = (*ex)->backward(0, {}, grads);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("no forward in flight"), std::string::npos) << s.message();
  // A training forward stashes the input only, and the micro-batch is freed by its backward.
  ASSERT_TRUE((*ex)->forward(1, in, out, true, 9).is_ok());
  EXPECT_EQ((*ex)->saved_bytes(), static_cast<int64_t>(in.at(x).nbytes()));
  graph::TensorId const y = g->outputs()[0];
  ASSERT_TRUE((*ex)->backward(1, {{y, testing::normal_tensor(g->tensor(y).shape.concrete(kBatch), 4)}}, grads).is_ok());
  EXPECT_EQ((*ex)->in_flight(), 0);
  EXPECT_GT((*ex)->peak_saved_bytes(), static_cast<int64_t>(in.at(x).nbytes()));  // the rebuilt activations
}

}  // namespace
}  // namespace gp::exec
