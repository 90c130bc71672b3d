#include "exec/npy.h"

#include <charconv>
#include <cstring>
#include <sstream>

#include "core/file_io.h"
#include "core/units.h"

namespace gp::exec {

Result<NpyArray> read_npy(std::string const& path) {
  ASSIGN_OR_RETURN(std::string bytes, read_whole_file(path, ".npy file", int64_t{1} << 40));
  return parse_npy(bytes, path);
}

Result<NpyArray> parse_npy(std::string_view bytes, std::string const& source) {
  auto bad = [&](std::string const& why) { return parse_error(source + ": " + why); };
  if (bytes.size() < 10 || bytes.substr(0, 6) != std::string_view("\x93NUMPY", 6))
    return bad("not a .npy file (bad magic)");
  auto const* u = reinterpret_cast<unsigned char const*>(bytes.data());
  int const major = u[6];
  if (major < 1 || major > 3)
    return unsupported(source + ": .npy format version " + std::to_string(major) + " (1-3 are read)");
  std::size_t header_len = 0, pos = 0;
  if (major == 1) {
    header_len = u[8] | (u[9] << 8);
    pos = 10;
  } else {
    if (bytes.size() < 12) return bad("truncated header");
    header_len = u[8] | (u[9] << 8) | (u[10] << 16) | (static_cast<std::size_t>(u[11]) << 24);
    pos = 12;
  }
  if (header_len > bytes.size() - pos) return bad("truncated header");
  std::string const header(bytes.substr(pos, header_len));
  pos += header_len;
  auto field = [&](std::string const& key) -> std::string {
    auto p = header.find("'" + key + "'");
    if (p == std::string::npos) return {};
    p = header.find(':', p);
    return p == std::string::npos ? std::string{} : header.substr(p + 1);
  };
  std::string descr = field("descr");
  auto q1 = descr.find('\''), q2 = q1 == std::string::npos ? q1 : descr.find('\'', q1 + 1);
  if (q1 == std::string::npos || q2 == std::string::npos) return bad("no 'descr' in the header");
  descr = descr.substr(q1 + 1, q2 - q1 - 1);
  std::string fortran = field("fortran_order");
  if (fortran.find("True") < fortran.find(','))
    return unsupported(source + ": Fortran-ordered arrays are not supported (save with np.ascontiguousarray)");
  std::string shape_text = field("shape");
  auto o = shape_text.find('('), c = shape_text.find(')');
  if (o == std::string::npos || c == std::string::npos || c < o) return bad("no 'shape' in the header");
  std::size_t elem = 0;
  if (descr == "<f4" || descr == "<i4")
    elem = 4;
  else if (descr == "<f8" || descr == "<i8")
    elem = 8;
  else
    return unsupported(source + ": dtype '" + descr + "' is not supported (use float32 '<f4' or int64 '<i8')");
  NpyArray a;
  std::size_t const data_bytes = bytes.size() - pos;
  uint64_t const cap = data_bytes / elem + 1;  // element counts above this cannot match the data
  uint64_t n = 1;
  int64_t nonzero = 1;  // the product of the non-zero dimensions must fit, even when a zero makes n 0
  std::stringstream ss(shape_text.substr(o + 1, c - o - 1));
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto const first = item.find_first_not_of(' ');
    if (first == std::string::npos) continue;
    int64_t d = -1;
    auto const [end, ec] = std::from_chars(item.data() + first, item.data() + item.size(), d);
    if (ec != std::errc{} ||
        std::string_view(end, item.data() + item.size()).find_first_not_of(' ') != std::string_view::npos || d < 0)
      return bad("bad dimension '" + item + "' in the shape");
    a.shape.push_back(d);
    if (d > 0 && __builtin_mul_overflow(nonzero, d, &nonzero))
      return bad("shape " + dims_string(a.shape) + "... has more elements than fit in 64 bits");
    uint64_t const ud = static_cast<uint64_t>(d);
    n = ud != 0 && n > cap / ud ? cap : n * ud;  // saturates at cap: more than the data holds
    if (a.shape.size() > 32) return bad("more than 32 dimensions");
  }
  if (n * elem != data_bytes)
    return bad("the data holds " + std::to_string(data_bytes) + " bytes but shape " + dims_string(a.shape) + " needs " +
               (n * elem > data_bytes ? "more" : std::to_string(n * elem)) + " (truncated or not this shape)");
  char const* raw = bytes.data() + pos;
  a.dtype = descr[1] == 'f' ? DType::kFloat32 : DType::kInt64;
  a.bytes.resize(static_cast<std::size_t>(n) * dtype_size(a.dtype));
  if (n == 0) return a;  // an empty array: nothing to copy (and no pointer to copy from)
  if (descr == "<f4" || descr == "<i8") {
    std::memcpy(a.bytes.data(), raw, a.bytes.size());
  } else if (descr == "<f8") {
    for (uint64_t i = 0; i < n; ++i) {
      double v;
      std::memcpy(&v, raw + i * 8, 8);
      float const f = static_cast<float>(v);
      std::memcpy(a.bytes.data() + i * 4, &f, 4);
    }
  } else {
    for (uint64_t i = 0; i < n; ++i) {
      int32_t v;
      std::memcpy(&v, raw + i * 4, 4);
      int64_t const w = v;
      std::memcpy(a.bytes.data() + i * 8, &w, 8);
    }
  }
  return a;
}

Status write_npy(std::string const& path, NpyArray const& array) {
  std::string descr;
  if (array.dtype == DType::kFloat32)
    descr = "<f4";
  else if (array.dtype == DType::kInt64)
    descr = "<i8";
  else
    return unsupported(std::string("write_npy: dtype ") + graph::dtype_name(array.dtype));
  std::string shape = "(";
  for (int64_t d : array.shape) shape += std::to_string(d) + ",";
  if (array.shape.size() > 1) shape.pop_back();
  shape += ")";
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  std::size_t const total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  ASSIGN_OR_RETURN(AtomicFile out, AtomicFile::open(path, ".npy file"));
  unsigned char const len[2] = {static_cast<unsigned char>(header.size() & 0xff),
                                static_cast<unsigned char>(header.size() >> 8)};
  RETURN_IF_ERROR(out.write("\x93NUMPY\x01\x00", 8));
  RETURN_IF_ERROR(out.write(len, 2));
  RETURN_IF_ERROR(out.write(header));
  RETURN_IF_ERROR(out.write(array.bytes.data(), array.bytes.size()));
  return out.commit();
}

std::shared_ptr<ArrayRef const> own_array(NpyArray array) {
  auto owned = std::make_shared<NpyArray const>(std::move(array));
  auto ref = std::make_shared<ArrayRef>();
  ref->dtype = owned->dtype;
  ref->shape = owned->shape;
  ref->data = owned->bytes.data();
  ref->size = owned->bytes.size();
  ref->owner = owned;
  return ref;
}

}  // namespace gp::exec
