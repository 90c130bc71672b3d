// Replays every input kept in tests/fuzz/regressions/<target>/ through its fuzz target: each once
// crashed, hung or tripped a sanitizer, and must now return cleanly (under the sanitized build too).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/fuzz/targets.h"

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> inputs_of(std::string const& target) {
  std::vector<fs::path> out;
  fs::path const dir = fs::path(GP_SOURCE_DIR) / "tests/fuzz/regressions" / target;
  std::error_code ec;
  for (auto const& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

class FuzzRegressions : public testing::TestWithParam<std::string> {};

TEST_P(FuzzRegressions, EveryKeptInputReturnsCleanly) {
  auto const target = gp::fuzz::find_target(GetParam());
  ASSERT_NE(target, nullptr);
  auto const inputs = inputs_of(GetParam());
  ASSERT_FALSE(inputs.empty()) << "tests/fuzz/regressions/" << GetParam() << "/ holds no input";
  for (auto const& path : inputs) {
    SCOPED_TRACE(path.string());
    std::ifstream in(path, std::ios::binary);
    std::string const bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    target(reinterpret_cast<uint8_t const*>(bytes.data()), bytes.size());
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzRegressions,
                         testing::Values("onnx_import", "plan_json", "schedule_text", "cluster_yaml", "train_config",
                                         "pipedream_graph", "checkpoint", "npy"));

}  // namespace
