#include <gtest/gtest.h>

#include "graph/onnx_import.h"
#include "tests/graph/onnx_text.h"

namespace gp::graph {
namespace {

TEST(Import, ConvReluGemm) {
  auto g = load_onnx_text(model_text("float[N,3,8,8] x", "float[N,10] y",
                                     {zeros("w", {4, 3, 3, 3}), zeros("b", {4}), zeros("fw", {10, 256}), zeros("fb", {10})},
                                     R"(
      c = Conv<pads = [1,1,1,1]>(x, w, b)
      r = Relu(c)
      f = Flatten(r)
      y = Gemm<transB = 1>(f, fw, fb)
  )"));
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  EXPECT_EQ(g->num_ops(), 4u);
}

}  // namespace
}  // namespace gp::graph
