// Mixed precision (graph/precision.h) on the CPU backend: the rewrite puts a Cast wherever a dtype
// changes and nowhere else; every op the policy runs in bf16 has a bf16 kernel; one bf16 training
// step agrees with float32 within what the format allows (and the check is tight enough to see a
// 5% error); and bf16 training follows float32 training's loss.
#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "exec/cpu/cpu_backend.h"
#include "exec/stage_executor.h"
#include "exec/trainer.h"
#include "graph/ops/registry.h"
#include "graph/precision.h"
#include "kernels/bf16.h"
#include "models/zoo.h"
#include "tests/exec/mixed_precision_models.h"
#include "tests/exec/tiny_models.h"

namespace gp::exec {
namespace {

using graph::DType;
using graph::kBatch;  // the symbolic batch dimension of the models
using graph::Precision;
using testing::graph_in;
using testing::one_step;
using testing::rel_l2;
using testing::tiny_resnet_block;
using testing::vanishes;

// bfloat16 keeps 8 significant bits: a rounding's relative error is at most 2^-8 (unit roundoff,
// round to nearest even). The deepest gradient here (the first conv's weights in the block without
// BatchNorm) passes through up to 16 ops that round to bf16, 8 forward and 8 backward (their sums
// accumulate in float32): with errors adding in quadrature that is about 4 units; the bound is 8.
constexpr double kUnit = 1.0 / 256;
constexpr double kTolerance = 8 * kUnit;

// The model imported in precision p with the importer's fusions and without (--no-fusion).
std::pair<graph::OpGraph, graph::OpGraph> fused_and_apart(graph::OnnxModelBuilder const& b, Precision p) {
  graph::ImportOptions fused, apart;
  fused.precision = apart.precision = p;
  apart.fuse = false;
  auto f = b.to_graph(fused);
  auto a = b.to_graph(apart);
  EXPECT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_TRUE(a.is_ok()) << a.status().message();
  if (!f.is_ok() || !a.is_ok()) return {};
  return {std::move(f).value(), std::move(a).value()};
}

// One training step of the fused graph and of the graph apart on the CPU: the same output and
// gradients within `bound` (relative L2), none of them zero except `may_vanish`.
void expect_same_step(graph::OpGraph const& fused, graph::OpGraph const& apart, double bound,
                      std::string const& may_vanish = "") {
  CpuBackend be;
  testing::NamedValues const got = one_step(fused, be), want = one_step(apart, be);
  ASSERT_EQ(got.size(), want.size());
  for (auto const& [name, values] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_LE(rel_l2(got.at(name), values), bound) << name;
    if (name != may_vanish) {
      EXPECT_FALSE(vanishes(values)) << name;
    }
  }
}

// The importer fuses a Relu that only reads a BatchNorm into it (BatchNormAttrs::relu), and a residual
// block's BatchNorm -> Add -> Relu (BatchNormAttrs::residual): one training step of the block with
// BatchNorm, fused and apart, gives the same output and gradients: in float32 to 1e-6 (the add, the
// clip and the mask are exact; oneDNN normalises alike either way), in bf16 within 4 bf16 units
// (apart, the normalised value is rounded to bf16 before the Add and the sum again after it; fused,
// once).
TEST(BatchNormRelu, TheFusedOpsTrainAsTheOpsApart) {
  for (Precision const p : {Precision::kFloat32, Precision::kBFloat16}) {
    SCOPED_TRACE(graph::precision_name(p));
    auto const [f, a] = fused_and_apart(tiny_resnet_block(true), p);
    auto count = [](graph::OpGraph const& g, bool residual) {
      int n = 0;
      for (auto const& op : g.ops())
        if (auto const* bn = std::get_if<graph::BatchNormAttrs>(&op.typed)) n += residual ? bn->residual : bn->relu;
      return n;
    };
    // conv1 -> BatchNorm -> Relu, and conv2 -> BatchNorm -> Add(the skip) -> Relu.
    EXPECT_EQ(count(f, false), 2);
    EXPECT_EQ(count(f, true), 1);
    EXPECT_EQ(count(a, false), 0);
    EXPECT_EQ(f.num_ops() + 3, a.num_ops());
    // conv1's bias shifts each channel before BatchNorm takes the channel's mean out: no gradient.
    expect_same_step(f, a, p == Precision::kFloat32 ? 1e-6 : 4.0 / 256, "dconv1.b");
  }
}

// The importer folds a MatMul operand's Transpose of its last two axes and a constant scale of an
// operand or of the product into the MatMul (MatMulAttrs): one training step of two attention heads,
// fused and apart, gives the same output and gradients: in float32 to 1e-6 (the GEMM reads the
// operand transposed in place and scales by alpha: only the order of a few float operations
// changes), in bf16 within 4 bf16 units (apart, the scaled scores are rounded to bf16 twice).
TEST(TransposedMatMul, TheFusedOpsTrainAsTheOpsApart) {
  for (Precision const p : {Precision::kFloat32, Precision::kBFloat16}) {
    SCOPED_TRACE(graph::precision_name(p));
    auto const [f, a] = fused_and_apart(testing::tiny_attention_heads(), p);
    std::map<std::string, int> fops, aops;
    for (auto const& op : f.ops()) ++fops[op.type];
    for (auto const& op : a.ops()) ++aops[op.type];
    EXPECT_EQ(aops["Transpose"], 5);
    EXPECT_EQ(aops["Mul"] + aops["Div"], 2);
    // q and v's permutations, o3's, and k's as 0,2,1,3 (innermost axis kept); no scaling op.
    EXPECT_EQ(fops["Transpose"], 4);
    EXPECT_EQ(fops["Mul"] + fops["Div"], 0);
    bool scores = false, att_t = false;
    for (auto const& op : f.ops()) {
      if (op.type != "MatMul") continue;
      auto const& m = std::get<graph::MatMulAttrs>(op.typed);
      std::string const out = f.tensor(op.outputs[0]).name;
      if (out == "ss") {  // (0.5 q) · kᵀ / 0.75, k read transposed from a 0,2,1,3 permutation
        scores = true;
        EXPECT_TRUE(!m.trans_a && m.trans_b);
        EXPECT_FLOAT_EQ(m.alpha, 0.5f / 0.75f);
        EXPECT_EQ(f.op(f.tensor(op.inputs[1]).producer).type, "Transpose");
        EXPECT_EQ(f.tensor(op.inputs[0]).name, "qh");
      } else if (out == "o2") {  // attᵀ · v, att read in place
        att_t = true;
        EXPECT_TRUE(m.trans_a && !m.trans_b);
        EXPECT_EQ(f.tensor(op.inputs[0]).name, p == Precision::kFloat32 ? "att" : "att.to_bf16");
      }
    }
    EXPECT_TRUE(scores && att_t);
    expect_same_step(f, a, p == Precision::kFloat32 ? 1e-6 : 4.0 / 256);
  }
}

TEST(MixedPrecision, TheRewriteCastsWhereTheDtypeChanges) {
  graph::OpGraph const g = graph_in(tiny_resnet_block(false), Precision::kBFloat16);
  auto dtype = [](graph::OpGraph const& h, std::string const& name) { return h.tensor(*h.find_tensor(name)).dtype; };
  auto producer = [](graph::OpGraph const& h, std::string const& name) {
    return h.op(h.tensor(*h.find_tensor(name)).producer);
  };
  // The first Conv reads a bf16 copy of the float32 input; weights are read as they are (float32
  // master weights, rounded inside the kernel), never through a Cast.
  ASSERT_TRUE(g.find_tensor("x.to_bf16"));
  EXPECT_EQ(producer(g, "x.to_bf16").type, "Cast");
  for (std::string const t : {"conv1.w", "conv1.b", "conv2.w", "fc.w", "fc.b"}) {
    EXPECT_FALSE(g.find_tensor(t + ".to_bf16")) << t;
    EXPECT_EQ(dtype(g, t), DType::kFloat32) << t;
  }
  // What follows a bf16 input stays bf16.
  for (std::string const t : {"n1", "r1", "p1", "n2", "s", "r2", "g", "bc", "ap", "g2", "f"})
    EXPECT_EQ(dtype(g, t), DType::kBFloat16) << t;
  // The graph output keeps its name and float32: Gemm writes y.bf16, a Cast writes y.
  EXPECT_EQ(dtype(g, "y"), DType::kFloat32);
  EXPECT_EQ(producer(g, "y").type, "Cast");
  EXPECT_EQ(dtype(g, "y.bf16"), DType::kBFloat16);
  EXPECT_EQ(producer(g, "y.bf16").type, "Gemm");
  // One cast down and one up; nothing else was added.
  auto casts = [](graph::OpGraph const& h) {
    int n = 0;
    for (auto const& op : h.ops()) n += op.type == "Cast";
    return n;
  };
  EXPECT_EQ(casts(g), 2);
  EXPECT_EQ(g.num_ops(), graph_in(tiny_resnet_block(false), Precision::kFloat32).num_ops() + 2);
  // BatchNorm follows its bf16 input (its scale, bias and statistics stay float32): the block with
  // BatchNorm needs no cast beyond the input's and the output's either.
  // (The first BatchNorm has its Relu fused: it writes r1; the second the residual Add and Relu
  // after it: it writes r2, reading the skip p1 as input 5, in bf16 too.)
  graph::OpGraph const bn = graph_in(tiny_resnet_block(true), Precision::kBFloat16);
  EXPECT_EQ(producer(bn, "r1").type, "BatchNormalization");
  EXPECT_EQ(producer(bn, "r1").inputs[0], *bn.find_tensor("c1"));
  EXPECT_EQ(dtype(bn, "c1"), DType::kBFloat16);
  for (std::size_t i = 1; i < producer(bn, "r1").inputs.size(); ++i)
    EXPECT_EQ(bn.tensor(producer(bn, "r1").inputs[i]).dtype, DType::kFloat32) << i;
  for (std::string const t : {"r1", "p1", "r2", "f"}) EXPECT_EQ(dtype(bn, t), DType::kBFloat16) << t;
  EXPECT_EQ(producer(bn, "r2").type, "BatchNormalization");
  EXPECT_EQ(producer(bn, "r2").inputs.at(graph::kBatchNormResidualInput), *bn.find_tensor("p1"));
  EXPECT_EQ(casts(bn), 2);
  // Each low tensor is cast up once however many float32 ops read it: the attention block's
  // residual Add reads a bf16 MatMul output and the float32 input, so it promotes.
  graph::OpGraph const a = graph_in(testing::tiny_attention(), Precision::kBFloat16);
  auto const& add = a.op(a.tensor(*a.find_tensor("r")).producer);
  EXPECT_EQ(a.tensor(add.inputs[0]).name, "o.to_fp32");
  EXPECT_EQ(a.tensor(add.inputs[1]).name, "x");
  EXPECT_EQ(a.tensor(*a.find_tensor("r")).dtype, DType::kFloat32);
  std::map<std::string, int> made;
  for (auto const& op : a.ops())
    if (op.type == "Cast") ++made[a.tensor(op.outputs[0]).name];
  for (auto const& [name, n] : made) EXPECT_EQ(n, 1) << name;
  // The accounting counts the bf16 tensors at 2 bytes an element.
  EXPECT_EQ(g.tensor(*g.find_tensor("n1")).bytes_per_sample(), 8 * 8 * 8 * 2);
}

// A GPT block: the three linear layers are Gemms (import fuses the weight transpose and the bias),
// and the q/k/v Split (every part: the rewrite once lowered only a multi-output op's first
// output), the head transpose and the Gelu follow the Gemms in bf16; the casts are only where
// float32 ops (LayerNorm, the scale Mul and Softmax, the residual with the float32 input) meet them.
TEST(MixedPrecision, TheSplitAndGeluOfAGptBlockFollowItsBf16LinearLayers) {
  graph::OpGraph const g = graph_in(testing::tiny_gpt_block(), Precision::kBFloat16);
  auto dtype = [&](std::string const& name) { return g.tensor(*g.find_tensor(name)).dtype; };
  std::map<std::string, int> ops;
  for (auto const& op : g.ops()) ++ops[op.type];
  EXPECT_EQ(ops["Gemm"], 3);
  EXPECT_EQ(ops["Gelu"], 1);
  EXPECT_EQ(ops["Add"], 1);  // the residual; the biases are in the Gemms
  // k's Transpose and the scale are in the MatMul (q · kᵀ · scale), which writes ss in 16 bits.
  EXPECT_EQ(ops["Transpose"], 0);
  EXPECT_EQ(ops["Mul"], 0);
  for (std::string const t : {"qkv", "q", "k", "v", "ss", "o", "h", "a", "f"})
    EXPECT_EQ(dtype(t), DType::kBFloat16) << t;
  for (std::string const t : {"ln", "att", "r"}) EXPECT_EQ(dtype(t), DType::kFloat32) << t;
  std::vector<std::string> casts;
  for (auto const& op : g.ops())
    if (op.type == "Cast") casts.push_back(g.tensor(op.outputs[0]).name);
  std::sort(casts.begin(), casts.end());
  // ln's rows (the Reshape in front of the first Gemm) and att down for the Gemm and MatMul that
  // read them, the scaled scores ss up for the Softmax, f up for the residual, r down for the head,
  // and the head's output up to the graph's float32 y.
  EXPECT_EQ(casts, (std::vector<std::string>{"Gemm_0/rows.to_bf16", "att.to_bf16", "f.to_fp32", "r.to_bf16",
                                             "ss.to_fp32", "y"}))
      << ::testing::PrintToString(casts);
}

TEST(MixedPrecision, Fp32LeavesTheGraphFp16RewritesItAndTheCpuRefusesFp16ByName) {
  graph::OpGraph const g = graph_in(tiny_resnet_block(true), Precision::kFloat32);
  for (auto const& t : g.tensors())
    if (t.dtype != DType::kFloat32) ADD_FAILURE() << t.name;
  EXPECT_EQ(graph::graph_precision(g), Precision::kFloat32);
  EXPECT_EQ(graph::graph_precision(graph_in(tiny_resnet_block(true), Precision::kBFloat16)), Precision::kBFloat16);
  // fp16 rewrites like bf16, with float16 tensors and ".to_fp16" casts; the CPU has no float16
  // kernel for the convolution and says which precision it runs.
  graph::OpGraph const h = graph_in(tiny_resnet_block(true), Precision::kFloat16);
  EXPECT_EQ(graph::graph_precision(h), Precision::kFloat16);
  EXPECT_TRUE(h.find_tensor("x.to_fp16").has_value());
  bool conv_seen = false;
  for (graph::Op const& op : h.ops()) {
    if (op.type != "Conv") continue;
    conv_seen = true;
    Status const s = CpuBackend().supports(op, h);
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("precision fp16 runs on CUDA only"), std::string::npos) << s.message();
  }
  EXPECT_TRUE(conv_seen);
  auto bad = graph::parse_precision("half");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("fp32, bf16, fp16"), std::string::npos);
}

