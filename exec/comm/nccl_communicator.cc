#include "exec/comm/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <thread>

#include "exec/comm/mpi_abort.h"
#include "exec/comm/nccl_bootstrap.h"
#include "exec/comm/nccl_check.h"
#include "exec/cuda/cuda_check.h"

namespace gp::exec {

namespace {

using cuda::cuda_error;
using nccl_bootstrap::agree;
using nccl_bootstrap::wait_comm;
using nccl_bootstrap::with_last_error;

constexpr int kMaxTensors = 16;
constexpr int kMaxRank = 8;
constexpr int64_t kMagic = 0x67704e43434c3031;  // "gpNCCL01"

struct Header {
  int64_t magic, step, edge, gradient, micro_batch, src, dst, count;
  struct Record {
    int64_t dtype, rank, dims[kMaxRank];
  } tensors[kMaxTensors];
};

Result<ncclDataType_t> nccl_type(DType d) {
  switch (d) {
    case DType::kFloat32:
      return ncclFloat32;
    case DType::kFloat16:
      return ncclFloat16;
    case DType::kBFloat16:
      return ncclBfloat16;
    case DType::kFloat64:
      return ncclFloat64;
    default:
      return unsupported(std::string("all-reduce of ") + graph::dtype_name(d) + " tensors over NCCL");
  }
}

Status device_tensor(Tensor const& t, std::string const& what) {
  if (t.defined() && t.device().kind != DeviceKind::kCuda)
    return invalid_argument(what +
                            " is in host memory: the NCCL transport moves GPU tensors (run with the CUDA "
                            "backend, or use the MPI transport for CPU tensors)");
  return Status::ok();
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(MPI_Comm mpi, int rank, int size, int device)
      : mpi_(mpi), rank_(rank), size_(size), device_(device), notice_(mpi, rank, size) {}

  ~NcclCommunicator() override {
    // Finalize flushes and can wait for peers; a stalled one is aborted instead of hanging.
    if (!abort_) {
      bool clean = true;
      for (ncclComm_t c : comms_newest_first()) {
        ncclResult_t const rc = ncclCommFinalize(c);
        if (rc != ncclSuccess && rc != ncclInProgress) clean = false;
        if (clean && !wait_comm(c, deadline_after(10), "ncclCommFinalize").is_ok()) clean = false;
      }
      if (clean)
        for (ncclComm_t c : comms_newest_first()) ncclCommDestroy(c);
      else
        abort_nccl();
    } else {
      abort_nccl();
    }
    if (done_) cudaEventDestroy(done_);
    if (compute_ready_) cudaEventDestroy(compute_ready_);
    if (dev_headers_) cudaFree(dev_headers_);
    if (host_headers_) cudaFreeHost(host_headers_);
    if (own_stream_) cudaStreamDestroy(stream_);
    MPI_Comm_free(&mpi_);
  }

  void set_options(NcclOptions const& options) {
    memory_ = options.memory;
    compute_ = static_cast<cudaStream_t>(options.compute_stream);
    stream_ = static_cast<cudaStream_t>(options.comm_stream);
  }

  // The start-up phases (exec/comm/nccl_bootstrap.h), in make_nccl_communicator's order.
  Status create_id() { return nccl_bootstrap::create_id(rank_, &id_); }
  Status share_id(double timeout_s) { return nccl_bootstrap::share_id(mpi_, &id_, timeout_s); }
  Status init(double timeout_s) { return nccl_bootstrap::init_world(&world_, size_, id_, rank_, timeout_s); }
  Status split_groups(std::vector<std::vector<int>> const& groups, double timeout_s) {
    return nccl_bootstrap::split_groups(world_, rank_, size_, groups, timeout_s, &groups_, &order_);
  }

  // A start-up phase failed on some rank (every rank knows): drop the communicators, no messages.
  void discard(Status const& cause) {
    abort_ = cause;
    abort_nccl();
  }

  Status make_streams() {
    if (!stream_) {
      GP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
      own_stream_ = true;
    }
    GP_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
    GP_CUDA_CHECK(cudaEventCreateWithFlags(&compute_ready_, cudaEventDisableTiming));
    return Status::ok();
  }

  std::string name() const override { return "nccl"; }
  int device() const override { return rank_; }
  int num_devices() const override { return size_; }

  Status send(MessageKey const& key, std::vector<Tensor> tensors, HostFence /*ready*/ = {}) override {
    if (auto a = aborted()) return aborted_status(*a);
    if (!sent_.insert(key).second) return internal_error("message " + key.to_string() + " sent twice");
    if (key.dst < 0 || key.dst >= size_ || key.dst == rank_)
      return internal_error("message " + key.to_string() + ": no such peer among " + std::to_string(size_) + " ranks");
    if (tensors.size() > kMaxTensors)
      return unsupported("message " + key.to_string() + " has " + std::to_string(tensors.size()) +
                         " tensors; the NCCL header describes at most " + std::to_string(kMaxTensors));
    Outgoing out{key, std::move(tensors), {}};
    Header& h = out.header;
    h = Header{};
    h.magic = kMagic;
    h.step = key.step, h.edge = key.edge, h.gradient = key.gradient, h.micro_batch = key.micro_batch;
    h.src = key.src, h.dst = key.dst, h.count = static_cast<int64_t>(out.tensors.size());
    for (std::size_t i = 0; i < out.tensors.size(); ++i) {
      Tensor const& t = out.tensors[i];
      RETURN_IF_ERROR(device_tensor(t, "tensor " + std::to_string(i) + " of message " + key.to_string()));
      if (t.rank() > kMaxRank) return unsupported("a tensor of rank > 8 crosses devices");
      h.tensors[i].dtype = static_cast<int64_t>(t.dtype());
      h.tensors[i].rank = t.rank();
      for (int64_t d = 0; d < t.rank(); ++d) h.tensors[i].dims[d] = t.dim(static_cast<int>(d));
    }
    queued_.push_back(std::move(out));
    return Status::ok();
  }

  Status post_recv(MessageKey const& key, std::vector<TensorMeta> const& expected) override {
    posted_[key] = expected;  // NCCL pairs by order: nothing to post ahead, only to account for
    return Status::ok();
  }

  Result<std::vector<Tensor>> recv(MessageKey const& key, std::vector<TensorMeta> const& expected,
                                   Deadline deadline) override {
    if (auto a = aborted()) return aborted_status(*a);
    if (!memory_ || memory_->device().kind != DeviceKind::kCuda)
      return internal_error("the NCCL transport needs a GPU allocator for received tensors (NcclOptions::memory)");
    std::string const what = "message " + key.to_string() + " from device " + std::to_string(key.src);
    RETURN_IF_ERROR(issue(&key, deadline));
    RETURN_IF_ERROR(wait(deadline, what));
    Header h;
    std::memcpy(&h, static_cast<char*>(host_headers_) + recv_slot_ * sizeof(Header), sizeof h);
    MessageKey const got{h.step,
                         static_cast<int>(h.edge),
                         h.gradient != 0,
                         static_cast<int>(h.micro_batch),
                         static_cast<int>(h.src),
                         static_cast<int>(h.dst)};
    Status bad;
    if (h.magic != kMagic || h.count < 0 || h.count > kMaxTensors)
      bad = internal_error(what + ": the header is not graphpipe's (a different build on the other rank?)");
    else if (!(got == key))
      bad = invalid_argument("expected message " + key.to_string() + " but " + got.to_string() +
                             " came first from device " + std::to_string(key.src) +
                             ": NCCL pairs messages by order and the two devices' schedules order this pair "
                             "differently (check_ordered_transport names the lines)");
    std::vector<TensorMeta> metas;
    for (int64_t i = 0; bad.is_ok() && i < h.count; ++i) {
      auto const& rec = h.tensors[i];
      if (rec.rank < 0 || rec.rank > kMaxRank) {
        bad = internal_error(what + ": a malformed header");
        break;
      }
      metas.push_back({static_cast<DType>(rec.dtype), std::vector<int64_t>(rec.dims, rec.dims + rec.rank)});
    }
    if (bad.is_ok()) bad = check_header(key, expected, metas);
    if (!bad.is_ok()) {
      abort(bad);  // the sender's payload is still waiting for a receive that will not come
      return bad;
    }
    std::vector<Tensor> out;
    for (auto const& m : expected) out.emplace_back(m.shape, m.dtype, *memory_);
    RETURN_IF_ERROR(ordered_after_compute());
    GP_NCCL_CHECK(ncclGroupStart());
    Status s;
    for (Tensor& t : out)
      if (t.nbytes() && s.is_ok())
        s = nccl_call(ncclRecv(t.raw(), t.nbytes(), ncclUint8, key.src, world_, stream_), "ncclRecv");
    RETURN_IF_ERROR(end_group(s, deadline));
    GP_CUDA_CHECK(cudaEventRecord(done_, stream_));
    RETURN_IF_ERROR(wait(deadline, "the payload of " + what));
    posted_.erase(key);
    return out;
  }

  Status all_reduce_sum(CollectiveKey const& key, std::vector<int> const& group, std::vector<Tensor>& tensors,
                        Deadline deadline) override {
    RETURN_IF_ERROR(send_queued(deadline));  // as check_ordered_transport models ALLREDUCE
    if (group.size() <= 1) return Status::ok();
    ncclComm_t comm = world_;
    if (!is_world(group)) {
      auto it = groups_.find(group);
      if (it == groups_.end())
        return internal_error(key.to_string() +
                              ": its replica group was not given to make_nccl_communicator "
                              "(NcclOptions::groups)");
      comm = it->second;
    }
    RETURN_IF_ERROR(ordered_after_compute());
    GP_NCCL_CHECK(ncclGroupStart());
    Status s;
    for (std::size_t i = 0; i < tensors.size() && s.is_ok(); ++i) {
      Tensor& t = tensors[i];
      s = device_tensor(t, "gradient " + std::to_string(i) + " of " + key.to_string());
      auto type = nccl_type(t.dtype());
      if (s.is_ok() && !type.is_ok()) s = type.status();
      if (s.is_ok() && t.numel())
        s = nccl_call(
            ncclAllReduce(t.raw(), t.raw(), static_cast<std::size_t>(t.numel()), *type, ncclSum, comm, stream_),
            "ncclAllReduce");
    }
    RETURN_IF_ERROR(end_group(s, deadline, comm));
    GP_CUDA_CHECK(cudaEventRecord(done_, stream_));
    return wait(deadline, key.to_string() + " over devices " + list(group));
  }

  Status barrier(int64_t step, Deadline deadline) override {
    RETURN_IF_ERROR(send_queued(deadline));
    MPI_Request r;
    GP_MPI(MPI_Ibarrier(mpi_, &r));
    for (int spins = 0;; ++spins) {
      int done = 0;
      GP_MPI(MPI_Test(&r, &done, MPI_STATUS_IGNORE));
      if (done) return Status::ok();
      if (auto a = aborted()) {
        abort_nccl();
        return aborted_status(*a);
      }
      if (stop_requested()) return aborted_error(kInterrupted);
      if (Clock::now() > deadline)
        return timeout_error("the barrier of step " + std::to_string(step + 1) +
                             " did not complete before the deadline");
      if (spins > 100) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  Status flush(Deadline deadline) override {
    RETURN_IF_ERROR(send_queued(deadline));
    sent_.clear();
    return Status::ok();
  }

  void abort(Status const& cause) override {
    if (abort_) return;
    abort_ = cause;
    notice_.send(cause.message());
    abort_nccl();
  }

  std::optional<Status> aborted() const override {
    if (!abort_) abort_ = notice_.poll();
    return abort_;
  }

  std::vector<MessageKey> undelivered() const override {
    std::vector<MessageKey> keys;
    for (auto const& [k, m] : posted_) keys.push_back(k);
    return keys;
  }

 private:
  struct Outgoing {
    MessageKey key;
    std::vector<Tensor> tensors;
    Header header;
  };

  static Status aborted_status(Status const& cause) {
    if (cause.code() == StatusCode::kAborted) return cause;
    return aborted_error("stopped because another device failed: " + cause.message());
  }
  static Status nccl_call(ncclResult_t rc, char const* call) {
    if (rc == ncclSuccess || rc == ncclInProgress) return Status::ok();
    return with_last_error(nccl_error(rc, call, __FILE__, __LINE__), nullptr);
  }
  static std::string list(std::vector<int> const& g) {
    std::string s = "{";
    for (std::size_t i = 0; i < g.size(); ++i) s += (i ? "," : "") + std::to_string(g[i]);
    return s + "}";
  }
  bool is_world(std::vector<int> const& g) const { return nccl_bootstrap::is_world(g, size_); }
  std::vector<ncclComm_t> comms_newest_first() const {
    std::vector<ncclComm_t> all(order_.rbegin(), order_.rend());
    if (world_) all.push_back(world_);
    return all;
  }
  // Replica groups first, then the world communicator; the handles are dead afterwards.
  void abort_nccl() {
    for (ncclComm_t c : comms_newest_first()) ncclCommAbort(c);
    order_.clear();
    groups_.clear();
    world_ = nullptr;
  }

  // The communication stream waits for the compute queued so far (the tensors to send, the
  // memory a receive reuses).
  Status ordered_after_compute() {
    GP_CUDA_CHECK(cudaEventRecord(compute_ready_, compute_));
    GP_CUDA_CHECK(cudaStreamWaitEvent(stream_, compute_ready_, 0));
    return Status::ok();
  }

  Status end_group(Status const& during, Deadline deadline, ncclComm_t comm = nullptr) {
    ncclResult_t const rc = ncclGroupEnd();
    RETURN_IF_ERROR(during);
    if (rc == ncclInProgress) return wait_comm(comm ? comm : world_, deadline, "ncclGroupEnd");
    return nccl_call(rc, "ncclGroupEnd");
  }

  Status reserve_headers(std::size_t n) {
    if (n <= header_slots_) return Status::ok();
    std::size_t const slots = std::max<std::size_t>(n, 2 * header_slots_);
    // Only between groups (nothing of this device in flight), so the implicit sync is harmless.
    if (dev_headers_) GP_CUDA_CHECK(cudaFree(dev_headers_));
    if (host_headers_) GP_CUDA_CHECK(cudaFreeHost(host_headers_));
    dev_headers_ = host_headers_ = nullptr;
    GP_CUDA_CHECK(cudaMalloc(&dev_headers_, slots * sizeof(Header)));
    GP_CUDA_CHECK(cudaMallocHost(&host_headers_, slots * sizeof(Header)));
    header_slots_ = slots;
    return Status::ok();
  }

  // One group: every queued send (header, then each tensor) and, if given, the header of `recv`.
  Status issue(MessageKey const* recv, Deadline deadline) {
    if (!world_) return aborted_error("the NCCL communicator was aborted");
    std::size_t const n = queued_.size() + (recv ? 1 : 0);
    RETURN_IF_ERROR(reserve_headers(n));
    auto* host = static_cast<char*>(host_headers_);
    auto* dev = static_cast<char*>(dev_headers_);
    for (std::size_t i = 0; i < queued_.size(); ++i)
      std::memcpy(host + i * sizeof(Header), &queued_[i].header, sizeof(Header));
    RETURN_IF_ERROR(ordered_after_compute());
    if (!queued_.empty())
      GP_CUDA_CHECK(cudaMemcpyAsync(dev, host, queued_.size() * sizeof(Header), cudaMemcpyHostToDevice, stream_));
    GP_NCCL_CHECK(ncclGroupStart());
    Status s;
    for (std::size_t i = 0; i < queued_.size() && s.is_ok(); ++i) {
      int const peer = queued_[i].key.dst;
      s = nccl_call(ncclSend(dev + i * sizeof(Header), sizeof(Header), ncclUint8, peer, world_, stream_), "ncclSend");
      for (Tensor const& t : queued_[i].tensors)
        if (s.is_ok() && t.nbytes())
          s = nccl_call(ncclSend(t.raw(), t.nbytes(), ncclUint8, peer, world_, stream_), "ncclSend");
    }
    recv_slot_ = queued_.size();
    if (recv && s.is_ok())
      s = nccl_call(ncclRecv(dev + recv_slot_ * sizeof(Header), sizeof(Header), ncclUint8, recv->src, world_, stream_),
                    "ncclRecv");
    RETURN_IF_ERROR(end_group(s, deadline));
    if (recv)
      GP_CUDA_CHECK(cudaMemcpyAsync(host + recv_slot_ * sizeof(Header), dev + recv_slot_ * sizeof(Header),
                                    sizeof(Header), cudaMemcpyDeviceToHost, stream_));
    GP_CUDA_CHECK(cudaEventRecord(done_, stream_));
    in_flight_ = std::move(queued_);  // alive until the group is done
    queued_.clear();
    return Status::ok();
  }

  // The queued sends as one group, waited for: each is done when its receiver reaches the RECV.
  Status send_queued(Deadline deadline) {
    if (auto a = aborted()) return aborted_status(*a);
    if (queued_.empty()) return Status::ok();
    std::string what = "sending";
    for (auto const& q : queued_) what += " " + q.key.to_string() + ",";
    what.back() = ' ';
    RETURN_IF_ERROR(issue(nullptr, deadline));
    return wait(deadline, what + "(each is done when its receiver reaches its RECV)");
  }

  // Until the last issued work is done; a timeout or failure aborts every rank.
  Status wait(Deadline deadline, std::string const& what) {
    auto fail = [&](Status s) {
      abort(s);
      return s;
    };
    for (int spins = 0;; ++spins) {
      cudaError_t const q = cudaEventQuery(done_);
      if (q == cudaSuccess) {
        in_flight_.clear();
        return Status::ok();
      }
      if (q != cudaErrorNotReady) return fail(cuda_error(q, "cudaEventQuery", __FILE__, __LINE__).with_context(what));
      (void)cudaGetLastError();  // "not ready" is an answer, not an error: keep it from the next launch's check
      for (ncclComm_t c : comms_newest_first()) {
        ncclResult_t state = ncclSuccess;
        if (ncclCommGetAsyncError(c, &state) == ncclSuccess && state != ncclSuccess && state != ncclInProgress)
          return fail(
              with_last_error(nccl_error(state, "ncclCommGetAsyncError", __FILE__, __LINE__), c).with_context(what));
      }
      if (auto a = aborted()) {
        abort_nccl();
        return aborted_status(*a);
      }
      if (stop_requested()) return fail(aborted_error(kInterrupted));
      if (Clock::now() > deadline)
        return fail(timeout_error(what + " did not complete before the deadline on device " + std::to_string(rank_) +
                                  " (GPU " + std::to_string(device_) +
                                  "; is the peer stuck, or does its schedule differ?)"));
      if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  MPI_Comm mpi_;
  int rank_, size_, device_;
  ncclUniqueId id_{};
  ncclComm_t world_ = nullptr;
  std::map<std::vector<int>, ncclComm_t> groups_;
  std::vector<ncclComm_t> order_;  // replica-group communicators, oldest first
  cudaStream_t stream_ = nullptr, compute_ = nullptr;
  bool own_stream_ = false;
  cudaEvent_t done_ = nullptr, compute_ready_ = nullptr;
  Allocator* memory_ = nullptr;
  void* dev_headers_ = nullptr;
  void* host_headers_ = nullptr;  // pinned: the header copy back is asynchronous
  std::size_t header_slots_ = 0, recv_slot_ = 0;
  std::vector<Outgoing> queued_, in_flight_;
  std::map<MessageKey, std::vector<TensorMeta>> posted_;
  std::set<MessageKey> sent_;
  mutable std::optional<Status> abort_;
  MpiAbortNotice notice_;
};

}  // namespace

Result<std::unique_ptr<Communicator>> make_nccl_communicator(NcclOptions const& options) {
  ASSIGN_OR_RETURN(int device, select_local_gpu(options.init_timeout_s));
  MPI_Comm comm;
  GP_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  auto nccl = std::make_unique<NcclCommunicator>(comm, rank, size, device);
  nccl->set_options(options);
  double const t = options.init_timeout_s;
  auto phase = [&](Status const& mine, std::string const& what) {
    Status s = agree(comm, mine, t, what);
    if (!s.is_ok()) nccl->discard(s);
    return s;
  };
  RETURN_IF_ERROR(phase(nccl->create_id(), "creating the NCCL id"));
  RETURN_IF_ERROR(phase(nccl->share_id(t), "receiving the NCCL id"));
  RETURN_IF_ERROR(phase(nccl->init(t), "creating the NCCL communicator"));
  RETURN_IF_ERROR(phase(nccl->split_groups(options.groups, t), "creating the replica groups' NCCL communicators"));
  RETURN_IF_ERROR(phase(nccl->make_streams(), "creating the NCCL stream"));
  return std::unique_ptr<Communicator>(std::move(nccl));
}

}  // namespace gp::exec
