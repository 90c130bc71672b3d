#include "exec/comm/in_process.h"

#include "kernels/vector_ops.h"

namespace gp::exec {

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(InProcessHub& hub, int device) : hub_(hub), device_(device) {}
  std::string name() const override { return "in-process"; }
  int device() const override { return device_; }
  int num_devices() const override { return hub_.num_devices_; }

  Status send(MessageKey const& key, std::vector<Tensor> tensors, HostFence ready = {}) override {
    if (key.src != device_ || key.dst < 0 || key.dst >= hub_.num_devices_)
      return internal_error("send " + key.to_string() + " from device " + std::to_string(device_));
    std::lock_guard lock(hub_.mu_);
    if (hub_.abort_) return aborted(*hub_.abort_);
    auto [it, fresh] = hub_.mailbox_[key.dst].emplace(key, InProcessHub::Message{std::move(tensors), std::move(ready)});
    if (!fresh) return internal_error("message " + key.to_string() + " was sent twice");
    hub_.cv_.notify_all();
    return Status::ok();
  }

  Result<std::vector<Tensor>> recv(MessageKey const& key, std::vector<TensorMeta> const& expected,
                                   Deadline deadline) override {
    if (key.dst != device_) return internal_error("recv " + key.to_string() + " on device " + std::to_string(device_));
    std::vector<Tensor> got;
    HostFence ready;
    {
      std::unique_lock lock(hub_.mu_);
      auto& box = hub_.mailbox_[device_];
      bool const ok = hub_.cv_.wait_until(lock, deadline, [&] { return hub_.abort_ || box.count(key); });
      if (hub_.abort_) return aborted(*hub_.abort_);
      if (!ok) return timeout_error("no message " + key.to_string() + " arrived before the deadline");
      auto it = box.find(key);
      got = std::move(it->second.tensors);
      ready = std::move(it->second.ready);
      box.erase(it);
    }
    std::vector<TensorMeta> metas;
    for (Tensor const& t : got) metas.push_back(meta_of(t));
    RETURN_IF_ERROR(check_header(key, expected, metas));
    // A GPU sender's kernels that wrote the tensors may still be running: the copy below runs on
    // this device's stream, which nothing orders after them, so wait for the sender's fence first.
    if (ready) RETURN_IF_ERROR(ready().with_context("the sender's work on " + key.to_string()));
    Allocator* const alloc = hub_.device_alloc_[device_];
    for (Tensor& t : got) t = t.clone_to(alloc ? *alloc : cpu_allocator());
    return got;
  }

  Status all_reduce_sum(CollectiveKey const& key, std::vector<int> const& group, std::vector<Tensor>& tensors,
                        Deadline deadline) override {
    if (group.size() <= 1) return Status::ok();
    std::unique_lock lock(hub_.mu_);
    if (hub_.abort_) return aborted(*hub_.abort_);
    auto& c = hub_.collectives_[key];
    if (c.members.count(device_))
      return internal_error(key.to_string() + " entered twice by device " + std::to_string(device_));
    c.members.emplace(device_, &tensors);
    if (c.members.size() == group.size()) {
      // The last to arrive sums in replica order and writes the sum into every member's tensors;
      // every member returns its status. The sum runs without the hub's lock (other workers' sends,
      // receives and collectives go on meanwhile); the members wait for it whatever happens, since
      // it reads and writes their tensors, and nothing else touches this collective until it is done.
      c.summing = true;
      lock.unlock();
      Status result;
      try {
        result = sum_into_members(key, group, c);
      } catch (std::exception const& e) {  // a device allocator's failed runtime call, or no memory
        result = internal_error(key.to_string() + ": " + e.what());
      }
      lock.lock();
      c.result = std::move(result);
      c.done = true;
      hub_.cv_.notify_all();
    } else {
      bool const ok = hub_.cv_.wait_until(lock, deadline, [&] { return hub_.abort_ || c.done; });
      // Once the sum has begun it reads and writes our tensors: we may not return before it ends.
      if (!c.done && c.summing) hub_.cv_.wait(lock, [&] { return c.done; });
      if (!c.done) {
        c.members.erase(device_);  // nobody may write into our tensors after we return
        if (hub_.abort_) return aborted(*hub_.abort_);
        if (!ok) {
          std::string missing;
          for (int d : group)
            if (!c.members.count(d) && d != device_) missing += (missing.empty() ? "d" : ", d") + std::to_string(d);
          return timeout_error(key.to_string() + ": replicas " + missing + " did not arrive before the deadline");
        }
      }
    }
    Status const result = c.result;
    if (++c.released == static_cast<int>(group.size())) hub_.collectives_.erase(key);
    return result;
  }

