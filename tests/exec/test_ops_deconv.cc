// ConvTranspose and InstanceNormalization on the CPU backend: forward against plain reference loops
// written here, finite-difference gradients of every float input (data, weight, bias, scale), the
// one-pass backward equal to the split one, import-time shapes and pads, and torch 1.13's export of
// GroupNorm (Reshape -> InstanceNormalization -> Reshape -> Mul -> Add) run end to end against torch.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "exec/data.h"
#include "exec/stage_executor.h"
#include "graph/onnx_import.h"
#include "graph/onnx_tensor_io.h"
#include "tests/exec/op_harness.h"
#include "tests/graph/onnx_text.h"

namespace gp::exec::testing {
namespace {

using graph::TensorRole;

// ---- reference loops ------------------------------------------------------------------------

// Up to 3 spatial dims, the missing ones of size 1.
int64_t sp_at(std::vector<int64_t> const& v, std::size_t i, int64_t dflt) { return i < v.size() ? v[i] : dflt; }

std::vector<int64_t> deconv_out_shape(Tensor const& x, Tensor const& w, graph::ConvTransposeAttrs const& a) {
  std::size_t const sp = x.shape().size() - 2;
  std::vector<int64_t> out = {x.dim(0), w.dim(1) * a.group};
  for (std::size_t i = 0; i < sp; ++i)
    out.push_back(a.strides[i] * (x.dim(2 + i) - 1) + a.output_padding[i] + (w.dim(2 + i) - 1) * a.dilations[i] + 1 -
                  a.pads[i] - a.pads[i + sp]);
  return out;
}

// y[n, g*M/g + m, o] = b + sum over the group's input channels c, positions i and kernel taps k with
// o = i*stride + k*dilation - pad_begin of x[n, c, i] * w[c, m, k].
Tensor reference_deconv(Tensor const& x, Tensor const& w, Tensor const& b, graph::ConvTransposeAttrs const& a) {
  std::size_t const sp = x.shape().size() - 2;
  std::vector<int64_t> const out = deconv_out_shape(x, w, a);
  Tensor y = Tensor::zeros(out);
  int64_t const n = x.dim(0), c = x.dim(1), m = w.dim(1), cg = c / a.group;
  int64_t in[3], k[3], o[3], s[3], d[3], p[3];
  for (std::size_t i = 0; i < 3; ++i) {
    in[i] = sp_at(x.shape(), 2 + i, 1);
    k[i] = sp_at(w.shape(), 2 + i, 1);
    o[i] = sp_at(out, 2 + i, 1);
    s[i] = i < sp ? a.strides[i] : 1;
    d[i] = i < sp ? a.dilations[i] : 1;
    p[i] = i < sp ? a.pads[i] : 0;
  }
  float const* xp = x.data<float>();
  float const* wp = w.data<float>();
  float* yp = y.data<float>();
  for (int64_t ni = 0; ni < n; ++ni)
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t mi = 0; mi < m; ++mi) {
        int64_t const oc = (ci / cg) * m + mi;
        for (int64_t i0 = 0; i0 < in[0]; ++i0)
          for (int64_t i1 = 0; i1 < in[1]; ++i1)
            for (int64_t i2 = 0; i2 < in[2]; ++i2)
              for (int64_t k0 = 0; k0 < k[0]; ++k0)
                for (int64_t k1 = 0; k1 < k[1]; ++k1)
                  for (int64_t k2 = 0; k2 < k[2]; ++k2) {
                    int64_t const o0 = i0 * s[0] + k0 * d[0] - p[0];
                    int64_t const o1 = i1 * s[1] + k1 * d[1] - p[1];
                    int64_t const o2 = i2 * s[2] + k2 * d[2] - p[2];
                    if (o0 < 0 || o0 >= o[0] || o1 < 0 || o1 >= o[1] || o2 < 0 || o2 >= o[2]) continue;
                    float const xv = xp[(((ni * c + ci) * in[0] + i0) * in[1] + i1) * in[2] + i2];
                    float const wv = wp[(((ci * m + mi) * k[0] + k0) * k[1] + k1) * k[2] + k2];
                    yp[(((ni * out[1] + oc) * o[0] + o0) * o[1] + o1) * o[2] + o2] += xv * wv;
                  }
      }
  if (b.defined()) {
    int64_t const plane = o[0] * o[1] * o[2];
    for (int64_t i = 0; i < y.numel(); ++i) yp[i] += b.data<float>()[(i / plane) % out[1]];
  }
  return y;
}

// Per (n, c): (x - mean) / sqrt(biased var + eps) * scale[c] + bias[c].
Tensor reference_instance_norm(Tensor const& x, Tensor const& scale, Tensor const& bias, float eps) {
  Tensor y(x.shape());
  int64_t const c = x.dim(1), plane = x.numel() / (x.dim(0) * c);
  for (int64_t nc = 0; nc < x.dim(0) * c; ++nc) {
    float const* p = x.data<float>() + nc * plane;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < plane; ++i) mean += p[i];
    mean /= static_cast<double>(plane);
    for (int64_t i = 0; i < plane; ++i) var += (p[i] - mean) * (p[i] - mean);
    var /= static_cast<double>(plane);
    double const inv = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < plane; ++i)
      y.data<float>()[nc * plane + i] =
          static_cast<float>((p[i] - mean) * inv * scale.data<float>()[nc % c] + bias.data<float>()[nc % c]);
  }
  return y;
}

