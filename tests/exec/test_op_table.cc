// The op table (graph/ops/registry) and the CPU backend's kernel table agree: every operator the
// importer lowers has CPU kernels (forward and backward), and every CPU kernel belongs to an
// operator the importer lowers, so "supported" means one thing.
#include <algorithm>

#include <gtest/gtest.h>

#include "exec/cpu/cpu_backend.h"
#include "exec/kernel_table.h"
#include "graph/onnx_import.h"
#include "graph/ops/registry.h"

namespace gp::exec {
namespace {

TEST(OpTable, EveryImportedOpHasCpuKernelsAndEveryKernelAnImportRule) {
  std::vector<std::string> const cpu = CpuBackend::op_types();
  std::vector<std::string> no_kernels, no_rule;
  for (auto const& [type, def] : graph::ops::op_table())
    if (def.infer != nullptr && std::find(cpu.begin(), cpu.end(), type) == cpu.end()) no_kernels.push_back(type);
  for (std::string const& type : cpu) {
    graph::ops::OpDef const* def = graph::ops::find_op(type);
    if (def == nullptr || def->infer == nullptr) no_rule.push_back(type);
  }
  EXPECT_TRUE(no_kernels.empty()) << "imported without CPU kernels: " << ::testing::PrintToString(no_kernels);
  EXPECT_TRUE(no_rule.empty()) << "CPU kernels the importer never produces: " << ::testing::PrintToString(no_rule);
}

TEST(OpTable, EveryOpHasAFamilyAndFoldedOpsAreMarked) {
  for (auto const& [type, def] : graph::ops::op_table()) {
    EXPECT_FALSE(def.family.empty()) << type;
    EXPECT_EQ(def.infer == nullptr, def.family == "folded") << type;
  }
  EXPECT_EQ(graph::ops::find_op("NoSuchOp"), nullptr);
}

TEST(OpTable, TheImportersUnsupportedMessageListsTheTable) {
  // A one-node model with an ONNX op graphpipe does not run: the error lists what is supported.
  auto r = graph::load_onnx_text(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 4] x) => (float[N, 4] y) { y = LpNormalization(x) })");
  ASSERT_FALSE(r.is_ok());
  for (std::string const& type : graph::ops::op_types())
    EXPECT_NE(r.status().message().find(" " + type), std::string::npos) << type << ": " << r.status().message();
}

// A backend gives a kernel at least the inputs its entry reads, each defined, or refuses the call
// naming the op (exec/kernel_table.h's check_forward_inputs, shared by the CPU and CUDA backends);
// a backward_weight call that wants no gradient does nothing.
TEST(OpTable, AForwardCallWithTooFewOrUndefinedInputsIsRefusedByName) {
  auto g = graph::load_onnx_text(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 4] a, float[N, 4] b) => (float[N, 4] y) { y = Add(a, b) })");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  graph::Op const& add = g->op(0);
  CpuBackend cpu;
  OpCall const call{add, *g};
  Tensor const a = Tensor::zeros({2, 4});
  std::vector<Tensor> out;
  Status s = cpu.forward(call, {a}, out, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "Add '" + add.name + "': given 1 inputs, needs 2");
  s = cpu.forward(call, {a, Tensor()}, out, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "Add '" + add.name + "': input 1 is undefined");
  ASSERT_TRUE(cpu.forward(call, {a, a}, out, nullptr).is_ok());

  std::vector<Tensor> none(2);
  EXPECT_TRUE(wanted_weight_grads(none).empty());
  std::vector<Tensor> one{Tensor(), a};
  EXPECT_EQ(wanted_weight_grads(one), (std::vector<bool>{false, true}));
  EXPECT_TRUE(cpu.backward_weight(call, Saved{}, {a}, none).is_ok());
}

}  // namespace
}  // namespace gp::exec
