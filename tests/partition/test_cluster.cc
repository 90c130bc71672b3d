#include <string>

#include <gtest/gtest.h>

#include "partition/cluster.h"

namespace gp::partition {
namespace {

TEST(ParseBytes, UnitsAndErrors) {
  EXPECT_EQ(*parse_bytes("16GiB"), int64_t{16} << 30);
  EXPECT_EQ(*parse_bytes("16GB"), int64_t{16'000'000'000});
  EXPECT_EQ(*parse_bytes("512 MiB"), int64_t{512} << 20);
  EXPECT_EQ(*parse_bytes("1.5e9"), int64_t{1'500'000'000});
  EXPECT_EQ(*parse_bytes("2kib"), 2048);
  auto bad = parse_bytes("16 parsecs");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("16 parsecs"), std::string::npos);
  EXPECT_FALSE(parse_bytes("-3GB").is_ok());
  EXPECT_FALSE(parse_bytes("").is_ok());
}

TEST(ParseBandwidth, BytesAndBitsPerSecond) {
  EXPECT_DOUBLE_EQ(*parse_bandwidth("100GB/s"), 100e9);
  EXPECT_DOUBLE_EQ(*parse_bandwidth("12.5GB/s"), 12.5e9);
  EXPECT_DOUBLE_EQ(*parse_bandwidth("100Gbit/s"), 12.5e9);
  EXPECT_DOUBLE_EQ(*parse_bandwidth("1e9"), 1e9);
  EXPECT_FALSE(parse_bandwidth("fast").is_ok());
}

TEST(Cluster, UniformPlacesDevicesOnNodes) {
  Cluster c = Cluster::uniform(10, 1 << 30);
  EXPECT_EQ(c.size(), 10);
  EXPECT_EQ(c.devices[9].node, 1);
  EXPECT_EQ(c.devices[3].memory_bytes, 1 << 30);
  EXPECT_EQ(&c.link(0, 7), &c.intra_node);
  EXPECT_EQ(&c.link(7, 8), &c.inter_node);
  EXPECT_EQ(&c.link_for_group(9), &c.inter_node);
}

TEST(Cluster, YamlWithGroupsLinksAndDefaults) {
  auto c = Cluster::from_yaml_string(R"(
memory: 16GiB
devices_per_node: 4
devices:
  - {count: 4, speed: 1.0}
  - {count: 2, memory: 32GiB, speed: 2.0, peak_flops: 31.4e12, memory_bandwidth: 1.8TB/s}
intra_node: {bandwidth: 300GB/s, latency: 2us}
inter_node: {bandwidth: 100Gbit/s, latency: 0.01ms}
)");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  ASSERT_EQ(c->size(), 6);
  EXPECT_EQ(c->devices[0].memory_bytes, int64_t{16} << 30);
  EXPECT_EQ(c->devices[5].memory_bytes, int64_t{32} << 30);
  EXPECT_DOUBLE_EQ(c->devices[5].speed, 2.0);
  EXPECT_DOUBLE_EQ(c->devices[4].memory_bandwidth, 1.8e12);
  EXPECT_EQ(c->devices[4].node, 1);
  EXPECT_DOUBLE_EQ(c->intra_node.bandwidth, 300e9);
  EXPECT_DOUBLE_EQ(c->intra_node.latency, 2e-6);
  EXPECT_DOUBLE_EQ(c->inter_node.bandwidth, 12.5e9);
  EXPECT_DOUBLE_EQ(c->inter_node.latency, 1e-5);
}

TEST(Cluster, YamlCountForm) {
  auto c = Cluster::from_yaml_string("devices: 8\nmemory: 512MiB\n");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->size(), 8);
  EXPECT_EQ(c->devices[7].memory_bytes, int64_t{512} << 20);
}

TEST(Cluster, YamlErrorsNameTheKey) {
  auto unknown = Cluster::from_yaml_string("devices: 2\nmemroy: 1GB\n");
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("memroy"), std::string::npos);
  auto missing = Cluster::from_yaml_string("memory: 1GB\n");
  EXPECT_NE(missing.status().message().find("devices"), std::string::npos);
  auto bad_group = Cluster::from_yaml_string("devices:\n  - {count: 0}\n");
  EXPECT_NE(bad_group.status().message().find("devices[0].count"), std::string::npos) << bad_group.status().message();
  auto bad_link = Cluster::from_yaml_string("devices: 2\nintra_node: {bandwidth: 10GB/s, jitter: 1}\n");
  EXPECT_NE(bad_link.status().message().find("intra_node.jitter"), std::string::npos);
  EXPECT_EQ(Cluster::from_yaml_string("devices: [").status().code(), StatusCode::kParseError);
  EXPECT_EQ(Cluster::from_yaml_file("/nonexistent/c.yaml").status().code(), StatusCode::kNotFound);
}

// The bundled examples parse; the 1,024-device one is 128 nodes of 8 with a slow inter-node link.
TEST(Cluster, ExampleFilesParse) {
  std::string const dir = std::string(GP_SOURCE_DIR) + "/examples/clusters/";
  for (char const* name : {"dgx_4x8.yaml", "mixed_a100_v100.yaml"}) {
    auto c = Cluster::from_yaml_file(dir + name);
    EXPECT_TRUE(c.is_ok()) << name << ": " << c.status().message();
  }
  auto c = Cluster::from_yaml_file(dir + "cluster_128x8.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  ASSERT_EQ(c->size(), 1024);
  EXPECT_EQ(c->devices_per_node, 8);
  EXPECT_EQ(c->devices[7].node, 0);
  EXPECT_EQ(c->devices[8].node, 1);
  EXPECT_EQ(c->devices[1023].node, 127);
  EXPECT_EQ(c->devices[1023].memory_bytes, int64_t{16} << 30);
  EXPECT_DOUBLE_EQ(c->devices[0].peak_flops, 15.7e12);
  EXPECT_DOUBLE_EQ(c->intra_node.bandwidth, 150e9);
  EXPECT_DOUBLE_EQ(c->inter_node.bandwidth, 12.5e9);
  EXPECT_EQ(&c->link(0, 7), &c->intra_node);
  EXPECT_EQ(&c->link(7, 8), &c->inter_node);
}

}  // namespace
}  // namespace gp::partition
