// Models from strangers: external data that points outside the model's folder, sizes that do not
// match the data file, weights beyond the memory limit, and graphs too large or too deeply nested
// are refused with one clear message, before anything is read or allocated.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include "graph/onnx_namespace.h"

#include "graph/onnx_builder.h"
#include "graph/onnx_export.h"
#include "graph/onnx_import.h"

namespace gp::graph {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(std::string const& name) {
  fs::path const dir = fs::path(GP_BINARY_DIR) / "untrusted_models" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// y = x @ w with w [300, 200] in an external data file next to the model.
onnx::ModelProto external_model(fs::path const& dir) {
  OnnxModelBuilder b("linear", 13, 7);
  b.add_input("x", {kBatch, 300});
  b.add_output("y", {kBatch, 200});
  b.add_initializer("w", {300, 200}, InitRule{InitRule::Kind::kOnes});
  b.add_node("MatMul", {"x", "w"}, {"y"});
  SaveOptions save;
  save.external_data = SaveOptions::ExternalData::kAlways;
  EXPECT_TRUE(b.save((dir / "m.onnx").string(), save).is_ok());
  onnx::ModelProto model;
  std::ifstream in(dir / "m.onnx", std::ios::binary);
  EXPECT_TRUE(model.ParseFromIstream(&in));
  return model;
}

void set_external(onnx::ModelProto& model, std::string const& key, std::string const& value) {
  auto* t = model.mutable_graph()->mutable_initializer(0);
  for (auto& e : *t->mutable_external_data())
    if (e.key() == key) {
      e.set_value(value);
      return;
    }
  auto* e = t->add_external_data();
  e->set_key(key);
  e->set_value(value);
}

std::string write_model(onnx::ModelProto const& model, fs::path const& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  EXPECT_TRUE(model.SerializeToOstream(&out));
  return path.string();
}

// The import fails and its message contains `needle`.
void expect_refused(Result<OpGraph> const& g, std::string const& needle) {
  ASSERT_FALSE(g.is_ok()) << "the model was accepted";
  EXPECT_NE(g.status().message().find(needle), std::string::npos) << g.status().message();
}

ImportOptions unchecked() {  // our checks, not ONNX's checker, must be what refuses
  ImportOptions o;
  o.run_checker = false;
  return o;
}

TEST(UntrustedModels, ExternalDataOutsideTheModelFolderIsRefused) {
  fs::path const root = fresh_dir("escape");
  fs::create_directories(root / "models");
  auto model = external_model(root / "models");
  fs::copy_file(root / "models" / "m.onnx.data", root / "secret.bin");
  set_external(model, "location", "../secret.bin");
  expect_refused(load_onnx(write_model(model, root / "models" / "up.onnx"), unchecked()), "outside the model's folder");
  expect_refused(load_onnx(write_model(model, root / "models" / "up.onnx")), "outside the model's folder");
  set_external(model, "location", (root / "secret.bin").string());
  expect_refused(load_onnx(write_model(model, root / "models" / "abs.onnx"), unchecked()),
                 "outside the model's folder");
  set_external(model, "location", "sub/../../secret.bin");
  expect_refused(load_onnx(write_model(model, root / "models" / "mid.onnx"), unchecked()),
                 "outside the model's folder");
}

// "m.onnx" has no parent path; its folder is the current one, not "a model read from memory".
TEST(UntrustedModels, AModelInTheCurrentFolderFindsItsExternalData) {
  fs::path const dir = fresh_dir("relative");
  external_model(dir);
  fs::path const saved = fs::current_path();
  fs::current_path(dir);
  auto g = load_onnx("m.onnx");
  Status const exported = export_trained_onnx("m.onnx", {}, "inlined.onnx");
  fs::current_path(saved);
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  ASSERT_NE(g->tensor(*g->find_tensor("w")).data, nullptr);
  EXPECT_EQ(g->tensor(*g->find_tensor("w")).data->numel(), 60000);
  ASSERT_TRUE(exported.is_ok()) << exported.to_string();
  fs::remove(dir / "m.onnx.data");  // the export inlined the weights: it needs no data file
  auto inlined = load_onnx((dir / "inlined.onnx").string());
  ASSERT_TRUE(inlined.is_ok()) << inlined.status().to_string();
  EXPECT_FLOAT_EQ(inlined->tensor(*inlined->find_tensor("w")).data->as<float>()[59999], 1.0f);
}

TEST(UntrustedModels, ASymlinkThatLeadsOutIsRefused) {
  fs::path const root = fresh_dir("symlink");
  fs::create_directories(root / "models");
  auto model = external_model(root / "models");
  fs::rename(root / "models" / "m.onnx.data", root / "secret.bin");
  fs::create_symlink(root / "secret.bin", root / "models" / "m.onnx.data");
  expect_refused(load_onnx((root / "models" / "m.onnx").string(), unchecked()), "a link that leads outside");
  // A link that stays inside the folder is fine.
  fs::remove(root / "models" / "m.onnx.data");
  fs::rename(root / "secret.bin", root / "models" / "real.data");
  fs::create_symlink("real.data", root / "models" / "m.onnx.data");
  auto g = load_onnx((root / "models" / "m.onnx").string(), unchecked());
  EXPECT_TRUE(g.is_ok()) << g.status().to_string();
}

TEST(UntrustedModels, DeclaredSizesAreCheckedAgainstTheFileBeforeAllocating) {
  fs::path const dir = fresh_dir("sizes");
  auto model = external_model(dir);
  set_external(model, "length", "1099511627776");  // 1 TiB declared, 240 KB on disk
  expect_refused(load_onnx(write_model(model, dir / "len.onnx"), unchecked()), "declares 1099511627776 bytes");
  set_external(model, "length", std::to_string(300 * 200 * 4));
  set_external(model, "offset", "4096");
  expect_refused(load_onnx(write_model(model, dir / "off.onnx"), unchecked()), "fewer than offset+length");
  set_external(model, "offset", "12abc");
  expect_refused(load_onnx(write_model(model, dir / "bad.onnx"), unchecked()), "external data offset '12abc'");
  // Dims that would need petabytes: refused from the dims, not by trying.
  set_external(model, "offset", "0");
  auto* w = model.mutable_graph()->mutable_initializer(0);
  w->set_dims(0, int64_t{1} << 40);
  w->set_dims(1, int64_t{1} << 20);
  expect_refused(load_onnx(write_model(model, dir / "huge.onnx"), unchecked()), "impossible dims");
}

TEST(UntrustedModels, ExternalDataFromMemoryIsRefused) {
  fs::path const dir = fresh_dir("bytes");
  auto model = external_model(dir);
  std::string bytes;
  ASSERT_TRUE(model.SerializeToString(&bytes));
  expect_refused(load_onnx_bytes(bytes, "mem", unchecked()), "load the model from its file");
}

TEST(UntrustedModels, WeightsOverTheMemoryLimitAreRefusedWithTheFigure) {
  fs::path const dir = fresh_dir("memory");
  external_model(dir);
  ImportOptions limited;
  limited.max_memory_bytes = 100 * 1024;
  expect_refused(load_onnx((dir / "m.onnx").string(), limited),
                 "the model's weights need 234.4 KiB, more than the memory limit of 100.0 KiB");
  limited.load_weights = false;  // planning reads no weights: the limit does not apply to them
  auto g = load_onnx((dir / "m.onnx").string(), limited);
  EXPECT_TRUE(g.is_ok()) << g.status().to_string();
}

TEST(UntrustedModels, HugeGraphsAreRefusedBeforeTheCheckerWalksThem) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(13);
  auto* g = model.mutable_graph();
  g->set_name("huge");
  auto add_vi = [](onnx::ValueInfoProto* v, std::string const& name) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_value(4);
  };
  add_vi(g->add_input(), "x0");
  int const n = 1'000'000;
  for (int i = 0; i < n; ++i) {
    auto* node = g->add_node();
    node->set_op_type("Relu");
    node->add_input("x" + std::to_string(i));
    node->add_output("x" + std::to_string(i + 1));
  }
  add_vi(g->add_output(), "x" + std::to_string(n));
  std::string bytes;
  ASSERT_TRUE(model.SerializeToString(&bytes));
  expect_refused(load_onnx_bytes(bytes, "huge"), "more than 200000 nodes");
}

TEST(UntrustedModels, DeeplyNestedSubgraphsAreRefused) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(13);
  onnx::GraphProto* g = model.mutable_graph();
  for (int depth = 0; depth < 20; ++depth) {  // If nodes whose then-branch holds the next If
    g->set_name("g" + std::to_string(depth));
    auto* node = g->add_node();
    node->set_op_type("If");
    node->add_input("c");
    node->add_output("y");
    auto* attr = node->add_attribute();
    attr->set_name("then_branch");
    attr->set_type(onnx::AttributeProto::GRAPH);
    g = attr->mutable_g();
  }
  std::string bytes;
  ASSERT_TRUE(model.SerializeToString(&bytes));
  expect_refused(load_onnx_bytes(bytes, "nested"), "nests subgraphs");
}

}  // namespace
}  // namespace gp::graph
