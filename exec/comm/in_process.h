// The default transport: pipeline workers are threads of one process. A shared hub holds one
// mailbox per device, the collectives in progress, the barrier counts and the first abort cause;
// one mutex and one condition variable guard it (device counts are small; an all-reduce's sum runs
// outside it, so the other workers' messages are not held up behind it). A received tensor is
// copied into the receiving device's memory (the receiving thread's allocator, or the device
// allocator set for it: a GPU worker's), so each device's memory is counted where it lives, as it
// would be after a real transfer. Between GPUs of one process a received tensor is a peer copy
// (Allocator::copy_from_peer), and replicas' gradients are summed on the first replica's GPU by its
// backend (set_device_adder; through host memory without one). NCCL, under MPI, is the fast path.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "exec/comm/communicator.h"

namespace gp::exec {

class InProcessHub {
 public:
  explicit InProcessHub(int num_devices);
  int num_devices() const { return num_devices_; }
  // The endpoint of one device; the hub must outlive it.
  std::unique_ptr<Communicator> endpoint(int device);
  // Received tensors of `device` go to `alloc` (a device's memory) instead of the receiving
  // thread's CPU allocator. Set before the workers start.
  void set_device_allocator(int device, Allocator* alloc);
  // How a device sums replicas' gradients where it holds them: dst += src (same device, dtype and
  // shape), and a wait for the adds queued so far. With one for the group's first device, an
  // all-reduce of GPU replicas sums on that GPU (peer copies there and back) instead of the host.
  struct DeviceAdder {
    std::function<Status(Tensor& dst, Tensor const& src)> add;
    std::function<Status()> wait;
  };
  // Set before the workers start; the adder runs on the thread that arrives last at a collective,
  // while the device's own worker waits in it.
  void set_device_adder(int device, DeviceAdder adder);
  // What waits in each mailbox now (for a stall report).
  std::vector<std::vector<MessageKey>> mailboxes() const;

 private:
  friend class InProcessCommunicator;
  struct Collective {
    std::map<int, std::vector<Tensor>*> members;  // device -> its tensors, while it waits
    bool summing = false;  // the last member is summing, without the hub's lock: members wait for done
    bool done = false;
    Status result;  // the sum's, which every member returns
    int released = 0;
  };

  int num_devices_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  struct Message {
    std::vector<Tensor> tensors;
    HostFence ready;  // the sender's fence (Communicator::send)
  };
  std::vector<std::map<MessageKey, Message>> mailbox_;
  std::vector<Allocator*> device_alloc_;   // per device; null: the receiving thread's CPU allocator
  std::vector<DeviceAdder> device_adder_;  // per device; empty: the all-reduce sums on the host
  std::map<CollectiveKey, Collective> collectives_;
  std::map<int64_t, int> barrier_arrived_, barrier_left_;
  std::optional<Status> abort_;
};

}  // namespace gp::exec
