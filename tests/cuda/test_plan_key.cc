// The keys cuDNN and cuBLASLt plans are cached by (exec/cuda/plan_key.h), without a GPU: a key
// must tell apart every two calls whose plans differ (a plan found under another call's key runs
// the wrong convolution or matmul, silently), and find the plan again from an equal key built
// afresh by the next call. And a cached cuDNN plan's variant pack, rebound on every call.
#include "exec/cuda/plan_key.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "exec/cuda/conv_shape.h"
#include "exec/cuda/gemm_mapping.h"

namespace gp::exec::cuda {
namespace {

ConvShape resnet_stem() {
  graph::ConvAttrs a;
  a.strides = {2, 2};
  a.pads = {3, 3, 3, 3};
  Result<ConvShape> s = conv_shape({64, 3, 224, 224}, {64, 3, 7, 7}, a);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return *s;
}

TEST(PlanKey, EqualCallsMakeEqualKeysAndFindTheSamePlan) {
  ConvShape const s = resnet_stem();
  EXPECT_EQ(s.y, (std::vector<int64_t>{64, 64, 112, 112}));
  PlanKey const a = conv_plan_key(PlanKind::kConvFprop, s, 0, 0);
  PlanKey const b = conv_plan_key(PlanKind::kConvFprop, resnet_stem(), 0, 0);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash(), b.hash());
  PlanCache<int> cache;
  cache.emplace(a, std::make_unique<int>(7));
  auto it = cache.find(b);
  ASSERT_NE(it, cache.end());
  EXPECT_EQ(*it->second, 7);
}

TEST(PlanKey, ListsKeepTheirBoundaries) {
  PlanKey a(PlanKind::kBatchNormTrain, 0, 0), b(PlanKind::kBatchNormTrain, 0, 0);
  std::vector<int64_t> const one_two{1, 2}, three{3}, one{1}, two_three{2, 3};
  a.add_list(one_two).add_list(three);
  b.add_list(one).add_list(two_three);
  EXPECT_NE(a, b);
  EXPECT_NE(a.describe(), b.describe());
}

TEST(PlanKey, KindDeviceAndDataTypeEachMakeAnotherKey) {
  std::vector<int64_t> const x{8, 16, 4, 4};
  auto key = [&](PlanKind kind, int device, int64_t dtype) {
    PlanKey k(kind, device, dtype);
    k.add_list(x);
    return k;
  };
  PlanKey const base = key(PlanKind::kBatchNormTrain, 0, 0);
  EXPECT_NE(base, key(PlanKind::kBatchNormBackward, 0, 0));
  EXPECT_NE(base, key(PlanKind::kBatchNormTrain, 1, 0));
  EXPECT_NE(base, key(PlanKind::kBatchNormTrain, 0, 9));
  // The device is not in the text: one plan file serves every GPU of the model.
  EXPECT_EQ(base.describe(), key(PlanKind::kBatchNormTrain, 1, 0).describe());
  EXPECT_EQ(base.describe(), "bn_train 0 4 8 16 4 4");
}

// Each field of a conv's geometry, changed alone, changes its key: a key that left one out would
// run a cached plan of another convolution.
TEST(PlanKey, EveryFieldOfAConvChangesItsKey) {
  ConvShape const base = resnet_stem();
  PlanKey const k0 = conv_plan_key(PlanKind::kConvFprop, base, 0, 0);
  std::vector<std::pair<std::string, std::function<void(ConvShape&)>>> const changes = {
      {"x", [](ConvShape& s) { s.x[0] = 32; }},
      {"w", [](ConvShape& s) { s.w[2] = 5; }},
      {"y", [](ConvShape& s) { s.y[3] = 111; }},
      {"stride", [](ConvShape& s) { s.stride[1] = 1; }},
      {"dilation", [](ConvShape& s) { s.dilation[0] = 2; }},
      {"pad_begin", [](ConvShape& s) { s.pad_begin[0] = 2; }},
      {"pad_end", [](ConvShape& s) { s.pad_end[1] = 2; }},
      {"pads moved from end to begin", [](ConvShape& s) { s.pad_begin[0] = 4, s.pad_end[0] = 2; }},
      {"group", [](ConvShape& s) { s.group = 2; }},
      {"rank", [](ConvShape& s) { s.x.push_back(1), s.w.push_back(1); }},
  };
  std::set<std::size_t> hashes{k0.hash()};
  for (auto const& [name, change] : changes) {
    ConvShape s = base;
    change(s);
    PlanKey const k = conv_plan_key(PlanKind::kConvFprop, s, 0, 0);
    EXPECT_NE(k, k0) << name;
    hashes.insert(k.hash());
  }
  EXPECT_EQ(hashes.size(), changes.size() + 1);
  for (PlanKind kind : {PlanKind::kConvDgrad, PlanKind::kConvWgrad})
    EXPECT_NE(conv_plan_key(kind, base, 0, 0), k0) << plan_kind_name(kind);
  // Deterministic engines (`deterministic: true`) are other plans, in memory and on disk.
  PlanKey const deterministic = conv_plan_key(PlanKind::kConvFprop, base, 0, 0, /*deterministic=*/true);
  EXPECT_NE(deterministic, k0);
  EXPECT_NE(deterministic.describe(), k0.describe());
}

// The same for a cuBLASLt call: everything its descriptors and algorithm are made from changes
// the key; alpha, beta and the offsets (arguments of each call) do not.
TEST(PlanKey, EveryDescriptorFieldOfAMatmulChangesItsKey) {
  LtCall base;
  base.m = 768, base.n = 4096, base.k = 768, base.lda = 768, base.ldb = 768, base.ldc = 768;
  auto key = [](LtCall const& c, int64_t type = 0, bool tf32 = false, uint32_t al = 16, uint32_t bias_al = 0,
                int device = 0) { return matmul_plan_key(c, type, tf32, al, bias_al, device); };
  PlanKey const k0 = key(base);
  std::vector<std::pair<std::string, std::function<void(LtCall&)>>> const changes = {
      {"m", [](LtCall& c) { c.m = 767; }},
      {"n", [](LtCall& c) { c.n = 4095; }},
      {"k", [](LtCall& c) { c.k = 767; }},
      {"lda", [](LtCall& c) { c.lda = 2304; }},
      {"ldb", [](LtCall& c) { c.ldb = 2304; }},
      {"ldc", [](LtCall& c) { c.ldc = 2304; }},
      {"batch", [](LtCall& c) { c.batch = 12; }},
      {"stride_a", [](LtCall& c) { c.stride_a = 64; }},
      {"stride_b", [](LtCall& c) { c.stride_b = 64; }},
      {"stride_c", [](LtCall& c) { c.stride_c = 64; }},
      {"op_a", [](LtCall& c) { c.op_a = LtOp::kT; }},
      {"op_b", [](LtCall& c) { c.op_b = LtOp::kT; }},
      {"epilogue", [](LtCall& c) { c.epilogue = LtEpilogue::kBias; }},
  };
  for (auto const& [name, change] : changes) {
    LtCall c = base;
    change(c);
    EXPECT_NE(key(c), k0) << name;
  }
  EXPECT_NE(key(base, 1), k0) << "data type";
  EXPECT_NE(key(base, 0, true), k0) << "tf32";
  EXPECT_NE(key(base, 0, false, 4), k0) << "alignment";
  EXPECT_NE(key(base, 0, false, 16, 16), k0) << "bias alignment";
  EXPECT_NE(key(base, 0, false, 16, 0, 1), k0) << "device";
  LtCall same = base;
  same.alpha = 2.f, same.beta = 1.f, same.offset_a = 64, same.offset_b = 64, same.offset_c = 64;
  EXPECT_EQ(key(same), k0);
}

// Keys of many distinct calls spread over the hash: ResNet-like convs at every batch size and
// channel count of a sweep give (nearly) as many hashes as keys.
TEST(PlanKey, DistinctKeysSpreadOverTheHash) {
  std::set<std::size_t> hashes;
  int keys = 0;
  for (int64_t n : {1, 2, 8, 32, 64, 128, 256})
    for (int64_t c : {64, 128, 256, 512, 1024, 2048})
      for (int64_t hw : {7, 14, 28, 56})
        for (int64_t k : {1, 3}) {
          graph::ConvAttrs a;
          a.pads = {k / 2, k / 2, k / 2, k / 2};
          Result<ConvShape> s = conv_shape({n, c, hw, hw}, {c, c, k, k}, a);
          ASSERT_TRUE(s.is_ok());
          hashes.insert(conv_plan_key(PlanKind::kConvWgrad, *s, 0, 0).hash());
          ++keys;
        }
  EXPECT_GE(static_cast<int>(hashes.size()), keys - 1) << keys << " keys";
}

// A cuDNN plan's tensors are bound by uid 1..n in the order the graph was built with; each call
// rebinds every one, and a call that would leave one unbound or bind too many rebinds nothing.
TEST(VariantPack, EachCallRebindsEveryTensorInBuildOrder) {
  int x = 0, w = 0, y = 0, other = 0;
  VariantPack pack(3);
  ASSERT_TRUE(pack.bind({&x, &w, &y}).is_ok());
  EXPECT_EQ(pack.map().at(1), &x);
  EXPECT_EQ(pack.map().at(2), &w);
  EXPECT_EQ(pack.map().at(3), &y);
  ASSERT_TRUE(pack.bind({&other, &w, &x}).is_ok());
  EXPECT_EQ(pack.map().at(1), &other);
  EXPECT_EQ(pack.map().at(3), &x);
  EXPECT_EQ(pack.size(), 3u);

  Status const null = pack.bind({&y, nullptr, &y});
  EXPECT_EQ(null.code(), StatusCode::kInternal);
  EXPECT_EQ(null.message(), "tensor 1 is unbound");
  Status const short_list = pack.bind({&y, &y});
  EXPECT_EQ(short_list.code(), StatusCode::kInternal);
  EXPECT_EQ(short_list.message(), "2 tensors bound to a graph of 3");
  EXPECT_EQ(pack.map().at(1), &other) << "a refused call rebinds nothing";
}

}  // namespace
}  // namespace gp::exec::cuda