// ---- ConvTranspose cases ----------------------------------------------------------------------

struct DeconvCase {
  std::string name;
  std::vector<int64_t> x, w;
  graph::ConvTransposeAttrs a;  // kernel, strides, dilations, pads, output_padding, group, has_bias
};

std::vector<DeconvCase> deconv_cases() {
  return {
      // output_padding within the stride: oneDNN's floor division keeps the extra row.
      {"1d_pads_output_padding", {2, 3, 5}, {3, 2, 3}, {{3}, {2}, {1}, {1, 0}, {1}, 1, true}},
      {"2d_grouped_strided_dilated",
       {2, 4, 4, 3},
       {4, 3, 3, 2},
       {{3, 2}, {2, 1}, {1, 2}, {1, 0, 0, 1}, {1, 0}, 2, true}},
      {"3d",
       {1, 2, 3, 2, 3},
       {2, 2, 2, 3, 2},
       {{2, 3, 2}, {1, 2, 1}, {1, 1, 1}, {0, 1, 0, 0, 0, 1}, {0, 1, 0}, 1, true}},
      // Negative pads (output_shape beyond the full output): zeros before and after.
      {"2d_negative_pads", {1, 2, 3, 3}, {2, 3, 3, 3}, {{3, 3}, {2, 1}, {1, 1}, {-1, 0, 1, -2}, {0, 0}, 1, true}},
      // output_padding at the stride (dilation 2 allows it): beyond what oneDNN computes.
      {"1d_output_padding_at_stride", {2, 2, 4}, {2, 4, 2}, {{2}, {1}, {2}, {0, 0}, {1}, 2, true}},
      {"2d_no_bias", {2, 3, 3, 2}, {3, 2, 2, 2}, {{2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, {0, 0}, 1, false}},
  };
}

OneOp deconv_op(DeconvCase const& k, uint32_t seed, TensorRole weight_role = kW) {
  std::vector<In> ins = {{"x", random_tensor(k.x, seed), kIn}, {"w", random_tensor(k.w, seed + 1), weight_role}};
  if (k.a.has_bias) ins.push_back({"b", random_tensor({k.w[1] * k.a.group}, seed + 2), kW});
  return make_op("ConvTranspose", k.a, ins);
}

TEST(ConvTranspose, ForwardMatchesReferenceLoop) {
  CpuBackend be;
  uint32_t seed = 1;
  for (DeconvCase const& k : deconv_cases()) {
    SCOPED_TRACE(k.name);
    OneOp o = deconv_op(k, seed += 3);
    ASSERT_TRUE(be.supports(o.the_op(), o.graph).is_ok()) << be.supports(o.the_op(), o.graph).to_string();
    std::vector<Tensor> out = run_forward(be, o);
    ASSERT_EQ(out.size(), 1u);
    Tensor const b = o.inputs.size() > 2 ? o.inputs[2] : Tensor();
    Tensor const ref = reference_deconv(o.inputs[0], o.inputs[1], b, k.a);
    EXPECT_LT(max_abs_diff(out[0], ref), 1e-5);
    // The comparison can fail: a wrong tap changes the output.
    Tensor bad = out[0].clone();
    bad.data<float>()[bad.numel() / 2] += 1e-2f;
    EXPECT_GT(max_abs_diff(bad, ref), 1e-5);
  }
}

TEST(ConvTranspose, GradientsOfInputWeightAndBias) {
  CpuBackend be;
  uint32_t seed = 100;
  for (DeconvCase const& k : deconv_cases()) {
    SCOPED_TRACE(k.name);
    OneOp o = deconv_op(k, seed += 3);
    expect_grads_ok(grad_check(be, o));
  }
}

TEST(ConvTranspose, WeightThatIsAnActivation) {
  CpuBackend be;
  for (DeconvCase const& k : {deconv_cases()[1], deconv_cases()[3]}) {
    SCOPED_TRACE(k.name);
    OneOp o = deconv_op(k, 200, kIn);
    expect_grads_ok(grad_check(be, o));
  }
}

TEST(ConvTranspose, OnePassBackwardEqualsSplit) {
  uint32_t seed = 300;
  for (DeconvCase const& k : deconv_cases()) {
    SCOPED_TRACE(k.name);
    OneOp o = deconv_op(k, seed += 3);
    expect_one_pass_equals_split(o);
  }
}

// ---- InstanceNormalization ----------------------------------------------------------------------

OneOp instance_norm_op(std::vector<int64_t> const& x, float eps, uint32_t seed) {
  return make_op("InstanceNormalization", graph::InstanceNormAttrs{eps},
                 {{"x", random_tensor(x, seed), kIn},
                  {"s", random_tensor({x[1]}, seed + 1), kW},
                  {"b", random_tensor({x[1]}, seed + 2), kW}});
}

TEST(InstanceNorm, ForwardMatchesReferenceLoop) {
  CpuBackend be;
  for (auto const& shape : std::vector<std::vector<int64_t>>{{2, 3, 4, 5}, {3, 2, 7}, {1, 2, 2, 3, 2}}) {
    OneOp o = instance_norm_op(shape, 1e-2f, 10);
    ASSERT_TRUE(be.supports(o.the_op(), o.graph).is_ok());
    std::vector<Tensor> out = run_forward(be, o);
    Tensor const ref = reference_instance_norm(o.inputs[0], o.inputs[1], o.inputs[2], 1e-2f);
    EXPECT_LT(max_abs_diff(out[0], ref), 1e-5) << o.inputs[0].shape_string();
    Tensor const other_eps = reference_instance_norm(o.inputs[0], o.inputs[1], o.inputs[2], 1e-5f);
    EXPECT_GT(max_abs_diff(out[0], other_eps), 1e-5) << "epsilon is ignored";
  }
}

TEST(InstanceNorm, GradientsOfInputScaleAndBias) {
  CpuBackend be;
  uint32_t seed = 20;
  for (auto const& shape : std::vector<std::vector<int64_t>>{{2, 3, 2, 3}, {3, 2, 5}}) {
    OneOp o = instance_norm_op(shape, 1e-5f, seed += 3);
    expect_grads_ok(grad_check(be, o));
  }
}

TEST(InstanceNorm, OnePassBackwardEqualsSplit) {
  OneOp o = instance_norm_op({2, 3, 4}, 1e-5f, 30);
  expect_one_pass_equals_split(o);
}

// ONNX's two node tests are opset 6, which the importer refuses (it imports opsets 7-17): their
// data runs through the kernel here instead, with the conformance suite's tolerance.
TEST(InstanceNorm, OnnxNodeTestData) {
  std::string const root = "/usr/share/libonnx-testdata/data/node/";
  if (!std::filesystem::exists(root + "test_instancenorm_example"))
    GTEST_SKIP() << "libonnx-testdata is not installed (" << root << ")";
  CpuBackend be;
  for (auto const& [test, eps] : std::vector<std::pair<std::string, float>>{{"test_instancenorm_example", 1e-5f},
                                                                            {"test_instancenorm_epsilon", 1e-2f}}) {
    SCOPED_TRACE(test);
    std::vector<Tensor> t;
    for (char const* f : {"input_0", "input_1", "input_2", "output_0"}) {
      auto pb = graph::load_tensor_pb(root + test + "/test_data_set_0/" + f + ".pb");
      ASSERT_TRUE(pb.is_ok()) << pb.status().to_string();
      t.push_back(Tensor::from_data(pb->data));
    }
    OneOp o = make_op("InstanceNormalization", graph::InstanceNormAttrs{eps},
                      {{"x", t[0], kIn}, {"s", t[1], kW}, {"b", t[2], kW}});
    std::vector<Tensor> out = run_forward(be, o);
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].shape(), t[3].shape());
    for (int64_t i = 0; i < out[0].numel(); ++i) {
      float const e = t[3].data<float>()[i];
      EXPECT_LE(std::fabs(out[0].data<float>()[i] - e), 1e-5 + 1e-4 * std::fabs(e)) << "element " << i;
    }
  }
}