// fp16 tensors (the CUDA backend computes in them) read back exactly: normal numbers, the largest
// finite, subnormals, infinities and NaN.
TEST(MixedPrecision, Float16TensorsReadBackExactly) {
  Tensor t({9}, DType::kFloat16);
  uint16_t const bits[9] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x0200, 0x8400, 0x7c00, 0xfc00, 0x3555};
  std::copy(bits, bits + 9, t.data<uint16_t>());
  std::vector<float> const v = t.to_vector();
  EXPECT_EQ(v[0], 1.f);
  EXPECT_EQ(v[1], -2.f);
  EXPECT_EQ(v[2], 65504.f);
  EXPECT_EQ(v[3], std::ldexp(1.f, -24));
  EXPECT_EQ(v[4], std::ldexp(1.f, -15));
  EXPECT_EQ(v[5], -std::ldexp(1.f, -14));
  EXPECT_EQ(v[6], std::numeric_limits<float>::infinity());
  EXPECT_EQ(v[7], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(v[8], 0.25f * (1.f + 0x155 / 1024.f));  // 0x3555: 2^-2 · (1 + 0x155/1024)
}

// float32 -> float16 rounds to nearest even: every half reads back to itself, each midpoint
// between neighbours goes to the even one (in the subnormals too), 65520 and up overflow to
// infinity, and values below 2^-25 flush to a signed zero.
TEST(MixedPrecision, Float16RoundsToNearestEven) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    auto const bits = static_cast<uint16_t>(h);
    float const f = kernels::half_to_float(bits);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(kernels::half_to_float(kernels::float_to_half(f)))) << h;
      continue;
    }
    ASSERT_EQ(kernels::float_to_half(f), bits) << "half " << h << " does not read back";
    if ((h & 0x7fffu) >= 0x7bffu) continue;  // no finite neighbour above
    float const next = kernels::half_to_float(static_cast<uint16_t>(h + 1));
    double const mid = (static_cast<double>(f) + next) / 2;  // exact in float32 (one more bit)
    uint16_t const even = (h & 1u) ? static_cast<uint16_t>(h + 1) : bits;
    ASSERT_EQ(kernels::float_to_half(static_cast<float>(mid)), even) << "midpoint above half " << h;
    ASSERT_EQ(kernels::float_to_half(std::nextafter(static_cast<float>(mid), f)), bits) << h;
    ASSERT_EQ(kernels::float_to_half(std::nextafter(static_cast<float>(mid), next)), static_cast<uint16_t>(h + 1)) << h;
  }
  EXPECT_EQ(kernels::float_to_half(65519.f), uint16_t{0x7bff});
  EXPECT_EQ(kernels::float_to_half(65520.f), uint16_t{0x7c00});
  EXPECT_EQ(kernels::float_to_half(-1e30f), uint16_t{0xfc00});
  EXPECT_EQ(kernels::float_to_half(std::ldexp(1.f, -25)), uint16_t{0x0000});
  EXPECT_EQ(kernels::float_to_half(std::nextafter(std::ldexp(1.f, -25), 1.f)), uint16_t{0x0001});
  EXPECT_EQ(kernels::float_to_half(-std::ldexp(1.f, -30)), uint16_t{0x8000});
}

