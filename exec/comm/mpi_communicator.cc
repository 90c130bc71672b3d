#include "exec/comm/mpi_communicator.h"

#include <mpi.h>

#include <cstring>
#include <deque>
#include <map>
#include <thread>

#include "exec/comm/mpi_abort.h"
#include "kernels/vector_ops.h"

namespace gp::exec {

namespace {

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, len);
}

#define GP_MPI(call)                                                                           \
  do {                                                                                         \
    int gp_rc_ = (call);                                                                       \
    if (gp_rc_ != MPI_SUCCESS) return io_error(std::string(#call) + ": " + mpi_error(gp_rc_)); \
  } while (0)

constexpr int kMaxRank = 8;  // dimensions a message header can describe

// A point-to-point message is two MPI messages with the same tag (MPI keeps their order): a
// fixed-size header, then the payload (the tensors' bytes in order). Only the header is posted
// ahead: its size never varies, so no receive can be truncated, and the payload is received once
// the header matched what the plan expects.
constexpr int kShownTensors = 8;  // tensors the header describes in full (for the error message)
struct Header {
  int64_t step, edge, gradient, micro_batch, src, dst;
  int64_t count, payload_bytes;
  uint64_t metas_hash;
  struct Record {
    int64_t dtype, rank, dims[kMaxRank];
  } shown[kShownTensors];
};

uint64_t hash_metas(std::vector<TensorMeta> const& metas) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](int64_t v) {
    for (int i = 0; i < 8; ++i) h = (h ^ ((static_cast<uint64_t>(v) >> (8 * i)) & 0xff)) * 1099511628211ull;
  };
  for (auto const& m : metas) {
    mix(static_cast<int64_t>(m.dtype));
    mix(static_cast<int64_t>(m.shape.size()));
    for (int64_t d : m.shape) mix(d);
  }
  return h;
}

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
      : comm_(comm),
        rank_(rank),
        size_(size),
        layout_(layout),
        p2p_base_(p2p_base),
        coll_base_(coll_base),
        notice_(comm, rank, size) {}
  ~MpiCommunicator() override {
    // Posted receives are cancelled and completed before their buffers go. Sends still in flight
    // (only after an error) keep their buffers: MPI may still read them, and the process is ending.
    for (auto& [k, r] : posted_) {
      MPI_Cancel(&r.request);
      MPI_Wait(&r.request, MPI_STATUS_IGNORE);
    }
    reap_sends();
    if (!sends_.empty()) {
      for (auto& s : sends_) MPI_Request_free(&s.request);
      new std::deque<Pending>(std::move(sends_));  // deliberately never freed
    }
    MPI_Comm_free(&comm_);
  }

  std::string name() const override { return "mpi"; }
  int device() const override { return rank_; }
  int num_devices() const override { return size_; }

  Status send(MessageKey const& key, std::vector<Tensor> tensors, HostFence /*ready*/ = {}) override {
    if (auto a = aborted()) return aborted_status(*a);
    ASSIGN_OR_RETURN(int tag, tag_of(key));
    std::vector<TensorMeta> metas;
    for (Tensor const& t : tensors) metas.push_back(meta_of(t));
    Pending head, body;
    head.buffer.resize(sizeof(Header));
    RETURN_IF_ERROR(pack_header(key, metas, head.buffer));
    body.buffer.resize(payload_bytes(metas));
    std::size_t off = 0;
    for (Tensor const& t : tensors) {
      if (t.nbytes()) std::memcpy(body.buffer.data() + off, t.raw(), t.nbytes());
      off += t.nbytes();
    }
    for (Pending* p : {&head, &body}) {
      sends_.push_back(std::move(*p));
      auto& s = sends_.back();
      GP_MPI(MPI_Isend(s.buffer.data(), static_cast<int>(s.buffer.size()), MPI_BYTE, key.dst, tag, comm_, &s.request));
    }
    reap_sends();
    return Status::ok();
  }

  Status post_recv(MessageKey const& key, std::vector<TensorMeta> const& expected) override {
    if (posted_.count(key)) return Status::ok();
    ASSIGN_OR_RETURN(int tag, tag_of(key));
    Posted p;
    p.expected = expected;
    p.buffer.resize(sizeof(Header));
    p.tag = tag;
    auto& slot = posted_[key] = std::move(p);
    GP_MPI(MPI_Irecv(slot.buffer.data(), static_cast<int>(slot.buffer.size()), MPI_BYTE, key.src, tag, comm_,
                     &slot.request));
    return Status::ok();
  }

  Result<std::vector<Tensor>> recv(MessageKey const& key, std::vector<TensorMeta> const& expected,
                                   Deadline deadline) override {
    RETURN_IF_ERROR(post_recv(key, expected));
    auto it = posted_.find(key);
    RETURN_IF_ERROR(wait(it->second.request, nullptr, deadline, "message " + key.to_string()));
    Posted slot = std::move(it->second);
    posted_.erase(it);
    Header h;
    std::memcpy(&h, slot.buffer.data(), sizeof h);
    MessageKey const got{h.step,
                         static_cast<int>(h.edge),
                         h.gradient != 0,
                         static_cast<int>(h.micro_batch),
                         static_cast<int>(h.src),
                         static_cast<int>(h.dst)};
    if (!(got == key))
      return invalid_argument("expected message " + key.to_string() + " but " + got.to_string() +
                              " arrived with its tag: the devices run different schedules");
    if (h.count != static_cast<int64_t>(expected.size()) || h.metas_hash != hash_metas(expected) ||
        h.payload_bytes != static_cast<int64_t>(payload_bytes(expected))) {
      std::vector<TensorMeta> shown;
      for (int64_t i = 0; i < std::min<int64_t>(h.count, kShownTensors); ++i) {
        auto const& rec = h.shown[i];
        if (rec.rank < 0 || rec.rank > kMaxRank) break;
        shown.push_back({static_cast<DType>(rec.dtype), std::vector<int64_t>(rec.dims, rec.dims + rec.rank)});
      }
      std::vector<TensorMeta> want(expected.begin(),
                                   expected.begin() + std::min<std::size_t>(expected.size(), shown.size()));
      Status s = check_header(key, want, shown);
      if (s.is_ok() || h.count != static_cast<int64_t>(expected.size()))
        s = check_header(key, expected,
                         std::vector<TensorMeta>(static_cast<std::size_t>(std::max<int64_t>(h.count, 0))));
      if (s.is_ok())
        s = invalid_argument("message " + key.to_string() + ": a tensor past the 8th differs from the plan");
      return s;
    }
    std::vector<std::byte> payload(static_cast<std::size_t>(h.payload_bytes));
    MPI_Request r;
    GP_MPI(MPI_Irecv(payload.data(), static_cast<int>(payload.size()), MPI_BYTE, key.src, slot.tag, comm_, &r));
    RETURN_IF_ERROR(wait(r, nullptr, deadline, "the payload of message " + key.to_string()));
    std::vector<Tensor> out;
    std::size_t off = 0;
    for (auto const& m : expected) {
      Tensor t(m.shape, m.dtype);
      if (t.nbytes()) std::memcpy(t.raw(), payload.data() + off, t.nbytes());
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
        RETURN_IF_ERROR(wait(reqs[g], nullptr, deadline,
                             key.to_string() + " (from replica on device " + std::to_string(group[g]) + ")"));
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
    notice_.send(cause.message());
  }

  std::optional<Status> aborted() const override {
    if (!abort_) abort_ = notice_.poll();
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
    int tag = 0;
    std::vector<TensorMeta> expected;
    std::vector<std::byte> buffer;
    MPI_Request request = MPI_REQUEST_NULL;
  };

  static Status aborted_status(Status const& cause) {
    if (cause.code() == StatusCode::kAborted) return cause;
    return aborted_error("stopped because another device failed: " + cause.message());
  }

  Result<int> tag_of(MessageKey const& key) const {
    if (key.edge <= -1000) {  // gathers of whole stages to device 0 (weights, checkpoints)
      int const g = -1000 - key.edge;
      if (g >= 2 * layout_.num_stages) return internal_error("gather " + key.to_string() + " out of range");
      return coll_base_ + 4 * (layout_.num_stages + kStepWideCollectives) + g;
    }
    if (key.edge < 0 || key.edge >= layout_.num_edges || key.micro_batch < 0 ||
        key.micro_batch >= layout_.num_micro_batches)
      return internal_error("message " + key.to_string() + " is outside the plan's edges and micro-batches");
    int64_t const m = layout_.num_micro_batches;
    int64_t const t = p2p_base_ + ((key.step & 1) * layout_.num_edges * 2 + key.edge * 2 + (key.gradient ? 1 : 0)) * m +
                      key.micro_batch;
    return static_cast<int>(t);
  }
  int coll_tag(CollectiveKey const& key, int dir) const {
    // Per step parity, a slot per stage and the step-wide ones (stage -1: the step's loss; -2: the
    // loss scaler's found-inf flag; -3: the tied weights' gradients), each with an up and a down
    // direction.
    int const slots = layout_.num_stages + kStepWideCollectives;
    return coll_base_ + ((static_cast<int>(key.step & 1) * slots + key.stage + kStepWideCollectives) * 2) + dir;
  }

  void reap_sends() {
    while (!sends_.empty()) {
      int done = 0;
      MPI_Test(&sends_.front().request, &done, MPI_STATUS_IGNORE);
      if (!done) break;
      sends_.pop_front();
    }
  }

  Status wait(MPI_Request& request, MPI_Status* status, Deadline deadline, std::string const& what,
              bool* truncated = nullptr) {
    MPI_Status local;
    for (int spins = 0;; ++spins) {
      int done = 0;
      int const rc = MPI_Test(&request, &done, status ? status : &local);
      if (rc != MPI_SUCCESS) {
        int cls = rc;
        MPI_Error_class(rc, &cls);
        if (cls == MPI_ERR_TRUNCATE && truncated) {
          *truncated = true;
          return Status::ok();
        }
        return io_error(what + ": " + mpi_error(rc));
      }
      if (done) return Status::ok();
      if (auto a = aborted()) return aborted_status(*a);
      if (stop_requested()) return aborted_error(kInterrupted);
      if (Clock::now() > deadline) return timeout_error(what + " did not complete before the deadline");
      if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  static Status pack_header(MessageKey const& key, std::vector<TensorMeta> const& metas, std::vector<std::byte>& buf) {
    Header h{};
    h.step = key.step;
    h.edge = key.edge;
    h.gradient = key.gradient;
    h.micro_batch = key.micro_batch;
    h.src = key.src;
    h.dst = key.dst;
    h.count = static_cast<int64_t>(metas.size());
    h.payload_bytes = static_cast<int64_t>(payload_bytes(metas));
    h.metas_hash = hash_metas(metas);
    for (std::size_t i = 0; i < metas.size() && i < kShownTensors; ++i) {
      if (metas[i].shape.size() > kMaxRank) return unsupported("a tensor of rank > 8 crosses devices");
      h.shown[i].dtype = static_cast<int64_t>(metas[i].dtype);
      h.shown[i].rank = static_cast<int64_t>(metas[i].shape.size());
      for (std::size_t d = 0; d < metas[i].shape.size(); ++d) h.shown[i].dims[d] = metas[i].shape[d];
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
  MpiAbortNotice notice_;
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
  int const p2p_base = coll_base + 4 * (layout.num_stages + kStepWideCollectives) + 2 * layout.num_stages;
  int64_t const top = p2p_base + int64_t{2} * layout.num_edges * 2 * layout.num_micro_batches;
  if (top > tag_ub)
    return unsupported("the plan needs MPI tags up to " + std::to_string(top) + " but this MPI allows " +
                       std::to_string(tag_ub) + " (fewer micro-batches or edges)");
  return std::unique_ptr<Communicator>(new MpiCommunicator(comm, rank, size, layout, p2p_base, coll_base));
}

namespace {
// A test loop with a deadline over one request of MPI_COMM_WORLD (no communicator exists yet, or
// the run's communicator is not MPI's).
Status wait_world(MPI_Request& r, double timeout_s, char const* what) {
  Deadline const deadline = deadline_after(timeout_s);
  for (;;) {
    int done = 0;
    GP_MPI(MPI_Test(&r, &done, MPI_STATUS_IGNORE));
    if (done) return Status::ok();
    if (stop_requested()) return aborted_error(kInterrupted);
    if (Clock::now() > deadline) return timeout_error(std::string(what) + " did not complete before the deadline");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}
}  // namespace

Result<std::vector<uint64_t>> allgather_from_ranks(uint64_t value, double timeout_s, char const* what) {
  int size = 1;
  GP_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
  std::vector<uint64_t> all(static_cast<std::size_t>(size));
  MPI_Request r;
  GP_MPI(MPI_Iallgather(&value, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD, &r));
  RETURN_IF_ERROR(wait_world(r, timeout_s, what));
  return all;
}

Result<std::string> broadcast_from_rank0(std::string const& text, double timeout_s) {
  auto wait = [&](MPI_Request& r, char const* what) { return wait_world(r, timeout_s, what); };
  int64_t n = static_cast<int64_t>(text.size());
  MPI_Request r;
  GP_MPI(MPI_Ibcast(&n, 1, MPI_INT64_T, 0, MPI_COMM_WORLD, &r));
  RETURN_IF_ERROR(wait(r, "broadcasting rank 0's profile size"));
  std::string out = text;
  out.resize(static_cast<std::size_t>(n));
  GP_MPI(MPI_Ibcast(out.data(), static_cast<int>(n), MPI_CHAR, 0, MPI_COMM_WORLD, &r));
  RETURN_IF_ERROR(wait(r, "broadcasting rank 0's profile"));
  return out;
}

Status check_same_run(Communicator& comm, uint64_t fingerprint, double timeout_s) {
  if (auto* mpi = dynamic_cast<MpiCommunicator*>(&comm)) return mpi->exchange_fingerprint(fingerprint, timeout_s);
  // Another transport under mpirun (NCCL): the same check over MPI_COMM_WORLD.
  ASSIGN_OR_RETURN(std::vector<uint64_t> all,
                   allgather_from_ranks(fingerprint, timeout_s, "the start-up check of plan and schedule"));
  std::string bad;
  for (std::size_t i = 1; i < all.size(); ++i)
    if (all[i] != all[0]) bad += (bad.empty() ? "" : ", ") + std::to_string(i);
  if (!bad.empty())
    return invalid_argument("ranks " + bad + " run a different plan, schedule or config than rank 0: give every " +
                            "rank the same files (a shared folder, or copy them to every host)");
  return Status::ok();
}

}  // namespace gp::exec