// ---- import-time inference ---------------------------------------------------------------------

graph::Op const* op_of(graph::OpGraph const& g, std::string const& type) {
  for (auto const& op : g.ops())
    if (op.type == type) return &op;
  ADD_FAILURE() << "no " << type;
  return nullptr;
}

TEST(ConvTransposeImport, PadsFromAttributesAutoPadAndOutputShape) {
  struct Case {
    std::string attrs;
    std::vector<int64_t> out, pads;
  };
  // x [N, 2, 3, 3], w [2, 3, 3, 3], group 1: full output per dim = s*2 + op + 3.
  std::vector<Case> const cases = {
      {"strides = [3,2], pads = [1,2,1,2]", {7, 3}, {1, 2, 1, 2}},
      {"strides = [3,2], output_padding = [1,1]", {10, 8}, {0, 0, 0, 0}},
      // total padding -1 (both dims): floor division puts the extra row at the end.
      {"strides = [3,2], output_shape = [10,8]", {10, 8}, {0, 0, -1, -1}},
      {"strides = [3,2], output_shape = [7,5]", {7, 5}, {1, 1, 1, 1}},
      {"strides = [2,2], auto_pad = \"SAME_UPPER\"", {6, 6}, {0, 0, 1, 1}},
      {"strides = [2,2], auto_pad = \"SAME_LOWER\"", {6, 6}, {1, 1, 0, 0}},
      {"dilations = [2,1], auto_pad = \"VALID\", pads = [1,1,1,1]", {7, 5}, {0, 0, 0, 0}},
  };
  for (Case const& c : cases) {
    SCOPED_TRACE(c.attrs);
    std::string const y = "float[N,3," + std::to_string(c.out[0]) + "," + std::to_string(c.out[1]) + "] y";
    graph::OpGraph g = must_load(graph::model_text("float[N,2,3,3] x", y, {graph::zeros("w", {2, 3, 3, 3}, 0.5)},
                                                   "y = ConvTranspose<" + c.attrs + ">(x, w)", 17));
    graph::Op const* op = op_of(g, "ConvTranspose");
    if (!op) continue;
    auto const& a = std::get<graph::ConvTransposeAttrs>(op->typed);
    EXPECT_EQ(a.pads, c.pads);
    EXPECT_FALSE(a.has_bias);
    EXPECT_EQ(g.tensor(op->outputs[0]).shape, (graph::Shape{{N, 3, c.out[0], c.out[1]}}));
  }
}

