// Host time of finding a call's cached plan, by the struct keys of exec/cuda/plan_key.h against
// the string keys they replaced (issue 23: "kernel and plan caches keyed by structs rather than
// strings"), measured in the same run. Every Conv (fprop, dgrad, wgrad), BatchNormalization
// (training forward, backward) and cuBLASLt matmul of a CUDA training step pays one lookup.
//
// The baseline is the code of 1f4ba48, copied here: the cuDNN call built its message text and its
// key as strings (ConvShape::describe() twice, the device prefixed), looked the key up in an
// unordered_map of strings, and made a fresh unordered_map of its tensor pointers; the cuBLASLt
// call formatted 16 integers into its key. The struct side is what the backend runs now: the key
// built inline, the lookup, and the pointers rebound into the plan's own variant pack. No GPU.
//
// The CPU backend's oneDNN primitive cache the same way: its keys were text made by an
// ostringstream (the dims through key_dims, then the pass's name around the geometry's key); now
// core/int_key.h's integers through dnnl_ctx::key.
//
// Usage: bench_plan_keys [--rounds N]   (default 200 rounds of every call of one step)
#include <algorithm>
#include <chrono>
#include <sstream>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/units.h"
#include "exec/cpu/dnnl_context.h"
#include "exec/cuda/conv_shape.h"
#include "exec/cuda/gemm_mapping.h"
#include "exec/cuda/plan_key.h"