// The CPU's bf16 Gemm adds C only as a bias row with alpha = beta = 1: any other Gemm is refused
// when the model is checked, before training, with the way out.
TEST(MixedPrecision, TheCpuRefusesABf16GemmWithAGeneralCBeforeTraining) {
  for (double alpha : {1.0, 0.5}) {
    graph::OnnxModelBuilder b("gemm_alpha", 17, 1);
    auto x = b.add_input("x", {kBatch, 4});
    auto w = b.add_initializer("w", {3, 4}, graph::InitRule::uniform(0.5));
    auto c = b.add_initializer("c", {3}, graph::InitRule::uniform(0.1));
    b.add_node("Gemm", {x, w, c}, {"y"}, {{"transB", int64_t{1}}, {"alpha", alpha}});
    b.add_output("y", {kBatch, 3});
    graph::OpGraph const g = graph_in(b, Precision::kBFloat16);
    for (graph::Op const& op : g.ops()) {
      if (op.type != "Gemm") continue;
      Status const s = CpuBackend().supports(op, g);
      if (alpha == 1.0) {
        EXPECT_TRUE(s.is_ok()) << s.message();
      } else {
        ASSERT_FALSE(s.is_ok());
        EXPECT_NE(s.message().find("bias row with alpha = beta = 1"), std::string::npos) << s.message();
        EXPECT_NE(s.message().find("precision fp32"), std::string::npos) << s.message();
      }
    }
  }
}

