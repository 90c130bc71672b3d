// The CUDA backend against the CPU backend (label cuda). Every op of the CUDA kernel table runs
// forward, B and W on both backends with the same inputs (the cases of tests/exec/test_gradcheck.cc);
// device operations, the allocator's steady state and pipeline training follow. Without a usable
// GPU every GPU test reports SKIPPED (never passed); the host tests here (the comparison can fail,
// the case list covers the table) run everywhere.
//
// Tolerances: fp32 on both sides, TF32 disabled (NVIDIA_TF32_OVERRIDE=0), sums in another order:
// 1e-4 relative + 1e-5 absolute per element for ops, 1e-3 relative after 3 training steps.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <set>

#include "exec/cuda/caching_allocator.h"
#include "exec/cuda/cuda_backend.h"
#include "exec/kernel_table.h"
#include "exec/cuda/cuda_check.h"
#include "exec/cuda/cudnn_graphs.h"
#include "exec/cuda/plan_disk_cache.h"
#include "graph/precision.h"
#include "tests/cuda/batchnorm_kernels.h"
#include "tests/cuda/rnn_cases.h"
#include "tests/exec/mixed_precision_models.h"
#include "tests/exec/op_harness.h"
#include "tests/exec/tiny_models.h"
#include "tests/runtime/runtime_fixtures.h"

