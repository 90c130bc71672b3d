// libFuzzer entry: GP_FUZZ_TARGET names the function in targets.h this binary drives.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(uint8_t const* data, std::size_t size) {
  gp::fuzz::GP_FUZZ_TARGET(data, size);
  return 0;
}
