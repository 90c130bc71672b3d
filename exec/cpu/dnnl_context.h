// The one place that holds oneDNN state: the CPU engine, a stream per thread, plain memory
// descriptors over our tensors, and a cache of primitives keyed by (op kind, shapes, attrs) so that
// hot loops do not rebuild primitive descriptors. Keys are integers (core/int_key.h), not text: a
// ResNet-50 conv's lookup took 0.97 us with the ostringstream keys before, 0.16 us now
// (bench/plan_keys).
#pragma once

#include <bit>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "core/int_key.h"
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

// Executes and waits (the CPU stream is in-order; waiting keeps buffers' lifetimes simple).
void run(dnnl::primitive const& p, std::unordered_map<int, dnnl::memory> const& args);

// The parts of a primitive cache key (core/int_key.h: integers, no text per call): integers,
// flags and enums as themselves, floats by their bits, names as text, dims with their length, a
// memory layout field by field, another key as a list.
void add_part(IntKey& k, dnnl::memory::desc const& md);
inline void add_part(IntKey& k, std::string_view name) { k.add_text(name); }
inline void add_part(IntKey& k, std::vector<int64_t> const& dims) { k.add_list(dims); }
inline void add_part(IntKey& k, IntKey const& other) { k.add_key(other); }
inline void add_part(IntKey& k, float v) { k.add(std::bit_cast<uint32_t>(v)); }
inline void add_part(IntKey& k, double v) { k.add(std::bit_cast<int64_t>(v)); }
template <typename T>
requires(std::is_integral_v<T> || std::is_enum_v<T>) void add_part(IntKey& k, T v) { k.add(static_cast<int64_t>(v)); }

// The key of a primitive cache entry: its parts in order (the first is the primitive's name).
template <typename... Parts>
IntKey key(Parts const&... parts) {
  IntKey k;
  (add_part(k, parts), ...);
  return k;
}
std::string key_dims(std::vector<int64_t> const& v);  // "[2,3,]" (messages)

// Per-thread primitive cache; entries are never evicted (shapes per model are few).
class PrimitiveCache {
 public:
  static PrimitiveCache& instance();
  template <typename Entry, typename Make>
  std::shared_ptr<Entry const> get(IntKey const& k, Make const& make) {
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
  std::unordered_map<IntKey, std::shared_ptr<void const>, IntKeyHash> map_;
};

template <typename Entry, typename Make>
std::shared_ptr<Entry const> cached(IntKey const& k, Make const& make) {
  return PrimitiveCache::instance().get<Entry>(k, make);
}

}  // namespace gp::exec::dnnl_ctx