TEST(ConvTransposeImport, GroupsBiasAndErrors) {
  graph::OpGraph g = must_load(graph::model_text(
      "float[N,4,5] x", "float[N,6,12] y", {graph::zeros("w", {4, 3, 3}, 0.5), graph::zeros("b", {6})},
      "y = ConvTranspose<group = 2, strides = [2], output_padding = [1]>(x, w, b)", 17));
  if (graph::Op const* op = op_of(g, "ConvTranspose")) {
    auto const& a = std::get<graph::ConvTransposeAttrs>(op->typed);
    EXPECT_EQ(a.group, 2);
    EXPECT_TRUE(a.has_bias);
    EXPECT_EQ(g.tensor(op->outputs[0]).shape, (graph::Shape{{N, 6, 12}}));
  }
  auto bad =
      graph::load_onnx_text(graph::model_text("float[N,3,5] x", "float[N,6,7] y", {graph::zeros("w", {4, 3, 3}, 0.5)},
                                              "y = ConvTranspose<group = 2>(x, w)", 17));
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("channels"), std::string::npos) << bad.status().message();
  bad =
      graph::load_onnx_text(graph::model_text("float[N,4,5] x", "float[N,3,13] y", {graph::zeros("w", {4, 3, 3}, 0.5)},
                                              "y = ConvTranspose<strides = [2], output_padding = [2]>(x, w)", 17));
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("output_padding"), std::string::npos) << bad.status().message();
}

