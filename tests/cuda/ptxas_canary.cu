// Not part of any library: the ptxas gate's canary. A per-thread array indexed at run time lives
// in local memory, which the gate must reject (tests/cuda/CMakeLists.txt expects it to fail).
__global__ void gp_ptxas_canary_local_array(float* out, int const* idx, int n) {
  float scratch[64];
  for (int i = 0; i < 64; ++i) scratch[i] = out[i] * 2.f;
  int const t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) out[t] = scratch[idx[t] & 63];
}
