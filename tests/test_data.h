// Where the tests' data files are: $GP_TEST_DATA (bin/gpu-check points it into its bundle, which has
// no source tree), else the source tree's tests/data (GP_SOURCE_DIR, defined for the test target).
#pragma once

#include <cstdlib>
#include <filesystem>

namespace gp::testing {

inline std::filesystem::path test_data_dir() {
  char const* env = std::getenv("GP_TEST_DATA");
  if (env != nullptr && *env != '\0') return env;
  return std::filesystem::path(GP_SOURCE_DIR) / "tests" / "data";
}

}  // namespace gp::testing
