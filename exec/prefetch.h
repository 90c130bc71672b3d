// Batches made ahead on a background thread. While the device runs one micro-batch, the next is
// read (and, on a GPU, written into the pinned memory its copy reads directly: the backend's
// pinned_host_allocator). A trainer asks for consecutive ranges (first, count), so after each the
// next one is prefetched; any other request is made at once. Either way the batch is made on the
// worker (so its allocator applies) and is the inner source's, byte for byte: prefetching changes
// when a batch is read, never what it holds.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "exec/data.h"

namespace gp::exec {

class PrefetchingSource final : public DataSource {
 public:
  // `alloc` (may be null: the process allocator): where the worker makes the batches' tensors; it
  // must outlive this source.
  PrefetchingSource(std::unique_ptr<DataSource> inner, Allocator* alloc);
  ~PrefetchingSource() override;  // waits for a batch being made
  PrefetchingSource(PrefetchingSource const&) = delete;
  PrefetchingSource& operator=(PrefetchingSource const&) = delete;

  Result<Batch> batch(int64_t first, int64_t count) override;
  std::string describe() const override { return inner_->describe(); }

  int64_t hits() const;  // requests served by a batch made ahead

 private:
  using Range = std::pair<int64_t, int64_t>;
  void loop();

  std::unique_ptr<DataSource> inner_;
  Allocator* alloc_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Range> request_;  // for the worker to make
  std::optional<Range> ready_range_;
  std::optional<Result<Batch>> ready_;
  bool busy_ = false, stop_ = false;
  int64_t hits_ = 0;
  std::thread worker_;  // last: started once the members above exist
};

}  // namespace gp::exec