TEST(MixedPrecision, EveryOpThePolicyRunsInBf16HasABf16CpuKernel) {
  int low = 0;
  for (auto const& [type, def] : graph::ops::op_table()) {
    graph::AmpPolicy const p = graph::amp_rule(def.kind).policy;
    if (p == graph::AmpPolicy::kFloat32) continue;
    ++low;
    EXPECT_TRUE(CpuBackend::runs(def.kind, DType::kBFloat16))
        << type << " is '" << graph::amp_policy_name(p) << "' but the CPU has no bfloat16 kernel";
  }
  EXPECT_GE(low, 12);
  EXPECT_TRUE(CpuBackend::runs(graph::ops::OpKind::kCast, DType::kBFloat16));
  EXPECT_FALSE(CpuBackend::runs(graph::ops::OpKind::kSoftmax, DType::kBFloat16));
}

// The CPU's bf16 modes this machine runs: emulated everywhere, native where oneDNN has bf16
// (AVX512); the guard restores the mode the process had.
struct Bf16Modes {
  CpuBf16 const before = cpu_bf16();
  ~Bf16Modes() { set_cpu_bf16(before); }
  std::vector<CpuBf16> all() const {
    if (set_cpu_bf16(CpuBf16::kNative) == CpuBf16::kNative) return {CpuBf16::kNative, CpuBf16::kEmulated};
    std::printf("oneDNN has no bf16 primitives on this CPU: the native bf16 mode is not tested here\n");
    return {CpuBf16::kEmulated};
  }
};

