// Internal to the CUDA backend: helpers every op family (exec/cuda/ops_*.cc) shares. The per-op
// functions have the CPU backend's signatures (exec/op_kernels.h) and conventions
// (exec/cpu/cpu_backend.h): views share storage, an undefined gradient means zero, weight
// gradients are accumulated. Work is enqueued on the current context's compute stream.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "exec/cuda/cuda_check.h"
#include "exec/cuda/cuda_ops.h"
#include "exec/cuda/device_context.h"

namespace gp::exec::cuda {

// Shared with the CPU backend (exec/op_kernels.h).
using exec::attrs_of;
using exec::constant_input;
using exec::no_check;
using exec::op_error;
using exec::require_attrs;
using exec::wants;

// The current context's compute stream; internal_error outside CudaBackend.
Result<cudaStream_t> compute_stream();
// dst += src on the compute stream (float32, same element count, both on this device).
Status add_into(Tensor& dst, Tensor const& src);
// A device copy of src (same shape and dtype), enqueued on the compute stream.
Result<Tensor> copy_of(Tensor const& src);
// The device memory an index check's kernel flags its first out-of-range index in: two int64
// words (DeferredChecks::Verdict), the first one what the kernel sets.
Result<Tensor> index_flag();
// After a kernel flagged out-of-range indices in `flag` (index_flag(); word 0: the smallest bad
// position, or all ones), the error naming the first bad index and its position; ok when none.
// The bad index is noted in word 1 on the device right away (hd::note_bad_index), so the error
// names the index the check saw whenever it is read. Synchronises (it reads the flag back): the
// index ops' one host round trip. `scale`: flag value -> position in idx.
// `deferrable`: the op's kernels read and write nothing outside their tensors on a bad index, so
// while the backend defers checks (Backend::defer_checks) the check is queued instead and its
// error comes from Backend::deferred_checks, with no host round trip here.
Status check_index_flag(OpCall const& call, Tensor const& idx, Tensor& flag, int64_t scale, std::string const& range,
                        bool deferrable = false);
// After a kernel flagged its first failing output position in `flag` (index_flag(); word 0, all
// ones when none: an integer Div's zero divisor), the op's error `error(position)`; ok when none.
// Read back at once (a synchronisation), or, while the backend defers checks, queued and read once
// a step (the kernel's outputs are defined whatever it flags).
Status check_position_flag(Tensor& flag, std::function<Status(uint64_t position)> error);
// f(T{}) with T the integer type of `dtype`'s element size (int64_t, int32_t or uint8_t): what the
// ops that move ids and masks as bytes (Expand, Concat, Pad, Tile) run; any other size is the op's
// error.
template <typename F>
Status by_element_size(OpCall const& call, DType dtype, F&& f) {
  switch (graph::dtype_size(dtype)) {
    case 8:
      return f(int64_t{});
    case 4:
      return f(int32_t{});
    case 1:
      return f(uint8_t{});
    default:
      return op_error(call, "cannot copy elements of " + std::to_string(graph::dtype_size(dtype)) + " bytes");
  }
}
// grad_outputs[i], or device zeros of `shape` when no gradient flowed into that output.
// Small host int64 tensors that carry shapes through Saved, in the process's host memory (not
// the worker's): exec::shape_tensor there.
inline Tensor shape_tensor(std::vector<int64_t> const& shape) {
  return exec::shape_tensor(shape, process_cpu_allocator());
}

}  // namespace gp::exec::cuda
