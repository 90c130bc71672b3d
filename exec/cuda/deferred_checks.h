// Index checks queued instead of read back at once (Backend::defer_checks). An op whose kernel
// flags its first out-of-range index in device memory (the smallest bad position, or all ones)
// would read the flag back and wait for the stream, once per call; queued, the flag is copied into
// a slot of pinned host memory on the stream without waiting, and resolve() reads every slot after
// one synchronisation, reporting the first failed check in queue order, as that op would have.
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
  static constexpr uint64_t kNoBadIndex = ~uint64_t{0};  // the flag's value when every index is in range

  struct Calls {
    std::function<Result<uint64_t*>(std::size_t n)> host_alloc;  // n pinned slots
    std::function<void(uint64_t*)> host_free;
    // Enqueue an 8-byte device-to-host copy of `flag` into `slot` (returns at once).
    std::function<Status(uint64_t* slot, void const* flag)> copy_async;
    std::function<Status()> synchronize;  // wait until the stream has done every copy
  };
  // `error(first_bad)`: the op's error for its flag's value (called only for a failed check).
  using ErrorFor = std::function<Status(uint64_t first_bad)>;

  DeferredChecks() = default;  // no calls: queue() is an internal error
  explicit DeferredChecks(Calls calls, std::size_t slots = 1024);
  DeferredChecks(DeferredChecks&&) noexcept = default;
  DeferredChecks& operator=(DeferredChecks&&) noexcept = default;
  ~DeferredChecks() = default;

  bool on = false;
  // Queues a check of `flag` (device memory, 8 bytes); with every slot taken, the queue is
  // resolved first (one synchronisation), and its error, if any, returned.
  Status queue(void const* flag, ErrorFor error);
  // The first failed check's error (queue order), ok when none; the queue is empty after it.
  Status resolve();
  void clear() {  // drops the queued checks unread (a step that failed)
    pending_.clear();
    queued_here_ = 0;
  }
  std::size_t size() const { return pending_.size(); }

  // The checks a capture queued: their slots (written by each replay) and errors, in queue order.
  struct Captured {
    std::shared_ptr<uint64_t> slots;
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
    std::function<void(uint64_t*)> free;
    void operator()(uint64_t* p) const {
      if (p && free) free(p);
    }
  };
  struct Pending {
    uint64_t const* slot;
    ErrorFor error;
    std::shared_ptr<uint64_t> keep;  // a capture's slots, while a check reads them
  };
  struct Capture {
    Captured checks;
    std::size_t capacity = 0;
  };
  Calls calls_;
  std::size_t capacity_ = 0;
  std::unique_ptr<uint64_t[], Free> slots_;
  std::vector<Pending> pending_;
  std::size_t queued_here_ = 0;  // of pending_, those in slots_ (the rest are captures')
  std::unique_ptr<Capture> capture_;
};

}  // namespace gp::exec::cuda
