// The position-addressed index ops (launchers declared in kernels/cuda/move.h): positions from
// indices (kernels/hd/index.h), gathers by position, and the stable sort by position that lets
// each position's values be combined in ascending j, as the CPU's loops do.

#include <cstdint>

#include "kernels/cuda/block.cuh"
#include "kernels/cuda/sort.cuh"
#include "kernels/cuda/move.h"

namespace gp::kernels::cuda {
namespace {

using detail::aligned;
using detail::global_thread;
using detail::grid_for;
using detail::grid_threads;
using detail::kBlock;
using detail::sort_pairs;

template <typename I>
__global__ void element_positions_kernel(hd::ElementIndex const p, I const* indices, int64_t n, int64_t* pos,
                                         unsigned long long* first_bad) {
  for (int64_t j = global_thread(); j < n; j += grid_threads()) {
    int64_t q = 0;
    if (!hd::element_position(p, j, static_cast<int64_t>(indices[j]), q)) {
      q = 0;  // never read outside data; the caller reports the index
      if (first_bad) atomicMin(first_bad, static_cast<unsigned long long>(j));
    }
    pos[j] = q;
  }
}

template <typename I>
__global__ void nd_positions_kernel(hd::NdIndex const p, I const* indices, int64_t n, int64_t* pos,
                                    unsigned long long* first_bad) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    int64_t const t = i / p.slice;
    int64_t off = 0;
    if (!hd::nd_offset(p, indices, t, off)) {
      off = 0;
      if (first_bad) atomicMin(first_bad, static_cast<unsigned long long>(t));
    }
    pos[i] = off + (i - t * p.slice);
  }
}

template <typename T>
__global__ void gather_positions_kernel(T const* x, int64_t const* pos, int64_t n, T* y) {
  for (int64_t j = global_thread(); j < n; j += grid_threads()) y[j] = x[pos[j]];
}

__global__ void iota_kernel(int32_t* order, int64_t n) {
  for (int64_t j = global_thread(); j < n; j += grid_threads()) order[j] = static_cast<int32_t>(j);
}

// Thread k owns the run of equal positions starting at k (the others return at once).
__device__ __forceinline__ bool run_start(int64_t const* sorted, int64_t k) {
  return k == 0 || sorted[k] != sorted[k - 1];
}

__global__ void combine_kernel(Combine op, int64_t const* sorted, int32_t const* order, int64_t n, float const* v,
                               float const* init, float* y) {
  for (int64_t k = global_thread(); k < n; k += grid_threads()) {
    if (!run_start(sorted, k)) continue;
    int64_t const q = sorted[k];
    float acc = init ? init[q] : 0.f;
    for (int64_t i = k; i < n && sorted[i] == q; ++i) {
      float const u = v[order[i]];
      acc = op == Combine::kAdd   ? acc + u
            : op == Combine::kMul ? acc * u
            : op == Combine::kMax ? hd::extremum_of(acc, u, true)
            : op == Combine::kMin ? hd::extremum_of(acc, u, false)
                                  : u;
    }
    y[q] = acc;
  }
}

__global__ void scatter_assign_backward_kernel(int64_t const* sorted, int32_t const* order, int64_t n, float const* g,
                                               float* gdata, float* gupd) {
  for (int64_t k = global_thread(); k < n; k += grid_threads()) {
    if (!run_start(sorted, k)) continue;
    int64_t const q = sorted[k];
    int64_t i = k;
    for (; i + 1 < n && sorted[i + 1] == q; ++i) gupd[order[i]] = 0.f;
    gupd[order[i]] = g[q];
    gdata[q] = 0.f;
  }
}

__global__ void scatter_mul_backward_kernel(int64_t const* sorted, int32_t const* order, int64_t n, float const* data,
                                            float const* u, float const* g, float* gdata, float* gupd) {
  for (int64_t k = global_thread(); k < n; k += grid_threads()) {
    if (!run_start(sorted, k)) continue;
    int64_t const q = sorted[k];
    int64_t e = k;
    float pre = 1.f;  // gupd holds each update's prefix product until the suffix pass
    for (; e < n && sorted[e] == q; ++e) {
      gupd[order[e]] = pre;
      pre *= u[order[e]];
    }
    gdata[q] = g[q] * pre;
    float suf = 1.f;
    for (int64_t i = e; i-- > k;) {
      gupd[order[i]] = g[q] * data[q] * gupd[order[i]] * suf;
      suf *= u[order[i]];
    }
  }
}

__global__ void scatter_extremum_backward_kernel(int64_t const* sorted, int32_t const* order, int64_t n,
                                                 float const* data, float const* u, float const* g, bool max,
                                                 float* gdata, float* gupd) {
  for (int64_t k = global_thread(); k < n; k += grid_threads()) {
    if (!run_start(sorted, k)) continue;
    int64_t const q = sorted[k];
    float r = data[q];
    int64_t e = k;
    for (; e < n && sorted[e] == q; ++e) r = hd::extremum_of(r, u[order[e]], max);
    int64_t ties = hd::extremum_ties(data[q], r);  // at least 1: r is one of them
    for (int64_t i = k; i < e; ++i) ties += hd::extremum_ties(u[order[i]], r);
    float const share = g[q] / static_cast<float>(ties);
    gdata[q] = hd::extremum_ties(data[q], r) ? share : 0.f;
    for (int64_t i = k; i < e; ++i) gupd[order[i]] = hd::extremum_ties(u[order[i]], r) ? share : 0.f;
  }
}

