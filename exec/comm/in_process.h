// The default transport: pipeline workers are threads of one process. A shared hub holds one
// mailbox per device, the collectives in progress, the barrier counts and the first abort cause;
// one mutex and one condition variable guard it (device counts are small). A received tensor is
// copied into the receiving device's memory (the receiving thread's allocator, or the device
// allocator set for it: a GPU worker's), so each device's memory is counted where it lives, as it
// would be after a real transfer. Between GPUs of one process a received tensor is a peer copy
// (Allocator::copy_from_peer); the all-reduce goes through host memory: correct, not fast (NCCL is
// the fast path, under MPI).
#pragma once

#include <condition_variable>
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
  // What waits in each mailbox now (for a stall report).
  std::vector<std::vector<MessageKey>> mailboxes() const;

 private:
  friend class InProcessCommunicator;
  struct Collective {
    std::map<int, std::vector<Tensor>*> members;  // device -> its tensors, while it waits
    bool done = false;
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
  std::vector<Allocator*> device_alloc_;  // per device; null: the receiving thread's CPU allocator
  std::map<CollectiveKey, Collective> collectives_;
  std::map<int64_t, int> barrier_arrived_, barrier_left_;
  std::optional<Status> abort_;
};

}  // namespace gp::exec