TEST(MixedPrecision, ABf16StepMatchesFloat32WithinTheFormatsTolerance) {
  Bf16Modes const modes;
  for (CpuBf16 mode : modes.all())
    for (auto const& model : {tiny_resnet_block(false), tiny_resnet_block(true), testing::tiny_attention(),
                              testing::tiny_conv_stack(), testing::tiny_gpt_block()}) {
      ASSERT_EQ(set_cpu_bf16(mode), mode);
      SCOPED_TRACE(cpu_bf16_name(mode));
      CpuBackend be;
      auto const want = one_step(graph_in(model, Precision::kFloat32), be);
      auto const got = one_step(graph_in(model, Precision::kBFloat16), be);
      ASSERT_EQ(got.size(), want.size());
      double worst = 0;
      int vanishing = 0;
      for (auto const& [name, w] : want) {
        ASSERT_TRUE(got.count(name)) << name;
        ASSERT_EQ(got.at(name).size(), w.size()) << name;
        if (vanishes(w)) {
          ++vanishing;
          continue;
        }
        double const e = rel_l2(got.at(name), w);
        worst = std::max(worst, e);
        if (std::getenv("GP_SHOW")) std::printf("  %s %s %.2f units\n", model.name().c_str(), name.c_str(), e / kUnit);
        EXPECT_LE(e, kTolerance) << model.name() << ": " << name;
        // Not bitwise float32: the step did run in bf16.
        if (name == "output") {
          EXPECT_GT(e, 0.0) << model.name();
        }
      }
      EXPECT_LE(vanishing, 1) << model.name();  // at most a conv's bias in front of BatchNorm
      // The check sees an error of 5% in any of them.
      for (auto const& [name, w] : want) {
        if (vanishes(w)) continue;
        std::vector<float> off = w;
        for (float& v : off) v *= 1.05f;
        EXPECT_GT(rel_l2(off, w), kTolerance) << name;
      }
      std::printf("%s (%s bf16): worst relative L2 difference to float32 %.2e (%.1f bf16 units)\n",
                  model.name().c_str(), cpu_bf16_name(mode), worst, worst / kUnit);
    }
}

