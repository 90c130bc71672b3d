// ONNX's own backend node tests (Debian's libonnx-testdata, and the current ONNX release's) on any backend: each test's
// model imported, its ops run forward on the backend (inputs and initializers copied to its device), the outputs read
// back and compared with the test's expected outputs. The CPU conformance test (test_onnx_node_conformance.cc) and the
// CUDA one (tests/cuda) run it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "exec/backend.h"
#include "graph/onnx_import.h"
#include "graph/onnx_tensor_io.h"

namespace gp::exec::onnx_node_tests {

namespace fs = std::filesystem;
inline constexpr char const* kNodeTests = "/usr/share/libonnx-testdata/data/node";
constexpr double kRtol = 1e-4;
constexpr double kAtol = 1e-5;

// Known deviations, each with its reason. A test listed here still runs; a mismatch is reported
// but does not fail the suite.
inline std::map<std::string, std::string> const& allow_list() {
  static std::map<std::string, std::string> const list = {
      // Training-mode Dropout draws its mask from a generator ONNX does not specify; ours is
      // reproducible from OpCall::rng_seed but cannot equal numpy's.
      // ONNX's bfloat16 Cast tests store their bf16 values as uint16 tensors (element type 4),
      // which graphpipe's tensor reader refuses; the Cast itself is tested in test_mixed_precision.
      {"test_cast_BFLOAT16_to_FLOAT", "bf16 test data stored as uint16"},
      {"test_cast_FLOAT_to_BFLOAT16", "bf16 test data stored as uint16"},
      {"test_castlike_BFLOAT16_to_FLOAT", "bf16 test data stored as uint16"},
      {"test_castlike_BFLOAT16_to_FLOAT_expanded", "bf16 test data stored as uint16"},
      {"test_castlike_FLOAT_to_BFLOAT16", "bf16 test data stored as uint16"},
      {"test_castlike_FLOAT_to_BFLOAT16_expanded", "bf16 test data stored as uint16"},
      {"test_training_dropout", "random mask differs from the reference generator"},
      {"test_training_dropout_default", "random mask differs from the reference generator"},
      {"test_training_dropout_default_mask", "random mask differs from the reference generator"},
      {"test_training_dropout_mask", "random mask differs from the reference generator"},
      // Bernoulli and its expansion (RandomUniformLike < p) draw from the same hash as Dropout.
      {"test_bernoulli", "random draws differ from the reference generator"},
      {"test_bernoulli_expanded", "random draws differ from the reference generator"},
      {"test_bernoulli_seed", "random draws differ from the reference generator"},
      {"test_bernoulli_seed_expanded", "random draws differ from the reference generator"},
      {"test_bernoulli_double_expanded", "random draws differ from the reference generator"},
      // ONNX's expected windows are computed with pi = 3.1415 (onnx/backend/test/case/node/window.py):
      // up to 7e-5 from the spec's formula, which graphpipe (and the _expanded function bodies) follow.
      {"test_blackmanwindow", "expected values computed with pi = 3.1415"},
      {"test_blackmanwindow_expanded", "expected values computed with pi = 3.1415"},
      {"test_blackmanwindow_symmetric", "expected values computed with pi = 3.1415"},
      {"test_blackmanwindow_symmetric_expanded", "expected values computed with pi = 3.1415"},
      {"test_hammingwindow", "expected values computed with pi = 3.1415"},
      {"test_hammingwindow_expanded", "expected values computed with pi = 3.1415"},
      {"test_hammingwindow_symmetric", "expected values computed with pi = 3.1415"},
      {"test_hammingwindow_symmetric_expanded", "expected values computed with pi = 3.1415"},
      {"test_hannwindow", "expected values computed with pi = 3.1415"},
      {"test_hannwindow_expanded", "expected values computed with pi = 3.1415"},
      {"test_hannwindow_symmetric", "expected values computed with pi = 3.1415"},
      {"test_hannwindow_symmetric_expanded", "expected values computed with pi = 3.1415"},
      // ONNX 1.18's expected output is written with 4 decimals (0.1511 for 1.3595 / 9 = 0.151056).
      {"test_averagepool_2d_ceil_last_window_starts_on_pad", "expected values rounded to 4 decimals"},
      // Written with 4 decimals too: -0.1406 where torch's grid_sample (and graphpipe) give -0.140625.
      {"test_gridsample_bicubic", "expected values rounded to 4 decimals"},
  };
  return list;
}

struct Outcome {
  bool ran = false;
  bool passed = false;
  std::string detail;
  std::set<std::string> unsupported_ops;
};

// Why a test did not run, keyed by operator: "LpNormalization: not supported", "Trilu: an input
// graphpipe needs static is a graph input", "Max: dtype (the backend runs float32)".
inline std::vector<std::string> not_run_reasons(Outcome const& o) {
  std::vector<std::string> keys;
  for (std::string const& op : o.unsupported_ops) keys.push_back(op + ": dtype or attribute the backend refuses");
  if (!keys.empty()) return keys;
  std::string const& m = o.detail;
  auto const u = m.find("unsupported operator");
  if (u != std::string::npos) {
    // "unsupported operators: A (2 nodes: ...); B (1 node: ...). Supported: ..."
    std::string list = m.substr(m.find(':', u) + 2);
    list = list.substr(0, list.find(". Supported"));
    std::size_t p = 0;
    while (p < list.size()) {
      std::size_t const e = list.find(" (", p);
      keys.push_back(list.substr(p, e - p) + ": not supported");
      std::size_t const next = list.find("; ", e);
      if (next == std::string::npos) break;
      p = next + 2;
    }
    return keys;
  }
  std::string const file = "model.onnx: ";
  std::string rest = m.find(file) != std::string::npos ? m.substr(m.find(file) + file.size()) : m;
  std::string const op = rest.substr(0, rest.find(' '));
  if (rest.find("computed at run time") != std::string::npos) return {op + ": a constant input is a graph input"};
  if (rest.find("graphpipe imports opsets") != std::string::npos)  // below 7, or none of the default domain
    return {"model: " +
            rest.substr(rest.find("uses ONNX opset") + 5, rest.find(';') - rest.find("uses ONNX opset") - 5)};
  if (rest.find("opset") != std::string::npos) return {op + ": opset"};
  if (rest.find("dtype") != std::string::npos || rest.find("element type") != std::string::npos ||
      rest.find("float16") != std::string::npos)
    return {op + ": dtype"};
  return {op + ": " + rest.substr(rest.find(": ") == std::string::npos ? 0 : rest.find(": ") + 2, 70)};
}

inline bool close(graph::TensorData const& expected, Tensor const& got, std::string& why) {
  auto dims = [](std::vector<int64_t> const& d) {
    std::string s = "[";
    for (std::size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
    return s + "]";
  };
  if (expected.dims != got.shape()) {  // the same values in another shape are wrong too (Flatten)
    why = "has shape " + dims(got.shape()) + ", expected " + dims(expected.dims);
    return false;
  }
  if (static_cast<int64_t>(expected.numel()) != got.numel()) {
    why = "has " + std::to_string(got.numel()) + " elements, expected " + std::to_string(expected.numel());
    return false;
  }
  if (expected.dtype == DType::kFloat32) {
    if (got.dtype() != DType::kFloat32) {
      why = "is not float32";
      return false;
    }
    float const* e = expected.as<float>();
    float const* g = got.data<float>();
    for (int64_t i = 0; i < got.numel(); ++i) {
      double const diff = std::fabs(static_cast<double>(e[i]) - g[i]);
      bool const same = e[i] == g[i] || (std::isnan(e[i]) && std::isnan(g[i]));  // infinities too
      if (!same && !(diff <= kAtol + kRtol * std::fabs(static_cast<double>(e[i])))) {
        why = "element " + std::to_string(i) + ": got " + std::to_string(g[i]) + ", expected " + std::to_string(e[i]);
        return false;
      }
    }
    return true;
  }
  // (An empty tensor's data may be null, which memcmp must not get even for 0 bytes.)
  if (graph::dtype_size(expected.dtype) != graph::dtype_size(got.dtype()) ||
      (!expected.bytes.empty() && std::memcmp(expected.bytes.data(), got.raw(), expected.bytes.size()) != 0)) {
    why = "integer/bool data differs";
    return false;
  }
  return true;
}

inline std::vector<fs::path> pb_files(fs::path const& dir, std::string const& prefix) {
  std::vector<fs::path> files;
  for (int i = 0;; ++i) {
    fs::path const p = dir / (prefix + std::to_string(i) + ".pb");
    if (!fs::exists(p)) break;
    files.push_back(p);
  }
  return files;
}

inline bool op_training(graph::Op const& op) {
  if (auto const* bn = std::get_if<graph::BatchNormAttrs>(&op.typed)) return bn->training;
  if (auto const* d = std::get_if<graph::DropoutAttrs>(&op.typed)) return d->training;
  return false;
}

// A test's model as the runner imports it: static shapes, no batch dimension (the tests' inputs
// are whole tensors). Where the importer needs an input static (a Reshape's shape, a Resize's
// scales, a Range's bounds: "computed at run time"), the test's values of every input but the
// first are fixed at import (ImportOptions::fixed_inputs), then of every input; `inputs` are the
// test data files of the inputs that stay graph inputs, in the graph's order.
struct TestModel {
  graph::OpGraph graph;
  std::vector<fs::path> inputs;
};

inline Result<TestModel> load_test_model(fs::path const& dir) {
  graph::ImportOptions opts;
  opts.first_dim_is_batch = false;
  std::vector<fs::path> const ins = pb_files(dir / "test_data_set_0", "input_");
  std::size_t kept = ins.size();  // the leading inputs that stay graph inputs
  Result<graph::OpGraph> g = graph::load_onnx((dir / "model.onnx").string(), opts);
  for (std::size_t fixed_from : {std::size_t{1}, std::size_t{0}}) {
    if (g.is_ok() || g.status().message().find("computed at run time") == std::string::npos) break;
    if (ins.size() <= fixed_from) continue;  // a single input: fixed in the next round
    opts.fixed_inputs.clear();
    for (std::size_t i = fixed_from; i < ins.size(); ++i) {
      ASSIGN_OR_RETURN(graph::NamedTensor t, graph::load_tensor_pb(ins[i].string()));
      std::ifstream f(ins[i], std::ios::binary);
      opts.fixed_inputs[t.name] = std::string(std::istreambuf_iterator<char>(f), {});
    }
    kept = fixed_from;
    g = graph::load_onnx((dir / "model.onnx").string(), opts);
  }
  if (!g.is_ok()) return g.status();
  return TestModel{std::move(g).value(), std::vector<fs::path>(ins.begin(), ins.begin() + static_cast<long>(kept))};
}

// One test on `be`: not run (unsupported_ops) when `be` refuses an op; else inputs and
// initializers copied to its device, every op forward in topological order, outputs read back.
inline Outcome run_one(Backend& be, fs::path const& dir) {
  Outcome o;
  Result<TestModel> m = load_test_model(dir);
  if (!m.is_ok()) {
    o.detail = "import: " + m.status().message();
    return o;
  }
  graph::OpGraph const& graph = m->graph;
  for (graph::Op const& op : graph.ops())
    if (!be.supports(op, graph).is_ok()) o.unsupported_ops.insert(op.type);
  if (!o.unsupported_ops.empty()) return o;
  // A model whose ops all folded at import (Constant, Shape, Size, EyeLike) or were rewired
  // (Identity) runs no op: its outputs are the folded constants and the inputs, compared below.

  fs::path const data = dir / "test_data_set_0";
  std::vector<fs::path> const& ins = m->inputs;
  std::vector<fs::path> const outs = pb_files(data, "output_");
  std::map<graph::TensorId, Tensor> env;
  if (ins.size() != graph.inputs().size()) {
    o.detail =
        "model has " + std::to_string(graph.inputs().size()) + " inputs, test data " + std::to_string(ins.size());
    o.ran = true;
    return o;
  }
  for (std::size_t i = 0; i < ins.size(); ++i) {
    auto t = graph::load_tensor_pb(ins[i].string());
    if (!t.is_ok()) {
      o.detail = t.status().message();
      o.ran = true;
      return o;
    }
    Result<Tensor> on = be.to_device(Tensor::from_data(t->data));
    if (!on.is_ok()) {
      o.detail = on.status().message();
      o.ran = true;
      return o;
    }
    env[graph.inputs()[i]] = std::move(on).value();
  }
  for (graph::TensorInfo const& t : graph.tensors()) {
    if ((t.role != graph::TensorRole::kWeight && t.role != graph::TensorRole::kConstant) || !t.data) continue;
    Result<Tensor> on = be.to_device(Tensor::from_data(*t.data));
    if (!on.is_ok()) {
      o.detail = on.status().message();
      o.ran = true;
      return o;
    }
    env[t.id] = std::move(on).value();
  }
  o.ran = true;
  for (graph::OpId id : graph.topo_order()) {
    graph::Op const& op = graph.op(id);
    std::vector<Tensor> in;
    for (graph::TensorId t : op.inputs) in.push_back(t == graph::kNoTensor ? Tensor() : env[t]);
    std::vector<Tensor> out;
    OpCall call{op, graph, op_training(op), 0};
    Status const s = be.forward(call, in, out, nullptr);
    if (!s.is_ok()) {
      o.detail = s.message();
      return o;
    }
    for (std::size_t k = 0; k < op.outputs.size() && k < out.size(); ++k) env[op.outputs[k]] = out[k];
  }
  if (Status const s = be.synchronize(); !s.is_ok()) {  // a device's kernel errors surface here
    o.detail = s.message();
    return o;
  }
  if (outs.size() != graph.outputs().size()) {
    o.detail =
        "model has " + std::to_string(graph.outputs().size()) + " outputs, test data " + std::to_string(outs.size());
    return o;
  }
  for (std::size_t i = 0; i < outs.size(); ++i) {
    auto t = graph::load_tensor_pb(outs[i].string());
    if (!t.is_ok()) {
      o.detail = t.status().message();
      return o;
    }
    std::string why;
    Tensor const& got = env[graph.outputs()[i]];
    if (!close(t->data, got.defined() ? got.clone_to(process_cpu_allocator()) : got, why)) {
      o.detail = "output " + std::to_string(i) + " " + why;
      return o;
    }
  }
  o.passed = true;
  return o;
}

// Where the node tests are: $GP_ONNX_NODE_TESTS (bin/gpu-check points it into its bundle), else
// Debian's libonnx-testdata (ONNX 1.12's).
inline fs::path node_tests_dir() {
  char const* env = std::getenv("GP_ONNX_NODE_TESTS");
  return env != nullptr && *env != '\0' ? fs::path(env) : fs::path(kNodeTests);
}

// The node tests of the ONNX release graphpipe builds against (1.18's: opsets up to 23, Attention,
// RMSNormalization, ...), which scripts/setup.sh unpacks from its source distribution into .deps/:
// $GP_CURRENT_ONNX_NODE_TESTS (bin/gpu-check's bundle), else that folder.
inline fs::path current_node_tests_dir() {
  char const* env = std::getenv("GP_CURRENT_ONNX_NODE_TESTS");
#ifdef GP_CURRENT_ONNX_NODE_TESTS
  return env != nullptr && *env != '\0' ? fs::path(env) : fs::path(GP_CURRENT_ONNX_NODE_TESTS);
#else
  return env != nullptr && *env != '\0' ? fs::path(env) : fs::path();
#endif
}

// The test folders (each with a model.onnx) under `root`, sorted; empty when there are none.
inline std::vector<fs::path> test_dirs(fs::path const& root) {
  std::vector<fs::path> dirs;
  if (root.empty() || !fs::is_directory(root)) return dirs;
  for (auto const& e : fs::directory_iterator(root))
    if (e.is_directory() && fs::exists(e.path() / "model.onnx")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

// Both sets' folders (Debian's, then the current release's), for the checks that cover every test.
inline std::vector<fs::path> test_dirs() {
  std::vector<fs::path> dirs = test_dirs(node_tests_dir());
  std::vector<fs::path> const current = test_dirs(current_node_tests_dir());
  dirs.insert(dirs.end(), current.begin(), current.end());
  return dirs;
}

}  // namespace gp::exec::onnx_node_tests
