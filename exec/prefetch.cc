#include "exec/prefetch.h"

#include <exception>

namespace gp::exec {

PrefetchingSource::PrefetchingSource(std::unique_ptr<DataSource> inner, Allocator* alloc)
    : inner_(std::move(inner)), alloc_(alloc), worker_([this] { loop(); }) {}

PrefetchingSource::~PrefetchingSource() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void PrefetchingSource::loop() {
  std::optional<ScopedThreadAllocator> scope;
  if (alloc_) scope.emplace(*alloc_);
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || request_.has_value(); });
    if (stop_) return;
    Range const r = *request_;
    request_.reset();
    busy_ = true;
    lock.unlock();
    std::optional<Result<Batch>> made;
    try {
      made.emplace(inner_->batch(r.first, r.second));
    } catch (std::exception const& e) {  // bad_alloc of a huge batch: an error for the caller, not a crash here
      made.emplace(internal_error(std::string("reading samples ") + std::to_string(r.first) + "..: " + e.what()));
    }
    lock.lock();
    ready_ = std::move(made);
    ready_range_ = r;
    busy_ = false;
    cv_.notify_all();
  }
}

Result<Batch> PrefetchingSource::batch(int64_t first, int64_t count) {
  std::unique_lock<std::mutex> lock(mu_);
  auto idle = [&] { return !busy_ && !request_.has_value(); };
  cv_.wait(lock, idle);
  Range const want{first, count};
  if (ready_ && ready_range_ == want) {
    ++hits_;
  } else {  // not the range made ahead (the first request, a jump): make it now
    ready_.reset();
    request_ = want;
    cv_.notify_all();
    cv_.wait(lock, [&] { return idle() && ready_.has_value(); });
  }
  Result<Batch> out = std::move(*ready_);
  ready_.reset();
  ready_range_.reset();
  request_ = Range{first + count, count};
  cv_.notify_all();
  return out;
}

int64_t PrefetchingSource::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

}  // namespace gp::exec
