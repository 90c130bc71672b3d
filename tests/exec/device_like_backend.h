// A test backend shared by the exec tests: the CPU backend dressed as a device.
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "exec/backend.h"
#include "exec/cpu/cpu_backend.h"
#include "exec/tensor.h"

namespace gp::exec::testing {

// The CPU backend dressed as a device (what the CUDA backend is to the trainer, without a GPU):
// its device is not the CPU and it hands out "pinned" host memory, a counting allocator here.
class DeviceLikeBackend final : public Backend {
 public:
  std::string name() const override { return "device-like"; }
  DeviceRef device() const override { return {DeviceKind::kCuda, 0}; }
  Allocator& allocator() override { return cpu_.allocator(); }
  Allocator* pinned_host_allocator() override { return &pinned; }
  Status supports(graph::Op const& op, graph::OpGraph const& graph) const override { return cpu_.supports(op, graph); }
  Result<ResolvedKernel> resolve(graph::Op const& op, graph::OpGraph const& graph) const override {
    return cpu_.resolve(op, graph);
  }
  Status forward(OpCall const& call, std::vector<Tensor> const& in, std::vector<Tensor>& out, Saved* saved) override {
    if (forwards) ++*forwards;
    log_reads(in);
    return cpu_.forward(call, in, out, saved);
  }
  Status backward_input(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                        std::vector<bool> const& needs, std::vector<Tensor>& grads) override {
    log_reads(saved.tensors);
    log_backward(call, "B");
    return cpu_.backward_input(call, saved, gout, needs, grads);
  }
  Status backward_weight(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                         std::vector<Tensor>& grads) override {
    log_reads(saved.tensors);
    log_backward(call, "W");
    return cpu_.backward_weight(call, saved, gout, grads);
  }
  Status backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                  std::vector<bool> const& needs, std::vector<Tensor>& grads, std::vector<Tensor>& wgrads) override {
    log_reads(saved.tensors);
    log_backward(call, "B+W");
    return cpu_.backward(call, saved, gout, needs, grads, wgrads);
  }
  Tensor empty(std::vector<int64_t> shape, DType dtype) override { return cpu_.empty(std::move(shape), dtype); }
  Tensor zeros(std::vector<int64_t> shape, DType dtype) override { return cpu_.zeros(std::move(shape), dtype); }
  Status fill(Tensor& t, float value) override { return cpu_.fill(t, value); }
  Status copy(Tensor const& src, Tensor& dst) override {
    if (pinned_live(src)) ++pinned_copies;
    return cpu_.copy(src, dst);
  }
  // As a device's copy stream: each copy logged by its destination (the work is done at once).
  Status copy_on(StreamKind stream, Tensor const& src, Tensor& dst) override {
    log(StreamOp::Kind::kCopy, stream, 0, dst.raw());
    return copy(src, dst);
  }
  bool overlaps_copies() const override { return copy_stream; }
  Status add_into(Tensor& dst, Tensor const& src) override { return cpu_.add_into(dst, src); }
  Status copy_chunks(Tensor const& src, std::vector<int> const& sc, Tensor& dst, std::vector<int> const& dc, int axis,
                     int64_t chunk) override {
    return cpu_.copy_chunks(src, sc, dst, dc, axis, chunk);
  }
  Status loss_into(LossKind kind, Tensor const& out, Tensor const& labels, int64_t rows, Tensor& grad,
                   StepLosses& losses, int slot) override {
    return cpu_.loss_into(kind, out, labels, rows, grad, losses, slot);
  }
  // As a device's: host reads are counted, and callers defer them (a step reads its losses once).
  Result<std::vector<double>> read_losses(StepLosses const& losses) override {
    ++loss_reads;
    return Backend::read_losses(losses);
  }
  bool defers_host_reads() const override { return defers_reads; }
  void defer_checks(bool on) override { deferring_checks = on; }
  Status deferred_checks() override {
    if (deferring_checks) ++deferred_check_reads;
    return Status::ok();
  }
  bool defers_reads = true;
  bool deferring_checks = false;
  std::atomic<int> loss_reads{0}, deferred_check_reads{0};
  Status optimizer_update(OptimizerConfig const& c, int64_t step, Tensor& p, Tensor const& g,
                          std::vector<Tensor*> const& state) override {
    return cpu_.optimizer_update(c, step, p, g, state);
  }
  Status optimizer_update_all(OptimizerConfig const& c, int64_t step,
                              std::vector<ParamUpdate> const& updates) override {
    ++update_all_calls;
    updated_params += static_cast<int>(updates.size());
    return Backend::optimizer_update_all(c, step, updates);  // one optimizer_update each, as the default does
  }
  int update_all_calls = 0, updated_params = 0;
  Status synchronize() override { return cpu_.synchronize(); }
  // With `fences` set, every fence is counted when made and when waited for (a real device's
  // fence waits for its stream; here the work is already done).
  struct FenceCounts {
    std::atomic<int> made{0}, waited{0};
  };
  // Events as a device's: numbered, logged when recorded and when waited for.
  Event record(StreamKind stream) override {
    uint64_t const id = ++events_;
    log(StreamOp::Kind::kRecord, stream, id, nullptr);
    return {id};
  }
  Status wait(StreamKind stream, Event event) override {
    log(StreamOp::Kind::kWait, stream, event.id, nullptr);
    return Status::ok();
  }
  // With `stream_log` set, what a device would order by its streams: events recorded and waited
  // for, copies (by destination) and the memory each op call reads (its inputs; in backward, the
  // tensors its forward saved), in the order they were queued. A read is on the compute stream.
  struct StreamOp {
    enum class Kind { kRecord, kWait, kCopy, kRead } kind;
    StreamKind stream = StreamKind::kCompute;
    uint64_t event = 0;
    void const* ptr = nullptr;
  };
  std::vector<StreamOp>* stream_log = nullptr;
  bool copy_stream = true;  // overlaps_copies(): the trainer stages its inputs on the copy stream
  HostFence fence(StreamKind) override {
    if (!fences) return {};
    ++fences->made;
    FenceCounts* const f = fences;
    return [f] {
      ++f->waited;
      return Status::ok();
    };
  }
  FenceCounts* fences = nullptr;

  bool pinned_live(Tensor const& t) const { return t.defined() && &t.allocator() == &pinned; }
  CountingAllocator pinned;
  int pinned_copies = 0;
  std::atomic<int>* forwards = nullptr;  // when set, counts the op forwards run here
  // Backward calls by op type and kind ("B": backward_input, "W": backward_weight, "B+W":
  // backward), e.g. backward_calls["BatchNormalization"]["W"].
  std::map<std::string, std::map<std::string, int>> backward_calls;

 private:
  void log(StreamOp::Kind kind, StreamKind stream, uint64_t event, void const* ptr) {
    if (stream_log) stream_log->push_back({kind, stream, event, ptr});
  }
  void log_backward(OpCall const& call, char const* kind) {
    std::lock_guard<std::mutex> lock(backward_calls_mu_);
    ++backward_calls[call.op.type][kind];
  }
  std::mutex backward_calls_mu_;
  void log_reads(std::vector<Tensor> const& tensors) {
    for (Tensor const& t : tensors)
      if (t.defined()) log(StreamOp::Kind::kRead, StreamKind::kCompute, 0, t.raw());
  }
  std::atomic<uint64_t> events_{0};
  CpuBackend cpu_;
};

}  // namespace gp::exec::testing
