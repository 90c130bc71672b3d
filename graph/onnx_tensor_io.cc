#include "graph/onnx_tensor_io.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include <onnx/onnx_pb.h>

namespace gp::graph {
namespace {

template <typename Src, typename Dst>
void copy_field(google::protobuf::RepeatedField<Src> const& field, std::vector<std::byte>& bytes) {
  bytes.resize(static_cast<std::size_t>(field.size()) * sizeof(Dst));
  Dst* out = reinterpret_cast<Dst*>(bytes.data());
  for (int i = 0; i < field.size(); ++i) out[i] = static_cast<Dst>(field.Get(i));
}

}  // namespace

Result<NamedTensor> load_tensor_pb(std::string const& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot open tensor file '" + path + "'");
  std::stringstream buf;
  buf << in.rdbuf();
  onnx::TensorProto t;
  if (!t.ParseFromString(buf.str())) return parse_error("'" + path + "' is not a serialized ONNX TensorProto");
  NamedTensor out;
  out.name = t.name();
  TensorData& d = out.data;
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      d.dtype = DType::kFloat32;
      break;
    case onnx::TensorProto::DOUBLE:
      d.dtype = DType::kFloat64;
      break;
    case onnx::TensorProto::INT64:
      d.dtype = DType::kInt64;
      break;
    case onnx::TensorProto::INT32:
      d.dtype = DType::kInt32;
      break;
    case onnx::TensorProto::INT8:
      d.dtype = DType::kInt8;
      break;
    case onnx::TensorProto::UINT8:
      d.dtype = DType::kUInt8;
      break;
    case onnx::TensorProto::BOOL:
      d.dtype = DType::kBool;
      break;
    case onnx::TensorProto::FLOAT16:
      d.dtype = DType::kFloat16;
      break;
    case onnx::TensorProto::BFLOAT16:
      d.dtype = DType::kBFloat16;
      break;
    default:
      return unsupported("'" + path + "' holds ONNX element type " + std::to_string(t.data_type()) +
                         ", which graphpipe does not read");
  }
  d.dims.assign(t.dims().begin(), t.dims().end());
  if (t.has_raw_data()) {
    d.bytes.resize(t.raw_data().size());
    if (!d.bytes.empty()) std::memcpy(d.bytes.data(), t.raw_data().data(), t.raw_data().size());  // an empty tensor
  } else {
    switch (d.dtype) {
      case DType::kFloat32:
        copy_field<float, float>(t.float_data(), d.bytes);
        break;
      case DType::kFloat64:
        copy_field<double, double>(t.double_data(), d.bytes);
        break;
      case DType::kInt64:
        copy_field<int64_t, int64_t>(t.int64_data(), d.bytes);
        break;
      case DType::kInt32:
        copy_field<int32_t, int32_t>(t.int32_data(), d.bytes);
        break;
      case DType::kInt8:
        copy_field<int32_t, int8_t>(t.int32_data(), d.bytes);
        break;
      case DType::kUInt8:
      case DType::kBool:
        copy_field<int32_t, uint8_t>(t.int32_data(), d.bytes);
        break;
      case DType::kFloat16:
      case DType::kBFloat16:
        copy_field<int32_t, uint16_t>(t.int32_data(), d.bytes);
        break;
    }
  }
  std::size_t const expected = static_cast<std::size_t>(d.numel()) * dtype_size(d.dtype);
  if (d.bytes.size() != expected)
    return parse_error("'" + path + "' holds " + std::to_string(d.bytes.size()) + " bytes but its dims need " +
                       std::to_string(expected));
  return out;
}

}  // namespace gp::graph
