// Index checks queued instead of read back at once (Backend::defer_checks). An op whose kernel
// flags its first out-of-range index in device memory (a Verdict: the smallest bad position, or
// all ones, and the index found there, noted on the device right after the check) would read the
// verdict back and wait for the stream, once per call; queued, the verdict is copied into a slot of
// pinned host memory on the stream without waiting, and resolve() reads every slot after one
// synchronisation, reporting the first failed check in queue order, as that op would have.
// Only ops whose kernels are safe on a bad index queue theirs (exec/cuda/ops_common.h).
//
// Captured work (CUDA graphs): between begin_capture and end_capture, queued checks copy their
// flags into slots of the capture's own, which every replay of the work writes again; after a
// replay, adopt() queues the capture's checks as if the work had just queued them, so resolve()
// reads them with the rest.
//
// Host-only: the CUDA calls come in as functions (exec/cuda/cuda_backend.cc binds them to the
// compute stream), so tests/cuda/test_deferred_checks.cc runs the queue on a fake stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/status.h"

namespace gp::exec::cuda {

class DeferredChecks {
 public:
  static constexpr uint64_t kNoBadIndex = ~uint64_t{0};  // first_bad when every index is in range

  // A check's two words in device memory (kernels/hd/index.h's note_bad_index), copied together.
  struct Verdict {
    uint64_t first_bad = kNoBadIndex;  // the smallest bad position
    int64_t index = 0;                 // the index there, as the check saw it (when first_bad is one)
  };
  static_assert(sizeof(Verdict) == 2 * sizeof(uint64_t));

  struct Calls {
    std::function<Result<Verdict*>(std::size_t n)> host_alloc;  // n pinned slots
    std::function<void(Verdict*)> host_free;
    // Enqueue a device-to-host copy of the verdict at `verdict` into `slot` (returns at once).
    std::function<Status(Verdict* slot, void const* verdict)> copy_async;
    std::function<Status()> synchronize;  // wait until the stream has done every copy
  };
  // The op's error for a failed check's verdict (called only for a failed check).
  using ErrorFor = std::function<Status(Verdict const& verdict)>;

  DeferredChecks() = default;  // no calls: queue() is an internal error
  explicit DeferredChecks(Calls calls, std::size_t slots = 1024);
  DeferredChecks(DeferredChecks&&) noexcept = default;
  DeferredChecks& operator=(DeferredChecks&&) noexcept = default;
  ~DeferredChecks() = default;

  bool on = false;
  // Queues a check of `verdict` (device memory, a Verdict); with every slot taken, the queue is
  // resolved first (one synchronisation), and its error, if any, returned.
  Status queue(void const* verdict, ErrorFor error);
  // The first failed check's error (queue order), ok when none; the queue is empty after it.
  Status resolve();
  void clear() {  // drops the queued checks unread (a step that failed)
    pending_.clear();
    queued_here_ = 0;
  }
  std::size_t size() const { return pending_.size(); }

  // The checks a capture queued: their slots (written by each replay) and errors, in queue order.
  struct Captured {
    std::shared_ptr<Verdict> slots;
    std::vector<ErrorFor> errors;
  };
  // Slots for a capture's checks (`slots` of them; one more check fails the capture's queue call),
  // made before the capture starts: allocating pinned memory is no work a stream can record.
  Status begin_capture(std::size_t slots = 1024);
  Result<Captured> end_capture();  // the capture's checks; none open: an internal error
  void abort_capture() { capture_.reset(); }
  bool capturing() const { return capture_ != nullptr; }
  // Queues the checks of one replay of a capture, resolved in order with the others.
  void adopt(Captured const& captured);

 private:
  struct Free {
    std::function<void(Verdict*)> free;
    void operator()(Verdict* p) const {
      if (p && free) free(p);
    }
  };
  struct Pending {
    Verdict const* slot;
    ErrorFor error;
    std::shared_ptr<Verdict> keep;  // a capture's slots, while a check reads them
  };
  struct Capture {
    Captured checks;
    std::size_t capacity = 0;
  };
  Calls calls_;
  std::size_t capacity_ = 0;
  std::unique_ptr<Verdict[], Free> slots_;
  std::vector<Pending> pending_;
  std::size_t queued_here_ = 0;  // of pending_, those in slots_ (the rest are captures')
  std::unique_ptr<Capture> capture_;
};

}  // namespace gp::exec::cuda
