#include "partition/synthetic.h"

#include <gtest/gtest.h>

#include "partition/cluster.h"
#include "partition/sp_decompose.h"

namespace gp::partition {
namespace {

int in_degree(Problem const& p, int v) { return static_cast<int>(p.in_edges[static_cast<std::size_t>(v)].size()); }
int out_degree(Problem const& p, int v) { return static_cast<int>(p.out_edges[static_cast<std::size_t>(v)].size()); }

TEST(Synthetic, ChainHasOneEdgePerNodeButTheFirst) {
  auto p = synthetic_problem("chain2000");
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  EXPECT_EQ(p->model, "chain2000");
  ASSERT_EQ(p->nodes.size(), 2000u);
  ASSERT_EQ(p->edges.size(), 1999u);
  for (int v = 1; v < 2000; ++v) {
    EXPECT_EQ(p->edges[static_cast<std::size_t>(v - 1)].src, v - 1);
    EXPECT_EQ(p->edges[static_cast<std::size_t>(v - 1)].dst, v);
  }
  EXPECT_EQ(p->batch, 256);
  EXPECT_EQ(p->cluster.size(), 8);
}

TEST(Synthetic, Branch16IsOneForkJoinWithAHead) {
  auto p = synthetic_problem("branch16");
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  int const join = 1 + 16 * 96;
  ASSERT_EQ(p->nodes.size(), static_cast<std::size_t>(join + 1 + 8));  // 1,546
  EXPECT_EQ(p->edges.size(), 16u * 97u + 8u);
  EXPECT_EQ(out_degree(*p, 0), 16);
  EXPECT_EQ(in_degree(*p, join), 16);
  EXPECT_EQ(in_degree(*p, join + 8), 1);
  EXPECT_EQ(out_degree(*p, join + 8), 0);
  auto sp = sp_decompose(*p);
  ASSERT_TRUE(sp.is_ok()) << sp.status().message();
  EXPECT_TRUE(sp->added_edges.empty());
}

TEST(Synthetic, BranchyFillsBlocksThenATail) {
  auto spec = synthetic_spec("branchy10000");
  ASSERT_TRUE(spec.is_ok()) << spec.status().message();
  EXPECT_EQ(spec->blocks, 384);  // 384 x (4 x 6 + 2) = 9,984
  EXPECT_EQ(spec->tail, 16);
  auto p = synthetic_problem("branchy10000");
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  ASSERT_EQ(p->nodes.size(), 10000u);
  // Per block: 4 branches of 6 nodes and their edge to the join; between blocks one edge; the tail.
  EXPECT_EQ(p->edges.size(), 384u * 4u * 7u + 383u + 16u);
  for (int k = 0; k < 384; ++k) {
    int const fork = 26 * k, join = fork + 25;
    EXPECT_EQ(out_degree(*p, fork), 4) << "block " << k;
    EXPECT_EQ(in_degree(*p, fork), k == 0 ? 0 : 1) << "block " << k;
    EXPECT_EQ(in_degree(*p, join), 4) << "block " << k;
  }
  EXPECT_EQ(out_degree(*p, 9999), 0);
  auto sp = sp_decompose(*p);
  ASSERT_TRUE(sp.is_ok()) << sp.status().message();
  EXPECT_TRUE(sp->added_edges.empty());
}

TEST(Synthetic, CostsAreAffineSeededAndDeterministic) {
  auto a = synthetic_problem("branchy1000");
  auto b = synthetic_problem("branchy1000");
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  auto const& t1 = a->node_times(1);
  auto const& t4 = a->node_times(4);
  auto const& u1 = b->node_times(1);
  // The generator bench_partition has used since it had synthetic rows: seed 12345's first draw.
  EXPECT_NEAR(t1[0].fwd_s, 20e-6 + 0.0006095786059854947, 1e-15);
  for (std::size_t v = 0; v < t1.size(); ++v) {
    EXPECT_EQ(t1[v].fwd_s, u1[v].fwd_s) << v;
    EXPECT_EQ(t1[v].bwd_input_s, t1[v].fwd_s);
    EXPECT_EQ(t1[v].bwd_weight_s, t1[v].fwd_s);
    double const c = t1[v].fwd_s - 20e-6;
    EXPECT_GE(c, 0.5e-3);
    EXPECT_LE(c, 1.5e-3);
    EXPECT_NEAR(t4[v].fwd_s, 20e-6 + 4 * c, 1e-12);
  }
  EXPECT_EQ(a->nodes[7].weight_bytes, int64_t{4} << 20);
  EXPECT_EQ(a->nodes[7].activation_bytes_per_sample, int64_t{2} << 20);
  EXPECT_EQ(a->edges[7].bytes_per_sample, int64_t{4} << 20);

  SyntheticSpec spec = *synthetic_spec("branchy1000");
  spec.seed = 7;
  spec.cluster = Cluster::uniform(1024, int64_t{16} << 30);
  spec.batch = 2048;
  auto c = synthetic_problem(spec);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->cluster.size(), 1024);
  EXPECT_EQ(c->batch, 2048);
  ASSERT_EQ(c->nodes.size(), a->nodes.size());
  int differ = 0;
  for (std::size_t v = 0; v < t1.size(); ++v) differ += c->node_times(1)[v].fwd_s != t1[v].fwd_s;
  EXPECT_GT(differ, 900) << "another seed must draw other costs";
}

TEST(Synthetic, BadNamesAndSpecsSayWhatIsValid) {
  for (char const* name : {"chain", "chain-3", "chain0", "branchy25", "branchyX", "tree100", "branch17"}) {
    auto p = synthetic_problem(name);
    ASSERT_FALSE(p.is_ok()) << name;
    EXPECT_NE(p.status().message().find("use chainN (N >= 1), branchyN (N >= 26) or branch16"), std::string::npos)
        << p.status().message();
  }
  auto big = synthetic_problem("chain60000");
  ASSERT_FALSE(big.is_ok());
  EXPECT_NE(big.status().message().find("at most 50000"), std::string::npos) << big.status().message();
  auto zero = synthetic_problem(SyntheticSpec{.shape = SyntheticShape::kBranchy, .blocks = 2, .branches = 0});
  ASSERT_FALSE(zero.is_ok());
  EXPECT_NE(zero.status().message().find("branches is 0, it must be at least 1"), std::string::npos)
      << zero.status().message();
}

}  // namespace
}  // namespace gp::partition
