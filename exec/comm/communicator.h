// One interface for every transport between pipeline workers (threads in one process, MPI ranks,
// later NCCL ranks). Messages are keyed, not ordered: a key names the step, the plan edge, the
// direction (activation or gradient), the micro-batch and both devices, and every message carries
// a header (dtype and shape of each tensor) that the receiver checks against what the plan
// expects. A transport that is tagless and ordered (NCCL) must see each device pair's sends and
// receives in the same order; keys then serve as the check, not the match.
//
// Failure model: every blocking call takes a deadline; abort(cause) records the first cause and
// wakes every waiting call on every device, which then returns kAborted.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "exec/tensor.h"

namespace gp::exec {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;
inline Deadline deadline_after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

struct MessageKey {
  int64_t step = 0;
  int edge = 0;           // index into Plan::edges; -1000 - g: gather g of whole stages to device 0
  bool gradient = false;  // the gradient flowing back along the edge, else the activation
  int micro_batch = 0;
  int src = 0;  // source device
  int dst = 0;  // destination device
  auto operator<=>(MessageKey const&) const = default;
  std::string to_string() const;  // "step 3 e2 m1 d0->d1" / "step 3 g2 m1 d1->d0"
};

// What a receiver expects of one tensor of a message.
struct TensorMeta {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  bool operator==(TensorMeta const&) const = default;
  std::string to_string() const;  // "float32[4,16]"
};
TensorMeta meta_of(Tensor const& t);
// Ok, or kInvalidArgument naming the key, the tensor's position and both sides' dtype and shape.
Status check_header(MessageKey const& key, std::vector<TensorMeta> const& expected, std::vector<TensorMeta> const& got);

// A replica group's collective: the step and the stage whose gradients are summed. Step-wide ones
// use the stages below 0: the step's loss and the loss scaler's found-inf flag (over every
// device), and the tied weights' gradients (over each group of devices holding copies,
// RuntimePlan::tied_groups; `part` is the group). A transport may share one slot among a step's
// parts (MPI's tags do): every device meets its parts in increasing order.
inline constexpr int kStepLossStage = -1, kFoundInfStage = -2, kTiedWeightsStage = -3;
inline constexpr int kStepWideCollectives = 3;
struct CollectiveKey {
  int64_t step = 0;
  int stage = 0;
  int part = 0;
  auto operator<=>(CollectiveKey const&) const = default;
  std::string to_string() const;
};

// A process-wide stop request (Ctrl-C): setting it is async-signal-safe; workers check it before
// every instruction and every transport's wait loop checks it, so a run stops within moments.
void request_stop();
bool stop_requested();
inline constexpr char const* kInterrupted = "interrupted (Ctrl-C): training stopped";

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::string name() const = 0;  // "in-process", "mpi"
  virtual int device() const = 0;        // the device this endpoint speaks for
  virtual int num_devices() const = 0;

  // Non-blocking: the tensors are owned by the transport from here on (the caller must not
  // change them). A key sent twice is an error. `ready`, when given, is the sender's fence after
  // the work that wrote the tensors (device tensors): a transport that reads them on another
  // thread waits for it first (in-process); one that orders its copies on the sender's stream
  // (NCCL) or gets host tensors (MPI) has no use for it.
  virtual Status send(MessageKey const& key, std::vector<Tensor> tensors, HostFence ready = {}) = 0;
  // Optional: announces a receive ahead of its recv() so the transport can post it early (MPI:
  // a rendezvous send then never waits for a late receiver). Default: nothing.
  virtual Status post_recv(MessageKey const& key, std::vector<TensorMeta> const& expected) {
    (void)key;
    (void)expected;
    return Status::ok();
  }
  // Waits for `key` until the deadline; the header must match `expected` exactly. The tensors
  // returned live in this device's memory.
  virtual Result<std::vector<Tensor>> recv(MessageKey const& key, std::vector<TensorMeta> const& expected,
                                           Deadline deadline) = 0;
  // In place: every member ends with the sum over `group` (devices in replica order), added in
  // that order whatever order the members arrive in, so every replica gets identical bits.
  virtual Status all_reduce_sum(CollectiveKey const& key, std::vector<int> const& group, std::vector<Tensor>& tensors,
                                Deadline deadline) = 0;
  // Every device reaches the barrier (the step's end), or an error.
  virtual Status barrier(int64_t step, Deadline deadline) = 0;
  // Waits until every send this device made has been handed over (MPI: completed).
  virtual Status flush(Deadline deadline) = 0;
  // Records the first cause and wakes every wait on every device. Idempotent.
  virtual void abort(Status const& cause) = 0;
  // The first cause of an abort anywhere, once known here.
  virtual std::optional<Status> aborted() const = 0;
  // Messages that arrived for this device and were not received: must be none after a step.
  virtual std::vector<MessageKey> undelivered() const = 0;
};

}  // namespace gp::exec
