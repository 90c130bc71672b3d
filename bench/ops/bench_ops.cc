// Throughput of the CPU backend's heavy operators (oneDNN): forward, backward-data (B) and
// backward-weights (W) of Conv and MatMul at ResNet/transformer-like shapes, in GFLOP/s; then
// BatchNormalization with its Relu fused (BatchNormAttrs::relu, what the importer makes of every
// BatchNorm -> Relu), and with a residual block's Add and Relu fused (BatchNormAttrs::residual),
// against the ops apart, forward + backward, at ResNet-18's shapes.
// Usage: bench_ops [--iters N]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>

#include "exec/cpu/cpu_backend.h"

namespace {

using namespace gp;
using namespace gp::exec;

struct Bench {
  graph::OpGraph graph;
  graph::OpId op = 0;
  std::vector<Tensor> inputs;
};

Bench make(std::string const& type, graph::OpAttrs attrs, std::vector<std::vector<int64_t>> const& shapes) {
  Bench b;
  graph::Op op;
  op.name = type;
  op.type = type;
  op.typed = std::move(attrs);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    graph::TensorInfo info;
    info.name = "in" + std::to_string(i);
    info.shape.dims = shapes[i];
    info.role = i == 0 ? graph::TensorRole::kInput : graph::TensorRole::kWeight;
    op.inputs.push_back(b.graph.add_tensor(info));
    Tensor t(shapes[i]);
    for (int64_t k = 0; k < t.numel(); ++k) t.data<float>()[k] = u(rng);
    b.inputs.push_back(t);
  }
  graph::TensorInfo out;
  out.name = "out";
  op.outputs.push_back(b.graph.add_tensor(out));
  b.op = b.graph.add_op(op);
  (void)b.graph.finalize();
  return b;
}

double seconds(std::function<void()> const& f, int iters) {
  f();  // warm-up: primitive creation
  auto const t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
}

void run(char const* label, Bench& b, double flops, int iters) {
  CpuBackend be;
  OpCall call{b.graph.op(b.op), b.graph, true, 0};
  Saved saved;
  std::vector<Tensor> out;
  double const tf = seconds([&] { (void)be.forward(call, b.inputs, out, &saved); }, iters);
  std::vector<Tensor> gout = {out[0].clone()};
  std::vector<Tensor> gin;
  std::vector<bool> needs(b.inputs.size(), false);
  needs[0] = true;
  double const tb = seconds([&] { (void)be.backward_input(call, saved, gout, needs, gin); }, iters);
  std::vector<Tensor> wg(b.inputs.size());
  for (std::size_t i = 1; i < b.inputs.size(); ++i) wg[i] = Tensor::zeros(b.inputs[i].shape());
  double const tw = seconds([&] { (void)be.backward_weight(call, saved, gout, wg); }, iters);
  std::printf("%-34s %9.2f %9.2f %9.2f   %7.1f %7.1f %7.1f\n", label, tf * 1e3, tb * 1e3, tw * 1e3, flops / tf * 1e-9,
              flops / tb * 1e-9, flops / tw * 1e-9);
}