// The zoo transformer in float32 and its bf16 rewrite (empty graphs, and a failed test, on error).
std::array<graph::OpGraph, 2> transformer_fp32_and_bf16(models::Size size) {
  auto built = models::build_graph("transformer", size, 1);
  EXPECT_TRUE(built.is_ok()) << built.status().message();
  if (!built.is_ok()) return {};
  auto low = graph::apply_precision(*built, Precision::kBFloat16);
  EXPECT_TRUE(low.is_ok()) << low.status().message();
  if (!low.is_ok()) return {};
  return {std::move(built).value(), std::move(low).value()};
}

// A trainer that has run `c` on `g` with `be` (which must outlive it); null, and a failed test, on error.
std::unique_ptr<Trainer> trained(TrainConfig const& c, graph::OpGraph const& g, Backend& be) {
  auto data = make_data_source(c.data, g, c.loss, c.seed);
  EXPECT_TRUE(data.is_ok()) << data.status().message();
  if (!data.is_ok()) return nullptr;
  auto t = Trainer::create(c, g, be, std::move(data).value());
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  if (!t.is_ok()) return nullptr;
  Status const run = (*t)->run(nullptr);
  EXPECT_TRUE(run.is_ok()) << run.message();
  return run.is_ok() ? std::move(t).value() : nullptr;
}

