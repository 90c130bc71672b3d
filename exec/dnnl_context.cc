#include "exec/dnnl_context.h"

namespace gp::exec::dnnl_ctx {

dnnl::engine const& engine() {
  static dnnl::engine const eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

dims to_dims(std::vector<int64_t> const& shape) {
  if (shape.empty()) return {1};
  return dims(shape.begin(), shape.end());
}

dnnl::memory::desc plain_md(std::vector<int64_t> const& shape) {
  dims d = to_dims(shape);
  dims strides(d.size());
  int64_t s = 1;
  for (int i = static_cast<int>(d.size()) - 1; i >= 0; --i) {
    strides[i] = s;
    s *= std::max<int64_t>(d[i], 1);
  }
  return dnnl::memory::desc(d, dnnl::memory::data_type::f32, strides);
}

dnnl::memory::desc strided_md(std::vector<int64_t> const& shape, std::vector<int64_t> const& strides) {
  return dnnl::memory::desc(to_dims(shape), dnnl::memory::data_type::f32, dims(strides.begin(), strides.end()));
}

dnnl::memory mem(dnnl::memory::desc const& md, void const* data) {
  return dnnl::memory(md, engine(), const_cast<void*>(data));
}

void run(dnnl::primitive const& p, std::unordered_map<int, dnnl::memory> const& args) {
  dnnl::stream& s = stream();
  p.execute(s, args);
  s.wait();
}

InLayout to_layout(void const* data, dnnl::memory::desc const& plain, dnnl::memory::desc const& want) {
  if (want == plain) return {Tensor(), mem(plain, data)};
  Tensor buf({static_cast<int64_t>(want.get_size())}, DType::kUInt8);
  dnnl::memory src = mem(plain, data), dst = mem(want, buf.raw());
  run(dnnl::reorder(src, dst), {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}});
  return {buf, dst};
}

InLayout output_layout(void* out, dnnl::memory::desc const& plain, dnnl::memory::desc const& want) {
  if (want == plain) return {Tensor(), mem(plain, out)};
  Tensor buf({static_cast<int64_t>(want.get_size())}, DType::kUInt8);
  return {buf, mem(want, buf.raw())};
}

void finish_layout(InLayout const& produced, void* out, dnnl::memory::desc const& plain) {
  if (!produced.storage.defined()) return;
  dnnl::memory dst = mem(plain, out);
  run(dnnl::reorder(produced.mem, dst), {{DNNL_ARG_FROM, produced.mem}, {DNNL_ARG_TO, dst}});
}

std::string key_dims(std::vector<int64_t> const& v) {
  std::string out = "[";
  for (int64_t d : v) out += std::to_string(d) + ",";
  return out + "]";
}

// One cache per thread: concurrent execution of one primitive object shares its scratchpad unless
// oneDNN was built with concurrent execution, so workers on different threads never share one.
PrimitiveCache& PrimitiveCache::instance() {
  thread_local PrimitiveCache cache;
  return cache;
}

std::size_t PrimitiveCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_.size();
}

}  // namespace gp::exec::dnnl_ctx
