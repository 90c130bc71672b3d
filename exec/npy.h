// .npy files, the data format training reads: parse (sizes checked before anything is allocated),
// read and write.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "graph/op_graph.h"

namespace gp::exec {

using graph::DType;

// .npy arrays (little-endian float32/float64/int32/int64, C order); float64 is read as float32
// and int32 as int64.
struct NpyArray {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;
};
Result<NpyArray> read_npy(std::string const& path);
// The same from the file's bytes; `source` names it in errors. Sizes are checked before anything is allocated.
Result<NpyArray> parse_npy(std::string_view bytes, std::string const& source);
Status write_npy(std::string const& path, NpyArray const& array);

}  // namespace gp::exec