TEST(InstanceNormImport, ShapesAndEpsilon) {
  graph::OpGraph g = must_load(graph::model_text("float[N,3,4,4] x", "float[N,3,4,4] y",
                                                 {graph::zeros("s", {3}, 1), graph::zeros("b", {3})},
                                                 "y = InstanceNormalization<epsilon = 0.01>(x, s, b)", 17));
  if (graph::Op const* op = op_of(g, "InstanceNormalization")) {
    EXPECT_FLOAT_EQ(std::get<graph::InstanceNormAttrs>(op->typed).epsilon, 0.01f);
    EXPECT_EQ(g.tensor(op->outputs[0]).shape, (graph::Shape{{N, 3, 4, 4}}));
  }
  auto bad = graph::load_onnx_text(graph::model_text("float[N,3,4] x", "float[N,3,4] y",
                                                     {graph::zeros("s", {2}, 1), graph::zeros("b", {3})},
                                                     "y = InstanceNormalization(x, s, b)", 17));
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("scale"), std::string::npos) << bad.status().message();
}

// ---- torch 1.13: GroupNorm, ConvTranspose2d and InstanceNorm2d exported and trained ------------

namespace fs = std::filesystem;

// Builds Conv2d -> GroupNorm(4, 8) -> Tanh -> ConvTranspose2d(groups 2, stride 2, output_padding)
// -> Tanh (else InstanceNorm would cancel the bias: a zero gradient) -> InstanceNorm2d(affine), perturbs every
// parameter (GroupNorm's affine away from ones/zeros), exports it (opset 17, TRAINING, no constant folding) and writes
// x, y = m(x), a projection r and the gradients of sum(y * r) for each parameter.
char const* const kTorchScript = R"(
import os, sys
import numpy as np
import torch
out = sys.argv[1]
torch.manual_seed(0)
m = torch.nn.Sequential(
    torch.nn.Conv2d(3, 8, 3, padding=1),
    torch.nn.GroupNorm(4, 8),
    torch.nn.Tanh(),
    torch.nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1, groups=2),
    torch.nn.Tanh(),
    torch.nn.InstanceNorm2d(4, affine=True),
)
with torch.no_grad():
    for p in m.parameters():
        p.add_(0.3 * torch.randn_like(p))
x = torch.randn(2, 3, 5, 5)
torch.onnx.export(m, x, os.path.join(out, "model.onnx"), opset_version=17,
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                  input_names=["x"], output_names=["y"])
y = m(x)
r = torch.randn_like(y)
(y * r).sum().backward()
np.save(os.path.join(out, "x.npy"), x.numpy())
np.save(os.path.join(out, "y.npy"), y.detach().numpy())
np.save(os.path.join(out, "r.npy"), r.numpy())
with open(os.path.join(out, "names.txt"), "w") as f:
    for i, (name, p) in enumerate(m.named_parameters()):
        np.save(os.path.join(out, "grad_%d.npy" % i), p.grad.numpy())
        f.write(name + "\n")
)";