namespace {

using namespace gp;
using namespace gp::exec::cuda;

// torchvision's ResNet-50 at batch 64, 224x224: the stem, then bottlenecks [3, 4, 6, 3] of widths
// 64..512 (stride in the 3x3 conv, a 1x1 downsample in each stage's first block).
std::vector<ConvShape> resnet50_convs() {
  std::vector<ConvShape> out;
  auto conv = [&](int64_t c, int64_t k, int64_t hw, int64_t kernel, int64_t stride) {
    graph::ConvAttrs a;
    a.strides = {stride, stride};
    int64_t const p = kernel / 2;
    a.pads = {p, p, p, p};
    Result<ConvShape> s = conv_shape({64, c, hw, hw}, {k, c, kernel, kernel}, a);
    if (!s.is_ok()) {
      std::fprintf(stderr, "bench_plan_keys: %s\n", s.status().message().c_str());
      std::exit(1);
    }
    out.push_back(*s);
    return s->y[2];
  };
  conv(3, 64, 224, 7, 2);
  int64_t in = 64, hw = 56;
  int const blocks[4] = {3, 4, 6, 3};
  for (int stage = 0; stage < 4; ++stage) {
    int64_t const width = 64 << stage;
    for (int b = 0; b < blocks[stage]; ++b) {
      int64_t const stride = (b == 0 && stage > 0) ? 2 : 1;
      conv(in, width, hw, 1, 1);
      int64_t const out_hw = conv(width, width, hw, 3, stride);
      conv(width, 4 * width, out_hw, 1, 1);
      if (b == 0) conv(in, 4 * width, hw, 1, stride);
      in = 4 * width, hw = out_hw;
    }
  }
  return out;
}

// A GPT-style decoder's cuBLASLt calls (d 768, 4 x MLP, 12 heads, sequence 256, batch 16): the
// linear layers forward, dA and dB, and the attention's batched products.
std::vector<LtCall> gpt_matmuls() {
  std::vector<LtCall> out;
  int64_t const rows = 16 * 256;
  for (auto [in, outf] : {std::pair<int64_t, int64_t>{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}, {768, 8192}})
    for (int pass = 0; pass < 3; ++pass) {
      LtCall c;
      c.m = pass == 1 ? in : outf, c.n = pass == 2 ? outf : rows, c.k = pass == 2 ? rows : (pass == 1 ? outf : in);
      c.op_a = pass == 0 ? LtOp::kT : LtOp::kN, c.op_b = pass == 2 ? LtOp::kT : LtOp::kN;
      c.lda = pass == 1 ? in : (pass == 0 ? in : outf), c.ldb = c.op_b == LtOp::kN ? c.k : c.n, c.ldc = c.m;
      c.epilogue = pass == 0 ? LtEpilogue::kBias : LtEpilogue::kNone;
      out.push_back(c);
    }
  for (int pass = 0; pass < 4; ++pass) {
    LtCall c;
    c.m = 256, c.n = 256, c.k = 64, c.batch = 192, c.lda = 64, c.ldb = 64, c.ldc = 256;
    c.op_a = pass % 2 ? LtOp::kN : LtOp::kT, c.stride_a = 256 * 64, c.stride_b = 256 * 64, c.stride_c = 256 * 256;
    c.k = pass < 2 ? 64 : 256;
    out.push_back(c);
  }
  return out;
}

struct Entry {
  VariantPack pack{0};
};

char const* const kConvKinds[3] = {"fprop", "dgrad", "wgrad"};
PlanKind const kConvPlanKinds[3] = {PlanKind::kConvFprop, PlanKind::kConvDgrad, PlanKind::kConvWgrad};

// ---- 1f4ba48's string keys (the baseline) ----
std::unordered_map<std::string, std::unique_ptr<Entry>> g_string_cache;

std::size_t string_conv(ConvShape const& s, int kind, void* const* ptrs) {
  std::string const what = std::string("conv ") + kConvKinds[kind] + " " + s.describe();
  std::string const key = std::string(kConvKinds[kind]) + s.describe() + " t" + std::to_string(0);
  std::string const full = std::to_string(0) + "|" + key;
  auto it = g_string_cache.find(full);
  if (it == g_string_cache.end()) it = g_string_cache.emplace(full, std::make_unique<Entry>()).first;
  std::unordered_map<int64_t, void*> pack;
  for (int i = 0; i < 3; ++i) pack.emplace(i + 1, ptrs[i]);
  return pack.size() + what.size();
}

std::size_t string_bn(std::vector<int64_t> const& x, int kind, void* const* ptrs) {
  char const* const names[2] = {"bn_train", "bn_bwd"};
  std::string const what =
      std::string(kind ? "batchnorm backward x " : "batchnorm training forward x ") + dims_string(x);
  std::string const full = std::to_string(0) + "|" + names[kind] + dims_string(x) + " t" + std::to_string(0);
  auto it = g_string_cache.find(full);
  if (it == g_string_cache.end()) it = g_string_cache.emplace(full, std::make_unique<Entry>()).first;
  std::unordered_map<int64_t, void*> pack;
  int const n = kind ? 8 : 12;
  for (int i = 0; i < n; ++i) pack.emplace(i + 1, ptrs[i]);
  return pack.size() + what.size();
}

std::size_t string_matmul(LtCall const& c) {
  std::string key = std::to_string(0) + ":" + std::to_string(0);
  for (int64_t v :
       {c.m, c.n, c.k, c.lda, c.ldb, c.ldc, c.batch, c.stride_a, c.stride_b, c.stride_c, static_cast<int64_t>(c.op_a),
        static_cast<int64_t>(c.op_b), static_cast<int64_t>(c.epilogue), int64_t{16}, int64_t{0}})
    key += "," + std::to_string(v);
  auto it = g_string_cache.find(key);
  if (it == g_string_cache.end()) it = g_string_cache.emplace(key, std::make_unique<Entry>()).first;
  return key.size();
}

// ---- the struct keys (what exec/cuda/cudnn_graphs.cc and cublaslt_gemm.cc run) ----
PlanCache<Entry> g_struct_cache;

Entry& struct_entry(PlanKey const& key, int slots) {
  auto it = g_struct_cache.find(key);
  if (it == g_struct_cache.end()) {
    auto e = std::make_unique<Entry>();
    e->pack = VariantPack(static_cast<std::size_t>(slots));
    it = g_struct_cache.emplace(key, std::move(e)).first;
  }
  return *it->second;
}

std::size_t bind(Entry& e, void* const* ptrs, int n) {
  Status const s = n == 3   ? e.pack.bind({ptrs[0], ptrs[1], ptrs[2]})
                   : n == 8 ? e.pack.bind({ptrs[0], ptrs[1], ptrs[2], ptrs[3], ptrs[4], ptrs[5], ptrs[6], ptrs[7]})
                            : e.pack.bind({ptrs[0], ptrs[1], ptrs[2], ptrs[3], ptrs[4], ptrs[5], ptrs[6], ptrs[7],
                                           ptrs[8], ptrs[9], ptrs[10], ptrs[11]});
  return s.is_ok() ? e.pack.size() : 0;
}

std::size_t struct_conv(ConvShape const& s, int kind, void* const* ptrs) {
  return bind(struct_entry(conv_plan_key(kConvPlanKinds[kind], s, 0, 0), 3), ptrs, 3);
}

std::size_t struct_bn(std::vector<int64_t> const& x, int kind, void* const* ptrs) {
  PlanKey key(kind ? PlanKind::kBatchNormBackward : PlanKind::kBatchNormTrain, 0, 0);
  key.add_list(x);
  int const n = kind ? 8 : 12;
  return bind(struct_entry(key, n), ptrs, n);
}

std::size_t struct_matmul(LtCall const& c) {
  return struct_entry(matmul_plan_key(c, 0, false, 16, 0, 0), 0).pack.size();
}

// ---- the CPU backend's oneDNN keys: 1f4ba48's text against dnnl_ctx::key's integers ----
template <typename... Parts>
std::string text_key(Parts const&... parts) {
  std::ostringstream os;
  ((os << parts << '|'), ...);
  return os.str();
}
char const* const kDnnlPasses[3] = {"conv_fwd", "conv_bwd_data", "conv_bwd_weights"};
std::unordered_map<std::string, int> g_dnnl_text;
std::unordered_map<IntKey, int, IntKeyHash> g_dnnl_int;

// What a CPU conv call keyed: its geometry (exec/cpu/conv.cc), then the pass around it.
std::size_t text_dnnl_conv(ConvShape const& s, int pass) {
  std::string const geometry = text_key(0, exec::dnnl_ctx::key_dims(s.x), exec::dnnl_ctx::key_dims(s.w), s.group,
                                        exec::dnnl_ctx::key_dims(s.stride), exec::dnnl_ctx::key_dims(s.dilation),
                                        exec::dnnl_ctx::key_dims(s.pad_begin), exec::dnnl_ctx::key_dims(s.pad_end));
  std::string const k = text_key(kDnnlPasses[pass], geometry, true);
  return static_cast<std::size_t>(g_dnnl_text.emplace(k, pass).first->second) + k.size();
}

std::size_t int_dnnl_conv(ConvShape const& s, int pass) {
  IntKey const geometry = exec::dnnl_ctx::key(0, s.x, s.w, s.group, s.stride, s.dilation, s.pad_begin, s.pad_end);
  IntKey const k = exec::dnnl_ctx::key(kDnnlPasses[pass], geometry, true);
  return static_cast<std::size_t>(g_dnnl_int.emplace(k, pass).first->second) + k.values().size();
}

template <typename F>
double ns_per_call(F const& one_round, int calls, int rounds) {
  std::size_t sink = one_round();  // warm-up: fills the caches
  double best[3];
  for (double& t : best) {
    auto const t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < rounds; ++r) sink += one_round();
    t = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / rounds / calls;
  }
  if (sink == 42) std::puts("");
  std::sort(best, best + 3);
  return best[1];  // the median of 3
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 200;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: bench_plan_keys [--rounds N]\n");
      return 2;
    }
  }
  std::vector<ConvShape> const convs = resnet50_convs();
  std::vector<LtCall> const matmuls = gpt_matmuls();
  int dummy[12];
  void* ptrs[12];
  for (int i = 0; i < 12; ++i) ptrs[i] = &dummy[i];

  struct Row {
    char const* name;
    int calls;
    double string_ns, struct_ns;
  };
  std::vector<Row> rows;
  // A row: `per_call(item, pass, text_keys)` over every item and pass of one step, both ways.
  auto row = [&](char const* name, auto const& items, int passes, auto const& per_call) {
    int const calls = passes * static_cast<int>(items.size());
    auto round = [&](bool text_keys) {
      return [&, text_keys] {
        std::size_t n = 0;
        for (auto const& item : items)
          for (int k = 0; k < passes; ++k) n += per_call(item, k, text_keys);
        return n;
      };
    };
    rows.push_back({name, calls, ns_per_call(round(true), calls, rounds), ns_per_call(round(false), calls, rounds)});
  };
  row("ResNet-50 Conv (fprop, dgrad, wgrad)", convs, 3,
      [&](ConvShape const& s, int k, bool text) { return text ? string_conv(s, k, ptrs) : struct_conv(s, k, ptrs); });
  // One BatchNormalization after every conv, on its output.
  row("ResNet-50 BatchNorm (train, backward)", convs, 2,
      [&](ConvShape const& s, int k, bool text) { return text ? string_bn(s.y, k, ptrs) : struct_bn(s.y, k, ptrs); });
  std::vector<LtCall> six_layers;  // the decoder's six layers
  for (int layer = 0; layer < 6; ++layer) six_layers.insert(six_layers.end(), matmuls.begin(), matmuls.end());
  row("GPT decoder cuBLASLt matmuls", six_layers, 1,
      [&](LtCall const& c, int, bool text) { return text ? string_matmul(c) : struct_matmul(c); });
  row("CPU oneDNN conv primitives (ResNet-50)", convs, 3,
      [&](ConvShape const& s, int k, bool text) { return text ? text_dnnl_conv(s, k) : int_dnnl_conv(s, k); });

  std::printf("plan lookups: host time per call, median of 3 runs of %d rounds (string keys: 1f4ba48)\n\n", rounds);
  std::printf("%-40s %6s %14s %14s %7s %15s %15s\n", "calls", "a step", "string ns", "struct ns", "ratio",
              "string us/step", "struct us/step");
  for (Row const& r : rows)
    std::printf("%-40s %6d %14.1f %14.1f %6.2fx %15.1f %15.1f\n", r.name, r.calls, r.string_ns, r.struct_ns,
                r.string_ns / r.struct_ns, r.string_ns * r.calls / 1e3, r.struct_ns * r.calls / 1e3);
  std::printf("\nratio = string / struct (> 1: the struct keys are faster); a step = one forward and backward\n");
  return 0;
}
