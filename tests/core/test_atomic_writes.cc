// Every file graphpipe writes is atomic: on a full disk (RLIMIT_FSIZE stands in for one: writes
// past it fail with EFBIG, as ENOSPC would) or in a read-only folder, the writer returns an error
// naming the file and the cause, the old file (if any) is untouched, and no partial or temporary
// file is left behind.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "core/file_io.h"
#include "exec/checkpoint.h"
#include "exec/data.h"
#include "graph/cost_model.h"
#include "graph/dot.h"
#include "graph/onnx_builder.h"
#include "graph/onnx_export.h"
#include "graph/onnx_import.h"
#include "partition/plan.h"
#include "schedule/build.h"
#include "schedule/schedule_text.h"
#include "schedule/trace.h"

namespace gp {
namespace {

namespace fs = std::filesystem;

// A fresh, empty folder per test.
fs::path fresh_dir(std::string const& name) {
  fs::path const dir = fs::path(GP_BINARY_DIR) / "atomic_writes" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string slurp(fs::path const& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<std::string> listing(fs::path const& dir) {
  std::vector<std::string> names;
  for (auto const& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Files may grow to `bytes` while alive: a disk that fills up after `bytes`.
class DiskFullAfter {
 public:
  explicit DiskFullAfter(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &saved_);
    rlimit lower = saved_;
    lower.rlim_cur = bytes;
    EXPECT_EQ(::setrlimit(RLIMIT_FSIZE, &lower), 0);
  }
  ~DiskFullAfter() { ::setrlimit(RLIMIT_FSIZE, &saved_); }

 private:
  rlimit saved_{};
};

// One writer under test: writes `path` (and perhaps files beside it), one of them over 48 KiB.
struct Writer {
  std::string name;
  std::function<Status(std::string const& path)> write;
};

partition::Plan fixed_plan() {
  auto plan = partition::plan_from_json(slurp(GP_FIXED_PLAN));
  EXPECT_TRUE(plan.is_ok()) << plan.status().to_string();
  return *plan;
}

graph::OnnxModelBuilder big_model() {
  graph::OnnxModelBuilder b("wide", 13, 3);
  b.add_input("x", {graph::kBatch, 256});
  b.add_output("y", {graph::kBatch, 256});
  b.add_initializer("w", {256, 256}, graph::InitRule{graph::InitRule::Kind::kOnes});
  b.add_node("MatMul", {"x", "w"}, {"y"});
  return b;
}

std::vector<Writer> writers(fs::path const& scratch) {
  std::vector<Writer> w;
  w.push_back({"plan", [](std::string const& p) {
                 auto plan = fixed_plan();
                 plan.notes = std::string(100000, 'n');
                 return partition::write_plan_file(plan, p);
               }});
  w.push_back({"schedule", [](std::string const& p) {
                 auto plan = fixed_plan();
                 plan.num_micro_batches = 256;
                 auto s = schedule::build_schedule(plan, schedule::Policy::kGpipe);
                 if (!s.is_ok()) return s.status();
                 return schedule::write_schedule_file(*s, p);
               }});
  w.push_back({"trace", [](std::string const& p) { return schedule::write_text_file(std::string(100000, 't'), p); }});
  w.push_back({"profile", [](std::string const& p) {
                 graph::MeasuredProfile profile;
                 for (int i = 0; i < 2000; ++i)
                   profile.ops.push_back({"op" + std::to_string(i), "Relu", {1}, {1e-3}, {2e-3}, {1e-3}});
                 return graph::write_profile_file(profile, p);
               }});
  w.push_back({"dot", [](std::string const& p) {
                 graph::OnnxModelBuilder b("chain", 13, 1);
                 b.add_input("x0", {graph::kBatch, 4});
                 for (int i = 0; i < 800; ++i)
                   b.add_node("Relu", {"x" + std::to_string(i)}, {"x" + std::to_string(i + 1)});
                 b.add_output("x800", {graph::kBatch, 4});
                 auto bytes = b.serialize();
                 if (!bytes.is_ok()) return bytes.status();
                 auto g = graph::load_onnx_bytes(*bytes, "chain");
                 if (!g.is_ok()) return g.status();
                 return graph::write_dot(*g, p);
               }});
  w.push_back({"checkpoint", [](std::string const& p) {
                 exec::CheckpointState s;
                 s.optimizer = "sgd";
                 s.weights.emplace("w", exec::Tensor::from_floats({40000}, std::vector<float>(40000, 1.f)));
                 return exec::save_checkpoint(p, s);
               }});
  w.push_back({"npy", [](std::string const& p) {
                 exec::NpyArray a;
                 a.dtype = graph::DType::kFloat32;
                 a.shape = {100, 400};
                 a.bytes.resize(160000);
                 return exec::write_npy(p, a);
               }});
  w.push_back({"onnx", [](std::string const& p) { return big_model().save(p); }});
  w.push_back({"onnx-external", [](std::string const& p) {
                 graph::SaveOptions o;
                 o.external_data = graph::SaveOptions::ExternalData::kAlways;
                 return big_model().save(p, o);
               }});
  fs::path const src = scratch / "export-src.onnx";
  EXPECT_TRUE(big_model().save(src.string()).is_ok());  // before any limit applies
  w.push_back({"exported-onnx", [src](std::string const& p) {
                 graph::TensorData w;
                 w.dtype = graph::DType::kFloat32;
                 w.dims = {256, 256};
                 w.bytes.resize(256 * 256 * 4);
                 return graph::export_trained_onnx(src.string(), {{"w", w}}, p);
               }});
  return w;
}

TEST(AtomicWrites, EveryWriterSucceedsNormally) {
  fs::path const dir = fresh_dir("normal");
  fs::path const scratch = fresh_dir("normal-scratch");
  for (auto const& w : writers(scratch)) {
    SCOPED_TRACE(w.name);
    fs::path const target = dir / (w.name + ".out");
    Status const s = w.write(target.string());
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    std::uintmax_t largest = 0;
    for (auto const& e : fs::directory_iterator(dir))
      if (e.path().filename().string().rfind(w.name, 0) == 0) largest = std::max(largest, e.file_size());
    EXPECT_GT(largest, 48u * 1024) << "the writer must produce more than the full-disk test's limit";
  }
}

TEST(AtomicWrites, AFullDiskLeavesNoPartialFileAndKeepsTheOldOne) {
  fs::path const scratch = fresh_dir("full-scratch");
  for (auto const& w : writers(scratch)) {
    SCOPED_TRACE(w.name);
    fs::path const dir = fresh_dir("full-" + w.name);
    fs::path const target = dir / (w.name + ".out");
    {  // a new file: nothing may appear
      DiskFullAfter limit(32 * 1024);
      Status const s = w.write(target.string());
      ASSERT_FALSE(s.is_ok()) << "a write past the file-size limit must fail";
      EXPECT_NE(s.message().find("disk full"), std::string::npos) << s.message();
      EXPECT_NE(s.message().find(target.filename().string()), std::string::npos) << s.message();
    }
    EXPECT_EQ(listing(dir), std::vector<std::string>{}) << "partial or temporary files left behind";
    {  // an existing file: it keeps its contents
      std::ofstream(target) << "the previous version";
      DiskFullAfter limit(32 * 1024);
      EXPECT_FALSE(w.write(target.string()).is_ok());
    }
    EXPECT_EQ(slurp(target), "the previous version");
    EXPECT_EQ(listing(dir), std::vector<std::string>{target.filename().string()});
  }
}

// Root ignores folder permissions: the write then runs in a child that gives up root first.
TEST(AtomicWrites, AReadOnlyFolderIsAClearErrorAndLeavesNothing) {
  fs::path const scratch = fresh_dir("ro-scratch");
  for (auto const& w : writers(scratch)) {
    SCOPED_TRACE(w.name);
    fs::path const dir = fresh_dir("ro-" + w.name);
    fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read | fs::perms::group_exec |
                             fs::perms::others_read | fs::perms::others_exec);
    fs::path const target = dir / (w.name + ".out");
    fs::path const report = scratch / (w.name + ".report");
    fs::permissions(scratch, fs::perms::all);
    fs::permissions(scratch.parent_path(), fs::perms::all);
    pid_t const pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      if (::getuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(3);
      Status const s = w.write(target.string());
      std::ofstream(report) << (s.is_ok() ? std::string("OK") : s.message());
      ::_exit(s.is_ok() ? 1 : 0);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_NE(WEXITSTATUS(status), 3) << "could not drop root";
    std::string const message = slurp(report);
    EXPECT_EQ(WEXITSTATUS(status), 0) << "a write into a read-only folder succeeded: " << message;
    EXPECT_NE(message.find("read-only"), std::string::npos) << message;
    EXPECT_NE(message.find(target.filename().string()), std::string::npos) << message;
    EXPECT_EQ(listing(dir), std::vector<std::string>{});
    fs::permissions(dir, fs::perms::all);
  }
}

TEST(AtomicWrites, AMissingFolderNamesTheFolder) {
  Status const s = write_file_atomic("/nonexistent-graphpipe-folder/plan.json", "{}", "plan file");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("the folder '/nonexistent-graphpipe-folder' does not exist"), std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace gp