  Status barrier(int64_t step, Deadline deadline) override {
    std::unique_lock lock(hub_.mu_);
    int const n = hub_.num_devices_;
    ++hub_.barrier_arrived_[step];
    hub_.cv_.notify_all();
    bool const ok =
        hub_.cv_.wait_until(lock, deadline, [&] { return hub_.abort_ || hub_.barrier_arrived_[step] == n; });
    if (hub_.abort_) return aborted(*hub_.abort_);
    if (!ok)
      return timeout_error("step " + std::to_string(step) +
                           " barrier: " + std::to_string(n - hub_.barrier_arrived_[step]) + " devices did not arrive");
    if (++hub_.barrier_left_[step] == n) {
      hub_.barrier_arrived_.erase(step);
      hub_.barrier_left_.erase(step);
    }
    return Status::ok();
  }

  Status flush(Deadline) override { return Status::ok(); }  // a send is handed over at once

  void abort(Status const& cause) override {
    std::lock_guard lock(hub_.mu_);
    if (!hub_.abort_) hub_.abort_ = cause;
    hub_.cv_.notify_all();
  }

  std::optional<Status> aborted() const override {
    std::lock_guard lock(hub_.mu_);
    return hub_.abort_;
  }

  std::vector<MessageKey> undelivered() const override {
    std::lock_guard lock(hub_.mu_);
    std::vector<MessageKey> keys;
    for (auto const& [k, v] : hub_.mailbox_[device_]) keys.push_back(k);
    return keys;
  }

 private:
  // Every member's tensors hold the sum of all members' (in group order). On GPUs with an adder for
  // the group's first device, summed there: the others' tensors peer-copied to it and added by its
  // backend, the sum peer-copied back. Else (CPU members, or no adder) in host memory, device
  // tensors staged through it. Called without the hub's lock, every member waiting for it (`summing`).
  Status sum_into_members(CollectiveKey const& key, std::vector<int> const& group, InProcessHub::Collective& c) {
    for (int d : group)
      if (!c.members.count(d))
        return internal_error(key.to_string() + ": device " + std::to_string(d) + " is not in the group");
    std::vector<Tensor> const& first = *c.members.at(group[0]);
    for (std::size_t g = 1; g < group.size(); ++g) {
      std::vector<Tensor> const& other = *c.members.at(group[g]);
      if (other.size() != first.size())
        return internal_error(key.to_string() + ": replicas hold different gradient lists");
      for (std::size_t i = 0; i < first.size(); ++i)
        if (other[i].numel() != first[i].numel() || other[i].dtype() != first[i].dtype())
          return invalid_argument(key.to_string() + ": gradient " + std::to_string(i) + " is " +
                                  other[i].shape_string() + " on device " + std::to_string(group[g]) + " but " +
                                  first[i].shape_string() + " on device " + std::to_string(group[0]));
    }
    bool on_devices = true;  // every member's tensors on a device whose adder is set
    for (int d : group) {
      InProcessHub::DeviceAdder const& a = hub_.device_adder_[static_cast<std::size_t>(d)];
      on_devices = on_devices && a.add && a.wait;
      for (Tensor const& t : *c.members.at(d)) on_devices = on_devices && t.device().kind != DeviceKind::kCpu;
    }
    return on_devices ? sum_on_device(group, c) : sum_on_host(group, c);
  }

