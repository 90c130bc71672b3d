// The integer cache keys (core/int_key.h) and the CPU's oneDNN primitive keys made of them
// (exec/cpu/dnnl_context.h): a key must tell apart every two calls whose primitives differ (a
// primitive found under another call's key computes the wrong thing, silently), and equal calls
// must find the same primitive.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "core/int_key.h"
#include "exec/cpu/dnnl_context.h"

namespace gp::exec {
namespace {

TEST(IntKey, TextsListsAndKeysKeepTheirBoundaries) {
  std::vector<int64_t> const one_two{1, 2}, three{3}, one{1}, two_three{2, 3};
  EXPECT_NE(IntKey().add_list(one_two).add_list(three), IntKey().add_list(one).add_list(two_three));
  EXPECT_NE(IntKey().add_text("ab").add_text("c"), IntKey().add_text("a").add_text("bc"));
  EXPECT_NE(IntKey().add_text("conv_fwd"), IntKey().add_text("conv_fwd\\0"));  // 8 bytes vs 10
  EXPECT_NE(IntKey().add_text("abcdefgh"), IntKey().add_text("abcdefgh").add_text(""));
  EXPECT_NE(IntKey().add_text(""), IntKey());
  IntKey inner;
  inner.add(7).add(8);
  EXPECT_NE(IntKey().add_key(inner).add(9), IntKey().add(7).add(8).add(9));
  EXPECT_EQ(IntKey().add_text("bn_fwd").add_list(one_two), IntKey().add_text("bn_fwd").add_list(one_two));
  EXPECT_EQ(IntKey().add_text("bn_fwd").add_list(one_two).hash(), IntKey().add_text("bn_fwd").add_list(one_two).hash());
}

// Every part of a oneDNN key counts: the name, each number (floats by their bits, so 0.5 is not
// 0.25 and -0 is not +0), each dims list, a memory layout's format.
TEST(IntKey, OneDnnKeysTellEveryPartApart) {
  std::vector<int64_t> const x{8, 3, 32, 32}, w{16, 3, 3, 3};
  IntKey const base = dnnl_ctx::key("conv_fwd", x, w, 1, 0.5f, true);
  EXPECT_EQ(base, dnnl_ctx::key("conv_fwd", x, w, 1, 0.5f, true));
  std::set<std::size_t> hashes{base.hash()};
  std::vector<IntKey> const others = {
      dnnl_ctx::key("conv_bwd", x, w, 1, 0.5f, true),  dnnl_ctx::key("conv_fwd", w, x, 1, 0.5f, true),
      dnnl_ctx::key("conv_fwd", x, w, 2, 0.5f, true),  dnnl_ctx::key("conv_fwd", x, w, 1, 0.25f, true),
      dnnl_ctx::key("conv_fwd", x, w, 1, -0.0f, true), dnnl_ctx::key("conv_fwd", x, w, 1, 0.5f, false),
      dnnl_ctx::key("conv_fwd", x, w, 1, 0.5, true),  // a double 0.5 has other bits than a float's
  };
  for (IntKey const& k : others) {
    EXPECT_NE(k, base);
    hashes.insert(k.hash());
  }
  EXPECT_EQ(hashes.size(), others.size() + 1);
  EXPECT_NE(dnnl_ctx::key("f", 0.0f), dnnl_ctx::key("f", -0.0f));

  dnnl::memory::desc const plain = dnnl_ctx::plain_md(x), blocked(dnnl_ctx::to_dims(x), dnnl::memory::data_type::f32,
                                                                  dnnl::memory::format_tag::nChw16c);
  dnnl::memory::desc const transposed = dnnl_ctx::strided_md(x, {3 * 32 * 32, 1, 32 * 3, 3});
  EXPECT_EQ(dnnl_ctx::key("reorder", plain), dnnl_ctx::key("reorder", dnnl_ctx::plain_md(x)));
  EXPECT_NE(dnnl_ctx::key("reorder", plain), dnnl_ctx::key("reorder", blocked));
  EXPECT_NE(dnnl_ctx::key("reorder", plain), dnnl_ctx::key("reorder", transposed));
  EXPECT_NE(dnnl_ctx::key("reorder", plain), dnnl_ctx::key("reorder", dnnl_ctx::plain_md(x, DType::kBFloat16)));
}

}  // namespace
}  // namespace gp::exec
