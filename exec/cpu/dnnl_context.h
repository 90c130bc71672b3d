// The one place that holds oneDNN state: the CPU engine, a stream per thread, plain memory
// descriptors over our tensors, and a cache of primitives keyed by (op kind, shapes, attrs) so that
// hot loops do not rebuild primitive descriptors.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "exec/tensor.h"

namespace gp::exec::dnnl_ctx {

dnnl::engine const& engine();
dnnl::stream& stream();  // one per calling thread

// Whether oneDNN has bf16 primitives on this CPU: 2.6 builds them only where it finds AVX512
// (its bf16 "data type support"), so an AVX2 machine has none and creating one throws. Probed
// once, by making a bf16 matmul and a bf16 ReLU.
bool has_bf16_primitives();

using dims = dnnl::memory::dims;
dims to_dims(std::vector<int64_t> const& shape);
// oneDNN's data type for a float dtype (f32 or bf16; anything else is a programming error).
dnnl::memory::data_type dnnl_type(DType dtype);
// Row-major (a rank-0 shape becomes {1}), f32 unless told.
dnnl::memory::desc plain_md(std::vector<int64_t> const& shape, DType dtype = DType::kFloat32);
// With explicit strides (transposed views for matmul).
dnnl::memory::desc strided_md(std::vector<int64_t> const& shape, std::vector<int64_t> const& strides,
                              DType dtype = DType::kFloat32);
dnnl::memory mem(dnnl::memory::desc const& md, void const* data);
inline dnnl::memory mem(Tensor const& t) { return mem(plain_md(t.shape(), t.dtype()), t.raw()); }

// A tensor's data in the layout a primitive asked for: the tensor itself when that layout is the
// plain one, else a reordered copy (kept alive by `storage`).
struct InLayout {
  Tensor storage;
  dnnl::memory mem;
};
InLayout to_layout(void const* data, dnnl::memory::desc const& plain, dnnl::memory::desc const& want);
// Memory in layout `want` that will end up in `out` (plain): `out` itself, or a buffer that
// finish_layout() reorders into `out`.
InLayout output_layout(void* out, dnnl::memory::desc const& plain, dnnl::memory::desc const& want);
void finish_layout(InLayout const& produced, void* out, dnnl::memory::desc const& plain);
// A buffer in layout `want` whose contents finish_accumulate() adds into a plain tensor: one
// reorder with a sum post-op instead of a reorder, a temporary and an addition.
InLayout scratch_layout(dnnl::memory::desc const& want);
void finish_accumulate(InLayout const& produced, void* out, dnnl::memory::desc const& plain);
// Reorders between layouts, from the primitive cache; `accumulate`: dst += reordered src.
void reorder(dnnl::memory const& src, dnnl::memory const& dst, bool accumulate = false);
std::string key_md(dnnl::memory::desc const& md);  // identifies a memory layout (cache keys)

// Executes and waits (the CPU stream is in-order; waiting keeps buffers' lifetimes simple).
void run(dnnl::primitive const& p, std::unordered_map<int, dnnl::memory> const& args);

// Builds the key of a primitive cache entry from anything streamable.
template <typename... Parts>
std::string key(Parts const&... parts) {
  std::ostringstream os;
  ((os << parts << '|'), ...);
  return os.str();
}
std::string key_dims(std::vector<int64_t> const& v);

// Per-thread primitive cache; entries are never evicted (shapes per model are few).
class PrimitiveCache {
 public:
  static PrimitiveCache& instance();
  template <typename Entry>
  std::shared_ptr<Entry const> get(std::string const& k, std::function<Entry()> const& make) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = map_.find(k);
      if (it != map_.end()) return std::static_pointer_cast<Entry const>(it->second);
    }
    auto entry = std::make_shared<Entry const>(make());
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, inserted] = map_.emplace(k, entry);
    return std::static_pointer_cast<Entry const>(it->second);
  }
  std::size_t size() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<void const>> map_;
};

template <typename Entry>
std::shared_ptr<Entry const> cached(std::string const& k, std::function<Entry()> const& make) {
  return PrimitiveCache::instance().get<Entry>(k, make);
}

}  // namespace gp::exec::dnnl_ctx
