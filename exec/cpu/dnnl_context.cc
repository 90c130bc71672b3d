#include "exec/cpu/dnnl_context.h"

#include <stdexcept>

namespace gp::exec::dnnl_ctx {

dnnl::engine const& engine() {
  static dnnl::engine const eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

bool has_bf16_primitives() {
  static bool const yes = [] {
    using dt = dnnl::memory::data_type;
    try {
      dnnl::memory::desc const md({2, 2}, dt::bf16, dnnl::memory::format_tag::ab);
      dnnl::matmul::primitive_desc const mm(dnnl::matmul::desc(md, md, md), engine());
      dnnl::eltwise_forward::primitive_desc const relu(
          dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::eltwise_relu, md, 0.f),
          engine());
      return true;
    } catch (dnnl::error const&) {
      return false;
    }
  }();
  return yes;
}

dims to_dims(std::vector<int64_t> const& shape) {
  if (shape.empty()) return {1};
  return dims(shape.begin(), shape.end());
}

dnnl::memory::data_type dnnl_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return dnnl::memory::data_type::f32;
    case DType::kBFloat16:
      return dnnl::memory::data_type::bf16;
    default:
      throw std::logic_error(std::string("no oneDNN float type for ") + graph::dtype_name(dtype));
  }
}

dnnl::memory::desc plain_md(std::vector<int64_t> const& shape, DType dtype) {
  dims d = to_dims(shape);
  dims strides(d.size());
  int64_t s = 1;
  for (int i = static_cast<int>(d.size()) - 1; i >= 0; --i) {
    strides[i] = s;
    s *= std::max<int64_t>(d[i], 1);
  }
  return dnnl::memory::desc(d, dnnl_type(dtype), strides);
}

dnnl::memory::desc strided_md(std::vector<int64_t> const& shape, std::vector<int64_t> const& strides, DType dtype) {
  return dnnl::memory::desc(to_dims(shape), dnnl_type(dtype), dims(strides.begin(), strides.end()));
}

dnnl::memory mem(dnnl::memory::desc const& md, void const* data) {
  return dnnl::memory(md, engine(), const_cast<void*>(data));
}

void run(dnnl::primitive const& p, std::unordered_map<int, dnnl::memory> const& args) {
  dnnl::stream& s = stream();
  p.execute(s, args);
  s.wait();
}

void add_part(IntKey& k, dnnl::memory::desc const& md) {
  dnnl_memory_desc_t const& d = md.data;
  k.add(d.ndims).add(d.data_type).add(d.format_kind).add(d.offset0);
  for (int i = 0; i < d.ndims; ++i) k.add(d.dims[i]).add(d.padded_dims[i]).add(d.padded_offsets[i]);
  if (d.format_kind == dnnl_blocked) {
    dnnl_blocking_desc_t const& b = d.format_desc.blocking;
    for (int i = 0; i < d.ndims; ++i) k.add(b.strides[i]);
    k.add(b.inner_nblks);
    for (int i = 0; i < b.inner_nblks; ++i) k.add(b.inner_blks[i]).add(b.inner_idxs[i]);
  }
  k.add(static_cast<int64_t>(d.extra.flags));
}

namespace {
struct Reorder {
  dnnl::reorder prim;
};
}  // namespace

void reorder(dnnl::memory const& src, dnnl::memory const& dst, bool accumulate) {
  dnnl::memory::desc const from = src.get_desc(), to = dst.get_desc();
  auto r = cached<Reorder>(key("reorder", from, to, accumulate), [&] {
    dnnl::primitive_attr attr;
    if (accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.f);
      attr.set_post_ops(ops);
    }
    return Reorder{dnnl::reorder(dnnl::reorder::primitive_desc(engine(), from, engine(), to, attr))};
  });
  run(r->prim, {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}});
}

InLayout to_layout(void const* data, dnnl::memory::desc const& plain, dnnl::memory::desc const& want) {
  if (want == plain) return {Tensor(), mem(plain, data)};
  Tensor buf({static_cast<int64_t>(want.get_size())}, DType::kUInt8);
  dnnl::memory dst = mem(want, buf.raw());
  reorder(mem(plain, data), dst);
  return {buf, dst};
}

InLayout output_layout(void* out, dnnl::memory::desc const& plain, dnnl::memory::desc const& want) {
  if (want == plain) return {Tensor(), mem(plain, out)};
  Tensor buf({static_cast<int64_t>(want.get_size())}, DType::kUInt8);
  return {buf, mem(want, buf.raw())};
}

void finish_layout(InLayout const& produced, void* out, dnnl::memory::desc const& plain) {
  if (!produced.storage.defined()) return;
  reorder(produced.mem, mem(plain, out));
}

InLayout scratch_layout(dnnl::memory::desc const& want) {
  Tensor buf({static_cast<int64_t>(want.get_size())}, DType::kUInt8);
  return {buf, mem(want, buf.raw())};
}

void finish_accumulate(InLayout const& produced, void* out, dnnl::memory::desc const& plain) {
  reorder(produced.mem, mem(plain, out), /*accumulate=*/true);
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