// Training forward and backward (dx, dscale, dbias; z's gradient with a residual) of
// BatchNormalization on x with the Relu fused into it, or with a residual block's tail (+ z, Relu:
// `residual`), or apart (BatchNorm, (Add,) Relu, Relu's backward, BatchNorm's backward; an Add's
// backward passes dy on). Seconds a step.
double bn_relu_step(std::vector<int64_t> const& x, bool fused, bool residual, int iters) {
  int64_t const c = x[1];
  std::vector<std::vector<int64_t>> shapes{x, {c}, {c}, {c}, {c}};
  if (fused && residual) shapes.push_back(x);
  Bench bn = make("BatchNormalization", graph::BatchNormAttrs{1e-5f, 0.9f, true, fused, fused && residual}, shapes);
  for (int k : {3, 4})  // running mean 0, variance 1
    for (int64_t i = 0; i < c; ++i) bn.inputs[k].data<float>()[i] = k == 3 ? 0.f : 1.f;
  Bench relu = make("Relu", std::monostate{}, {x});
  Bench add = make("Add", std::monostate{}, {x, x});
  CpuBackend be;
  OpCall bn_call{bn.graph.op(bn.op), bn.graph, true, 0};
  OpCall relu_call{relu.graph.op(relu.op), relu.graph, true, 0};
  OpCall add_call{add.graph.op(add.op), add.graph, true, 0};
  std::vector<bool> wanted{true, true, true, false, false};
  if (fused && residual) wanted.push_back(true);
  Tensor const dy = relu.inputs[0].clone();  // any values: an upstream gradient
  Tensor const z = add.inputs[1];
  return seconds(
      [&] {
        Saved bn_saved, relu_saved, add_saved;
        std::vector<Tensor> y, s, r, gr, gin;
        (void)be.forward(bn_call, bn.inputs, y, &bn_saved);
        std::vector<Tensor> g{dy};
        if (!fused) {
          if (residual) (void)be.forward(add_call, {y[0], z}, s, &add_saved);
          (void)be.forward(relu_call, {residual ? s[0] : y[0]}, r, &relu_saved);
          (void)be.backward_input(relu_call, relu_saved, {dy}, {true}, gr);
          g = {gr[0]};
        }
        (void)be.backward_input(bn_call, bn_saved, g, wanted, gin);
      },
      iters);
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 10;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--iters") == 0) iters = std::atoi(argv[i + 1]);
  std::printf("%-34s %9s %9s %9s   %7s %7s %7s\n", "op", "fwd ms", "B ms", "W ms", "fwd GF/s", "B GF/s", "W GF/s");
  struct ConvCase {
    char const* label;
    int64_t n, c, hw, o, k, s;
  };
  for (ConvCase const& c : {ConvCase{"conv 32x64x56x56 k3 o64", 32, 64, 56, 64, 3, 1},
                            ConvCase{"conv 32x128x28x28 k3 o128", 32, 128, 28, 128, 3, 1},
                            ConvCase{"conv 32x256x14x14 k3 o256", 32, 256, 14, 256, 3, 1},
                            ConvCase{"conv 32x3x224x224 k7 s2 o64", 32, 3, 224, 64, 7, 2}}) {
    int64_t const p = c.k / 2;
    Bench b = make("Conv", graph::ConvAttrs{{c.k, c.k}, {c.s, c.s}, {1, 1}, {p, p, p, p}, 1, true},
                   {{c.n, c.c, c.hw, c.hw}, {c.o, c.c, c.k, c.k}, {c.o}});
    int64_t const out = (c.hw + 2 * p - c.k) / c.s + 1;
    run(c.label, b, 2.0 * c.n * c.o * out * out * c.c * c.k * c.k, iters);
  }
  struct MmCase {
    char const* label;
    int64_t m, k, n;
  };
  for (MmCase const& c :
       {MmCase{"matmul 4096x768 · 768x768", 4096, 768, 768}, MmCase{"matmul 4096x768 · 768x3072", 4096, 768, 3072},
        MmCase{"matmul 256x1024 · 1024x1024", 256, 1024, 1024}}) {
    Bench b = make("MatMul", graph::MatMulAttrs{}, {{c.m, c.k}, {c.k, c.n}});
    run(c.label, b, 2.0 * c.m * c.k * c.n, iters);
  }
  for (bool const residual : {false, true}) {
    std::printf("\n%-34s %9s %9s %7s\n",
                residual ? "BatchNorm+Add+Relu, training step" : "BatchNorm+Relu, training step", "apart ms",
                "fused ms", "ratio");
    for (std::vector<int64_t> const& x : std::vector<std::vector<int64_t>>{
             {16, 64, 112, 112}, {16, 64, 56, 56}, {16, 128, 28, 28}, {16, 256, 14, 14}, {16, 512, 7, 7}}) {
      std::string const label = "x " + std::to_string(x[0]) + "x" + std::to_string(x[1]) + "x" + std::to_string(x[2]) +
                                "x" + std::to_string(x[3]);
      double const apart = bn_relu_step(x, false, residual, iters), fused = bn_relu_step(x, true, residual, iters);
      std::printf("%-34s %9.2f %9.2f %6.2fx\n", label.c_str(), apart * 1e3, fused * 1e3, apart / fused);
    }
  }
  return 0;
}
