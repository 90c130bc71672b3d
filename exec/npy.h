// .npy files, the data format training reads: parse (sizes checked before anything is allocated),
// read and write.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
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

// An array's bytes without owning them (C order, the dtypes of NpyArray): what the .npy data
// source samples from, whether the bytes came from a file or from a caller's array.
struct ArrayRef {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  std::byte const* data = nullptr;
  std::size_t size = 0;               // bytes
  std::shared_ptr<void const> owner;  // keeps `data` alive
};
// A view of `array`, which it then owns.
std::shared_ptr<ArrayRef const> own_array(NpyArray array);
// The same from the file's bytes; `source` names it in errors. Sizes are checked before anything is allocated.
Result<NpyArray> parse_npy(std::string_view bytes, std::string const& source);
Status write_npy(std::string const& path, NpyArray const& array);

}  // namespace gp::exec
