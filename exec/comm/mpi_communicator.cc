#include "exec/comm/mpi_communicator.h"

#include <mpi.h>

#include <cstring>
#include <deque>
#include <map>
#include <thread>

#include "kernels/vector_ops.h"

namespace gp::exec {

namespace {

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, len);
}

#define GP_MPI(call)                                                                          \
  do {                                                                                        \
    int gp_rc_ = (call);                                                                      \
    if (gp_rc_ != MPI_SUCCESS) return io_error(std::string(#call) + ": " + mpi_error(gp_rc_)); \
  } while (0)

constexpr int kAbortTag = 0;
constexpr int kMaxRank = 8;  // dimensions a message header can describe

// Header of a point-to-point message, followed by the tensors' bytes in order.
struct Header {
  int64_t step, edge, gradient, micro_batch, src, dst, count;
  int64_t dtype[16];
  int64_t rank[16];
  int64_t dims[16][kMaxRank];
};
constexpr int kMaxTensors = 16;

std::size_t payload_bytes(std::vector<TensorMeta> const& metas) {
  std::size_t n = 0;
  for (auto const& m : metas) {
    std::size_t e = graph::dtype_size(m.dtype);
    for (int64_t d : m.shape) e *= static_cast<std::size_t>(d);
    n += e;
  }
  return n;
}

}  // namespace

Result<std::unique_ptr<MpiSession>> MpiSession::start(int* argc, char*** argv) {
  int provided = 0;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) GP_MPI(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
  std::unique_ptr<MpiSession> s(new MpiSession());
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  GP_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &s->rank_));
  GP_MPI(MPI_Comm_size(MPI_COMM_WORLD, &s->size_));
  return s;
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, int rank, int size, MpiLayout layout, int p2p_base, int coll_base)
      : comm_(comm), rank_(rank), size_(size), layout_(layout), p2p_base_(p2p_base), coll_base_(coll_base) {}
  ~MpiCommunicator() override {
    for (auto& s : sends_) MPI_Request_free(&s.request);
    for (auto& [k, r] : posted_) MPI_Cancel(&r.request);
    MPI_Comm_free(&comm_);
  }

  std::string name() const override { return "mpi"; }
  int device() const override { return rank_; }
  int num_devices() const override { return size_; }

  Status send(MessageKey const& key, std::vector<Tensor> tensors) override {
    if (auto a = aborted()) return aborted_status(*a);
    if (tensors.size() > kMaxTensors) return unsupported("more than 16 tensors on one edge");
    ASSIGN_OR_RETURN(int tag, tag_of(key));
    Pending p;
    std::vector<TensorMeta> metas;
    for (Tensor const& t : tensors) metas.push_back(meta_of(t));
    p.buffer.resize(sizeof(Header) + payload_bytes(metas));
    RETURN_IF_ERROR(pack(key, tensors, p.buffer));
    sends_.push_back(std::move(p));
    auto& s = sends_.back();
    GP_MPI(MPI_Isend(s.buffer.data(), static_cast<int>(s.buffer.size()), MPI_BYTE, key.dst, tag, comm_, &s.request));
    reap_sends();
    return Status::ok();
  }

  Status post_recv(MessageKey const& key, std::vector<TensorMeta> const& expected) override {
    if (posted_.count(key)) return Status::ok();
    ASSIGN_OR_RETURN(int tag, tag_of(key));
    Posted p;
    p.expected = expected;
    p.buffer.resize(sizeof(Header) + payload_bytes(expected));
    auto& slot = posted_[key] = std::move(p);
    GP_MPI(MPI_Irecv(slot.buffer.data(), static_cast<int>(slot.buffer.size()), MPI_BYTE, key.src, tag, comm_,
                     &slot.request));
    return Status::ok();
  }

  Result<std::vector<Tensor>> recv(MessageKey const& key, std::vector<TensorMeta> const& expected,
                                   Deadline deadline) override {
    RETURN_IF_ERROR(post_recv(key, expected));
    auto it = posted_.find(key);
    MPI_Status status;
    RETURN_IF_ERROR(wait(it->second.request, &status, deadline, "message " + key.to_string()));
    Posted slot = std::move(it->second);
    posted_.erase(it);
    if (status.MPI_ERROR != MPI_SUCCESS && status.MPI_ERROR != 0) {
      if (status.MPI_ERROR == MPI_ERR_TRUNCATE)
        return invalid_argument("message " + key.to_string() + " is larger than the plan expects (" +
                                std::to_string(slot.buffer.size()) + " bytes): the two devices disagree on shapes");
      return io_error("message " + key.to_string() + ": " + mpi_error(status.MPI_ERROR));
    }
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    if (count < static_cast<int>(sizeof(Header)))
      return invalid_argument("message " + key.to_string() + " has no header (" + std::to_string(count) + " bytes)");
    Header h;
    std::memcpy(&h, slot.buffer.data(), sizeof h);
    MessageKey const got{h.step, static_cast<int>(h.edge), h.gradient != 0, static_cast<int>(h.micro_batch),
                         static_cast<int>(h.src), static_cast<int>(h.dst)};
    if (!(got == key))
      return invalid_argument("expected message " + key.to_string() + " but " + got.to_string() +
                              " arrived with its tag: the devices run different schedules");
    std::vector<TensorMeta> metas;
    for (int64_t i = 0; i < h.count && i < kMaxTensors; ++i) {
      TensorMeta m;
      m.dtype = static_cast<DType>(h.dtype[i]);
      m.shape.assign(h.dims[i], h.dims[i] + h.rank[i]);
      metas.push_back(m);
    }
    RETURN_IF_ERROR(check_header(key, expected, metas));
    if (static_cast<std::size_t>(count) != slot.buffer.size())
      return invalid_argument("message " + key.to_string() + ": " + std::to_string(count) + " bytes for a header of " +
                              std::to_string(slot.buffer.size()));
    std::vector<Tensor> out;
    std::size_t off = sizeof(Header);
    for (auto const& m : metas) {
      Tensor t(m.shape, m.dtype);
      if (t.nbytes()) std::memcpy(t.raw(), slot.buffer.data() + off, t.nbytes());
      off += t.nbytes();
      out.push_back(std::move(t));
    }
    return out;
  }

  Status all_reduce_sum(CollectiveKey const& key, std::vector<int> const& group, std::vector<Tensor>& tensors,
                        Deadline deadline) override {
    if (group.size() <= 1) return Status::ok();
    int const root = group[0];
    int const up = coll_tag(key, 0), down = coll_tag(key, 1);
    std::size_t bytes = 0;
    for (Tensor const& t : tensors) bytes += t.nbytes();
    if (rank_ == root) {
      std::vector<std::vector<float>> parts(group.size());
      std::vector<MPI_Request> reqs(group.size(), MPI_REQUEST_NULL);
      for (std::size_t g = 1; g < group.size(); ++g) {
        parts[g].resize(bytes / sizeof(float));
        GP_MPI(MPI_Irecv(parts[g].data(), static_cast<int>(bytes), MPI_BYTE, group[g], up, comm_, &reqs[g]));
      }
      for (std::size_t g = 1; g < group.size(); ++g)
        RETURN_IF_ERROR(wait(reqs[g], nullptr, deadline, key.to_string() + " (from replica on device " +
                                                             std::to_string(group[g]) + ")"));
      // Replica order: ((r0 + r1) + r2) ...
      std::vector<float> sum(bytes / sizeof(float));
      std::size_t off = 0;
      for (Tensor const& t : tensors) {
        std::memcpy(sum.data() + off, t.raw(), t.nbytes());
        off += t.numel();
      }
      for (std::size_t g = 1; g < group.size(); ++g)
        kernels::add_inplace(sum.data(), parts[g].data(), static_cast<int64_t>(sum.size()));
      off = 0;
      for (Tensor& t : tensors) {
        std::memcpy(t.raw(), sum.data() + off, t.nbytes());
        off += t.numel();
      }
      std::vector<MPI_Request> out(group.size(), MPI_REQUEST_NULL);
      for (std::size_t g = 1; g < group.size(); ++g)
        GP_MPI(MPI_Isend(sum.data(), static_cast<int>(bytes), MPI_BYTE, group[g], down, comm_, &out[g]));
      for (std::size_t g = 1; g < group.size(); ++g) RETURN_IF_ERROR(wait(out[g], nullptr, deadline, key.to_string()));
      return Status::ok();
    }
    std::vector<float> mine(bytes / sizeof(float)), sum(bytes / sizeof(float));
    std::size_t off = 0;
    for (Tensor const& t : tensors) {
      std::memcpy(mine.data() + off, t.raw(), t.nbytes());
      off += t.numel();
    }
    MPI_Request rs = MPI_REQUEST_NULL, rr = MPI_REQUEST_NULL;
    GP_MPI(MPI_Irecv(sum.data(), static_cast<int>(bytes), MPI_BYTE, root, down, comm_, &rr));
    GP_MPI(MPI_Isend(mine.data(), static_cast<int>(bytes), MPI_BYTE, root, up, comm_, &rs));
    RETURN_IF_ERROR(wait(rs, nullptr, deadline, key.to_string() + " (to device " + std::to_string(root) + ")"));
    RETURN_IF_ERROR(wait(rr, nullptr, deadline, key.to_string() + " (from device " + std::to_string(root) + ")"));
    off = 0;
    for (Tensor& t : tensors) {
      std::memcpy(t.raw(), sum.data() + off, t.nbytes());
      off += t.numel();
    }
    return Status::ok();
  }

  Status barrier(int64_t step, Deadline deadline) override {
    MPI_Request r;
    GP_MPI(MPI_Ibarrier(comm_, &r));
    return wait(r, nullptr, deadline, "the barrier of step " + std::to_string(step + 1));
  }

  Status flush(Deadline deadline) override {
    while (!sends_.empty()) {
      RETURN_IF_ERROR(wait(sends_.front().request, nullptr, deadline, "completing a send"));
      sends_.pop_front();
    }
    return Status::ok();
  }

  void abort(Status const& cause) override {
    if (abort_) return;
    abort_ = cause;
    abort_text_ = cause.message();
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      MPI_Request req;
      if (MPI_Isend(abort_text_.data(), static_cast<int>(abort_text_.size()), MPI_CHAR, r, kAbortTag, comm_, &req) ==
          MPI_SUCCESS)
        MPI_Request_free(&req);
    }
  }

  std::optional<Status> aborted() const override {
    if (abort_) return abort_;
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kAbortTag, comm_, &flag, &st) == MPI_SUCCESS && flag) {
      int n = 0;
      MPI_Get_count(&st, MPI_CHAR, &n);
      std::string text(static_cast<std::size_t>(n), '\0');
      MPI_Recv(text.data(), n, MPI_CHAR, st.MPI_SOURCE, kAbortTag, comm_, MPI_STATUS_IGNORE);
      abort_ = Status(StatusCode::kAborted, "rank " + std::to_string(st.MPI_SOURCE) + " failed: " + text);
    }
    return abort_;
  }

  std::vector<MessageKey> undelivered() const override {
    std::vector<MessageKey> keys;
    for (auto const& [k, p] : posted_) keys.push_back(k);
    return keys;
  }

  Status exchange_fingerprint(uint64_t fp, double timeout_s) {
    std::vector<uint64_t> all(static_cast<std::size_t>(size_));
    MPI_Request r;
    GP_MPI(MPI_Iallgather(&fp, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm_, &r));
    RETURN_IF_ERROR(wait(r, nullptr, deadline_after(timeout_s), "the start-up check of plan and schedule"));
    std::string bad;
    for (int i = 1; i < size_; ++i)
      if (all[i] != all[0]) bad += (bad.empty() ? "" : ", ") + std::to_string(i);
    if (!bad.empty())
      return invalid_argument("ranks " + bad + " run a different plan, schedule or config than rank 0: give every " +
                              "rank the same files (a shared folder, or copy them to every host)");
    return Status::ok();
  }

 private:
  struct Pending {
    std::vector<std::byte> buffer;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  struct Posted {
    std::vector<TensorMeta> expected;
    std::vector<std::byte> buffer;
    MPI_Request request = MPI_REQUEST_NULL;
  };

  static Status aborted_status(Status const& cause) {
    if (cause.code() == StatusCode::kAborted) return cause;
    return aborted_error("stopped because another device failed: " + cause.message());
  }

  Result<int> tag_of(MessageKey const& key) const {
    if (key.edge <= -1000) return coll_base_ + 4 * (layout_.num_stages + 1) + (-1000 - key.edge);
    if (key.edge < 0 || key.edge >= layout_.num_edges || key.micro_batch < 0 ||
        key.micro_batch >= layout_.num_micro_batches)
      return internal_error("message " + key.to_string() + " is outside the plan's edges and micro-batches");
    int64_t const m = layout_.num_micro_batches;
    int64_t const t = p2p_base_ + ((key.step & 1) * layout_.num_edges * 2 + key.edge * 2 + (key.gradient ? 1 : 0)) * m +
                      key.micro_batch;
    return static_cast<int>(t);
  }
  int coll_tag(CollectiveKey const& key, int dir) const {
    return coll_base_ + ((static_cast<int>(key.step & 1) * (layout_.num_stages + 1) + key.stage + 1) * 2) + dir;
  }

  void reap_sends() {
    while (!sends_.empty()) {
      int done = 0;
      MPI_Test(&sends_.front().request, &done, MPI_STATUS_IGNORE);
      if (!done) break;
      sends_.pop_front();
    }
  }

  Status wait(MPI_Request& request, MPI_Status* status, Deadline deadline, std::string const& what) {
    MPI_Status local;
    for (int spins = 0;; ++spins) {
      int done = 0;
      GP_MPI(MPI_Test(&request, &done, status ? status : &local));
      if (done) return Status::ok();
      if (auto a = aborted()) return aborted_status(*a);
      if (Clock::now() > deadline) return timeout_error(what + " did not complete before the deadline");
      if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  Status pack(MessageKey const& key, std::vector<Tensor> const& tensors, std::vector<std::byte>& buf) const {
    Header h{};
    h.step = key.step;
    h.edge = key.edge;
    h.gradient = key.gradient;
    h.micro_batch = key.micro_batch;
    h.src = key.src;
    h.dst = key.dst;
    h.count = static_cast<int64_t>(tensors.size());
    std::size_t off = sizeof h;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      if (tensors[i].rank() > kMaxRank) return unsupported("a tensor of rank > 8 crosses devices");
      h.dtype[i] = static_cast<int64_t>(tensors[i].dtype());
      h.rank[i] = tensors[i].rank();
      for (int64_t d = 0; d < tensors[i].rank(); ++d) h.dims[i][d] = tensors[i].dim(static_cast<int>(d));
      if (tensors[i].nbytes()) std::memcpy(buf.data() + off, tensors[i].raw(), tensors[i].nbytes());
      off += tensors[i].nbytes();
    }
    std::memcpy(buf.data(), &h, sizeof h);
    return Status::ok();
  }

  MPI_Comm comm_;
  int rank_, size_;
  MpiLayout layout_;
  int p2p_base_, coll_base_;
  std::deque<Pending> sends_;
  std::map<MessageKey, Posted> posted_;
  mutable std::optional<Status> abort_;
  std::string abort_text_;
};

Result<std::unique_ptr<Communicator>> make_mpi_communicator(MpiLayout const& layout) {
  MPI_Comm comm;
  GP_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int* ub = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(comm, MPI_TAG_UB, &ub, &flag);
  int64_t const tag_ub = flag && ub ? *ub : 32767;
  int const coll_base = 1;
  int const p2p_base = coll_base + 4 * (layout.num_stages + 1) + layout.num_stages + 1;
  int64_t const top = p2p_base + int64_t{2} * layout.num_edges * 2 * layout.num_micro_batches;
  if (top > tag_ub)
    return unsupported("the plan needs MPI tags up to " + std::to_string(top) + " but this MPI allows " +
                       std::to_string(tag_ub) + " (fewer micro-batches or edges)");
  return std::unique_ptr<Communicator>(new MpiCommunicator(comm, rank, size, layout, p2p_base, coll_base));
}

Status check_same_run(Communicator& comm, uint64_t fingerprint, double timeout_s) {
  auto* mpi = dynamic_cast<MpiCommunicator*>(&comm);
  if (!mpi) return Status::ok();
  return mpi->exchange_fingerprint(fingerprint, timeout_s);
}

}  // namespace gp::exec
