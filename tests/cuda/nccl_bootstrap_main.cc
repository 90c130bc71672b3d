// Run under mpirun -np 2 by tests/cuda/test_nccl_bootstrap.cc. Starts the NCCL communicator and,
// with a GPU per rank, exercises it:
//   roundtrip  both ranks send, then both receive (NVIDIA/nccl#479's order), the values come back
//              right; then an all-reduce over both ranks.
//   mismatch   rank 0 sends 5 floats where rank 1 expects 4: rank 1 reports the header mismatch,
//              rank 0 stops with the abort.
// Each rank prints "rank R: ..." lines and exits non-zero on any error (never MPI_Abort).
#include <cuda_runtime_api.h>

#include <cstdio>
#include <stdexcept>
#include <string>

#include "exec/comm/mpi_communicator.h"
#include "exec/comm/nccl_communicator.h"

namespace {

using namespace gp;
using namespace gp::exec;

// Plain cudaMalloc memory for the received tensors (the CUDA backend's caching allocator is not
// needed to test the transport).
class RawGpuAllocator final : public Allocator {
 public:
  explicit RawGpuAllocator(int device) : device_(device) {}
  DeviceRef device() const override { return {DeviceKind::kCuda, device_}; }
  void* allocate(std::size_t bytes) override {
    void* p = nullptr;
    check(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc");
    in_use_ += static_cast<int64_t>(bytes);
    return p;
  }
  void deallocate(void* ptr, std::size_t bytes) override {
    cudaFree(ptr);
    in_use_ -= static_cast<int64_t>(bytes);
  }
  int64_t bytes_in_use() const override { return in_use_; }
  int64_t peak_bytes() const override { return in_use_; }
  void zero_bytes(void* ptr, std::size_t n) override { check(cudaMemset(ptr, 0, n), "cudaMemset"); }
  void copy_to_host(void* dst, void const* src, std::size_t n) override {
    check(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost), "cudaMemcpy");
  }
  void copy_from_host(void* dst, void const* src, std::size_t n) override {
    check(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  void copy_within(void* dst, void const* src, std::size_t n) override {
    check(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToDevice), "cudaMemcpy");
  }

 private:
  static void check(cudaError_t e, char const* call) {
    if (e != cudaSuccess) throw std::runtime_error(std::string(call) + ": " + cudaGetErrorString(e));
  }
  int device_;
  int64_t in_use_ = 0;
};

Tensor on_gpu(Allocator& gpu, std::vector<float> const& values) {
  Tensor host = Tensor::from_floats({static_cast<int64_t>(values.size())}, values);
  return host.clone_to(gpu);
}

int fail(int rank, Status const& s) {
  std::fprintf(stderr, "rank %d: error: %s\n", rank, s.message().c_str());
  return 1;
}

int run(int rank, std::string const& mode) {
  auto device = select_local_gpu(20);
  if (!device.is_ok()) return fail(rank, device.status());
  RawGpuAllocator gpu(*device);
  NcclOptions options;
  options.init_timeout_s = 20;
  options.memory = &gpu;
  auto made = make_nccl_communicator(options);
  if (!made.is_ok()) return fail(rank, made.status());
  Communicator& comm = **made;
  int const peer = 1 - rank;
  Deadline const deadline = deadline_after(20);
  MessageKey const out{0, 0, rank == 1, 0, rank, peer}, in{0, 0, peer == 1, 0, peer, rank};
  if (mode == "mismatch") {
    if (rank == 0) {
      Status s = comm.send(out, {on_gpu(gpu, {1, 2, 3, 4, 5})});
      if (s.is_ok()) s = comm.flush(deadline);
      return s.is_ok() ? 0 : fail(rank, s);
    }
    auto got = comm.recv(in, {{DType::kFloat32, {4}}}, deadline);
    return got.is_ok() ? 0 : fail(rank, got.status());
  }
  std::vector<float> const mine{float(rank) + 1, 10, 20, 30};
  Status s = comm.send(out, {on_gpu(gpu, mine)});
  if (!s.is_ok()) return fail(rank, s);
  auto got = comm.recv(in, {{DType::kFloat32, {4}}}, deadline);
  if (!got.is_ok()) return fail(rank, got.status());
  std::vector<float> const back = (*got)[0].to_vector();
  if (back != std::vector<float>{float(peer) + 1, 10, 20, 30})
    return fail(rank, internal_error("received " + std::to_string(back[0]) + " from rank " + std::to_string(peer)));
  std::printf("rank %d: send/recv ok\n", rank);
  std::vector<Tensor> grads{on_gpu(gpu, {float(rank) + 1, 1})};
  s = comm.all_reduce_sum({0, -1}, {0, 1}, grads, deadline);
  if (!s.is_ok()) return fail(rank, s);
  if (grads[0].to_vector() != std::vector<float>{3, 2})
    return fail(rank, internal_error("all-reduce gave a wrong sum"));
  s = comm.flush(deadline);
  if (s.is_ok()) s = comm.barrier(0, deadline);
  if (!s.is_ok()) return fail(rank, s);
  std::printf("rank %d: all-reduce ok\n", rank);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string const mode = argc > 1 ? argv[1] : "roundtrip";
  auto session = gp::exec::MpiSession::start(&argc, &argv);
  if (!session.is_ok()) {
    std::fprintf(stderr, "error: %s\n", session.status().message().c_str());
    return 1;
  }
  int code = 1;
  try {
    code = run((*session)->rank(), mode);
  } catch (std::exception const& e) {
    std::fprintf(stderr, "rank %d: error: %s\n", (*session)->rank(), e.what());
  }
  std::fflush(stdout);
  return code;
}