namespace gp::exec::testing {
namespace {

using graph::TensorRole;
constexpr TensorRole kConst = TensorRole::kConstant;

// The first element where |got - want| > atol + rtol |want|, described; nullopt when all agree.
std::optional<std::string> first_mismatch(std::vector<float> const& got, std::vector<float> const& want, double rtol,
                                          double atol) {
  if (got.size() != want.size())
    return "sizes differ: " + std::to_string(got.size()) + " vs " + std::to_string(want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    double const d = std::abs(static_cast<double>(got[i]) - want[i]);
    if (!(d <= atol + rtol * std::abs(static_cast<double>(want[i]))))
      return "element " + std::to_string(i) + ": " + std::to_string(got[i]) + " vs " + std::to_string(want[i]);
  }
  return std::nullopt;
}

// The zoo's CNN (convolutions, BatchNorm, pooling, concat) the GPU training tests run. The first
// GPU run found them asking for a "resnet" the zoo never had; the host test below keeps every name
// they use buildable.
constexpr char kCnnModel[] = "inception";

TEST(CudaTestModels, TheZooModelsTheGpuTestsTrainExist) {
  for (std::string const model : {"mlp", kCnnModel}) {
    auto built = models::build_graph(model, models::Size::kTiny, 1);
    EXPECT_TRUE(built.is_ok()) << model << ": " << built.status().message();
  }
}

TEST(CudaCompare, TheComparisonRejectsAPerturbedResult) {
  std::vector<float> const want{1.f, -2.f, 3e-6f, 100.f};
  EXPECT_FALSE(first_mismatch(want, want, 1e-4, 1e-5).has_value());
  std::vector<float> off = want;
  off[3] *= 1.001f;  // 1e-3 relative: above the op tolerance
  EXPECT_TRUE(first_mismatch(off, want, 1e-4, 1e-5).has_value());
  off = want;
  off[1] = -off[1];
  EXPECT_TRUE(first_mismatch(off, want, 1e-4, 1e-5).has_value());
  EXPECT_TRUE(first_mismatch({1.f}, want, 1e-4, 1e-5).has_value());
}

// A tensor of `dtype` with small values, ties and signs: -5..5 (times 0.25 for floats), 0..10 for
// uint8, 0 and 1 for bool.
Tensor values_of(DType dtype, std::vector<int64_t> shape, int seed) {
  Tensor t(std::move(shape), dtype);
  for (int64_t i = 0; i < t.numel(); ++i) {
    int const v = static_cast<int>((i * 7 + seed) % 11) - 5;
    switch (dtype) {
      case DType::kFloat32:
        t.data<float>()[i] = 0.25f * static_cast<float>(v);
        break;
      case DType::kFloat64:
        t.data<double>()[i] = 0.25 * v;
        break;
      case DType::kInt64:
        t.data<int64_t>()[i] = v;
        break;
      case DType::kInt32:
        t.data<int32_t>()[i] = v;
        break;
      case DType::kInt8:
        t.data<int8_t>()[i] = static_cast<int8_t>(v);
        break;
      case DType::kUInt8:
        t.data<uint8_t>()[i] = static_cast<uint8_t>(v + 5);
        break;
      default:  // bool
        t.data<uint8_t>()[i] = v > 0 ? 1 : 0;
        break;
    }
  }
  return t;
}

Tensor bool_tensor(std::vector<int64_t> shape, std::vector<uint8_t> const& v) {
  Tensor t(std::move(shape), DType::kBool);
  for (std::size_t i = 0; i < v.size(); ++i) t.data<uint8_t>()[i] = v[i];
  return t;
}

struct Case {
  std::string label;
  std::function<OneOp()> make;
  bool training = true;
  std::vector<int> skip_inputs{};  // not differentiated (BatchNorm running statistics)
};

// Every other entry of the CUDA kernel table by the dtype of its data input (ids, masks, the byte
// types, float64), so a GPU run exercises every kernel instantiation: views, Casts to float32,
// comparisons, the boolean ops of uint8 masks, Where of a uint8 condition, integer arithmetic,
// ArgMax/ArgMin/CumSum of int32, the moves and index ops of ids and masks, the random ops' inputs.
template <typename Add>
void by_dtype_cases(Add const& add) {
  using D = DType;
  for (D d : {D::kFloat64, D::kInt64, D::kInt32, D::kInt8, D::kUInt8, D::kBool}) {
    std::string const n = std::string(" ") + graph::dtype_name(d);
    add("Reshape" + n, [d] {
      return make_op("Reshape", graph::ReshapeAttrs{{0, -1}, false}, {{"x", values_of(d, {2, 3, 2}, 1), kIn}}, 1, {d});
    });
    add("Flatten" + n, [d] {
      return make_op("Flatten", graph::FlattenAttrs{2}, {{"x", values_of(d, {2, 3, 2}, 2), kIn}}, 1, {d});
    });
    add("Squeeze" + n, [d] {
      return make_op("Squeeze", graph::SqueezeAttrs{{1}}, {{"x", values_of(d, {2, 1, 3}, 3), kIn}}, 1, {d});
    });
    add("Unsqueeze" + n, [d] {
      return make_op("Unsqueeze", graph::UnsqueezeAttrs{{0, 3}}, {{"x", values_of(d, {2, 3}, 4), kIn}}, 1, {d});
    });
    add("Identity" + n, [d] { return make_op("Identity", {}, {{"x", values_of(d, {2, 3}, 5), kIn}}, 1, {d}); });
    add("Cast" + n + " to float32", [d] {
      return make_op("Cast", graph::CastAttrs{1}, {{"x", values_of(d, {2, 5}, 6), kIn}}, 1, {D::kFloat32});
    });
    for (char const* r : {"RandomUniformLike", "RandomNormalLike"}) {
      graph::RandomAttrs a;
      a.kind = std::string(r) == "RandomUniformLike" ? graph::RandomKind::kUniform : graph::RandomKind::kNormal;
      add(std::string(r) + " of a" + n + " input", [r, a, d] {
        return make_op(r, a, {{"x", values_of(d, {4, 5}, 9), kIn}}, 1, {D::kFloat32});
      });
    }
    // The moves and index ops of ids, masks and float64 (copied as bytes): Expand, Trilu,
    // GatherElements and GatherND of any gathered dtype.
    add("Expand" + n, [d] {
      return make_op("Expand", graph::ExpandAttrs{{2, 3, 3}}, {{"x", values_of(d, {3, 1}, 22), kIn}}, 1, {d});
    });
    add("Trilu" + n + " upper", [d] {
      return make_op("Trilu", graph::TriluAttrs{true, 0}, {{"x", values_of(d, {3, 4}, 25), kIn}}, 1, {d});
    });
    add("GatherElements of" + n, [d] {
      return make_op("GatherElements", graph::GatherElementsAttrs{1},
                     {{"x", values_of(d, {2, 3}, 26), kIn}, {"i", int_tensor({2, 2}, {2, 0, -1, 1}), kIn}}, 1, {d});
    });
    add("GatherND of" + n, [d] {
      return make_op("GatherND", graph::GatherNDAttrs{},
                     {{"x", values_of(d, {3, 2}, 27), kIn}, {"i", int_tensor({2, 1}, {2, 0}), kIn}}, 1, {d});
    });
    if (d == D::kInt64 || d == D::kInt32 || d == D::kUInt8 || d == D::kBool) {  // index arithmetic's slices
      add("Slice" + n + " reversed", [d] {
        return make_op("Slice", graph::SliceAttrs{{1, -1}, {100, 0}, {0, 1}, {1, -1}},
                       {{"x", values_of(d, {3, 4}, 28), kIn}}, 1, {d});
      });
      // XLNet's ids transposed to [T, N]; HF's causal mask gathered from a flattened one.
      add("Transpose" + n, [d] {
        return make_op("Transpose", graph::TransposeAttrs{{2, 0, 1}}, {{"x", values_of(d, {2, 3, 4}, 29), kIn}}, 1,
                       {d});
      });
      add("Gather of" + n + " along axis 1", [d] {
        return make_op("Gather", graph::GatherAttrs{1},
                       {{"x", values_of(d, {2, 4, 3}, 30), kIn}, {"i", int_tensor({2, 2}, {3, -1, 0, 2}), kIn}}, 1,
                       {d});
      });
    }
    if (d == D::kFloat64) continue;
    for (char const* t : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"})
      add(std::string(t) + n + " broadcast", [t, d] {
        return make_op(t, {}, {{"a", values_of(d, {2, 3}, 7), kIn}, {"b", values_of(d, {3}, 8), kIn}}, 1, {D::kBool});
      });
  }
  // Dropout's masks are uint8: the boolean ops and Where's condition take them.
  for (char const* t : {"And", "Or", "Xor"})
    add(std::string(t) + " uint8 masks", [t] {
      return make_op(t, {}, {{"a", values_of(D::kUInt8, {2, 3}, 10), kIn}, {"b", values_of(D::kUInt8, {3}, 11), kIn}},
                     1, {D::kBool});
    });
  add("Not uint8 mask", [] {
    return make_op("Not", {}, {{"a", values_of(D::kUInt8, {2, 3}, 12), kIn}}, 1, {D::kBool});
  });
  add("Where uint8 condition", [] {
    return make_op("Where", {},
                   {{"c", values_of(D::kUInt8, {3, 1}, 13), kIn},
                    {"x", random_tensor({2, 3, 4}, 14), kIn},
                    {"y", random_tensor({4}, 15), kW}});
  });
  // Integer arithmetic of the other index type, and ArgMax/ArgMin/CumSum of int32.
  for (char const* t : {"Add", "Sub", "Mul"})
    for (D d : {D::kInt64, D::kInt32})
      add(std::string(t) + " " + graph::dtype_name(d) + " broadcast", [t, d] {
        return make_op(t, {}, {{"a", values_of(d, {2, 3}, 16), kIn}, {"b", values_of(d, {3}, 17), kIn}}, 1, {d});
      });
  for (char const* op : {"ArgMax", "ArgMin"})
    add(std::string(op) + " int32", [op] {
      return make_op(op, graph::ArgReduceAttrs{1, true, false}, {{"x", values_of(D::kInt32, {2, 5}, 18), kIn}}, 1,
                     {D::kInt64});
    });
  for (D d : {D::kInt64, D::kInt32})
    add(std::string("TopK ") + graph::dtype_name(d) + " smallest", [d] {
      return make_op("TopK", graph::TopKAttrs{1, 3, false}, {{"x", values_of(d, {2, 5}, 28), kIn}}, 2, {d, D::kInt64});
    });
  // OneHot of int64, int32 and float32 (truncated) indices into float32, int64 and int32 values.
  add("OneHot int64 ids axis -1", [] {
    return make_op("OneHot", graph::OneHotAttrs{2, 5, 0.1, 0.9}, {{"i", int_tensor({2, 3}, {0, 4, -1, 7, 2, -6}), kIn}},
                   1, {D::kFloat32});
  });
  add("OneHot int32 ids axis 1 to int64", [] {
    return make_op("OneHot", graph::OneHotAttrs{1, 4, 0, 1}, {{"i", values_of(D::kInt32, {3, 2}, 29), kIn}}, 1,
                   {D::kInt64});
  });
  add("OneHot float32 ids to int32", [] {
    return make_op("OneHot", graph::OneHotAttrs{1, 6, 2, 5}, {{"i", random_tensor({4}, 30, 0.f, 5.f), kIn}}, 1,
                   {D::kInt32});
  });
  add("CumSum int32", [] {
    return make_op("CumSum", graph::CumSumAttrs{1, false, false}, {{"x", values_of(D::kInt32, {2, 4}, 19), kIn}}, 1,
                   {D::kInt32});
  });
  // Neg (signed types), Abs and Sign of integers.
  for (D d : {D::kInt64, D::kInt32, D::kInt8, D::kUInt8})
    for (char const* op : {"Neg", "Abs", "Sign"}) {
      if (d == D::kUInt8 && std::string(op) == "Neg") continue;
      add(std::string(op) + " " + graph::dtype_name(d), [d, op] {
        return make_op(op, {}, {{"x", values_of(d, {2, 5}, 36), kIn}}, 1, {d});
      });
    }
  // The bitwise family: two operands broadcast, shifts both ways (a negative or too wide shift
  // gives 0 on both backends), Not.
  for (D d : {D::kInt64, D::kInt32, D::kInt8, D::kUInt8}) {
    std::string const n = std::string(" ") + graph::dtype_name(d);
    for (char const* op : {"BitwiseAnd", "BitwiseOr", "BitwiseXor"})
      add(op + n + " broadcast", [d, op] {
        return make_op(op, {}, {{"a", values_of(d, {2, 3}, 40), kIn}, {"b", values_of(d, {3}, 41), kIn}}, 1, {d});
      });
    for (bool left : {true, false})
      add(std::string("BitShift ") + (left ? "left" : "right") + n, [d, left] {
        return make_op("BitShift", graph::BitShiftAttrs{left},
                       {{"x", values_of(d, {2, 4}, 42), kIn}, {"s", values_of(d, {4}, 43), kIn}}, 1, {d});
      });
    add("BitwiseNot" + n, [d] { return make_op("BitwiseNot", {}, {{"x", values_of(d, {2, 5}, 44), kIn}}, 1, {d}); });
  }
  // ReduceSum, ReduceProd, ReduceMax and ReduceMin of integers (XLM's sequence lengths), Max and Min
  // of bool masks: over an inner axis, two outer axes (kept), and every axis.
  for (D d : {D::kInt64, D::kInt32, D::kInt8, D::kUInt8, D::kBool})
    for (char const* op : {"ReduceSum", "ReduceProd", "ReduceMax", "ReduceMin"}) {
      if (d == D::kBool && (std::string(op) == "ReduceSum" || std::string(op) == "ReduceProd")) continue;
      std::string const n = std::string(op) + " " + graph::dtype_name(d);
      add(n + " axis 2", [d, op] {
        return make_op(op, graph::ReduceAttrs{{2}, false}, {{"x", values_of(d, {2, 3, 4}, 37), kIn}}, 1, {d});
      });
      add(n + " axes 0 and 2 kept", [d, op] {
        return make_op(op, graph::ReduceAttrs{{0, 2}, true}, {{"x", values_of(d, {2, 3, 4}, 38), kIn}}, 1, {d});
      });
      add(n + " every axis", [d, op] {
        return make_op(op, graph::ReduceAttrs{{0, 1}, false}, {{"x", values_of(d, {3, 5}, 39), kIn}}, 1, {d});
      });
    }
  // Clip of integers: both bounds, one, and crossed bounds (every element the upper).
  // (values_of's scalar of seed s is s % 11 - 5: bounds -2 and 3, 1, and 5 over 0.)
  for (D d : {D::kInt64, D::kInt32, D::kInt8, D::kUInt8}) {
    std::string const n = std::string(" ") + graph::dtype_name(d);
    auto clip = [d](int lo_seed, int hi_seed) {
      return make_op("Clip", graph::ClipAttrs{},
                     {{"x", values_of(d, {2, 5}, 31), kIn},
                      {"lo", lo_seed < 0 ? Tensor() : values_of(d, {}, lo_seed), graph::TensorRole::kConstant},
                      {"hi", values_of(d, {}, hi_seed), graph::TensorRole::kConstant}},
                     1, {d});
    };
    add("Clip" + n, [clip] { return clip(3, 8); });
    add("Clip" + n + " upper bound only", [clip] { return clip(-1, 6); });
    add("Clip" + n + " crossed bounds", [clip] { return clip(10, 5); });
  }
  // Concat, Pad and Tile of ids and masks.
  for (D d : {D::kInt64, D::kInt32, D::kUInt8, D::kBool}) {
    std::string const n = std::string(" ") + graph::dtype_name(d);
    add("Concat" + n, [d] {
      return make_op("Concat", graph::ConcatAttrs{1},
                     {{"a", values_of(d, {2, 1}, 20), kIn}, {"b", values_of(d, {2, 2}, 21), kIn}}, 1, {d});
    });
    if (d != D::kUInt8) {
      add("Pad" + n + " edge", [d] {
        return make_op("Pad", graph::PadAttrs{graph::PadMode::kEdge, {1, 0, 0, 2}, 0.f},
                       {{"x", values_of(d, {2, 3}, 23), kIn}}, 1, {d});
      });
      add("Tile" + n, [d] {
        return make_op("Tile", graph::TileAttrs{{2, 1}}, {{"x", values_of(d, {2, 3}, 24), kIn}}, 1, {d});
      });
    }
  }
}

std::vector<Case> cases() {
  std::vector<Case> c;
  auto add = [&](std::string label, std::function<OneOp()> make, bool training = true, std::vector<int> skip = {}) {
    c.push_back({std::move(label), std::move(make), training, std::move(skip)});
  };
  add("Conv bias", [] {
    return make_op("Conv", graph::ConvAttrs{{3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1, true},
                   {{"x", random_tensor({2, 3, 5, 5}, 1), kIn},
                    {"w", random_tensor({4, 3, 3, 3}, 2), kW},
                    {"b", random_tensor({4}, 3), kW}});
  });
  add("Conv grouped strided dilated", [] {
    return make_op("Conv", graph::ConvAttrs{{3, 3}, {2, 2}, {2, 1}, {2, 1, 1, 0}, 2, false},
                   {{"x", random_tensor({1, 4, 7, 6}, 4), kIn}, {"w", random_tensor({4, 2, 3, 3}, 5), kW}});
  });
  // TensorFlow's SAME at stride 2: more padding at the end than the beginning, the geometry whose
  // weight gradient cuDNN got wrong for a ConvTranspose on the H200 (now run on symmetric padding).
  add("Conv stride 2 pads end > begin", [] {
    return make_op("Conv", graph::ConvAttrs{{3, 3}, {2, 2}, {1, 1}, {0, 0, 1, 1}, 1, true},
                   {{"x", random_tensor({2, 3, 6, 6}, 6), kIn},
                    {"w", random_tensor({4, 3, 3, 3}, 7), kW},
                    {"b", random_tensor({4}, 11), kW}});
  });
  add("Gemm transB alpha beta", [] {
    return make_op(
        "Gemm", graph::GemmAttrs{0.7f, 1.3f, false, true, true},
        {{"a", random_tensor({3, 4}, 8), kIn}, {"b", random_tensor({5, 4}, 9), kW}, {"c", random_tensor({5}, 10), kW}});
  });
  add("Gemm transA bias matrix", [] {
    return make_op("Gemm", graph::GemmAttrs{1.f, 1.f, true, false, true},
                   {{"a", random_tensor({4, 3}, 11), kIn},
                    {"b", random_tensor({4, 5}, 12), kIn},
                    {"c", random_tensor({3, 5}, 13), kIn}});
  });
  add("MatMul weight", [] {
    return make_op("MatMul", graph::MatMulAttrs{},
                   {{"a", random_tensor({2, 3, 4}, 17), kIn}, {"b", random_tensor({4, 5}, 18), kW}});
  });
  add("MatMul batched broadcast", [] {
    return make_op("MatMul", graph::MatMulAttrs{},
                   {{"a", random_tensor({2, 1, 3, 4}, 19), kIn}, {"b", random_tensor({3, 4, 2}, 20), kIn}});
  });
  add("MatMul vector", [] {
    return make_op("MatMul", graph::MatMulAttrs{},
                   {{"a", random_tensor({4}, 21), kIn}, {"b", random_tensor({2, 4, 3}, 22), kIn}});
  });
  add("MatMul transposed B scaled (rows folded)", [] {
    return make_op("MatMul", graph::MatMulAttrs{false, true, 0.7f},
                   {{"a", random_tensor({2, 3, 4}, 26), kIn}, {"b", random_tensor({5, 4}, 27), kW}});
  });
  add("MatMul both transposed broadcast scaled", [] {
    return make_op("MatMul", graph::MatMulAttrs{true, true, -1.3f},
                   {{"a", random_tensor({2, 1, 4, 3}, 28), kIn}, {"b", random_tensor({3, 2, 4}, 29), kIn}});
  });
  add("MatMul transposed A by a matrix", [] {
    return make_op("MatMul", graph::MatMulAttrs{true, false, 1.f},
                   {{"a", random_tensor({2, 4, 3}, 30), kIn}, {"b", random_tensor({4, 5}, 31), kW}});
  });
  add("MaxPool", [] {
    return make_op("MaxPool", graph::PoolAttrs{graph::PoolKind::kMax, {3, 3}, {2, 2}, {1, 1, 1, 1}, false, false, {}},
                   {{"x", distinct_tensor({1, 2, 5, 5}, 25), kIn}});
  });
  add("MaxPool ceil", [] {
    return make_op("MaxPool", graph::PoolAttrs{graph::PoolKind::kMax, {2, 2}, {2, 2}, {0, 0, 0, 0}, false, true, {}},
                   {{"x", distinct_tensor({1, 2, 5, 5}, 26), kIn}});
  });
  add("MaxPool with Indices, two images", [] {  // torch's return_indices: indices into the whole input
    return make_op("MaxPool", graph::PoolAttrs{graph::PoolKind::kMax, {2, 2}, {2, 2}, {1, 0, 0, 1}, false, true, {}},
                   {{"x", distinct_tensor({2, 2, 5, 4}, 37), kIn}}, 2, {DType::kFloat32, DType::kInt64});
  });
  add("MaxPool with column-major Indices (storage_order 1)", [] {
    return make_op("MaxPool",
                   graph::PoolAttrs{graph::PoolKind::kMax, {2, 3}, {1, 2}, {0, 1, 1, 0}, false, false, {}, true},
                   {{"x", distinct_tensor({1, 3, 4, 5}, 38), kIn}}, 2, {DType::kFloat32, DType::kInt64});
  });
  add("MaxPool dilated", [] {
    return make_op("MaxPool",
                   graph::PoolAttrs{graph::PoolKind::kMax, {2, 3}, {1, 2}, {1, 0, 0, 2}, false, false, {2, 2}},
                   {{"x", distinct_tensor({1, 2, 5, 7}, 35), kIn}});
  });
  add("AveragePool dilated ceil", [] {
    return make_op("AveragePool",
                   graph::PoolAttrs{graph::PoolKind::kAverage, {2, 2}, {2, 1}, {1, 1, 1, 1}, false, true, {3, 2}},
                   {{"x", random_tensor({2, 2, 6, 5}, 36), kIn}});
  });
  add("AveragePool include pad ceil", [] {
    return make_op("AveragePool",
                   graph::PoolAttrs{graph::PoolKind::kAverage, {3, 3}, {2, 2}, {1, 1, 1, 1}, true, true, {}},
                   {{"x", random_tensor({1, 2, 6, 7}, 38), kIn}});
  });
  add("AveragePool include pad", [] {
    return make_op("AveragePool",
                   graph::PoolAttrs{graph::PoolKind::kAverage, {3, 3}, {2, 2}, {1, 1, 1, 1}, true, false, {}},
                   {{"x", random_tensor({2, 2, 5, 5}, 28), kIn}});
  });
  add("GlobalAveragePool", [] {
    return make_op("GlobalAveragePool", graph::PoolAttrs{graph::PoolKind::kGlobalAverage, {}, {}, {}, false, false, {}},
                   {{"x", random_tensor({2, 3, 4, 3}, 29), kIn}});
  });
  add("BatchNormalization training",
      [] {
        return make_op("BatchNormalization", graph::BatchNormAttrs{1e-5f, 0.9f, true},
                       {{"x", random_tensor({3, 2, 2, 3}, 30), kIn},
                        {"s", random_tensor({2}, 31), kW},
                        {"b", random_tensor({2}, 32), kW},
                        {"m", random_tensor({2}, 33), kConst},
                        {"v", random_tensor({2}, 34, 0.5f, 1.f, true), kConst}});
      },
      true, {3, 4});
  add("BatchNormalization inference",
      [] {
        return make_op("BatchNormalization", graph::BatchNormAttrs{1e-5f, 0.9f, false},
                       {{"x", random_tensor({2, 3, 2, 2}, 35), kIn},
                        {"s", random_tensor({3}, 36), kW},
                        {"b", random_tensor({3}, 37), kW},
                        {"m", random_tensor({3}, 38), kConst},
                        {"v", random_tensor({3}, 39, 0.5f, 1.f, true), kConst}});
      },
      false, {3, 4});
  // The two shapes above swapped between the modes (cuDNN refused both on an H100; the backend's
  // own kernels run them), and one with more channels, which cuDNN may well run itself.
  add("BatchNormalization training 3 channels",
      [] {
        return make_op("BatchNormalization", graph::BatchNormAttrs{1e-5f, 0.9f, true},
                       {{"x", random_tensor({2, 3, 2, 2}, 150), kIn},
                        {"s", random_tensor({3}, 151), kW},
                        {"b", random_tensor({3}, 152), kW},
                        {"m", random_tensor({3}, 153), kConst},
                        {"v", random_tensor({3}, 154, 0.5f, 1.f, true), kConst}});
      },
      true, {3, 4});
  add("BatchNormalization inference 2 channels",
      [] {
        return make_op("BatchNormalization", graph::BatchNormAttrs{1e-5f, 0.9f, false},
                       {{"x", random_tensor({3, 2, 2, 3}, 155), kIn},
                        {"s", random_tensor({2}, 156), kW},
                        {"b", random_tensor({2}, 157), kW},
                        {"m", random_tensor({2}, 158), kConst},
                        {"v", random_tensor({2}, 159, 0.5f, 1.f, true), kConst}});
      },
      false, {3, 4});
  add("BatchNormalization training 32 channels",
      [] {
        return make_op("BatchNormalization", graph::BatchNormAttrs{1e-5f, 0.9f, true},
                       {{"x", random_tensor({4, 32, 5, 5}, 160), kIn},
                        {"s", random_tensor({32}, 161), kW},
                        {"b", random_tensor({32}, 162), kW},
                        {"m", random_tensor({32}, 163), kConst},
                        {"v", random_tensor({32}, 164, 0.5f, 1.f, true), kConst}});
      },
      true, {3, 4});
  // A Relu fused into BatchNormalization (the importer fuses every BatchNorm+Relu): on cuDNN's
  // graphs the Relu is a pass of its own and dy is masked before cuDNN's backward; on our kernels
  // (the 2-channel shape cuDNN refused, and every case in the BatchNorm-on-our-kernels test) the
  // normalisation's own passes clip y and mask dy.
  for (bool training : {true, false})
    for (int64_t channels : {2, 32})
      add(std::string("BatchNormalization with a fused Relu, ") + (training ? "training, " : "inference, ") +
              std::to_string(channels) + " channels",
          [training, channels] {
            uint32_t const seed = 170 + static_cast<uint32_t>(channels) + (training ? 0 : 7);
            return make_op("BatchNormalization", graph::BatchNormAttrs{1e-5f, 0.9f, training, true},
                           {{"x", random_tensor({3, channels, 4, 3}, seed), kIn},
                            {"s", random_tensor({channels}, seed + 1, 0.5f, 1.5f), kW},
                            {"b", random_tensor({channels}, seed + 2), kW},
                            {"m", random_tensor({channels}, seed + 3), kConst},
                            {"v", random_tensor({channels}, seed + 4, 0.5f, 1.f, true), kConst}});
          },
          training, {3, 4});
  // A residual block's tail fused in too (BatchNormAttrs::residual): y = max(0, BatchNorm(x) + z).
  for (bool training : {true, false})
    for (int64_t channels : {2, 32})
      add(std::string("BatchNormalization with a fused residual and Relu, ") +
              (training ? "training, " : "inference, ") + std::to_string(channels) + " channels",
          [training, channels] {
            uint32_t const seed = 190 + static_cast<uint32_t>(channels) + (training ? 0 : 7);
            return make_op("BatchNormalization", graph::BatchNormAttrs{1e-5f, 0.9f, training, true, true},
                           {{"x", random_tensor({3, channels, 4, 3}, seed), kIn},
                            {"s", random_tensor({channels}, seed + 1, 0.5f, 1.5f), kW},
                            {"b", random_tensor({channels}, seed + 2), kW},
                            {"m", random_tensor({channels}, seed + 3), kConst},
                            {"v", random_tensor({channels}, seed + 4, 0.5f, 1.f, true), kConst},
                            {"z", random_tensor({3, channels, 4, 3}, seed + 5), kIn}});
          },
          training, {3, 4});
  add("LayerNormalization", [] {
    return make_op("LayerNormalization", graph::LayerNormAttrs{2, 1e-5f, true},
                   {{"x", random_tensor({2, 3, 5}, 40), kIn},
                    {"s", random_tensor({5}, 41), kW},
                    {"b", random_tensor({5}, 42), kW}});
  });
  add("LayerNormalization two axes no bias", [] {
    return make_op("LayerNormalization", graph::LayerNormAttrs{1, 1e-5f, false},
                   {{"x", random_tensor({2, 3, 2}, 43), kIn}, {"s", random_tensor({3, 2}, 44), kW}});
  });
  add("Softmax axis 1", [] {
    return make_op("Softmax", graph::SoftmaxAttrs{1}, {{"x", random_tensor({2, 4, 3}, 45), kIn}});
  });
  add("Softmax last axis", [] {
    return make_op("Softmax", graph::SoftmaxAttrs{2}, {{"x", random_tensor({2, 4, 3}, 46), kIn}});
  });
  for (char const* t : {"Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Abs", "Neg"})
    add(t, [t] { return make_op(t, {}, {{"x", random_tensor({3, 7}, 47), kIn}}); });
  add("LeakyRelu", [] {
    return make_op("LeakyRelu", graph::LeakyReluAttrs{0.2f}, {{"x", random_tensor({3, 7}, 48), kIn}});
  });
  add("Gelu erf", [] { return make_op("Gelu", graph::GeluAttrs{false}, {{"x", random_tensor({3, 7}, 49), kIn}}); });
  add("Gelu tanh", [] { return make_op("Gelu", graph::GeluAttrs{true}, {{"x", random_tensor({3, 7}, 50), kIn}}); });
  for (char const* t : {"Sqrt", "Log"})
    add(t, [t] { return make_op(t, {}, {{"x", random_tensor({3, 7}, 51, 0.5f, 2.f, true), kIn}}); });
  add("Pow constant", [] {
    return make_op(
        "Pow", {},
        {{"x", random_tensor({2, 5}, 52, 0.5f, 2.f, true), kIn}, {"e", Tensor::from_floats({}, {3.f}), kConst}});
  });
  add("Pow tensor exponent", [] {
    return make_op("Pow", {},
                   {{"x", random_tensor({2, 3}, 79, 0.5f, 2.f, true), kIn}, {"e", random_tensor({3}, 80), kIn}});
  });
  add("Pow weight exponent", [] {
    return make_op("Pow", {},
                   {{"x", random_tensor({3}, 81, 0.5f, 2.f, true), kIn}, {"e", random_tensor({2, 3}, 82), kW}});
  });
  for (char const* t : {"Add", "Sub", "Mul", "Div"}) {
    add(std::string(t) + " broadcast", [t] {
      return make_op(t, {},
                     {{"a", random_tensor({2, 3, 4}, 53), kIn}, {"b", random_tensor({3, 1}, 54, 0.5f, 1.f), kIn}});
    });
    add(std::string(t) + " weight", [t] {
      return make_op(t, {},
                     {{"a", random_tensor({2, 1, 4}, 57), kIn}, {"b", random_tensor({3, 1}, 58, 0.5f, 1.f), kW}});
    });
  }
  // The other activations (hd::Pointwise), each inside its domain.
  struct Pw {
    char const* type;
    graph::OpAttrs attrs;
    float lo, hi;
    bool positive;
  };
  for (Pw const& p : std::vector<Pw>{{"Selu", graph::ActivationAttrs{1.6733f, 0.f, 1.0507f}, 0.1f, 1.f, false},
                                     {"Celu", graph::ActivationAttrs{0.7f}, 0.1f, 1.f, false},
                                     {"Softsign", {}, 0.1f, 1.f, false},
                                     {"HardSigmoid", graph::ActivationAttrs{0.2f, 0.5f}, 0.1f, 1.f, false},
                                     {"ThresholdedRelu", graph::ActivationAttrs{0.5f}, 0.1f, 1.f, false},
                                     {"Shrink", graph::ActivationAttrs{0.5f, 0.2f}, 0.1f, 1.f, false},
                                     {"Sin", {}, 0.1f, 1.f, false},
                                     {"Cos", {}, 0.1f, 1.f, false},
                                     {"Tan", {}, 0.1f, 1.f, false},
                                     {"Asin", {}, 0.05f, 0.9f, false},
                                     {"Acos", {}, 0.05f, 0.9f, false},
                                     {"Atan", {}, 0.1f, 1.f, false},
                                     {"Sinh", {}, 0.1f, 1.f, false},
                                     {"Cosh", {}, 0.1f, 1.f, false},
                                     {"Asinh", {}, 0.1f, 1.f, false},
                                     {"Acosh", {}, 1.1f, 3.f, true},
                                     {"Atanh", {}, 0.05f, 0.9f, false},
                                     {"Sign", {}, 0.1f, 1.f, false},
                                     {"Floor", {}, 0.1f, 3.f, false},
                                     {"Ceil", {}, 0.1f, 3.f, false},
                                     {"Round", {}, 0.1f, 3.f, false},
                                     {"Clip", graph::ClipAttrs{-0.5f, 0.5f}, 0.1f, 1.f, false},
                                     {"HardSwish", {}, 0.1f, 4.5f, false},
                                     {"Softplus", {}, 0.1f, 1.f, false},
                                     {"Reciprocal", {}, 0.3f, 3.f, false},
                                     {"Elu", graph::ActivationAttrs{0.8f}, 0.1f, 1.f, false}})
    add(p.type, [p] {
      return make_op(p.type, p.attrs, {{"x", random_tensor({3, 7}, 83, p.lo, p.hi, p.positive), kIn}});
    });
  // Clip with bounds computed at run time (inputs, not attributes): both bounds get gradients.
  add("Clip with bounds as inputs", [] {
    Tensor lo(std::vector<int64_t>{}), hi(std::vector<int64_t>{1});
    lo.data<float>()[0] = -0.4f;
    hi.data<float>()[0] = 0.3f;
    return make_op("Clip", graph::ClipAttrs{},
                   {{"x", random_tensor({3, 7}, 95), kIn}, {"lo", lo, kW}, {"hi", hi, kIn}});
  });
  add("Clip with only a runtime max", [] {
    Tensor hi(std::vector<int64_t>{1});
    hi.data<float>()[0] = 0.2f;
    return make_op("Clip", graph::ClipAttrs{},
                   {{"x", random_tensor({3, 7}, 96), kIn}, {"", Tensor(), kIn}, {"hi", hi, kIn}});
  });
  // The logic family: comparisons of floats and of int64 ids, the boolean operators on masks, and
  // Where with a broadcast condition (its gradient to x and y summed down).
  for (char const* t : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"})
    add(std::string(t) + " broadcast", [t] {
      Tensor a = random_tensor({2, 3, 4}, 84);
      Tensor b = random_tensor({3, 1}, 85);
      a.data<float>()[0] = b.data<float>()[0];  // one tie, where Equal and the *OrEqual ops differ
      return make_op(t, {}, {{"a", a, kIn}, {"b", b, kIn}});
    });
  add("Equal int64 ids", [] {
    return make_op("Equal", {},
                   {{"a", int_tensor({2, 4}, {0, 3, 0, 5, 7, 0, 1, 0}), kIn}, {"b", int_tensor({}, {0}), kIn}});
  });
  add("Less int8 (signed bytes)", [] {
    return make_op("Less", {},
                   {{"a", typed_tensor<int8_t>({4}, DType::kInt8, {-128, -1, 5, 127}), kIn},
                    {"b", typed_tensor<int8_t>({1}, DType::kInt8, {0}), kIn}});
  });
  add("GreaterOrEqual uint8 (unsigned bytes)", [] {
    return make_op("GreaterOrEqual", {},
                   {{"a", typed_tensor<uint8_t>({4}, DType::kUInt8, {0, 127, 128, 255}), kIn},
                    {"b", typed_tensor<uint8_t>({1}, DType::kUInt8, {128}), kIn}});
  });
  add("Where int8", [] {
    return make_op("Where", {},
                   {{"c", bool_tensor({3}, {1, 0, 1}), kIn},
                    {"x", typed_tensor<int8_t>({2, 3}, DType::kInt8, {-5, 4, 3, 2, 1, -128}), kIn},
                    {"y", typed_tensor<int8_t>({3}, DType::kInt8, {9, 8, 7}), kIn}},
                   1, {DType::kInt8});
  });
  for (char const* t : {"And", "Or", "Xor"})
    add(t, [t] {
      return make_op(t, {},
                     {{"a", bool_tensor({2, 3}, {1, 0, 1, 0, 1, 1}), kIn}, {"b", bool_tensor({3}, {1, 1, 0}), kIn}});
    });
  add("Not", [] { return make_op("Not", {}, {{"a", bool_tensor({2, 3}, {1, 0, 1, 0, 0, 1}), kIn}}); });
  add("Where broadcast", [] {
    return make_op("Where", {},
                   {{"c", bool_tensor({3, 1}, {1, 0, 1}), kIn},
                    {"x", random_tensor({2, 3, 4}, 86), kIn},
                    {"y", random_tensor({4}, 87), kW}});
  });
  // Casts between types (float to int truncates; to bool is nonzero), views and Expand of ids and
  // masks, ConstantOfShape and Range (static here: the sweep has no micro-batch), and the random
  // ops (the CPU's draws, bit for bit).
  add("Cast float to int64", [] {
    return make_op("Cast", graph::CastAttrs{7}, {{"x", random_tensor({2, 5}, 88, 0.1f, 3.f), kIn}}, 1, {DType::kInt64});
  });
  add("Cast bool to float", [] {
    return make_op("Cast", graph::CastAttrs{1}, {{"m", bool_tensor({2, 3}, {1, 0, 0, 1, 1, 0}), kIn}}, 1,
                   {DType::kFloat32});
  });
  add("Cast int64 to int32", [] {
    return make_op("Cast", graph::CastAttrs{6}, {{"i", int_tensor({4}, {0, -3, 7, 1}), kIn}}, 1, {DType::kInt32});
  });
  add("Cast float to bool", [] {
    Tensor x = random_tensor({2, 3}, 89);
    x.data<float>()[2] = 0.f;
    return make_op("Cast", graph::CastAttrs{9}, {{"x", x, kIn}}, 1, {DType::kBool});
  });
  add("Cast float to float64", [] {
    return make_op("Cast", graph::CastAttrs{11}, {{"x", random_tensor({2, 3}, 92), kIn}}, 1, {DType::kFloat64});
  });
  add("Cast float64 to float", [] {
    return make_op("Cast", graph::CastAttrs{1},
                   {{"d", typed_tensor<double>({4}, DType::kFloat64, {0.1, -3e38, 3.5, 1e-50}), kIn}}, 1,
                   {DType::kFloat32});
  });
  add("Cast float to int8 and uint8 saturate, NaN gives 0", [] {
    Tensor x = random_tensor({2, 4}, 93, 0.1f, 3.f);
    x.data<float>()[0] = 1000.f;
    x.data<float>()[1] = -1000.f;
    x.data<float>()[2] = std::nanf("");
    x.data<float>()[3] = -7.9f;
    return make_op("Cast", graph::CastAttrs{3}, {{"x", x, kIn}}, 1, {DType::kInt8});
  });
  add("Cast float to uint8 saturates", [] {
    Tensor x = random_tensor({2, 3}, 94, 0.1f, 3.f);
    x.data<float>()[0] = 300.f;
    x.data<float>()[1] = -4.f;
    return make_op("Cast", graph::CastAttrs{2}, {{"x", x, kIn}}, 1, {DType::kUInt8});
  });
  add("Cast int8 to int64", [] {
    return make_op("Cast", graph::CastAttrs{7}, {{"b", typed_tensor<int8_t>({3}, DType::kInt8, {-128, 0, 127}), kIn}},
                   1, {DType::kInt64});
  });
  add("Unsqueeze int64", [] {
    return make_op("Unsqueeze", graph::UnsqueezeAttrs{{1}}, {{"i", int_tensor({3}, {4, 0, 2}), kIn}}, 1,
                   {DType::kInt64});
  });
  add("Expand bool mask", [] {
    return make_op("Expand", graph::ExpandAttrs{{2, 3, 3}},
                   {{"m", bool_tensor({3, 3}, {1, 0, 0, 1, 1, 0, 1, 1, 1}), kIn}}, 1, {DType::kBool});
  });
  add("ConstantOfShape", [] { return make_op("ConstantOfShape", graph::ConstantOfShapeAttrs{{2, 3}, 1.5, 1}, {}); });
  add("Range", [] { return make_op("Range", graph::RangeAttrs{2, 11, 0, 3}, {}, 1, {DType::kInt64}); });
  for (auto kind : {graph::RandomKind::kUniform, graph::RandomKind::kNormal}) {
    graph::RandomAttrs a;
    a.kind = kind;
    add(kind == graph::RandomKind::kUniform ? "RandomUniformLike" : "RandomNormalLike", [a] {
      return make_op(a.kind == graph::RandomKind::kUniform ? "RandomUniformLike" : "RandomNormalLike", a,
                     {{"x", random_tensor({4, 5}, 90), kIn}});
    });
  }
  add("Bernoulli", [] {
    graph::RandomAttrs a;
    a.kind = graph::RandomKind::kBernoulli;
    return make_op("Bernoulli", a, {{"p", random_tensor({4, 5}, 91, 0.1f, 0.9f, true), kIn}});
  });
  add("Dropout training", [] {
    return make_op("Dropout", graph::DropoutAttrs{0.3f, true}, {{"x", random_tensor({4, 6}, 59), kIn}}, 2);
  });
  add(
      "Dropout inference",
      [] {
        return make_op("Dropout", graph::DropoutAttrs{0.3f, false}, {{"x", random_tensor({4, 6}, 60), kIn}});
      },
      false);
  add("Reshape", [] {
    return make_op("Reshape", graph::ReshapeAttrs{{0, -1}, false}, {{"x", random_tensor({2, 3, 2}, 61), kIn}});
  });
  add("Flatten", [] { return make_op("Flatten", graph::FlattenAttrs{2}, {{"x", random_tensor({2, 3, 2}, 62), kIn}}); });
  add("Squeeze", [] {
    return make_op("Squeeze", graph::SqueezeAttrs{{1}}, {{"x", random_tensor({2, 1, 3}, 63), kIn}});
  });
  add("Unsqueeze", [] {
    return make_op("Unsqueeze", graph::UnsqueezeAttrs{{0, 3}}, {{"x", random_tensor({2, 3}, 64), kIn}});
  });
  add("Identity", [] { return make_op("Identity", {}, {{"x", random_tensor({2, 3}, 65), kIn}}); });
  add("Cast", [] { return make_op("Cast", graph::CastAttrs{1}, {{"x", random_tensor({2, 3}, 66), kIn}}); });
  add("Expand", [] {
    return make_op("Expand", graph::ExpandAttrs{{2, 3, 4}}, {{"x", random_tensor({3, 1}, 67), kIn}});
  });
  add("Transpose", [] {
    return make_op("Transpose", graph::TransposeAttrs{{2, 0, 1}}, {{"x", random_tensor({2, 3, 4}, 68), kIn}});
  });
  add("Concat", [] {
    return make_op("Concat", graph::ConcatAttrs{1},
                   {{"a", random_tensor({2, 1, 3}, 69), kIn},
                    {"b", random_tensor({2, 3, 3}, 70), kW},
                    {"c", random_tensor({2, 2, 3}, 71), kIn}});
  });
  // Ids, positions and index pairs built per micro-batch: integer arithmetic (the CPU's per-element
  // function, two's-complement wrap, truncating division) and integer and bool Concat.
  add("Add int64 broadcast, wrapping", [] {
    int64_t const big = std::numeric_limits<int64_t>::max();
    return make_op("Add", {},
                   {{"a", int_tensor({2, 3}, {big, 1, -5, 0, 7, -2}), kIn}, {"b", int_tensor({3}, {1, 2, 3}), kIn}}, 1,
                   {DType::kInt64});
  });
  add("Sub int64", [] {
    return make_op("Sub", {},
                   {{"a", int_tensor({2, 2}, {5, -3, 0, 9}), kIn}, {"b", int_tensor({2, 2}, {7, 2, -4, 9}), kIn}}, 1,
                   {DType::kInt64});
  });
  add("Mul int32 mask broadcast", [] {  // RoBERTa's position ids: cumsum(mask) * mask
    return make_op("Mul", {},
                   {{"a", int32_tensor({2, 4}, {1, 2, 3, 4, 1, 2, 2, 3}), kIn},
                    {"b", int32_tensor({2, 4}, {1, 1, 1, 1, 1, 1, 0, 1}), kIn}},
                   1, {DType::kInt32});
  });
  add("Div int64 truncates toward zero, the lowest over -1 wraps", [] {
    int64_t const low = std::numeric_limits<int64_t>::lowest();
    return make_op("Div", {},
                   {{"a", int_tensor({4}, {low, -7, 7, 9}), kIn}, {"b", int_tensor({4}, {-1, 2, -2, 3}), kIn}}, 1,
                   {DType::kInt64});
  });
  add("Div int32 broadcast", [] {
    return make_op("Div", {},
                   {{"a", int32_tensor({2, 3}, {-9, 8, 7, 100, -1, 0}), kIn}, {"b", int32_tensor({1}, {4}), kIn}}, 1,
                   {DType::kInt32});
  });
  add("Max int64 of three inputs, broadcast, the extremes", [] {
    int64_t const big = std::numeric_limits<int64_t>::max(), low = std::numeric_limits<int64_t>::lowest();
    return make_op("Max", {},
                   {{"a", int_tensor({2, 3}, {big, -1, 5, low, 0, 7}), kIn},
                    {"b", int_tensor({3}, {1, 2, 3}), kIn},
                    {"c", int_tensor({2, 1}, {4, -9}), kIn}},
                   1, {DType::kInt64});
  });
  add("Max int32 broadcast", [] {
    return make_op("Max", {},
                   {{"a", int32_tensor({2, 3}, {-9, 8, 7, 100, -1, 0}), kIn}, {"b", int32_tensor({1}, {4}), kIn}}, 1,
                   {DType::kInt32});
  });
  add("Max int64 of one input (MaxViT's)", [] {
    return make_op("Max", {}, {{"a", int_tensor({2, 2}, {5, -3, 0, 9}), kIn}}, 1, {DType::kInt64});
  });
  add("Min int64", [] {
    return make_op("Min", {},
                   {{"a", int_tensor({2, 2}, {5, -3, 0, 9}), kIn}, {"b", int_tensor({2, 2}, {7, 2, -4, 9}), kIn}}, 1,
                   {DType::kInt64});
  });
  add("Min int32 of three inputs", [] {
    return make_op("Min", {},
                   {{"a", int32_tensor({3}, {3, -7, 2147483647}), kIn},
                    {"b", int32_tensor({3}, {1, 1, 1}), kIn},
                    {"c", int32_tensor({1}, {0}), kIn}},
                   1, {DType::kInt32});
  });
  add("Mod int64 floored (the divisor's sign), -1 and the lowest value", [] {
    int64_t const low = std::numeric_limits<int64_t>::lowest();
    return make_op(
        "Mod", graph::ModAttrs{false},
        {{"a", int_tensor({6}, {7, -7, 7, -7, low, 5}), kIn}, {"b", int_tensor({6}, {3, 3, -3, -3, -1, 1}), kIn}}, 1,
        {DType::kInt64});
  });
  add("Mod int32 fmod (the dividend's sign), broadcast", [] {
    return make_op(
        "Mod", graph::ModAttrs{true},
        {{"a", int32_tensor({2, 3}, {7, -7, 8, -9, 10, -11}), kIn}, {"b", int32_tensor({3}, {3, -4, 5}), kIn}}, 1,
        {DType::kInt32});
  });
  add("Mod int8 floored, -1 and the lowest value", [] {
    return make_op("Mod", graph::ModAttrs{false},
                   {{"a", typed_tensor<int8_t>({5}, DType::kInt8, {7, -7, 7, -128, 100}), kIn},
                    {"b", typed_tensor<int8_t>({5}, DType::kInt8, {3, 3, -3, -1, 127}), kIn}},
                   1, {DType::kInt8});
  });
  add("Mod uint8 (a divisor of 255 is not -1)", [] {
    return make_op("Mod", graph::ModAttrs{false},
                   {{"a", typed_tensor<uint8_t>({4}, DType::kUInt8, {7, 200, 254, 3}), kIn},
                    {"b", typed_tensor<uint8_t>({4}, DType::kUInt8, {3, 7, 255, 255}), kIn}},
                   1, {DType::kUInt8});
  });
  add("Concat int64 axis 1", [] {
    return make_op("Concat", graph::ConcatAttrs{1},
                   {{"a", int_tensor({2, 1}, {0, 1}), kIn}, {"b", int_tensor({2, 2}, {5, 6, 7, 8}), kIn}}, 1,
                   {DType::kInt64});
  });
  add("Concat bool axis 0", [] {
    Tensor a({1, 3}, DType::kBool), b({2, 3}, DType::kBool);
    for (int i = 0; i < 3; ++i) a.data<uint8_t>()[i] = static_cast<uint8_t>(i % 2);
    for (int i = 0; i < 6; ++i) b.data<uint8_t>()[i] = static_cast<uint8_t>(i % 3 == 0);
    return make_op("Concat", graph::ConcatAttrs{0}, {{"a", a, kIn}, {"b", b, kIn}}, 1, {DType::kBool});
  });
  add("Split", [] {
    return make_op("Split", graph::SplitAttrs{1, {1, 3, 2}}, {{"x", random_tensor({2, 6, 2}, 72), kIn}}, 3);
  });
  add("Slice with steps", [] {
    return make_op("Slice", graph::SliceAttrs{{1, -1}, {100, 0}, {0, 2}, {2, -2}},
                   {{"x", random_tensor({5, 2, 6}, 73), kIn}});
  });
  add("Gather embedding", [] {
    return make_op("Gather", graph::GatherAttrs{0},
                   {{"t", random_tensor({5, 3}, 74), kW}, {"i", int_tensor({2, 3}, {4, 0, 4, 1, -1, 2}), kIn}});
  });
  add("Gather axis 1", [] {
    return make_op("Gather", graph::GatherAttrs{1},
                   {{"x", random_tensor({2, 4, 3}, 75), kIn}, {"i", int_tensor({2}, {3, 1}), kIn}});
  });
  add("ReduceMean keepdims", [] {
    return make_op("ReduceMean", graph::ReduceAttrs{{1}, true}, {{"x", random_tensor({2, 3, 4}, 76), kIn}});
  });
  add("ReduceSum two axes", [] {
    return make_op("ReduceSum", graph::ReduceAttrs{{0, 2}, false}, {{"x", random_tensor({2, 3, 4}, 77), kIn}});
  });
  // The row reductions: a middle axis kept (a strided copy into rows and back), two outer axes
  // dropped, and the last axis (rows as they are); Max/Min with a tie, Prod with a zero.
  uint32_t seed = 78;
  for (char const* op : {"ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare",
                         "ReduceLogSum", "ReduceLogSumExp"}) {
    std::string const name = op;
    bool const positive = name == "ReduceLogSum";  // its log needs positive sums; the others see signs
    uint32_t const s1 = seed++, s2 = seed++;
    add(name + " keepdims middle axis", [op, positive, s1] {
      Tensor x = random_tensor({2, 3, 4}, s1, positive ? 0.1f : -1.f, 1.f, positive);
      x.data<float>()[4] = x.data<float>()[0];  // a tie along axis 1 (elements 0 and 4 of the first row)
      if (std::string(op) == "ReduceProd") x.data<float>()[9] = 0.f;
      return make_op(op, graph::ReduceAttrs{{1}, true}, {{"x", x, kIn}});
    });
    add(name + " two axes and the last", [op, positive, s2] {
      Tensor x = random_tensor({3, 2, 5}, s2, positive ? 0.1f : -1.f, 1.f, positive);
      return make_op(op, graph::ReduceAttrs{{0, -1}, false}, {{"x", x, kIn}});
    });
  }
  // noop_with_empty_axes=1 without axes: the identity (a view of x; the gradient passes through).
  for (char const* op : {"ReduceSum", "ReduceMax"})
    add(std::string(op) + " noop_with_empty_axes", [op] {
      return make_op(op, graph::ReduceAttrs{{}, true, true}, {{"x", random_tensor({2, 3}, 99, -1.f, 1.f), kIn}});
    });
  // Trilu: upper with a positive k and lower with a negative one (float, gradients masked alike),
  // and a causal mask of bools.
  add("Trilu upper k=1", [] {
    return make_op("Trilu", graph::TriluAttrs{true, 1}, {{"x", random_tensor({2, 3, 4}, 120, -1.f, 1.f), kIn}});
  });
  add("Trilu lower k=-1", [] {
    return make_op("Trilu", graph::TriluAttrs{false, -1}, {{"x", random_tensor({4, 3}, 121, -1.f, 1.f), kIn}});
  });
  add("Trilu bool mask", [] {
    return make_op("Trilu", graph::TriluAttrs{false, 0}, {{"m", bool_tensor({3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1}), kIn}},
                   1, {DType::kBool});
  });
  add("Tile 2-D", [] { return make_op("Tile", graph::TileAttrs{{2, 3}}, {{"x", random_tensor({2, 3}, 122), kIn}}); });
  add("Tile 3-D with a unit axis", [] {
    return make_op("Tile", graph::TileAttrs{{1, 2, 2}}, {{"x", random_tensor({2, 1, 3}, 123), kW}});
  });
  // Pad in every mode (begin and end pads on two axes, reflect longer than an axis), Resize nearest,
  // linear and cubic (the separable passes and their adjoints).
  add("Pad constant", [] {
    return make_op("Pad", graph::PadAttrs{graph::PadMode::kConstant, {0, 1, 2, 0, 2, 1}, 0.5f},
                   {{"x", random_tensor({2, 3, 4}, 124), kIn}});
  });
  for (auto [name, mode] : {std::pair{"Pad reflect", graph::PadMode::kReflect},
                            std::pair{"Pad edge", graph::PadMode::kEdge}, std::pair{"Pad wrap", graph::PadMode::kWrap}})
    add(name, [mode] {
      return make_op("Pad", graph::PadAttrs{mode, {0, 2, 1, 0, 3, 1}, 0.f},
                     {{"x", random_tensor({2, 3, 4}, 125), kIn}});
    });
  // Ids and masks padded and tiled (copies, never differentiated).
  add("Pad int64 constant 7, a cropping pad", [] {
    return make_op("Pad", graph::PadAttrs{graph::PadMode::kConstant, {1, -1, 0, 2}, 7.f},
                   {{"x", int_tensor({2, 3}, {1, 2, 3, 4, 5, 6}), kIn}}, 1, {DType::kInt64});
  });
  add("Pad bool reflect", [] {
    return make_op("Pad", graph::PadAttrs{graph::PadMode::kReflect, {1, 1, 0, 2}, 0.f},
                   {{"m", bool_tensor({2, 3}, {1, 0, 0, 1, 1, 0}), kIn}}, 1, {DType::kBool});
  });
  add("Tile int32", [] {
    return make_op("Tile", graph::TileAttrs{{2, 3}}, {{"x", int32_tensor({2, 2}, {1, -2, 3, 4}), kIn}}, 1,
                   {DType::kInt32});
  });
  for (auto [name, mode] : {std::pair{"Resize nearest x2", graph::ResizeMode::kNearest},
                            std::pair{"Resize linear x2", graph::ResizeMode::kLinear},
                            std::pair{"Resize cubic x2", graph::ResizeMode::kCubic}})
    add(name, [mode] {
      graph::ResizeAttrs a;
      a.mode = mode;
      a.scales = {1.f, 1.f, 2.f, 2.f};
      return make_op("Resize", a, {{"x", random_tensor({1, 2, 3, 4}, 126), kIn}});
    });
  for (bool fmod : {false, true})
    add(fmod ? "Mod fmod broadcast" : "Mod floored broadcast", [fmod] {
      return make_op(
          "Mod", graph::ModAttrs{fmod},
          {{"a", random_tensor({2, 3}, 130, -5.f, 5.f), kIn}, {"b", random_tensor({3}, 131, 0.5f, 2.f, false), kW}});
    });
  // ConvTranspose: as a cuDNN conv's dgrad/fprop/wgrad (1-D with output_padding, grouped strided
  // dilated, 3-D, a U-Net up-sampling step; negative pads and output_padding at the stride, where the
  // conv computes a block of the output and the rest is bias alone).
  auto deconv = [&](std::string const& label, std::vector<int64_t> x, std::vector<int64_t> w,
                    graph::ConvTransposeAttrs a, uint32_t seed) {
    add("ConvTranspose " + label, [=] {
      std::vector<In> ins = {{"x", random_tensor(x, seed), kIn}, {"w", random_tensor(w, seed + 1), kW}};
      if (a.has_bias) ins.push_back({"b", random_tensor({w[1] * a.group}, seed + 2), kW});
      return make_op("ConvTranspose", a, ins);
    });
  };
  deconv("1-D pads output_padding", {2, 3, 5}, {3, 2, 3}, {{3}, {2}, {1}, {1, 0}, {1}, 1, true}, 130);
  deconv("grouped strided dilated", {2, 4, 4, 3}, {4, 3, 3, 2}, {{3, 2}, {2, 1}, {1, 2}, {1, 0, 0, 1}, {1, 0}, 2, true},
         133);
  deconv("3-D", {1, 2, 3, 2, 3}, {2, 2, 2, 3, 2},
         {{2, 3, 2}, {1, 2, 1}, {1, 1, 1}, {0, 1, 0, 0, 0, 1}, {0, 1, 0}, 1, true}, 136);
  deconv("U-Net up-sampling", {2, 8, 6, 6}, {8, 4, 2, 2}, {{2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, {0, 0}, 1, false},
         139);
  deconv("negative pads (an output_shape past the full output)", {1, 2, 3, 3}, {2, 3, 3, 3},
         {{3, 3}, {2, 1}, {1, 1}, {-1, 0, 1, -2}, {0, 0}, 1, true}, 142);
  deconv("output_padding at the stride (dilated)", {2, 2, 4}, {2, 4, 2}, {{2}, {1}, {2}, {0, 0}, {1}, 2, true}, 145);
  // The position-addressed index ops: duplicate and negative indices (gradients add up in index
  // order), int32 indices, gathered ids, every scatter reduction with duplicates.
  add("GatherElements duplicates negative", [] {
    return make_op("GatherElements", graph::GatherElementsAttrs{1},
                   {{"x", random_tensor({2, 4, 3}, 150), kIn},
                    {"i", int_tensor({2, 3, 3}, {0, 1, 3, -1, 0, 0, 2, 2, 2, 1, 1, 1, 3, -4, 0, 0, 1, 2}), kIn}});
  });
  add("GatherElements int32 weight", [] {
    return make_op("GatherElements", graph::GatherElementsAttrs{0},
                   {{"x", random_tensor({3, 2}, 151), kW}, {"i", int32_tensor({4, 2}, {0, 1, 2, 2, 1, 0, 0, 0}), kIn}});
  });
  add("GatherElements int64 ids", [] {
    return make_op(
        "GatherElements", graph::GatherElementsAttrs{1},
        {{"x", int_tensor({2, 3}, {7, 8, 9, 10, 11, 12}), kIn}, {"i", int_tensor({2, 2}, {2, 0, -1, 1}), kIn}}, 1,
        {DType::kInt64});
  });
  add("GatherND repeated tuples", [] {
    return make_op("GatherND", graph::GatherNDAttrs{},
                   {{"d", random_tensor({3, 4, 2}, 152), kW}, {"i", int_tensor({3, 2}, {2, 1, 0, 3, 2, 1}), kIn}});
  });
  add("GatherND whole rows", [] {
    return make_op("GatherND", graph::GatherNDAttrs{},
                   {{"d", random_tensor({3, 4}, 153), kIn}, {"i", int_tensor({2, 1}, {1, -2}), kIn}});
  });
  using R = graph::ScatterReduction;
  for (auto [red, name] : {std::pair{R::kNone, "none"}, std::pair{R::kAdd, "add"}, std::pair{R::kMul, "mul"},
                           std::pair{R::kMax, "max"}, std::pair{R::kMin, "min"}}) {
    add(std::string("ScatterElements ") + name + " duplicates", [red] {
      Tensor upd = random_tensor({2, 3}, 155);
      upd.data<float>()[4] = 0.f;  // a zero factor (mul's gradient stays exact)
      return make_op("ScatterElements", graph::ScatterElementsAttrs{1, red},
                     {{"data", random_tensor({2, 4}, 154), kIn},
                      {"i", int_tensor({2, 3}, {1, 3, 1, 0, -1, 3}), kIn},
                      {"u", upd, kIn}});
    });
  }
  // ScatterND: slices of 2 at tuples of 2 (one given twice, one negative), every reduction.
  for (auto [red, name] : {std::pair{R::kNone, "none"}, std::pair{R::kAdd, "add"}, std::pair{R::kMul, "mul"},
                           std::pair{R::kMax, "max"}, std::pair{R::kMin, "min"}}) {
    add(std::string("ScatterND ") + name + " duplicate tuples", [red] {
      return make_op("ScatterND", graph::ScatterNDAttrs{red},
                     {{"data", random_tensor({3, 4, 2}, 158), kIn},
                      {"i", int_tensor({3, 2}, {2, 1, 0, -1, 2, 1}), kIn},
                      {"u", random_tensor({3, 2}, 159), kIn}});
    });
  }
  add("Scatter", [] {
    return make_op("Scatter", graph::ScatterElementsAttrs{0, R::kNone},
                   {{"data", random_tensor({3, 2}, 156), kIn},
                    {"i", int_tensor({2, 2}, {2, 0, 2, 1}), kIn},
                    {"u", random_tensor({2, 2}, 157), kIn}});
  });
  // The loss ops: [N, C] and [N, C, d1, d2] scores, every reduction, class weights, an
  // ignore_index, and SCE's log-probability output (its gradient flows too).
  using LR = graph::LossReduction;
  struct LossCase {
    char const* type;
    std::vector<int64_t> shape;
    LR reduction;
    bool weighted, ignore;
    int outputs;
  };
  for (LossCase const& lc : {LossCase{"NegativeLogLikelihoodLoss", {4, 5}, LR::kMean, true, true, 1},
                             LossCase{"NegativeLogLikelihoodLoss", {2, 3, 4, 2}, LR::kNone, false, false, 1},
                             LossCase{"SoftmaxCrossEntropyLoss", {4, 5}, LR::kSum, true, false, 1},
                             LossCase{"SoftmaxCrossEntropyLoss", {2, 3, 4, 2}, LR::kMean, false, true, 2},
                             LossCase{"SoftmaxCrossEntropyLoss", {3, 4}, LR::kNone, true, true, 2}}) {
    std::string const label = std::string(lc.type) + " " + std::to_string(lc.shape.size()) + "-D reduction " +
                              std::to_string(static_cast<int>(lc.reduction)) + (lc.weighted ? " weighted" : "") +
                              (lc.ignore ? " ignore_index" : "") + (lc.outputs > 1 ? " log_prob" : "");
    add(label, [lc] {
      std::vector<int64_t> tshape = {lc.shape[0]};
      tshape.insert(tshape.end(), lc.shape.begin() + 2, lc.shape.end());
      Tensor t(tshape, DType::kInt64);
      for (int64_t i = 0; i < t.numel(); ++i)
        t.data<int64_t>()[i] = lc.ignore && i % 3 == 1 ? 1 : (i * 7 + 3) % lc.shape[1];
      std::vector<In> ins = {{"scores", random_tensor(lc.shape, 160, 0.1f, 2.f), kIn}, {"target", t, kIn}};
      if (lc.weighted) {
        Tensor w({lc.shape[1]});
        for (int64_t k = 0; k < lc.shape[1]; ++k) w.data<float>()[k] = 0.5f + 0.25f * static_cast<float>(k);
        ins.push_back({"weight", w, graph::TensorRole::kConstant});
      }
      return make_op(lc.type, graph::LossAttrs{lc.reduction, lc.ignore, 1}, ins, lc.outputs);
    });
  }
  // Einsum (exec/einsum.h's plan): batched products, attention scores, a transpose, a diagonal,
  // a full sum, a contraction that also sums a label away, a mixture-of-experts dispatch.
  struct EinsumCase {
    char const* equation;
    std::vector<std::vector<int64_t>> shapes;
  };
  uint32_t es = 170;
  for (EinsumCase const& ec :
       {EinsumCase{"bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}}, EinsumCase{"bhqd,bhkd->bhqk", {{2, 2, 3, 4}, {2, 2, 5, 4}}},
        EinsumCase{"ij->ji", {{3, 4}}}, EinsumCase{"ii->i", {{4, 4}}}, EinsumCase{"ij->", {{3, 4}}},
        EinsumCase{"bij,bjk->bk", {{2, 3, 4}, {2, 4, 5}}}, EinsumCase{"sec,sm->ecm", {{6, 2, 3}, {6, 4}}}}) {
    uint32_t const seed = es;
    es += 2;
    add(std::string("Einsum ") + ec.equation, [ec, seed] {
      std::vector<In> ins;
      for (std::size_t i = 0; i < ec.shapes.size(); ++i)
        ins.push_back(
            {std::string(1, static_cast<char>('a' + i)), random_tensor(ec.shapes[i], seed + i), i == 0 ? kIn : kW});
      return make_op("Einsum", graph::EinsumAttrs{ec.equation}, ins);
    });
  }
  // LSTM, GRU and RNN (exec/rnn_plan.h on cuBLASLt and kernels/cuda/rnn.cu): every attribute and
  // optional input, each output's gradient (rnn_cases.h).
  uint32_t rs = 190;
  for (RnnOpCase const& rc : rnn_op_cases()) {
    uint32_t const seed = rs;
    rs += 10;
    add(rc.label, [rc, seed] { return rnn_case_op(rc, seed); });
  }
  // GridSample: bilinear with each padding mode (grid points past [-1, 1]), nearest; 4-D and 5-D;
  // bicubic (4-D).
  {
    uint32_t gs = 230;
    for (bool vol : {false, true})
      for (auto padding :
           {graph::GridSamplePadding::kZeros, graph::GridSamplePadding::kBorder, graph::GridSamplePadding::kReflection})
        for (auto mode :
             {graph::GridSampleMode::kLinear, graph::GridSampleMode::kNearest, graph::GridSampleMode::kCubic}) {
          if (vol && mode == graph::GridSampleMode::kCubic) continue;
          bool const nearest = mode == graph::GridSampleMode::kNearest;
          graph::GridSampleAttrs a;
          a.mode = mode;
          a.padding = padding;
          a.align_corners = padding == graph::GridSamplePadding::kReflection;
          uint32_t const seed = gs;
          gs += 2;
          char const* names[] = {"linear", "nearest", "cubic"};
          add(std::string("GridSample ") + (vol ? "5-D " : "") + names[static_cast<int>(mode)] + " padding " +
                  std::to_string(static_cast<int>(padding)),
              [a, seed, nearest, vol] {
                std::vector<int64_t> const x =
                    vol ? std::vector<int64_t>{2, 2, 3, 4, 5} : std::vector<int64_t>{2, 3, 4, 5};
                std::vector<int64_t> const grid =
                    vol ? std::vector<int64_t>{2, 2, 3, 4, 3} : std::vector<int64_t>{2, 3, 6, 2};
                return make_op("GridSample", a,
                               {{"x", random_tensor(x, seed, -1.f, 1.f), kIn},
                                {"grid", random_tensor(grid, seed + 1, -1.3f, 1.3f),
                                 nearest ? graph::TensorRole::kConstant : kIn}});
              });
        }
  }
  // Col2Im (nn.Fold): 2-D with every attribute, and 3-D.
  add("Col2Im 2-D", [] {
    graph::Col2ImAttrs a;
    a.image = {5, 6};
    a.block = {2, 3};
    a.dilations = {1, 2};
    a.strides = {2, 1};
    a.pads = {1, 0, 0, 2};
    return make_op("Col2Im", a, {{"x", random_tensor({2, 12, 12}, 126, -1.f, 1.f), kIn}});
  });
  add("Col2Im 3-D", [] {
    graph::Col2ImAttrs a;
    a.image = {3, 4, 3};
    a.block = {2, 2, 2};
    a.dilations = {1, 1, 1};
    a.strides = {1, 2, 1};
    a.pads = {0, 0, 1, 0, 1, 0};
    return make_op("Col2Im", a, {{"x", random_tensor({2, 16, 12}, 127, -1.f, 1.f), kIn}});
  });
  // LRN: an odd window, and an even one wider than the channels on 3-D data.
  add("LRN size 5", [] {
    graph::LrnAttrs a;
    a.size = 5;
    a.alpha = 0.8f;
    return make_op("LRN", a, {{"x", random_tensor({2, 7, 3, 4}, 125, -1.f, 1.f), kIn}});
  });
  add("LRN size 4 of 3 channels", [] {
    graph::LrnAttrs a;
    a.size = 4;
    a.alpha = 1.5f;
    a.beta = 0.5f;
    a.bias = 2.f;
    return make_op("LRN", a, {{"x", random_tensor({2, 3, 5}, 126, -1.f, 1.f), kIn}});
  });
  add("InstanceNormalization", [] {
    return make_op("InstanceNormalization", graph::InstanceNormAttrs{1e-5f},
                   {{"x", random_tensor({2, 3, 4, 5}, 127, -1.f, 1.f), kIn},
                    {"s", random_tensor({3}, 128), kW},
                    {"b", random_tensor({3}, 129), kW}});
  });
  // PRelu with a per-channel slope (a weight), and the variadic ops with numpy broadcasting.
  add("PRelu per-channel slope", [] {
    return make_op("PRelu", {},
                   {{"x", random_tensor({2, 3, 4}, 110, -1.f, 1.f), kIn}, {"s", random_tensor({3, 1}, 111), kW}});
  });
  for (char const* op : {"Max", "Min"})
    add(std::string(op) + " broadcast with a tie", [op] {
      Tensor a = random_tensor({2, 3}, 112, -1.f, 1.f), b = random_tensor({3}, 113, -1.f, 1.f);
      a.data<float>()[1] = b.data<float>()[1];  // the first input wins a tie
      return make_op(op, {}, {{"a", a, kIn}, {"b", b, kIn}, {"c", random_tensor({2, 1}, 114, -1.f, 1.f), kW}});
    });
  add("Sum of three", [] {
    return make_op("Sum", {},
                   {{"a", random_tensor({2, 3}, 115), kIn},
                    {"b", random_tensor({3}, 116), kW},
                    {"c", random_tensor({2, 3}, 117), kIn}});
  });
  add("Mean broadcast", [] {
    return make_op("Mean", {}, {{"a", random_tensor({2, 1, 4}, 118), kIn}, {"b", random_tensor({3, 1}, 119), kIn}});
  });
  // Along one axis: a middle axis (lines `inner` apart) and the last one.
  add("LogSoftmax axis 1", [] {
    return make_op("LogSoftmax", graph::SoftmaxAttrs{1}, {{"x", random_tensor({2, 4, 3}, 100, -3.f, 3.f), kIn}});
  });
  add("LogSoftmax last axis", [] {
    return make_op("LogSoftmax", graph::SoftmaxAttrs{2}, {{"x", random_tensor({2, 3, 5}, 101, -3.f, 3.f), kIn}});
  });
  add("Hardmax axis 1 with a tie", [] {
    Tensor x = random_tensor({2, 3, 4}, 102, -1.f, 1.f);
    x.data<float>()[4] = x.data<float>()[0] = 2.f;  // the first maximum wins
    return make_op("Hardmax", graph::SoftmaxAttrs{1}, {{"x", x, kIn}});
  });
  add("CumSum axis 1", [] {
    return make_op("CumSum", graph::CumSumAttrs{1, false, false},
                   {{"x", random_tensor({2, 4, 3}, 103, -1.f, 1.f), kIn}});
  });
  add("CumSum exclusive reverse", [] {
    return make_op("CumSum", graph::CumSumAttrs{2, true, true}, {{"x", random_tensor({2, 3, 5}, 104, -1.f, 1.f), kIn}});
  });
  add("CumSum int64 mask", [] {
    return make_op("CumSum", graph::CumSumAttrs{1, false, false},
                   {{"x", int_tensor({2, 4}, {1, 1, 0, 1, 0, 1, 1, 1}), kIn}}, 1, {DType::kInt64});
  });
  for (char const* op : {"ArgMax", "ArgMin"}) {
    add(std::string(op) + " axis 1 first of ties", [op] {
      Tensor x = random_tensor({2, 3, 4}, 105, -1.f, 1.f);
      x.data<float>()[4] = x.data<float>()[0];
      return make_op(op, graph::ArgReduceAttrs{1, false, false}, {{"x", x, kIn}}, 1, {DType::kInt64});
    });
    add(std::string(op) + " last axis last of ties, int64", [op] {
      return make_op(op, graph::ArgReduceAttrs{1, true, true},
                     {{"x", int_tensor({2, 4}, {3, 7, 7, 3, -2, -2, 5, 5}), kIn}}, 1, {DType::kInt64});
    });
  }
  add("TopK axis 1 largest, a tie", [] {
    Tensor x = random_tensor({2, 5, 3}, 106, -1.f, 1.f);
    x.data<float>()[3] = x.data<float>()[0];  // positions 0 and 1 of the first line: the lower index first
    return make_op("TopK", graph::TopKAttrs{1, 3, true}, {{"x", x, kIn}}, 2, {DType::kFloat32, DType::kInt64});
  });
  add("TopK last axis smallest", [] {
    return make_op("TopK", graph::TopKAttrs{-1, 2, false}, {{"x", random_tensor({3, 7}, 107, -1.f, 1.f), kIn}}, 2,
                   {DType::kFloat32, DType::kInt64});
  });
  by_dtype_cases(add);
  return c;
}

// Pow takes what the CPU takes (a float32 exponent tensor, input or weight) and refuses, by name and
// before any device is touched, what the CPU refuses (an exponent tensor of another dtype).
TEST(CudaOpCases, PowAcceptsAndRefusesTheExponentsTheCpuDoes) {
  CpuBackend const cpu;
  for (TensorRole role : {kIn, kW}) {
    OneOp o = make_op("Pow", {},
                      {{"x", random_tensor({2, 3}, 79, 0.5f, 2.f, true), kIn}, {"e", random_tensor({3}, 80), role}});
    EXPECT_TRUE(cpu.supports(o.the_op(), o.graph).is_ok());
    Status const s = CudaBackend::supports_op(o.the_op(), o.graph);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
  }
  OneOp o = make_op("Pow", {},
                    {{"x", random_tensor({2, 3}, 79, 0.5f, 2.f, true), kIn}, {"e", int_tensor({3}, {1, 2, 3}), kIn}});
  EXPECT_FALSE(cpu.supports(o.the_op(), o.graph).is_ok());
  Status const s = CudaBackend::supports_op(o.the_op(), o.graph);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("Pow"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("exponent"), std::string::npos) << s.message();
}

TEST(CudaOpCases, TheCaseListCoversEveryOpOfTheCudaKernelTable) {
  std::set<std::string> covered;
  for (Case const& c : cases()) covered.insert(c.make().the_op().type);
  for (std::string const& op : CudaBackend::op_types())
    EXPECT_TRUE(covered.count(op)) << op << " is in the CUDA kernel table but has no differential case here";
}

// By dtype: every entry of the CUDA table (op type, dtype of its data input) runs in a case of the
// sweep, float32, integer and bool alike, so a GPU run exercises every kernel instantiation
// (bfloat16 and float16: the 16-bit sweep's, low_precision_cases).
TEST(CudaOpCases, TheCaseListCoversEveryEntryOfTheCudaKernelTableByDtype) {
  std::set<std::pair<std::string, DType>> covered;
  for (Case const& c : cases()) {
    OneOp const o = c.make();
    covered.emplace(o.the_op().type, data_dtype(o.the_op(), o.graph));
  }
  std::vector<std::string> missing;
  for (auto const& [op, dtypes] : CudaBackend::entry_dtypes())
    for (DType d : dtypes)
      if (d != DType::kBFloat16 && d != DType::kFloat16 && !covered.count({op, d}))
        missing.push_back(op + " " + graph::dtype_name(d));
  std::string list;
  for (std::string const& m : missing) list += (list.empty() ? "" : ", ") + m;
  EXPECT_TRUE(missing.empty()) << missing.size() << " entries of the CUDA kernel table without a case: " << list;
}

// The optimizer the device-operation tests compare: lr 0.01, momentum 0.9, weight decay 0.01.
OptimizerConfig test_optimizer(OptimizerKind kind) {
  OptimizerConfig oc;
  oc.kind = kind;
  oc.lr = 0.01f;
  oc.momentum = 0.9f;
  oc.weight_decay = 0.01f;
  return oc;
}

class CudaGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("NVIDIA_TF32_OVERRIDE", "0", 1);  // fp32 means fp32 in the comparison
    if (Status s = cuda::device_available(); !s) GTEST_SKIP() << s.message();
    auto b = CudaBackend::create(0);
    ASSERT_TRUE(b.is_ok()) << b.status().message();
    gpu_ = std::move(b).value();
  }
  std::unique_ptr<CudaBackend> gpu_;
  CpuBackend cpu_;
};

struct CaseRun {
  std::vector<Tensor> outputs, grad_inputs, weight_grads;
  Status status = Status::ok();
};

// Forward, then B and W with the same output gradients; weight accumulators start at 0.25.
CaseRun run_case(Backend& be, OneOp const& o, Case const& c, std::vector<Tensor> const& gouts_host) {
  CaseRun r;
  OpCall call{o.the_op(), o.graph, c.training, 7};
  std::vector<Tensor> inputs;
  for (Tensor const& t : o.inputs) {
    if (!t.defined()) {
      inputs.emplace_back();
      continue;
    }
    auto d = be.to_device(t);
    if (!d.is_ok()) {
      r.status = d.status();
      return r;
    }
    inputs.push_back(std::move(d).value());
  }
  Saved saved;
  if (r.status = be.forward(call, inputs, r.outputs, &saved); !r.status) return r;
  // As the executor: an op with no float output (ArgMax's indices, a comparison's mask) has no
  // backward; the CPU refuses to differentiate it.
  if (std::none_of(r.outputs.begin(), r.outputs.end(),
                   [](Tensor const& t) { return t.defined() && t.dtype() == DType::kFloat32; })) {
    r.status = be.synchronize();
    return r;
  }
  std::size_t const n = o.inputs.size();
  std::vector<Tensor> gouts;
  for (Tensor const& g : gouts_host) gouts.push_back(g.defined() ? be.to_device(g).value() : Tensor());
  std::vector<bool> needs(n, false);
  r.weight_grads.assign(n, Tensor());
  for (std::size_t i = 0; i < n; ++i) {
    if (!o.inputs[i].defined() || o.inputs[i].dtype() != DType::kFloat32) continue;
    if (std::find(c.skip_inputs.begin(), c.skip_inputs.end(), static_cast<int>(i)) != c.skip_inputs.end()) continue;
    if (o.roles[i] == kW) {
      r.weight_grads[i] = be.empty(o.inputs[i].shape());
      if (r.status = be.fill(r.weight_grads[i], 0.25f); !r.status) return r;
    } else if (o.roles[i] == kIn) {
      needs[i] = true;
    }
  }
  if (r.status = be.backward_input(call, saved, gouts, needs, r.grad_inputs); !r.status) return r;
  if (r.status = be.backward_weight(call, saved, gouts, r.weight_grads); !r.status) return r;
  r.status = be.synchronize();
  return r;
}

void expect_same(std::vector<Tensor> const& got, std::vector<Tensor> const& want, std::string const& what,
                 std::size_t limit = ~std::size_t{0}) {
  for (std::size_t k = 0; k < want.size() && k < limit; ++k) {
    if (!want[k].defined()) continue;
    ASSERT_LT(k, got.size()) << what << " " << k << " missing";
    ASSERT_TRUE(got[k].defined()) << what << " " << k << " undefined on CUDA";
    EXPECT_EQ(got[k].shape(), want[k].shape()) << what << " " << k;
    EXPECT_EQ(got[k].dtype(), want[k].dtype()) << what << " " << k;
    if (want[k].dtype() == DType::kInt64 || want[k].dtype() == DType::kInt32 || want[k].dtype() == DType::kBool) {
      // Integers and masks exactly, byte for byte (a float view would round large int64 values).
      Tensor const g = got[k].clone_to(process_cpu_allocator());
      EXPECT_TRUE(g.nbytes() == want[k].nbytes() && std::memcmp(g.raw(), want[k].raw(), g.nbytes()) == 0)
          << what << " " << k << ": " << ::testing::PrintToString(g.to_vector()) << " against "
          << ::testing::PrintToString(want[k].to_vector());
      continue;
    }
    if (auto m = first_mismatch(got[k].to_vector(), want[k].to_vector(), 1e-4, 1e-5))
      ADD_FAILURE() << what << " " << k << ": " << *m;
  }
}

// One case's forward, B and W on both backends; failures are added, the caller goes on.
void expect_case_matches(Backend& gpu, CpuBackend& cpu, Case const& c, OneOp const& o) {
  Saved probe;
  std::vector<Tensor> outs = run_forward(cpu, o, c.training, 7, &probe);
  std::vector<Tensor> gouts = loss_weights(outs);
  gouts.resize(std::min(gouts.size(), o.the_op().outputs.size()));
  CaseRun const want = run_case(cpu, o, c, gouts);
  if (!want.status.is_ok()) {
    ADD_FAILURE() << "the CPU reference failed: " << want.status.message();
    return;
  }
  CaseRun const got = run_case(gpu, o, c, gouts);
  if (!got.status.is_ok()) {
    ADD_FAILURE() << "mismatch: the CUDA run failed: " << got.status.message();
    return;
  }
  expect_same(got.outputs, want.outputs, "output");
  expect_same(got.grad_inputs, want.grad_inputs, "input gradient");
  expect_same(got.weight_grads, want.weight_grads, "weight gradient");
}

// Without a GPU: every case's reference side runs on the CPU and gives finite results, so a case
// the GPU sweep cannot judge (the CPU refuses it, or both sides give NaN) fails here, not first on
// a lent GPU (both happened: ArgMax differentiated, ReduceLogSum of negative sums).
TEST(CudaOpCases, EveryCaseRunsOnTheCpuWithFiniteResults) {
  CpuBackend cpu;
  for (Case const& c : cases()) {
    SCOPED_TRACE(c.label);
    OneOp o = c.make();
    Saved probe;
    std::vector<Tensor> outs = run_forward(cpu, o, c.training, 7, &probe);
    std::vector<Tensor> gouts = loss_weights(outs);
    gouts.resize(std::min(gouts.size(), o.the_op().outputs.size()));
    CaseRun const r = run_case(cpu, o, c, gouts);
    ASSERT_TRUE(r.status.is_ok()) << r.status.message();
    for (auto const* set : {&r.outputs, &r.grad_inputs, &r.weight_grads})
      for (Tensor const& t : *set) {
        if (!t.defined() || t.dtype() != DType::kFloat32) continue;
        for (float v : t.to_vector()) ASSERT_TRUE(std::isfinite(v)) << "a non-finite value in the CPU reference";
      }
  }
}

// Without a GPU: the CUDA table accepts every case's op with its dtypes and attributes (what
// supports() answers before a device is touched), so the sweep runs each case on the GPU rather
// than count it as unsupported.
TEST(CudaOpCases, TheCudaTableAcceptsEveryCase) {
  for (Case const& c : cases()) {
    OneOp o = c.make();
    Status const s = CudaBackend::supports_op(o.the_op(), o.graph);
    EXPECT_TRUE(s.is_ok()) << c.label << ": " << s.message();
  }
}

TEST_F(CudaGpu, EveryOpMatchesTheCpuBackendForwardAndBackward) {
  int unsupported_count = 0;
  for (Case const& c : cases()) {
    SCOPED_TRACE(c.label);
    OneOp o = c.make();
    if (Status s = gpu_->supports(o.the_op(), o.graph); !s) {
      ADD_FAILURE() << "unsupported (not a mismatch): " << s.message();
      ++unsupported_count;
      continue;
    }
    // Every failing op is reported, not only the first: the sweep goes on.
    expect_case_matches(*gpu_, cpu_, c, o);
  }
  EXPECT_EQ(unsupported_count, 0);
}

// The sweep in the 16-bit formats: every case whose op the mixed-precision policy runs low or lets
// follow (graph/precision.h), rewritten for bf16 and for fp16 (Casts around the op, float32 weights
// rounded per call), one training step on the GPU against the CPU's float32: output, input and
// weight gradients within 8 units of the format (relative L2; bf16 2^-8, fp16 2^-11).
std::vector<Case> low_precision_cases() {
  std::vector<Case> low;
  for (Case const& c : cases()) {
    OneOp const o = c.make();
    if (graph::amp_rule(o.the_op().kind()).policy == graph::AmpPolicy::kFloat32) continue;
    if (std::any_of(o.inputs.begin(), o.inputs.end(),
                    [](Tensor const& t) { return t.defined() && t.dtype() != DType::kFloat32; }))
      continue;  // the rewrite casts float32 models
    low.push_back(c);
  }
  return low;
}

// Without a GPU: the 16-bit sweep covers every op the policy runs low or lets follow, and its
// harness runs each case in bf16 on the CPU (which has bf16 kernels) within the same bound.
TEST(CudaOpCases, TheSixteenBitSweepCoversEveryOpThePolicyRunsLow) {
  std::set<std::string> covered;
  CpuBackend cpu;
  for (Case const& c : low_precision_cases()) {
    SCOPED_TRACE(c.label);
    OneOp const o = c.make();
    covered.insert(o.the_op().type);
    if (!c.training) continue;
    auto const want = testing::one_step(o.graph, cpu);
    auto low = graph::apply_precision(o.graph, graph::Precision::kBFloat16);
    ASSERT_TRUE(low.is_ok()) << low.status().message();
    // The CPU refuses some (bf16 Gemm with alpha/beta != 1 or a 2-D C); the GPU sweep runs them.
    if (std::any_of(low->ops().begin(), low->ops().end(),
                    [&](graph::Op const& op) { return !cpu.supports(op, *low).is_ok(); }))
      continue;
    auto const got = testing::one_step(*low, cpu);
    ASSERT_FALSE(want.empty());
    testing::expect_within(got, want, 8.0 / 256);
  }
  for (char const* op : {"Conv", "Gemm", "MatMul", "Relu", "MaxPool", "AveragePool", "GlobalAveragePool",
                         "BatchNormalization", "Add", "Transpose"})
    EXPECT_TRUE(covered.count(op)) << op;
}

TEST_F(CudaGpu, EveryLowPrecisionOpMatchesCpuFloat32WithinTheFormatsTolerance) {
  struct Format {
    graph::Precision p;
    double unit;
  };
  for (Format const f :
       {Format{graph::Precision::kBFloat16, 1.0 / 256}, Format{graph::Precision::kFloat16, 1.0 / 2048}})
    for (Case const& c : low_precision_cases()) {
      if (!c.training) continue;  // one_step trains
      SCOPED_TRACE(c.label + " " + graph::precision_name(f.p));
      OneOp const o = c.make();
      auto const want = testing::one_step(o.graph, cpu_);
      auto low = graph::apply_precision(o.graph, f.p);
      ASSERT_TRUE(low.is_ok()) << low.status().message();
      testing::expect_within(testing::one_step(*low, *gpu_), want, 8 * f.unit);
    }
}

// The sweep runs BatchNormalization on cuDNN's graphs (the default); here on our kernels, chosen
// (GP_CUDA_BATCHNORM=ours) and where cuDNN refuses a shape (an H100's cuDNN refused x [3,2,2,3]
// and [2,3,2,2]: no engine config; which shapes varies by device, so here cuDNN refuses every one).
TEST_F(CudaGpu, BatchNormalizationOnOurKernelsMatchesTheCpuBackend) {
  for (bool chosen : {true, false}) {
    testing::BatchNormKernelsFor const use(chosen ? cuda::BatchNormKernels::kOurs : cuda::BatchNormKernels::kCudnn,
                                           !chosen);
    int ran = 0;
    for (Case const& c : cases()) {
      OneOp o = c.make();
      if (o.the_op().type != "BatchNormalization") continue;
      SCOPED_TRACE(c.label + (chosen ? ", our kernels" : ", cuDNN refusing: our kernels"));
      expect_case_matches(*gpu_, cpu_, c, o);
      ++ran;
    }
    EXPECT_GE(ran, 4);
  }
}

TEST_F(CudaGpu, DeviceOperationsMatchTheCpuBackend) {
  Tensor const a = random_tensor({3, 4, 5}, 90), b = random_tensor({3, 4, 5}, 91);
  for (Backend* be : std::initializer_list<Backend*>{&cpu_, gpu_.get()}) ASSERT_TRUE(be->synchronize().is_ok());
  auto on = [&](Backend& be, Tensor const& t) { return be.to_device(t).value(); };
  // add_into, fill, copy
  Tensor ga = gpu_->clone(a).value(), ca = a.clone();
  ASSERT_TRUE(gpu_->add_into(ga, on(*gpu_, b)).is_ok());
  ASSERT_TRUE(cpu_.add_into(ca, b).is_ok());
  EXPECT_FALSE(first_mismatch(ga.to_vector(), ca.to_vector(), 0, 0).has_value());
  Tensor f = gpu_->empty({7});
  ASSERT_TRUE(gpu_->fill(f, 1.5f).is_ok());
  ASSERT_TRUE(gpu_->synchronize().is_ok());
  EXPECT_EQ(f.to_vector(), std::vector<float>(7, 1.5f));
  // copy_chunks: chunks 2 and 0 of axis 1 (chunk 2 rows) into chunks 0 and 1
  Tensor const src = random_tensor({2, 6, 3}, 92);
  Tensor gdst = gpu_->zeros({2, 4, 3}), cdst = Tensor::zeros({2, 4, 3});
  ASSERT_TRUE(gpu_->copy_chunks(on(*gpu_, src), {2, 0}, gdst, {0, 1}, 1, 2).is_ok());
  ASSERT_TRUE(cpu_.copy_chunks(src, {2, 0}, cdst, {0, 1}, 1, 2).is_ok());
  ASSERT_TRUE(gpu_->synchronize().is_ok());
  EXPECT_FALSE(first_mismatch(gdst.to_vector(), cdst.to_vector(), 0, 0).has_value());
  // losses
  Tensor const logits = random_tensor({4, 5}, 93, 0.1f, 3.f);
  Tensor const labels = int_tensor({4}, {0, 4, 2, 1});
  Tensor cg, gg;
  double const cl = cpu_.loss(LossKind::kCrossEntropy, logits, labels, 8, cg).value();
  auto gl = gpu_->loss(LossKind::kCrossEntropy, on(*gpu_, logits), labels, 8, gg);
  ASSERT_TRUE(gl.is_ok()) << gl.status().message();
  EXPECT_NEAR(*gl, cl, 1e-5 * std::abs(cl) + 1e-6);
  EXPECT_FALSE(first_mismatch(gg.to_vector(), cg.to_vector(), 1e-4, 1e-6).has_value());
  Tensor bad = int_tensor({4}, {0, 5, 2, 1});
  auto badl = gpu_->loss(LossKind::kCrossEntropy, on(*gpu_, logits), bad, 8, gg);
  ASSERT_FALSE(badl.is_ok());
  EXPECT_NE(badl.status().message().find("label 5 (row 1)"), std::string::npos) << badl.status().message();
  // A step's losses: three micro-batches into three slots, read once, each the CPU's.
  {
    Backend::StepLosses dl = gpu_->step_losses(3), cl3 = cpu_.step_losses(3);
    for (int m = 0; m < 3; ++m) {
      Tensor const x = random_tensor({4, 5}, 95 + m, 0.1f, 3.f);
      Tensor const y = int_tensor({4}, {m, 4 - m, 2, 1});
      ASSERT_TRUE(gpu_->loss_into(LossKind::kCrossEntropy, on(*gpu_, x), y, 12, gg, dl, m).is_ok());
      ASSERT_TRUE(cpu_.loss_into(LossKind::kCrossEntropy, x, y, 12, cg, cl3, m).is_ok());
    }
    auto const dv = gpu_->read_losses(dl), cv = cpu_.read_losses(cl3);
    ASSERT_TRUE(dv.is_ok() && cv.is_ok()) << dv.status().message();
    for (int m = 0; m < 3; ++m) EXPECT_NEAR((*dv)[m], (*cv)[m], 1e-5 * std::abs((*cv)[m]) + 1e-7) << m;
    // A bad label in slot 1 is found when the slots are read, named as the loss saw it though its
    // labels' buffer holds another micro-batch's by then.
    Tensor buffer = on(*gpu_, bad);
    ASSERT_TRUE(gpu_->loss_into(LossKind::kCrossEntropy, on(*gpu_, logits), buffer, 8, gg, dl, 1).is_ok());
    ASSERT_TRUE(gpu_->copy(int_tensor({4}, {3, 3, 3, 3}), buffer).is_ok());
    auto const badv = gpu_->read_losses(dl);
    ASSERT_FALSE(badv.is_ok());
    EXPECT_EQ(badv.status().message(), badl.status().message());
  }
  double const cm = cpu_.loss(LossKind::kMse, a, b, 3, cg).value();
  auto gm = gpu_->loss(LossKind::kMse, on(*gpu_, a), b, 3, gg);
  ASSERT_TRUE(gm.is_ok());
  EXPECT_NEAR(*gm, cm, 1e-5 * std::abs(cm));
  EXPECT_FALSE(first_mismatch(gg.to_vector(), cg.to_vector(), 1e-4, 1e-6).has_value());
  // optimizers: three steps each
  for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdam, OptimizerKind::kAdamW}) {
    OptimizerConfig const oc = test_optimizer(kind);
    int const moments = moment_count(oc);
    Tensor cw = a.clone(), gw = gpu_->clone(a).value();
    std::vector<Tensor> cs, gs;
    for (int m = 0; m < moments; ++m) {
      cs.push_back(Tensor::zeros(a.shape()));
      gs.push_back(gpu_->zeros(a.shape()));
    }
    std::vector<Tensor*> cp, gp_;
    for (auto& t : cs) cp.push_back(&t);
    for (auto& t : gs) gp_.push_back(&t);
    Tensor const gb = on(*gpu_, b);
    for (int64_t step = 1; step <= 3; ++step) {
      ASSERT_TRUE(cpu_.optimizer_update(oc, step, cw, b, cp).is_ok());
      ASSERT_TRUE(gpu_->optimizer_update(oc, step, gw, gb, gp_).is_ok());
    }
    ASSERT_TRUE(gpu_->synchronize().is_ok());
    EXPECT_FALSE(first_mismatch(gw.to_vector(), cw.to_vector(), 1e-5, 1e-7).has_value()) << static_cast<int>(kind);
  }
}

// The multi-tensor update (one launch for every parameter) equals the per-parameter kernels bit for
// bit, over parameters spanning several chunks, an empty one, and a second set of tensors (the
// device table is uploaded again when the parameters move); a float16 parameter falls back to the
// per-parameter path and its error.
// While checks are deferred (a training step), a bad Gather index is no error at the op (its
// output row is zeros, nothing outside the tensors is touched): deferred_checks reports it, the
// message the op gives at once without deferral.
TEST_F(CudaGpu, GatherIndexErrorsWaitForTheDeferredCheckWhileDeferred) {
  OneOp const o = make_op("Gather", graph::GatherAttrs{0},
                          {{"t", random_tensor({5, 3}, 74), kW}, {"i", int_tensor({2}, {1, 9}), kIn}});
  OpCall const call{o.the_op(), o.graph, true, 7};
  std::vector<Tensor> const in{gpu_->to_device(o.inputs[0]).value(), o.inputs[1]};
  std::vector<Tensor> out;
  Status const at_once = gpu_->forward(call, in, out, nullptr);
  ASSERT_FALSE(at_once.is_ok());
  EXPECT_NE(at_once.message().find("index 9 (position 1) is out of range"), std::string::npos) << at_once.message();
  CpuBackend cpu;
  EXPECT_EQ(at_once.message(), cpu.forward(call, o.inputs, out, nullptr).message()) << "the CPU's error";
  gpu_->defer_checks(true);
  out.clear();
  Tensor buffer = gpu_->to_device(o.inputs[1]).value();  // an input buffer on the device
  ASSERT_TRUE(gpu_->forward(call, {in[0], buffer}, out, nullptr).is_ok());
  ASSERT_EQ(out.size(), 1u);
  std::vector<float> const y = out[0].to_vector();
  std::vector<float> const t = o.inputs[0].to_vector();
  EXPECT_EQ(std::vector<float>(y.begin(), y.begin() + 3), std::vector<float>(t.begin() + 3, t.begin() + 6));
  EXPECT_EQ(std::vector<float>(y.begin() + 3, y.end()), std::vector<float>(3, 0.f));
  // By the step's end the buffer holds a later micro-batch's indices: the error still names the
  // index the check saw (noted on the device beside its flag), not what the buffer holds now.
  ASSERT_TRUE(gpu_->copy(int_tensor({2}, {3, 4}), buffer).is_ok());
  Status const later = gpu_->deferred_checks();
  EXPECT_EQ(later.message(), at_once.message());
  EXPECT_TRUE(gpu_->deferred_checks().is_ok()) << "a resolved check was reported twice";
  gpu_->defer_checks(false);
}

// An integer division (or Mod) by zero is the CPU's error, at once and, while checks are deferred (a
// training step), at the step's end; the outputs stay defined meanwhile.
TEST_F(CudaGpu, AnIntegerDivisionOrModByZeroIsTheCpusErrorAtOnceAndWhenDeferred) {
  OneOp const o = make_op("Div", {}, {{"a", int_tensor({3}, {4, 5, 6}), kIn}, {"b", int_tensor({3}, {2, 0, 3}), kIn}},
                          1, {DType::kInt64});
  OpCall const call{o.the_op(), o.graph, true, 7};
  std::vector<Tensor> const in{gpu_->to_device(o.inputs[0]).value(), gpu_->to_device(o.inputs[1]).value()};
  std::vector<Tensor> out;
  CpuBackend cpu;
  std::string const want = cpu.forward(call, o.inputs, out, nullptr).message();
  EXPECT_NE(want.find("integer division by zero"), std::string::npos) << want;
  out.clear();
  EXPECT_EQ(gpu_->forward(call, in, out, nullptr).message(), want);
  gpu_->defer_checks(true);
  out.clear();
  ASSERT_TRUE(gpu_->forward(call, in, out, nullptr).is_ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].to_vector(), (std::vector<float>{2, 0, 2}));
  EXPECT_EQ(gpu_->deferred_checks().message(), want);
  EXPECT_TRUE(gpu_->deferred_checks().is_ok()) << "a resolved check was reported twice";
  gpu_->defer_checks(false);
  // Integer Mod by zero: the CPU's error, which names the first output element it hit.
  OneOp const m =
      make_op("Mod", graph::ModAttrs{false},
              {{"a", int_tensor({3}, {4, 5, 6}), kIn}, {"b", int_tensor({3}, {2, 3, 0}), kIn}}, 1, {DType::kInt64});
  OpCall const mod_call{m.the_op(), m.graph, true, 7};
  out.clear();
  std::string const mod_want = cpu.forward(mod_call, m.inputs, out, nullptr).message();
  EXPECT_NE(mod_want.find("integer division by zero at output element 2"), std::string::npos) << mod_want;
  out.clear();
  std::vector<Tensor> const mod_in{gpu_->to_device(m.inputs[0]).value(), gpu_->to_device(m.inputs[1]).value()};
  EXPECT_EQ(gpu_->forward(mod_call, mod_in, out, nullptr).message(), mod_want);
}

// cuDNN plans stored by one run load in the next (here: the thread's plans dropped from memory)
// instead of being built, and compute the same results, bit for bit: a convolution (fprop, dgrad,
// wgrad) and a BatchNormalization in training (forward with its pass-by-value epsilon and
// momentum, backward) on cuDNN's graphs.
TEST_F(CudaGpu, CudnnPlansStoredOnDiskLoadInsteadOfBeingBuiltAndComputeTheSame) {
  std::filesystem::path const dir =
      std::filesystem::temp_directory_path() / ("gp_cudnn_plans_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  cuda::set_cudnn_plan_cache_folder(dir.string());
  cuda::BatchNormKernels const kernels = cuda::batchnorm_kernels();
  cuda::set_batchnorm_kernels(cuda::BatchNormKernels::kCudnn);
  cuda::clear_cudnn_plans_of_this_thread();
  std::vector<std::pair<OneOp, Case>> const ops = {
      {make_op("Conv", graph::ConvAttrs{{3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 1, false},
               {{"x", random_tensor({2, 3, 9, 9}, 41), kIn}, {"w", random_tensor({5, 3, 3, 3}, 42), kW}}),
       Case{"conv", nullptr}},
      {make_op("BatchNormalization", graph::BatchNormAttrs{1e-5f, 0.9f, true},
               {{"x", random_tensor({4, 32, 8, 8}, 43), kIn},
                {"s", random_tensor({32}, 44), kW},
                {"b", random_tensor({32}, 45), kW},
                {"m", random_tensor({32}, 46), kConst},
                {"v", random_tensor({32}, 47, 0.5f, 1.f, true), kConst}}),
       Case{"batchnorm", nullptr, true, {3, 4}}},
  };
  auto once = [&] {
    std::vector<std::vector<float>> all;
    for (auto const& [o, c] : ops) {
      Saved probe;
      std::vector<Tensor> gouts = loss_weights(run_forward(cpu_, o, true, 7, &probe));
      CaseRun r = run_case(*gpu_, o, c, gouts);
      EXPECT_TRUE(r.status.is_ok()) << c.label << ": " << r.status.message();
      for (auto const* list : {&r.outputs, &r.grad_inputs, &r.weight_grads})
        for (Tensor const& t : *list)
          if (t.defined()) all.push_back(t.to_vector());
    }
    return all;
  };
  cuda::CudnnPlanCounts const before = cuda::cudnn_plan_counts();
  auto const built = once();
  cuda::CudnnPlanCounts const mid = cuda::cudnn_plan_counts();
  EXPECT_EQ(mid.built - before.built, 5) << "conv fprop, dgrad, wgrad; batchnorm training forward, backward";
  EXPECT_EQ(mid.stored - before.stored, mid.built - before.built);
  cuda::clear_cudnn_plans_of_this_thread();
  auto const loaded = once();
  cuda::CudnnPlanCounts const after = cuda::cudnn_plan_counts();
  EXPECT_EQ(after.built, mid.built) << "a stored plan was built again";
  EXPECT_EQ(after.loaded - mid.loaded, mid.built - before.built);
  EXPECT_EQ(loaded, built);
  cuda::set_batchnorm_kernels(kernels);
  cuda::set_cudnn_plan_cache_folder(cuda::PlanDiskCache::folder_from_environment());
  cuda::clear_cudnn_plans_of_this_thread();
  std::filesystem::remove_all(dir);
}

TEST_F(CudaGpu, OneUpdateOfEveryParameterEqualsOneUpdateEach) {
  std::vector<int64_t> const sizes{3, 0, 70000, 2 * kernels::hd::kMultiTensorChunk + 5};
  for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdam, OptimizerKind::kAdamW}) {
    OptimizerConfig const oc = test_optimizer(kind);
    int const moments = moment_count(oc);
    for (int set = 0; set < 2; ++set) {
      std::vector<Tensor> w1, w2, g, s1, s2;
      for (std::size_t k = 0; k < sizes.size(); ++k) {
        Tensor const host = random_tensor({sizes[k]}, static_cast<uint32_t>(31 + k + 7 * set));
        w1.push_back(gpu_->clone(host).value());
        w2.push_back(gpu_->clone(host).value());
        g.push_back(gpu_->clone(random_tensor({sizes[k]}, static_cast<uint32_t>(41 + k))).value());
        for (int m = 0; m < moments; ++m) {
          s1.push_back(gpu_->zeros({sizes[k]}));
          s2.push_back(gpu_->zeros({sizes[k]}));
        }
      }
      std::vector<Backend::ParamUpdate> all;
      for (std::size_t k = 0; k < sizes.size(); ++k) {
        Backend::ParamUpdate u{&w1[k], &g[k], {}};
        for (int m = 0; m < moments; ++m) u.state.push_back(&s1[k * moments + m]);
        all.push_back(u);
      }
      for (int64_t step = 1; step <= 3; ++step) {
        ASSERT_TRUE(gpu_->optimizer_update_all(oc, step, all).is_ok());
        for (std::size_t k = 0; k < sizes.size(); ++k) {
          std::vector<Tensor*> st;
          for (int m = 0; m < moments; ++m) st.push_back(&s2[k * moments + m]);
          ASSERT_TRUE(gpu_->optimizer_update(oc, step, w2[k], g[k], st).is_ok());
        }
      }
      ASSERT_TRUE(gpu_->synchronize().is_ok());
      for (std::size_t k = 0; k < sizes.size(); ++k)
        EXPECT_EQ(w1[k].to_vector(), w2[k].to_vector()) << static_cast<int>(kind) << " set " << set << " param " << k;
    }
  }
  OptimizerConfig sgd;
  Tensor half = gpu_->zeros({4}, DType::kFloat16), grad = gpu_->zeros({4}, DType::kFloat16);
  EXPECT_FALSE(gpu_->optimizer_update_all(sgd, 1, {Backend::ParamUpdate{&half, &grad, {}}}).is_ok());
}

// The caching allocator's steady state on a real device: after the first training step, the next
// ones make no cudaMalloc or cudaFree (both would synchronise the device).
TEST_F(CudaGpu, TrainingStepsAfterTheFirstMakeNoRawAllocations) {
  auto built = models::build_graph(kCnnModel, models::Size::kTiny, 1);
  ASSERT_TRUE(built.is_ok()) << built.status().message();
  graph::OpGraph const& g = *built;
  TrainConfig const c = config_for(models::Task::kClassification, 16, 2, 3);
  auto data = make_data_source(c.data, g, c.loss, c.seed);
  ASSERT_TRUE(data.is_ok()) << data.status().message();
  auto trainer = Trainer::create(c, g, *gpu_, std::move(data).value());
  ASSERT_TRUE(trainer.is_ok()) << trainer.status().message();
  ASSERT_TRUE((*trainer)->step().is_ok());
  ASSERT_TRUE(gpu_->synchronize().is_ok());
  auto const after_first = gpu_->caching_allocator().stats();
  for (int i = 0; i < 2; ++i) ASSERT_TRUE((*trainer)->step().is_ok());
  ASSERT_TRUE(gpu_->synchronize().is_ok());
  auto const after_more = gpu_->caching_allocator().stats();
  EXPECT_EQ(after_more.raw_mallocs, after_first.raw_mallocs);
  EXPECT_EQ(after_more.raw_frees, after_first.raw_frees);
  EXPECT_GT(after_more.cache_hits, after_first.cache_hits);
  std::cout << "segments " << after_more.segments << ", reserved " << after_more.bytes_reserved << " B, peak in use "
            << after_more.peak_bytes_in_use << " B" << std::endl;
}

// One-device training on the GPU equals the CPU's: the trainer's inputs go on the copy stream
// into two alternating device buffers while the micro-batch before computes (Trainer::stage), so
// a missing or misplaced event (a buffer overwritten while read, a read before its copy) shows
// as weights that differ; with 4 micro-batches each buffer is reused within every step.
TEST_F(CudaGpu, TrainingWithInputsCopiedBesideComputeEqualsCpuTraining) {
  auto built = models::build_graph(kCnnModel, models::Size::kTiny, 1);
  ASSERT_TRUE(built.is_ok()) << built.status().message();
  graph::OpGraph const& g = *built;
  TrainConfig const c = config_for(models::Task::kClassification, 16, 4, 3);
  auto const want = train_single(g, c);
  auto data = make_data_source(c.data, g, c.loss, c.seed);
  ASSERT_TRUE(data.is_ok()) << data.status().message();
  ASSERT_TRUE(gpu_->overlaps_copies());
  auto trainer = Trainer::create(c, g, *gpu_, std::move(data).value());
  ASSERT_TRUE(trainer.is_ok()) << trainer.status().message();
  ASSERT_TRUE((*trainer)->run(nullptr).is_ok());
  double const worst = expect_close((*trainer)->trained_tensors(), want, 1e-3, 1e-5, "one CUDA device");
  std::cout << "worst relative difference to CPU " << worst << std::endl;
}

// CUDA graphs (cuda_graphs: true): from the second step each micro-batch is captured once per
// (micro-batch, input buffer) and replayed. The captured training must be the eager CUDA
// training's (the same kernels on the same values: equal up to the kernels' own run-to-run
// differences) and the CPU's within the tolerance above, and the captures must have happened: a
// model whose capture fails (the trainer then trains without graphs) fails here with the reason.
// dlrm's Gathers read graph inputs, so their index checks are captured and read after replays;
// the dropout MLP's masks come from seeds the captured kernels read from device memory.
TEST_F(CudaGpu, CapturedMicroBatchesTrainAsEagerOnes) {
  // The random ops' and Dropout's seeds and a dynamic loss scale (starting past float32's range, so
  // that steps overflow and are skipped while captured) are read from device memory by a replay.
  struct Case {
    std::string model;
    bool scaled = false;
  };
  for (Case const& k : {Case{kCnnModel}, Case{kCnnModel, true}, Case{"transformer"}, Case{"dlrm"}, Case{"dropout_mlp"},
                        Case{"noisy_mlp"}}) {
    std::string const model = k.model + (k.scaled ? " with a dynamic loss scale" : "");
    for (int64_t const mbs : {2, 3}) {
      SCOPED_TRACE(model + ", " + std::to_string(mbs) + " micro-batches");
      auto built = k.model == "dropout_mlp" ? testing::tiny_dropout_mlp().to_graph()
                   : k.model == "noisy_mlp" ? testing::tiny_noisy_mlp().to_graph()
                                            : models::build_graph(k.model, models::Size::kTiny, 1);
      ASSERT_TRUE(built.is_ok()) << built.status().message();
      graph::OpGraph const& g = *built;
      TrainConfig c = config_for(models::Task::kClassification, 4 * mbs, mbs, 5);
      if (k.scaled) {
        c.loss_scale.dynamic = true;
        c.loss_scale.init = 0x1p128;
        c.loss_scale.growth_interval = 2;
      }
      auto const want = train_single(g, c);
      auto train = [&](bool graphs) -> std::unique_ptr<Trainer> {
        c.cuda_graphs = graphs;
        auto data = make_data_source(c.data, g, c.loss, c.seed);
        EXPECT_TRUE(data.is_ok()) << data.status().message();
        auto trainer = Trainer::create(c, g, *gpu_, std::move(data).value());
        EXPECT_TRUE(trainer.is_ok()) << trainer.status().message();
        if (!trainer.is_ok()) return nullptr;
        Status const ran = (*trainer)->run(nullptr);
        EXPECT_TRUE(ran.is_ok()) << ran.message();
        return std::move(trainer).value();
      };
      auto const eager = train(false);
      auto const captured = train(true);
      ASSERT_TRUE(eager && captured);
      std::string const summary = captured->cuda_graphs_summary();
      std::cout << model << ", " << mbs << " micro-batches: " << summary << std::endl;
      EXPECT_EQ(summary.find("off after"), std::string::npos) << summary;
      EXPECT_EQ(captured->graph_replays(), (c.steps - 1) * mbs);
      EXPECT_EQ(captured->loss_scaler().skipped_steps(), eager->loss_scaler().skipped_steps());
      EXPECT_EQ(captured->loss_scaler().scale(), eager->loss_scaler().scale());
      EXPECT_EQ(captured->losses().size(), eager->losses().size());
      for (std::size_t k = 0; k < captured->losses().size(); ++k)
        EXPECT_NEAR(captured->losses()[k], eager->losses()[k], 1e-5 * std::abs(eager->losses()[k])) << "step " << k;
      double const to_eager =
          expect_close(captured->trained_tensors(), eager->trained_tensors(), 1e-5, 1e-7, model + " captured");
      double const to_cpu = expect_close(captured->trained_tensors(), want, 1e-3, 1e-5, model + " captured vs CPU");
      std::cout << "  worst relative difference to eager CUDA " << to_eager << ", to CPU " << to_cpu << std::endl;
    }
  }
}

// Between two GPUs of the process a tensor is a peer copy (Allocator::copy_from_peer), both ways,
// bytes equal; a pipeline's in-process receive is this clone (PipelineTrainingEqualsSingleDevice
// CpuTraining below trains across GPUs 0 and 1 through it where there are two).
TEST_F(CudaGpu, TensorsMoveBetweenTwoGpusByPeerCopies) {
  if (cuda::device_count() < 2) GTEST_SKIP() << "needs two GPUs (has " << cuda::device_count() << ")";
  auto other = CudaBackend::create(1);
  ASSERT_TRUE(other.is_ok()) << other.status().message();
  Tensor const host = random_tensor({257, 33}, 5);
  Tensor const on0 = host.clone_to(gpu_->caching_allocator());
  Tensor const on1 = on0.clone_to((*other)->caching_allocator());
  EXPECT_EQ(on1.device(), (DeviceRef{DeviceKind::kCuda, 1}));
  Tensor const back = on1.clone_to(gpu_->caching_allocator());
  EXPECT_EQ(on1.to_vector(), host.to_vector());
  EXPECT_EQ(back.to_vector(), host.to_vector());
}

// The weights after training `plan` with worker threads on CUDA devices (device d on GPU d modulo
// the GPUs there are), each worker waiting 60 s at most for its peers.
Result<std::map<std::string, Tensor>> train_on_cuda_workers(TrainConfig const& c, graph::OpGraph const& g,
                                                            partition::Plan const& plan,
                                                            schedule::Schedule const& sched) {
  int const gpus = cuda::device_count();
  RuntimeOptions o;
  o.worker.timeout_s = 60;
  o.threads_per_worker = 1;
  o.make_backend = [gpus](int device) -> Result<std::unique_ptr<Backend>> {
    ASSIGN_OR_RETURN(auto b, CudaBackend::create(device % gpus));
    return std::unique_ptr<Backend>(std::move(b));
  };
  ASSIGN_OR_RETURN(auto rt, Runtime::create_threads(c, g, plan, sched, o));
  RETURN_IF_ERROR(rt->run(-1, nullptr));
  return rt->trained_tensors();
}

// Replicas on GPUs: a 2-stage plan whose second stage has 2 replicas, 3 CUDA workers (GPUs 0, 1, 2
// round robin over what there is), the replicas' gradients all-reduced on the first replica's GPU
// (the in-process hub's device adder: peer copies and its add kernel), ends with the weights the
// CPU reaches on one device.
TEST_F(CudaGpu, ReplicatedStageTrainingEqualsSingleDeviceCpuTraining) {
  auto built = models::build_graph("mlp", models::Size::kTiny, 1);
  ASSERT_TRUE(built.is_ok()) << built.status().message();
  auto g = std::make_shared<graph::OpGraph const>(std::move(built).value());
  TrainConfig const c = config_for(models::Task::kClassification, 16, 2);
  auto const want = train_single(*g, c);
  auto plan = make_plan(g, "balanced", 2, c, false);
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  ASSERT_EQ(plan->stages.size(), 2u);
  plan->stages[0].devices = {0};
  plan->stages[0].replicas = 1;
  plan->stages[1].devices = {1, 2};
  plan->stages[1].replicas = 2;
  plan->num_devices = 3;
  ASSERT_TRUE(partition::validate_plan(*plan).is_ok());
  auto sched = schedule::build_schedule(*plan, schedule::Policy::kGpipe, {2, 0});
  ASSERT_TRUE(sched.is_ok()) << sched.status().message();
  auto got = train_on_cuda_workers(c, *g, *plan, *sched);
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  double const worst = expect_close(*got, want, 1e-3, 1e-5, "mlp with a replicated stage on CUDA");
  std::cout << "worst relative difference to CPU " << worst << std::endl;
}

// Synchronous semantics on GPUs: two CUDA workers (on GPUs 0 and 1, or both on GPU 0) training a
// 2-stage plan end with the weights the CPU reaches on one device.
TEST_F(CudaGpu, PipelineTrainingEqualsSingleDeviceCpuTraining) {
  for (std::string const model : {"mlp", kCnnModel}) {
    SCOPED_TRACE(model);
    auto built = models::build_graph(model, models::Size::kTiny, 1);
    ASSERT_TRUE(built.is_ok()) << built.status().message();
    auto g = std::make_shared<graph::OpGraph const>(std::move(built).value());
    TrainConfig const c = config_for(models::Task::kClassification, 16, 4);
    auto const want = train_single(*g, c);
    auto plan = make_plan(g, "balanced", 2, c, false);
    ASSERT_TRUE(plan.is_ok()) << plan.status().message();
    auto sched = schedule::build_schedule(*plan, schedule::Policy::k1F1B, {4, 0});
    ASSERT_TRUE(sched.is_ok()) << sched.status().message();
    auto got = train_on_cuda_workers(c, *g, *plan, *sched);
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    double const worst = expect_close(*got, want, 1e-3, 1e-5, model + " on CUDA");
    std::cout << model << ": worst relative difference to CPU " << worst << std::endl;
  }
}

}  // namespace
}  // namespace gp::exec::testing
