#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "exec/data.h"

namespace gp::exec {
namespace {

using graph::DType;
using graph::kBatch;
using graph::TensorRole;

// x [N,4] -> Gemm(W [3,4]) -> y [N,3].
graph::OpGraph tiny_classifier() {
  graph::OpGraph g;
  graph::TensorInfo x{.name = "x", .shape = {{kBatch, 4}}, .role = TensorRole::kInput};
  auto xi = g.add_tensor(x);
  graph::TensorInfo w{.name = "w", .shape = {{3, 4}}, .role = TensorRole::kWeight};
  w.data = std::make_shared<graph::TensorData>(graph::TensorData::from_floats({3, 4}, std::vector<float>(12, 0.1f)));
  auto wi = g.add_tensor(w);
  auto yi = g.add_tensor(graph::TensorInfo{.name = "y", .shape = {{kBatch, 3}}});
  graph::Op op;
  op.name = "fc";
  op.type = "Gemm";
  op.typed = graph::GemmAttrs{.trans_b = true};
  op.inputs = {xi, wi};
  op.outputs = {yi};
  g.add_op(op);
  g.mark_input(xi);
  g.mark_output(yi);
  EXPECT_TRUE(g.finalize().is_ok());
  return g;
}

std::string data_temp_path(std::string const& name) {
  return (std::filesystem::temp_directory_path() / ("gp_test_data_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

TEST(Data, LabelSpecFromTheModelOutput) {
  auto g = tiny_classifier();
  auto ce = label_spec(g, LossKind::kCrossEntropy);
  ASSERT_TRUE(ce.is_ok());
  EXPECT_EQ(ce->classes, 3);
  EXPECT_TRUE(ce->label_dims.empty());
  auto mse = label_spec(g, LossKind::kMse);
  ASSERT_TRUE(mse.is_ok());
  EXPECT_EQ(mse->label_dims, (std::vector<int64_t>{3}));
}

TEST(Data, SyntheticIsDeterministicPerSampleAndUsesEveryClass) {
  auto g = tiny_classifier();
  auto a = make_data_source(DataConfig{}, g, LossKind::kCrossEntropy, 7);
  auto b = make_data_source(DataConfig{}, g, LossKind::kCrossEntropy, 7);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  auto big = (*a)->batch(0, 64);
  ASSERT_TRUE(big.is_ok());
  EXPECT_EQ(big->inputs[0].shape(), (std::vector<int64_t>{64, 4}));
  EXPECT_EQ(big->labels.shape(), (std::vector<int64_t>{64}));
  EXPECT_EQ(big->labels.dtype(), DType::kInt64);
  // Sample i does not depend on how batches are cut: samples 10..13 are the same either way.
  auto part = (*b)->batch(10, 4);
  ASSERT_TRUE(part.is_ok());
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(part->labels.data<int64_t>()[j], big->labels.data<int64_t>()[10 + j]);
    for (int k = 0; k < 4; ++k)
      EXPECT_EQ(part->inputs[0].data<float>()[j * 4 + k], big->inputs[0].data<float>()[(10 + j) * 4 + k]);
  }
  int counts[3] = {0, 0, 0};
  for (int j = 0; j < 64; ++j) {
    int64_t l = big->labels.data<int64_t>()[j];
    ASSERT_TRUE(l >= 0 && l < 3);
    ++counts[l];
  }
  for (int c : counts) EXPECT_GT(c, 3);
  auto other = make_data_source(DataConfig{}, g, LossKind::kCrossEntropy, 8);
  EXPECT_NE((*other)->batch(0, 1)->inputs[0].to_vector(), part->inputs[0].reshaped({4, 4}).to_vector());
}

TEST(Data, FiniteSyntheticDatasetCycles) {
  auto g = tiny_classifier();
  DataConfig c;
  c.samples = 5;
  auto d = make_data_source(c, g, LossKind::kMse, 1);
  ASSERT_TRUE(d.is_ok());
  auto b = (*d)->batch(3, 4);  // samples 3, 4, 0, 1
  auto first = (*d)->batch(0, 2);
  ASSERT_TRUE(b.is_ok() && first.is_ok());
  auto bv = b->inputs[0].to_vector(), fv = first->inputs[0].to_vector();
  EXPECT_EQ(std::vector<float>(bv.begin() + 8, bv.end()), fv);
  EXPECT_EQ(b->labels.dtype(), DType::kFloat32);
}

TEST(Data, NpyRoundTripAndBatches) {
  auto g = tiny_classifier();
  NpyArray x{DType::kFloat32, {6, 4}, {}};
  std::vector<float> xv(24);
  for (int i = 0; i < 24; ++i) xv[i] = static_cast<float>(i);
  x.bytes.resize(96);
  std::memcpy(x.bytes.data(), xv.data(), 96);
  NpyArray y{DType::kInt64, {6}, {}};
  std::vector<int64_t> yv = {0, 1, 2, 2, 1, 0};
  y.bytes.resize(48);
  std::memcpy(y.bytes.data(), yv.data(), 48);
  auto xp = data_temp_path("x.npy"), yp = data_temp_path("y.npy");
  ASSERT_TRUE(write_npy(xp, x).is_ok());
  ASSERT_TRUE(write_npy(yp, y).is_ok());
  auto back = read_npy(xp);
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->shape, x.shape);
  EXPECT_EQ(back->bytes, x.bytes);
  DataConfig c;
  c.kind = DataConfig::Kind::kNpy;
  c.inputs = {xp};
  c.labels = yp;
  auto d = make_data_source(c, g, LossKind::kCrossEntropy, 0);
  ASSERT_TRUE(d.is_ok()) << d.status().message();
  auto b = (*d)->batch(4, 4);  // rows 4, 5, 0, 1
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(b->inputs[0].to_vector()[0], 16.f);
  EXPECT_EQ(b->inputs[0].to_vector()[8], 0.f);
  EXPECT_EQ(b->labels.data<int64_t>()[1], 0);
  EXPECT_EQ(b->labels.data<int64_t>()[3], 1);
  std::filesystem::remove(xp);
  std::filesystem::remove(yp);
}

TEST(Data, NpyShapeMismatchIsAClearError) {
  auto g = tiny_classifier();
  NpyArray x{DType::kFloat32, {2, 5}, std::vector<std::byte>(40)};
  NpyArray y{DType::kInt64, {2}, std::vector<std::byte>(16)};
  auto xp = data_temp_path("bad_x.npy"), yp = data_temp_path("bad_y.npy");
  ASSERT_TRUE(write_npy(xp, x).is_ok());
  ASSERT_TRUE(write_npy(yp, y).is_ok());
  DataConfig c;
  c.kind = DataConfig::Kind::kNpy;
  c.inputs = {xp};
  c.labels = yp;
  auto d = make_data_source(c, g, LossKind::kCrossEntropy, 0);
  ASSERT_FALSE(d.is_ok());
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
  std::string const msg = d.status().message();
  EXPECT_NE(msg.find("[5]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'x' [4]"), std::string::npos) << msg;
  // Labels out of range and sample-count mismatch are also caught.
  NpyArray x2{DType::kFloat32, {2, 4}, std::vector<std::byte>(32)};
  ASSERT_TRUE(write_npy(xp, x2).is_ok());
  NpyArray y3{DType::kInt64, {3}, std::vector<std::byte>(24)};
  ASSERT_TRUE(write_npy(yp, y3).is_ok());
  auto d2 = make_data_source(c, g, LossKind::kCrossEntropy, 0);
  ASSERT_FALSE(d2.is_ok());
  EXPECT_NE(d2.status().message().find("2 samples"), std::string::npos) << d2.status().message();
  std::filesystem::remove(xp);
  std::filesystem::remove(yp);
}

TEST(Data, TruncatedNpyIsAParseError) {
  auto p = data_temp_path("trunc.npy");
  NpyArray x{DType::kFloat32, {8, 4}, std::vector<std::byte>(128)};
  ASSERT_TRUE(write_npy(p, x).is_ok());
  std::filesystem::resize_file(p, std::filesystem::file_size(p) - 10);
  auto r = read_npy(p);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kParseError);
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos);
  std::filesystem::remove(p);
}

}  // namespace
}  // namespace gp::exec
