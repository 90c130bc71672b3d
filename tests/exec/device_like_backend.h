// A test backend shared by the exec tests: the CPU backend dressed as a device.
#pragma once

#include <atomic>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "exec/backend.h"
#include "exec/cpu/cpu_backend.h"
#include "exec/seeds.h"
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
    if (on_forward) on_forward();
    log_reads(in);
    RETURN_IF_ERROR(cpu_.forward(call, in, out, saved));
    if (recording_) {
      std::optional<Saved> kept;
      if (saved) kept = *saved;
      record([this, call, in, made = out, kept]() -> Status {
        // A device's kernel reads a seed slot when it runs, not when it was recorded.
        OpCall now = call;
        if (now.rng_seed_slot) now.rng_seed = salted_seed(*now.rng_seed_slot, now.rng_salt);
        std::vector<Tensor> again;
        Saved saved_again;
        RETURN_IF_ERROR(cpu_.forward(now, in, again, kept ? &saved_again : nullptr));
        refill(again, made);
        if (kept) refill(saved_again.tensors, kept->tensors);
        return Status::ok();
      });
    }
    return Status::ok();
  }
  Status backward_input(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                        std::vector<bool> const& needs, std::vector<Tensor>& grads) override {
    log_reads(saved.tensors);
    log_backward(call, "B");
    RETURN_IF_ERROR(cpu_.backward_input(call, saved, gout, needs, grads));
    if (recording_)
      record([this, call, saved, gout, needs, made = grads]() -> Status {
        std::vector<Tensor> again;
        RETURN_IF_ERROR(cpu_.backward_input(call, saved, gout, needs, again));
        refill(again, made);
        return Status::ok();
      });
    return Status::ok();
  }
  Status backward_weight(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                         std::vector<Tensor>& grads) override {
    log_reads(saved.tensors);
    log_backward(call, "W");
    for (Tensor const& g : grads) keep(g);  // accumulated into
    RETURN_IF_ERROR(cpu_.backward_weight(call, saved, gout, grads));
    if (recording_)
      record([this, call, saved, gout, into = grads]() -> Status {
        std::vector<Tensor> same = into;
        return cpu_.backward_weight(call, saved, gout, same);
      });
    return Status::ok();
  }
  Status backward(OpCall const& call, Saved const& saved, std::vector<Tensor> const& gout,
                  std::vector<bool> const& needs, std::vector<Tensor>& grads, std::vector<Tensor>& wgrads) override {
    log_reads(saved.tensors);
    log_backward(call, "B+W");
    for (Tensor const& g : wgrads) keep(g);
    RETURN_IF_ERROR(cpu_.backward(call, saved, gout, needs, grads, wgrads));
    if (recording_)
      record([this, call, saved, gout, needs, made = grads, into = wgrads]() -> Status {
        std::vector<Tensor> again, same = into;
        RETURN_IF_ERROR(cpu_.backward(call, saved, gout, needs, again, same));
        refill(again, made);
        return Status::ok();
      });
    return Status::ok();
  }
  Tensor empty(std::vector<int64_t> shape, DType dtype) override { return cpu_.empty(std::move(shape), dtype); }
  Tensor zeros(std::vector<int64_t> shape, DType dtype) override {
    Tensor z = cpu_.zeros(std::move(shape), dtype);
    if (recording_)
      record([this, z]() -> Status {
        Tensor same = z;
        return cpu_.fill(same, 0.f);
      });
    return z;
  }
  Status fill(Tensor& t, float value) override {
    return in_place(t, [this, value](Tensor& into) { return cpu_.fill(into, value); });
  }
  Status copy(Tensor const& src, Tensor& dst) override {
    if (pinned_live(src)) ++pinned_copies;
    return in_place(dst, [this, src](Tensor& into) { return cpu_.copy(src, into); });
  }
  // As a device's copy stream: each copy logged by its destination (the work is done at once).
  Status copy_on(StreamKind stream, Tensor const& src, Tensor& dst) override {
    log(StreamOp::Kind::kCopy, stream, 0, dst.raw());
    return copy(src, dst);
  }
  bool overlaps_copies() const override { return copy_stream; }
  Status scale_by(Tensor& t, Tensor const& factor) override {  // reads the factor when it runs, as a kernel
    return in_place(t, [this, factor](Tensor& into) { return cpu_.scale_by(into, factor); });
  }
  Status add_into(Tensor& dst, Tensor const& src) override {
    return in_place(dst, [this, src](Tensor& into) { return cpu_.add_into(into, src); });
  }
  Status copy_chunks(Tensor const& src, std::vector<int> const& sc, Tensor& dst, std::vector<int> const& dc, int axis,
                     int64_t chunk) override {
    return cpu_.copy_chunks(src, sc, dst, dc, axis, chunk);
  }
  Status loss_into(LossKind kind, Tensor const& out, Tensor const& labels, int64_t rows, Tensor& grad,
                   StepLosses& losses, int slot) override {
    log_reads({labels});
    keep(losses.values);
    keep(losses.bad);
    RETURN_IF_ERROR(cpu_.loss_into(kind, out, labels, rows, grad, losses, slot));
    if (recording_)
      record([this, kind, out, labels, rows, made = grad, &losses, slot]() -> Status {
        // A GPU's replay writes the slot's device memory, not what the call noted on the host.
        auto const written = losses.written;
        auto const classes = losses.classes;
        Tensor again;
        Status const s = cpu_.loss_into(kind, out, labels, rows, again, losses, slot);
        losses.written = written;
        losses.classes = classes;
        RETURN_IF_ERROR(s);
        refill({again}, {made});
        return Status::ok();
      });
    return Status::ok();
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

  // Captured work as a GPU's (Backend::begin_capture), with `capture` set: the calls between
  // begin_capture and end_capture run here at once and are recorded, and end_capture gives every
  // tensor they wrote into back its contents from before, so that a capture leaves no trace, as a
  // GPU's, which records without running. replay() runs the recorded calls again on the same
  // tensors: what a call makes anew is copied into the tensor the recording handed on (a GPU's
  // replay writes the same addresses). `fail_capture` makes end_capture fail with it.
  bool capture = false;
  Status fail_capture = Status::ok();
  int captures = 0, replays = 0;
  bool captures_work() const override { return capture; }
  Status begin_capture() override {
    if (!capture) return Backend::begin_capture();
    if (recording_) return internal_error("device-like: a capture is already open");
    recording_ = std::make_unique<Recording>();
    return Status::ok();
  }
  Result<std::unique_ptr<CapturedWork>> end_capture() override {
    if (!recording_) return internal_error("device-like: no capture is open");
    for (auto& [t, before] : restore_) std::memcpy(t.raw(), before.raw(), t.nbytes());
    restore_.clear();
    kept_.clear();
    std::unique_ptr<Recording> done = std::move(recording_);
    if (!fail_capture.is_ok()) return fail_capture;
    ++captures;
    return std::unique_ptr<CapturedWork>(std::move(done));
  }
  Status replay(CapturedWork& work) override {
    auto* const r = dynamic_cast<Recording*>(&work);
    if (r == nullptr) return internal_error("device-like: replay of work captured elsewhere");
    ++replays;
    for (auto const& call : r->calls) RETURN_IF_ERROR(call());
    return Status::ok();
  }

  bool pinned_live(Tensor const& t) const { return t.defined() && &t.allocator() == &pinned; }
  CountingAllocator pinned;
  int pinned_copies = 0;
  std::atomic<int>* forwards = nullptr;  // when set, counts the op forwards run here
  std::function<void()> on_forward;      // when set, called first by every op forward
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

  struct Recording final : CapturedWork {
    std::vector<std::function<Status()>> calls;
  };
  void record(std::function<Status()> call) { recording_->calls.push_back(std::move(call)); }
  // A call that writes `dst` in place: run now and, while a capture records, again at each replay
  // on the same tensor (its contents before the capture are kept for end_capture).
  Status in_place(Tensor& dst, std::function<Status(Tensor&)> op) {
    keep(dst);
    RETURN_IF_ERROR(op(dst));
    if (recording_)
      record([dst, op]() -> Status {
        Tensor same = dst;
        return op(same);
      });
    return Status::ok();
  }
  // A tensor written in place during a capture: its contents now, put back at end_capture.
  void keep(Tensor const& t) {
    if (recording_ && t.defined() && t.nbytes() > 0 && kept_.insert(t.raw()).second)
      restore_.emplace_back(t, t.clone());
  }
  // A rerun's new tensors copied into the recorded ones (the same memory: nothing to copy).
  static void refill(std::vector<Tensor> const& again, std::vector<Tensor> const& recorded) {
    for (std::size_t k = 0; k < again.size() && k < recorded.size(); ++k)
      if (again[k].defined() && recorded[k].defined() && again[k].raw() != recorded[k].raw() &&
          again[k].nbytes() == recorded[k].nbytes())
        std::memcpy(Tensor(recorded[k]).raw(), again[k].raw(), again[k].nbytes());
  }
  std::unique_ptr<Recording> recording_;
  std::vector<std::pair<Tensor, Tensor>> restore_;
  std::set<void const*> kept_;
};

}  // namespace gp::exec::testing
