// The op table (graph/ops/registry) and the CPU backend's kernel table agree: every operator the
// importer lowers has CPU kernels (forward and backward), and every CPU kernel belongs to an
// operator the importer lowers, so "supported" means one thing.
#include <algorithm>

#include <gtest/gtest.h>

#include "exec/cpu/cpu_backend.h"
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

}  // namespace
}  // namespace gp::exec