cudaError_t reset_flag(unsigned long long* first_bad, cudaStream_t stream) {
  return first_bad ? cudaMemsetAsync(first_bad, 0xff, sizeof(unsigned long long), stream) : cudaSuccess;
}

}  // namespace

template <typename I>
cudaError_t element_positions(hd::ElementIndex const& p, I const* indices, int64_t n, int64_t* pos,
                              unsigned long long* first_bad, cudaStream_t stream) {
  if (cudaError_t e = reset_flag(first_bad, stream); e != cudaSuccess) return e;
  if (n == 0) return cudaSuccess;
  element_positions_kernel<I><<<grid_for(n), kBlock, 0, stream>>>(p, indices, n, pos, first_bad);
  return cudaGetLastError();
}

template <typename I>
cudaError_t nd_positions(hd::NdIndex const& p, I const* indices, int64_t tuples, int64_t* pos,
                         unsigned long long* first_bad, cudaStream_t stream) {
  if (cudaError_t e = reset_flag(first_bad, stream); e != cudaSuccess) return e;
  int64_t const n = tuples * p.slice;
  if (n == 0) return cudaSuccess;
  nd_positions_kernel<I><<<grid_for(n), kBlock, 0, stream>>>(p, indices, n, pos, first_bad);
  return cudaGetLastError();
}

cudaError_t gather_positions(void const* x, int64_t const* pos, int64_t n, int width, void* y, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (width) {
    case 1:
      gather_positions_kernel<<<grid_for(n), kBlock, 0, stream>>>(static_cast<uint8_t const*>(x), pos, n,
                                                                  static_cast<uint8_t*>(y));
      break;
    case 2:
      gather_positions_kernel<<<grid_for(n), kBlock, 0, stream>>>(static_cast<uint16_t const*>(x), pos, n,
                                                                  static_cast<uint16_t*>(y));
      break;
    case 4:
      gather_positions_kernel<<<grid_for(n), kBlock, 0, stream>>>(static_cast<uint32_t const*>(x), pos, n,
                                                                  static_cast<uint32_t*>(y));
      break;
    case 8:
      gather_positions_kernel<<<grid_for(n), kBlock, 0, stream>>>(static_cast<uint64_t const*>(x), pos, n,
                                                                  static_cast<uint64_t*>(y));
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t sort_positions_workspace(int64_t n, int64_t limit, std::size_t* bytes) {
  std::size_t temp = 0;
  if (n > 0) {
    cudaError_t const e = sort_pairs<int64_t>(nullptr, temp, nullptr, nullptr, nullptr, nullptr, n, limit, nullptr);
    if (e != cudaSuccess) return e;
  }
  *bytes = aligned(static_cast<std::size_t>(n) * sizeof(int32_t)) + temp;
  return cudaSuccess;
}

cudaError_t sort_positions(int64_t const* pos, int64_t n, int64_t limit, int64_t* sorted, int32_t* order,
                           void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  std::size_t const array = aligned(static_cast<std::size_t>(n) * sizeof(int32_t));
  if (workspace_bytes < array) return cudaErrorInvalidValue;
  auto* identity = static_cast<int32_t*>(workspace);
  iota_kernel<<<grid_for(n), kBlock, 0, stream>>>(identity, n);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  std::size_t temp_bytes = workspace_bytes - array;
  return sort_pairs(static_cast<unsigned char*>(workspace) + array, temp_bytes, pos, sorted, identity, order, n, limit,
                    stream);
}

cudaError_t combine_at_positions(Combine op, int64_t const* sorted, int32_t const* order, int64_t n, float const* v,
                                 float const* init, float* y, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  combine_kernel<<<grid_for(n), kBlock, 0, stream>>>(op, sorted, order, n, v, init, y);
  return cudaGetLastError();
}

cudaError_t scatter_assign_backward(int64_t const* sorted, int32_t const* order, int64_t n, float const* g,
                                    float* gdata, float* gupd, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  scatter_assign_backward_kernel<<<grid_for(n), kBlock, 0, stream>>>(sorted, order, n, g, gdata, gupd);
  return cudaGetLastError();
}

cudaError_t scatter_mul_backward(int64_t const* sorted, int32_t const* order, int64_t n, float const* data,
                                 float const* updates, float const* g, float* gdata, float* gupd, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  scatter_mul_backward_kernel<<<grid_for(n), kBlock, 0, stream>>>(sorted, order, n, data, updates, g, gdata, gupd);
  return cudaGetLastError();
}

cudaError_t scatter_extremum_backward(int64_t const* sorted, int32_t const* order, int64_t n, float const* data,
                                      float const* updates, float const* g, bool max, float* gdata, float* gupd,
                                      cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  scatter_extremum_backward_kernel<<<grid_for(n), kBlock, 0, stream>>>(sorted, order, n, data, updates, g, max, gdata,
                                                                       gupd);
  return cudaGetLastError();
}

template cudaError_t element_positions<int64_t>(hd::ElementIndex const&, int64_t const*, int64_t, int64_t*,
                                                unsigned long long*, cudaStream_t);
template cudaError_t element_positions<int32_t>(hd::ElementIndex const&, int32_t const*, int64_t, int64_t*,
                                                unsigned long long*, cudaStream_t);
template cudaError_t nd_positions<int64_t>(hd::NdIndex const&, int64_t const*, int64_t, int64_t*, unsigned long long*,
                                           cudaStream_t);
template cudaError_t nd_positions<int32_t>(hd::NdIndex const&, int32_t const*, int64_t, int64_t*, unsigned long long*,
                                           cudaStream_t);

}  // namespace gp::kernels::cuda