  Status sum_on_device(std::vector<int> const& group, InProcessHub::Collective& c) {
    auto adder = [&](int d) -> InProcessHub::DeviceAdder const& {
      return hub_.device_adder_[static_cast<std::size_t>(d)];
    };
    // The gradients are done: each member's queued kernels have run (two workers may share a GPU,
    // each on its own stream, and copy within it).
    for (int d : group) RETURN_IF_ERROR(adder(d).wait());
    std::vector<Tensor> sum;
    for (Tensor const& t : *c.members.at(group[0])) sum.push_back(t.clone());  // on the first member's GPU
    for (std::size_t g = 1; g < group.size(); ++g) {
      std::vector<Tensor> staged;  // kept until the adds that read them are done
      for (std::size_t i = 0; i < sum.size(); ++i) {
        staged.push_back(c.members.at(group[g])->at(i).clone_to(sum[i].allocator()));
        RETURN_IF_ERROR(adder(group[0]).add(sum[i], staged.back()));
      }
      RETURN_IF_ERROR(adder(group[0]).wait());
    }
    write_back(group, c, sum);  // within the GPU, or peer copies
    return Status::ok();
  }

  // Every member's tensors <- `sum`, whichever devices either side is on.
  static void write_back(std::vector<int> const& group, InProcessHub::Collective& c, std::vector<Tensor> const& sum) {
    for (int d : group) {
      std::vector<Tensor>& dst = *c.members.at(d);
      for (std::size_t i = 0; i < sum.size(); ++i) sum[i].copy_bytes_into(dst[i]);
    }
  }

  static Status sum_on_host(std::vector<int> const& group, InProcessHub::Collective& c) {
    std::vector<Tensor> sum;
    for (Tensor const& t : *c.members.at(group[0])) sum.push_back(t.clone_to(process_cpu_allocator()));
    for (std::size_t g = 1; g < group.size(); ++g) {
      std::vector<Tensor> const& other = *c.members.at(group[g]);
      for (std::size_t i = 0; i < sum.size(); ++i) {
        if (other[i].device().kind == DeviceKind::kCpu) {
          kernels::add_inplace(sum[i].data<float>(), other[i].data<float>(), sum[i].numel());
        } else {
          Tensor const staged = other[i].clone_to(process_cpu_allocator());
          kernels::add_inplace(sum[i].data<float>(), staged.data<float>(), sum[i].numel());
        }
      }
    }
    write_back(group, c, sum);
    return Status::ok();
  }

  static Status aborted(Status const& cause) {
    return aborted_error("stopped because another device failed: " + cause.message());
  }

  InProcessHub& hub_;
  int device_;
};

InProcessHub::InProcessHub(int num_devices)
    : num_devices_(num_devices),
      mailbox_(num_devices),
      device_alloc_(static_cast<std::size_t>(num_devices), nullptr),
      device_adder_(static_cast<std::size_t>(num_devices)) {}

void InProcessHub::set_device_adder(int device, DeviceAdder adder) {
  std::lock_guard lock(mu_);
  device_adder_.at(static_cast<std::size_t>(device)) = std::move(adder);
}

void InProcessHub::set_device_allocator(int device, Allocator* alloc) {
  std::lock_guard lock(mu_);
  device_alloc_.at(static_cast<std::size_t>(device)) = alloc;
}

std::unique_ptr<Communicator> InProcessHub::endpoint(int device) {
  return std::make_unique<InProcessCommunicator>(*this, device);
}

std::vector<std::vector<MessageKey>> InProcessHub::mailboxes() const {
  std::lock_guard lock(mu_);
  std::vector<std::vector<MessageKey>> out(mailbox_.size());
  for (std::size_t d = 0; d < mailbox_.size(); ++d)
    for (auto const& [k, v] : mailbox_[d]) out[d].push_back(k);
  return out;
}

}  // namespace gp::exec
