// The backward glue every backend shares (exec/op_kernels.h): gradients are stored or accumulated
// through the backend that runs the op, which each backend names in the calls it makes.
#include <gtest/gtest.h>

#include "exec/cpu/cpu_backend.h"
#include "exec/op_kernels.h"

namespace gp::exec {
namespace {

struct OneOp {
  graph::OpGraph graph;
  graph::Op op;
  OneOp() {
    op.name = "relu";
    op.type = "Relu";
  }
};

TEST(OpKernels, EmitGradStoresOrAddsThroughTheCallsBackend) {
  OneOp m;
  CpuBackend cpu;
  OpCall const call = bound_to(OpCall{m.op, m.graph}, cpu);
  EXPECT_EQ(call.backend, &cpu);
  std::vector<Tensor> grads;
  ASSERT_TRUE(emit_grad(call, grads, 1, Tensor::from_floats({2}, {1.f, 2.f}), false).is_ok());
  ASSERT_EQ(grads.size(), 2u);
  ASSERT_TRUE(emit_grad(call, grads, 1, Tensor::from_floats({2}, {10.f, 20.f}), true).is_ok());
  EXPECT_EQ(grads[1].to_vector(), (std::vector<float>{11.f, 22.f}));
  Status const wrong = emit_grad(call, grads, 1, Tensor::from_floats({3}, {1.f, 1.f, 1.f}), true);
  EXPECT_EQ(wrong.code(), StatusCode::kInvalidArgument) << wrong.message();
}

TEST(OpKernels, AccumulatingWithoutABackendIsAnErrorNotACrash) {
  OneOp m;
  OpCall const unbound{m.op, m.graph};
  std::vector<Tensor> grads{Tensor::from_floats({2}, {1.f, 2.f})};
  Status const s = emit_grad(unbound, grads, 0, Tensor::from_floats({2}, {1.f, 1.f}), true);
  EXPECT_EQ(s.code(), StatusCode::kInternal) << s.message();
  EXPECT_EQ(grads[0].to_vector(), (std::vector<float>{1.f, 2.f}));
}

TEST(OpKernels, ShapeTensorsRoundTrip) {
  std::vector<int64_t> const dims{3, 0, 7};
  EXPECT_EQ(shape_of(shape_tensor(dims)), dims);
  EXPECT_TRUE(shape_of(shape_tensor({})).empty());
}

}  // namespace
}  // namespace gp::exec
