// The cuDNN plan cache on disk (exec/cuda/plan_disk_cache.h), host-side: what it stores loads back
// byte for byte under the same key and environment and under nothing else; a damaged, foreign or
// unreadable file is a miss, never an error; the folder comes from the environment.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "exec/cuda/plan_disk_cache.h"

namespace gp::exec::cuda {
namespace {

namespace fs = std::filesystem;

class Folder {
 public:
  Folder() : path_(fs::temp_directory_path() / ("gp_plan_cache_" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
  }
  ~Folder() { fs::remove_all(path_); }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

std::vector<uint8_t> blob_of(std::string const& s) { return {s.begin(), s.end()}; }

int files_in(std::string const& folder) {
  int n = 0;
  std::error_code ec;
  for (auto const& entry : fs::directory_iterator(folder, ec)) n += entry.is_regular_file();
  return n;
}

TEST(PlanDiskCache, AStoredPlanLoadsBackUnderItsKeyAndEnvironmentOnly) {
  Folder dir;
  PlanDiskCache const cache(dir.str() + "/nested", "sm90 NVIDIA H200 cudnn 91900 fe 13200");
  std::vector<uint8_t> blob = blob_of("plan bytes");
  blob.push_back(0);  // binary, a zero and a newline inside
  blob.push_back('\n');
  blob.push_back(0xff);
  EXPECT_FALSE(cache.load("fprop x [64,3,224,224]").has_value());
  ASSERT_TRUE(cache.store("fprop x [64,3,224,224]", blob).is_ok());  // makes the folder
  auto const back = cache.load("fprop x [64,3,224,224]");
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, blob);
  EXPECT_FALSE(cache.load("fprop x [32,3,224,224]").has_value());
  EXPECT_FALSE(PlanDiskCache(dir.str() + "/nested", "sm80 NVIDIA A100 cudnn 91900 fe 13200")
                   .load("fprop x [64,3,224,224]")
                   .has_value())
      << "a plan built for another GPU loaded";
  EXPECT_EQ(files_in(dir.str() + "/nested"), 1) << "a temporary file was left behind";
  // Stored again (a plan rebuilt after a failed load): the new bytes replace the old.
  ASSERT_TRUE(cache.store("fprop x [64,3,224,224]", blob_of("newer")).is_ok());
  EXPECT_EQ(cache.load("fprop x [64,3,224,224]"), blob_of("newer"));
}

TEST(PlanDiskCache, AnotherKeysFileOrADamagedOneIsAMiss) {
  Folder dir;
  PlanDiskCache const cache(dir.str(), "env");
  ASSERT_TRUE(cache.store("key a", blob_of("A")).is_ok());
  // Key b's name now holds key a's file (as a hash collision would): not b's plan.
  fs::copy_file(cache.path_for("key a"), cache.path_for("key b"));
  EXPECT_FALSE(cache.load("key b").has_value());
  // Cut inside its header, and empty.
  std::ofstream(cache.path_for("key a"), std::ios::binary | std::ios::trunc) << "graphpipe cudnn plan v1\nen";
  EXPECT_FALSE(cache.load("key a").has_value());
  std::ofstream(cache.path_for("key a"), std::ios::binary | std::ios::trunc);
  EXPECT_FALSE(cache.load("key a").has_value());
  // A folder where the file should be.
  fs::create_directories(cache.path_for("key c"));
  EXPECT_FALSE(cache.load("key c").has_value());
  EXPECT_FALSE(cache.store("key c", blob_of("C")).is_ok());
}

TEST(PlanDiskCache, DisabledItStoresNothing) {
  PlanDiskCache const off("", "env");
  EXPECT_FALSE(off.enabled());
  EXPECT_TRUE(off.store("k", blob_of("x")).is_ok());
  EXPECT_FALSE(off.load("k").has_value());
}

TEST(PlanDiskCache, AnUnwritableFolderIsAnErrorNamingTheFix) {
  Folder dir;
  fs::create_directories(dir.str());
  std::ofstream(dir.str() + "/file") << "x";
  PlanDiskCache const cache(dir.str() + "/file/plans", "env");  // below a regular file
  Status const s = cache.store("k", blob_of("x"));
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("GP_CUDNN_PLAN_CACHE"), std::string::npos) << s.message();
  EXPECT_FALSE(cache.load("k").has_value());
}

TEST(PlanDiskCache, TheFolderComesFromTheEnvironment) {
  auto saved = [](char const* name) {
    char const* v = std::getenv(name);
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  auto const gp = saved("GP_CUDNN_PLAN_CACHE"), cache = saved("GP_CACHE_DIR"), home = saved("HOME");
  auto restore = [](char const* name, std::optional<std::string> const& v) {
    if (v)
      ::setenv(name, v->c_str(), 1);
    else
      ::unsetenv(name);
  };
  ::unsetenv("GP_CUDNN_PLAN_CACHE");  // on by default (since the H200 run of 2026-12-04)
  ::setenv("GP_CACHE_DIR", "/x/cache", 1);
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(PlanDiskCache::folder_from_environment(), "/x/cache/cudnn-plans");
  ::setenv("GP_CUDNN_PLAN_CACHE", "", 1);
  EXPECT_EQ(PlanDiskCache::folder_from_environment(), "/x/cache/cudnn-plans");
  ::setenv("GP_CUDNN_PLAN_CACHE", "on", 1);
  EXPECT_EQ(PlanDiskCache::folder_from_environment(), "/x/cache/cudnn-plans");
  ::unsetenv("GP_CACHE_DIR");
  EXPECT_EQ(PlanDiskCache::folder_from_environment(), "/home/u/.cache/graphpipe/cudnn-plans");
  ::unsetenv("HOME");
  EXPECT_EQ(PlanDiskCache::folder_from_environment(), "");
  ::setenv("GP_CUDNN_PLAN_CACHE", "/plans", 1);
  EXPECT_EQ(PlanDiskCache::folder_from_environment(), "/plans");
  ::setenv("GP_CUDNN_PLAN_CACHE", "off", 1);
  EXPECT_EQ(PlanDiskCache::folder_from_environment(), "");
  restore("GP_CUDNN_PLAN_CACHE", gp);
  restore("GP_CACHE_DIR", cache);
  restore("HOME", home);
}

}  // namespace
}  // namespace gp::exec::cuda