Tensor read_tensor(fs::path const& path) {
  auto a = read_npy(path.string());
  EXPECT_TRUE(a.is_ok()) << a.status().message();
  if (!a.is_ok()) return Tensor();
  Tensor t(a->shape, a->dtype);
  std::memcpy(t.raw(), a->bytes.data(), a->bytes.size());
  return t;
}

// max|a - b| / max|b|
double max_rel(Tensor const& a, Tensor const& b) {
  if (a.numel() != b.numel()) return 1e30;
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a.data<float>()[i]) - b.data<float>()[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b.data<float>()[i])));
  }
  return diff / std::max(scale, 1e-6);
}

class TorchGroupNorm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists("/usr/bin/python3") ||
        std::system("/usr/bin/python3 -c 'import torch, onnx, numpy' >/dev/null 2>&1") != 0)
      GTEST_SKIP() << "/usr/bin/python3 cannot import torch, onnx and numpy (apt-get install python3-torch "
                      "python3-onnx)";
    dir_ = fs::temp_directory_path() / ("gp_deconv_torch_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  fs::path dir_;
};

TEST_F(TorchGroupNorm, ExportImportsAndMatchesTorchForwardAndGradients) {
  std::ofstream(dir_ / "export.py") << kTorchScript;
  std::string const cmd = "/usr/bin/python3 " + (dir_ / "export.py").string() + " " + dir_.string() + " >" +
                          (dir_ / "log.txt").string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto g = graph::load_onnx((dir_ / "model.onnx").string());
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  std::map<std::string, int> types;
  for (auto const& op : g->ops()) ++types[op.type];
  EXPECT_EQ(types["InstanceNormalization"], 2);  // GroupNorm's and InstanceNorm2d's
  EXPECT_EQ(types["ConvTranspose"], 1);
  EXPECT_GE(types["Reshape"], 2);

  CpuBackend be;
  auto ex = StageExecutor::create(*g, be);
  ASSERT_TRUE(ex.is_ok()) << ex.status().to_string();
  TensorMap inputs, outputs, input_grads;
  inputs.emplace(g->inputs()[0], read_tensor(dir_ / "x.npy"));
  Status s = (*ex)->forward(0, inputs, outputs, true, 0);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  Tensor const y = outputs.at(g->outputs()[0]);
  double const fwd = max_rel(y, read_tensor(dir_ / "y.npy"));
  EXPECT_LT(fwd, 1e-4) << "forward differs from torch";
  s = (*ex)->backward(0, {{g->outputs()[0], read_tensor(dir_ / "r.npy")}}, input_grads);
  ASSERT_TRUE(s.is_ok()) << s.to_string();

  // Every torch parameter is trainable here with torch's gradient; GroupNorm's constant ones and
  // zeros (InstanceNormalization's scale and B) are not parameters.
  std::ifstream names(dir_ / "names.txt");
  std::string name;
  int i = 0;
  while (std::getline(names, name)) {
    Tensor const ref = read_tensor(dir_ / ("grad_" + std::to_string(i++) + ".npy"));
    auto it = (*ex)->gradients().find(name);
    EXPECT_TRUE(it != (*ex)->gradients().end()) << "'" << name << "' is not trainable";
    if (it == (*ex)->gradients().end()) continue;
    EXPECT_LT(max_rel(it->second, ref), 1e-4) << "gradient of '" << name << "'";
  }
  EXPECT_EQ(i, 8);  // weight and bias of Conv2d, GroupNorm, ConvTranspose2d, InstanceNorm2d
  EXPECT_EQ(static_cast<int>((*ex)->parameters().size()), i);
}

}  // namespace
}  // namespace gp::exec::testing
