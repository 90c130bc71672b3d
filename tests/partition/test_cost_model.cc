#include <gtest/gtest.h>

#include <filesystem>

#include "graph/cost_model.h"
#include "graph/onnx_import.h"
#include "partition/from_graph.h"

namespace gp::partition {
namespace {

// X -> MatMul(W1) -> A, X -> MatMul(W2) -> B, Add(A, B) -> Relu: two concurrent branches.
std::string two_branches_text() {
  std::string zeros = "0.0";
  for (int i = 1; i < 8 * 16; ++i) zeros += ",0.0";
  return "<ir_version: 8, opset_import: [\"\" : 13]>\n"
         "net (float[N,8] X) => (float[N,16] Y) <float[8,16] W1 = {" +
         zeros + "}, float[8,16] W2 = {" + zeros +
         "}> {\n"
         "  A = MatMul(X, W1)\n  B = MatMul(X, W2)\n  C = Add(A, B)\n  Y = Relu(C)\n}\n";
}

std::shared_ptr<graph::OpGraph const> two_branches() {
  auto g = graph::load_onnx_text(two_branches_text());
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  return std::make_shared<graph::OpGraph const>(std::move(g).value());
}

TEST(AnalyticCostModel, IsARooflinePlusOverhead) {
  auto g = two_branches();
  graph::OpId const mm = *g->find_op(g->ops()[0].name);
  graph::Op const& op = g->op(mm);
  ASSERT_EQ(op.type, "MatMul");
  EXPECT_DOUBLE_EQ(op.fwd_flops_per_sample, 2.0 * 16 * 8);
  graph::AnalyticCostModel model({.efficiency = 0.5, .fwd_overhead_s = 1e-6, .bwd_overhead_s = 2e-6});
  graph::DeviceSpec compute_bound{.peak_flops = 1e6, .memory_bandwidth = 1e12, .speed = 2.0};
  graph::OpTime t = model.op_time(*g, mm, 4, compute_bound);
  EXPECT_DOUBLE_EQ(t.fwd_s, (1e-6 + 256.0 * 4 / 5e5) / 2.0);
  // Backward: X is a graph input, so only the weight gradient (256 FLOPs per sample) is needed.
  EXPECT_DOUBLE_EQ(op.bwd_flops_per_sample, 256.0);
  EXPECT_DOUBLE_EQ(op.bwd_weight_flops_per_sample, 256.0);
  EXPECT_NEAR(t.bwd_weight_s, (2e-6 + 256.0 * 4 / 5e5) / 2.0, 1e-15);
  EXPECT_DOUBLE_EQ(t.bwd_input_s, 0.0);
  graph::DeviceSpec memory_bound{.peak_flops = 1e15, .memory_bandwidth = 1e6, .speed = 1.0};
  double const bytes = 32.0 * 4 + 512 + 64.0 * 4;  // X, W1, A at 4 samples
  EXPECT_DOUBLE_EQ(model.op_time(*g, mm, 4, memory_bound).fwd_s, 1e-6 + bytes / 1e6);
  // Sub-linear in the sample count: the weight bytes and the overhead do not grow.
  double const t1 = model.op_time(*g, mm, 1, memory_bound).fwd_s;
  double const t8 = model.op_time(*g, mm, 8, memory_bound).fwd_s;
  EXPECT_LT(t8, 8 * t1);
}

TEST(MeasuredCostModel, InterpolatesExtrapolatesAndFallsBack) {
  auto g = two_branches();
  graph::MeasuredProfile profile;
  profile.model = "two";
  std::string const mm = g->ops()[0].name;
  profile.ops.push_back({mm, "MatMul", {2, 4}, {1.0, 3.0}, {2.0, 2.0}, {0.5, 1.5}});
  auto fallback = std::make_shared<graph::AnalyticCostModel>();
  graph::MeasuredCostModel model(profile, fallback);
  graph::DeviceSpec d{};
  graph::OpId const id = *g->find_op(mm);
  EXPECT_DOUBLE_EQ(model.op_time(*g, id, 3, d).fwd_s, 2.0);  // between 2 and 4
  EXPECT_DOUBLE_EQ(model.op_time(*g, id, 8, d).fwd_s, 6.0);  // proportional above 4
  EXPECT_DOUBLE_EQ(model.op_time(*g, id, 1, d).fwd_s, 1.0);  // flat below 2
  EXPECT_DOUBLE_EQ(model.op_time(*g, id, 4, {.speed = 2.0}).bwd_weight_s, 0.75);
  EXPECT_EQ(model.missing_ops(*g).size(), 3u);
  graph::OpId const other = *g->find_op(g->ops()[1].name);
  EXPECT_DOUBLE_EQ(model.op_time(*g, other, 4, d).fwd_s, fallback->op_time(*g, other, 4, d).fwd_s);
}

TEST(MeasuredProfile, JsonRoundTripsAndErrorsNameTheOp) {
  graph::MeasuredProfile profile;
  profile.model = "m";
  profile.device = "cpu";
  profile.ops.push_back({"op1", "Relu", {1, 2, 4}, {1e-3, 2e-3, 3e-3}, {0, 0, 0}, {0, 1e-4, 2e-4}});
  std::string const path = std::string(GP_BINARY_DIR) + "/test_profile_roundtrip.json";
  ASSERT_TRUE(graph::write_profile_file(profile, path).is_ok());
  auto back = graph::read_profile_file(path);
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->device, "cpu");
  ASSERT_EQ(back->ops.size(), 1u);
  EXPECT_EQ(back->ops[0].samples, profile.ops[0].samples);
  EXPECT_EQ(back->ops[0].bwd_weight_s, profile.ops[0].bwd_weight_s);
  std::filesystem::remove(path);

  std::string bad = graph::profile_to_json(profile);
  bad.replace(bad.find("4\n"), 1, "0");  // samples 1, 2, 0: not ascending
  auto err = graph::profile_from_json(bad);
  ASSERT_FALSE(err.is_ok());
  EXPECT_NE(err.status().message().find("op1"), std::string::npos) << err.status().message();
  EXPECT_FALSE(graph::profile_from_json("{\"format\": \"graphpipe-profile\", \"version\": 9, \"ops\": []}").is_ok());
}

TEST(ProblemFromGraph, OneNodePerOpAndEdgesCarryBatchedTensors) {
  auto g = two_branches();
  auto p = problem_from_graph(g, std::make_shared<graph::AnalyticCostModel>(), Cluster::uniform(2, 1 << 30), 8);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  ASSERT_EQ(p->nodes.size(), 4u);
  EXPECT_EQ(p->nodes[0].kind, "MatMul");
  EXPECT_EQ(p->nodes[0].weight_bytes, 512);
  EXPECT_EQ(p->nodes[3].kind, "Relu");
  ASSERT_EQ(p->edges.size(), 3u);
  for (Edge const& e : p->edges) {
    EXPECT_EQ(e.bytes_per_sample, 64);
    EXPECT_EQ(e.tensors.size(), 1u);
  }
  auto const& t = p->node_times(4);
  graph::OpTime direct =
      graph::AnalyticCostModel().op_time(*g, g->topo_order()[0], 4, device_spec(p->cluster.devices[0]));
  EXPECT_DOUBLE_EQ(t[0].fwd_s, direct.fwd_s);
}

}  // namespace
}  // namespace gp::partition