// 60 steps of the zoo transformer (AdamW) in bf16 and in float32 from the same weights and
// batches: the mean loss of the last 10 steps within 2%. Fresh samples of the synthetic teacher
// task (the default data): on 256 cycled samples the runs memorise them, where bf16's per-step
// differences grow (measured 1.4% native, 2.9% emulated, both with a lower bf16 loss); on fresh
// samples the loss measures what was learnt (fp32 2.2903, bf16 emulated 2.2816, from 2.4546).
TEST(MixedPrecision, Bf16TrainingFollowsFloat32) {
  auto const graphs = transformer_fp32_and_bf16(models::Size::kTiny);
  ASSERT_GT(graphs[1].num_ops(), 0u);
  TrainConfig c;
  c.batch = 16;
  c.micro_batches = 2;
  c.steps = 60;
  c.seed = 1;
  c.optimizer.kind = OptimizerKind::kAdamW;
  c.optimizer.lr = 3e-3f;
  c.data.samples = 0;
  double tail[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    CpuBackend be;
    auto const t = trained(c, graphs[i], be);
    ASSERT_NE(t, nullptr);
    auto const& losses = t->losses();
    ASSERT_EQ(losses.size(), 60u);
    for (std::size_t s = 50; s < 60; ++s) tail[i] += losses[s] / 10;
    EXPECT_LT(tail[i], losses[0]) << "no learning";
  }
  EXPECT_NEAR(tail[1], tail[0], 0.02 * tail[0]);
  std::printf("last-10 mean loss: fp32 %.4f, bf16 %.4f\n", tail[0], tail[1]);
}

// A 16-bit Conv/Gemm/MatMul kernel saves the inputs it is given, the rounded copy of its weight
// among them; the wrapper keeps the float32 master instead (no activation memory) and rounds it
// again for the backward. Before, each micro-batch in flight held a bf16 copy of every such weight,
// which the accounting does not count: the zoo transformer (small) saved more in bf16 than in
// float32 (10.43 against 9.15 MiB a step in `graphpipe train`, batch 16 in 4 micro-batches), where
// the accounting says 0.60x. Now bf16 saves less, and training is bitwise what it was (the same
// rounding of the same master).
TEST(MixedPrecision, Bf16SavesLessThanFloat32AndNoRoundedWeightCopies) {
  auto const graphs = transformer_fp32_and_bf16(models::Size::kSmall);
  graph::OpGraph const* low = &graphs[1];
  ASSERT_GT(low->num_ops(), 0u);
  TrainConfig c;
  c.batch = 4;
  c.micro_batches = 1;
  c.steps = 1;
  c.seed = 1;
  int64_t peak[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    CpuBackend be;
    auto const t = trained(c, graphs[i], be);
    ASSERT_NE(t, nullptr);
    peak[i] = t->executor().peak_saved_bytes();
  }
  // The bf16 copies of the weights of the ops the policy runs low: what the saved state held on top.
  int64_t copies = 0;
  for (auto const& op : low->ops()) {
    if (op.type != "Conv" && op.type != "Gemm" && op.type != "MatMul") continue;
    for (graph::TensorId in : op.inputs)
      if (in != graph::kNoTensor && low->tensor(in).role == graph::TensorRole::kWeight)
        copies += low->tensor(in).shape.elements_per_sample() * 2;  // a weight has no batch dimension
  }
  std::printf("peak saved bytes: fp32 %lld, bf16 %lld (the weights' bf16 copies: %lld)\n",
              static_cast<long long>(peak[0]), static_cast<long long>(peak[1]), static_cast<long long>(copies));
  ASSERT_GT(copies, 0);
  EXPECT_LT(peak[1], peak[0]);
  // With the copies the bf16 run would exceed float32's: the check above tells the two apart.
  EXPECT_GT(peak[1] + copies, peak[0]);
}

}  // namespace
}  // namespace gp::exec
