// ONNX's C++ namespace. graphpipe's ONNX is built with its own namespace and proto package
// (ONNX_NAMESPACE=onnx_gp, scripts/setup.sh), so that it never meets another libonnx in one process
// (Debian's, which libtorch and python3-onnx load: two registrations of package `onnx` in the shared
// Protobuf abort the process). `onnx::` in graphpipe's code names graphpipe's ONNX.
#pragma once

#ifndef ONNX_NAMESPACE
#error "ONNX_NAMESPACE is not defined: link ONNX::onnx (its interface defines it)"
#endif

namespace ONNX_NAMESPACE {}
namespace onnx = ONNX_NAMESPACE;
