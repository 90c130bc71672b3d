#include "exec/cuda/cudnn_graphs.h"

#include "kernels/cuda/low_types.h"
#include "core/units.h"

#include <cudnn_frontend.h>

#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "exec/cuda/cuda_check.h"
#include "exec/cuda/device_context.h"
#include "exec/cuda/plan_disk_cache.h"

namespace gp::exec::cuda {
namespace {

namespace fe = cudnn_frontend;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

std::vector<int64_t> contiguous(std::vector<int64_t> const& d) {
  std::vector<int64_t> s(d.size(), 1);
  for (std::size_t i = d.size(); i-- > 1;) s[i - 1] = s[i] * d[i];
  return s;
}

// cuDNN wants at least two spatial dims: a trailing unit dim makes 1-D (and BN's 0-D) ones 2-D.
std::vector<int64_t> at_least_4d(std::vector<int64_t> v) {
  while (v.size() < 4) v.push_back(1);
  return v;
}

template <typename T>
constexpr fe::DataType_t fe_type();
template <>
constexpr fe::DataType_t fe_type<float>() {
  return fe::DataType_t::FLOAT;
}
// Mixed precision's convolutions: 16-bit tensors, float intermediates and compute (configure).
template <>
constexpr fe::DataType_t fe_type<__nv_bfloat16>() {
  return fe::DataType_t::BFLOAT16;
}
template <>
constexpr fe::DataType_t fe_type<__half>() {
  return fe::DataType_t::HALF;
}

void configure(fe::graph::Graph& g, fe::DataType_t io) {
  g.set_io_data_type(io).set_intermediate_data_type(fe::DataType_t::FLOAT).set_compute_data_type(fe::DataType_t::FLOAT);
}

TensorPtr input(fe::graph::Graph& g, char const* name, std::vector<int64_t> const& dims, fe::DataType_t type) {
  return g.tensor(
      fe::graph::Tensor_attributes().set_name(name).set_dim(dims).set_stride(contiguous(dims)).set_data_type(type));
}

void output(TensorPtr const& t, std::vector<int64_t> const& dims, fe::DataType_t type) {
  t->set_output(true).set_data_type(type).set_dim(dims).set_stride(contiguous(dims));
}

// The conv parameters lifted to ≥ 2 spatial dims.
struct Conv4 {
  std::vector<int64_t> x, w, y, stride, dilation, pre, post;
};

Conv4 lift(ConvShape const& s) {
  Conv4 c{at_least_4d(s.x), at_least_4d(s.w), at_least_4d(s.y), s.stride, s.dilation, s.pad_begin, s.pad_end};
  while (c.stride.size() < 2) {
    c.stride.push_back(1), c.dilation.push_back(1), c.pre.push_back(0), c.post.push_back(0);
  }
  return c;
}

template <typename A>
A conv_attrs(Conv4 const& c, char const* name) {
  return A().set_name(name).set_pre_padding(c.pre).set_post_padding(c.post).set_stride(c.stride).set_dilation(
      c.dilation);
}

Status fe_check(fe::error_t e, std::string const& what, char const* step, bool support) {
  if (e.is_good()) return Status::ok();
  clear_last_cuda_error();
  std::string const msg = "cuDNN " + what + ": " + step + " failed: " + e.get_message();
  return support ? unsupported(msg + " (cuDNN cannot run this graph on this device)") : internal_error(msg);
}

struct Entry {
  std::unique_ptr<fe::graph::Graph> graph;
  int64_t workspace = 0;
  Status refused = Status::ok();  // kUnsupported: cuDNN cannot run this graph (graph is then null)
  VariantPack pack{0};            // run()'s tensors, uids 1..n in build order: made once, rebound per call
};

// This thread's plans (plans are not promised to be thread-safe), by device and key.
PlanCache<Entry>& memory_cache() {
  thread_local PlanCache<Entry> cache;
  return cache;
}

// Lowers, plans and sizes e's graph; `deterministic`: only engines without cuDNN's
// NONDETERMINISTIC note (no atomics), so that two runs compute the same bits.
Status finish(Entry& e, cudnnHandle_t handle, std::string const& what, bool deterministic) {
  fe::graph::Graph& g = *e.graph;
  RETURN_IF_ERROR(fe_check(g.validate(), what, "validate", false));
  RETURN_IF_ERROR(fe_check(g.build_operation_graph(handle), what, "build_operation_graph", true));
  RETURN_IF_ERROR(fe_check(g.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}), what,
                           "create_execution_plans", true));
  if (deterministic) g.deselect_numeric_notes({fe::NumericalNote_t::NONDETERMINISTIC});
  RETURN_IF_ERROR(fe_check(g.check_support(), what, "check_support", true));
  RETURN_IF_ERROR(fe_check(g.build_plans(), what, "build_plans", true));
  RETURN_IF_ERROR(fe_check(g.get_workspace_size(e.workspace), what, "get_workspace_size", false));
  return Status::ok();
}

// ---- Plans on disk (exec/cuda/plan_disk_cache.h): one cache per device, for the GPU model, the
// cuDNN and cudnn-frontend versions and the TF32 override the plans were built under.

std::mutex g_disk_mu;
std::optional<std::string> g_disk_folder;                    // set_cudnn_plan_cache_folder; else the environment's
std::map<int, std::shared_ptr<PlanDiskCache const>> g_disk;  // shared: a folder change leaves users theirs
std::atomic<int64_t> g_built{0}, g_loaded{0}, g_stored{0};

std::shared_ptr<PlanDiskCache const> disk_cache(int device) {
  std::lock_guard lock(g_disk_mu);
  auto& slot = g_disk[device];
  if (!slot) {
    cudaDeviceProp prop{};
    std::string env;
    if (cudaGetDeviceProperties(&prop, device) == cudaSuccess) {
      char const* tf32 = std::getenv("NVIDIA_TF32_OVERRIDE");
      env = "sm" + std::to_string(prop.major) + std::to_string(prop.minor) + " " + prop.name + " cudnn " +
            std::to_string(cudnnGetVersion()) + " frontend " + std::to_string(CUDNN_FRONTEND_VERSION) +
            " tf32-override " + (tf32 ? tf32 : "unset");
    } else {
      clear_last_cuda_error();
    }
    // Without the device's description no file could be told apart from another GPU's: no cache.
    std::string const folder = env.empty() ? "" : g_disk_folder.value_or(PlanDiskCache::folder_from_environment());
    slot = std::make_shared<PlanDiskCache const>(folder, env);
  }
  return slot;
}

// The plan stored for `key`, deserialized into e (plan only: run() binds by uid); false when there
// is none or it does not load (then it is built and stored again).
bool load_plan(Entry& e, PlanDiskCache const& disk, std::string const& key, cudnnHandle_t handle) {
  std::optional<std::vector<uint8_t>> blob = disk.load(key);
  if (!blob) return false;
  auto g = std::make_unique<fe::graph::Graph>();
  int64_t workspace = 0;
  fe::error_t loaded = g->deserialize(handle, *blob, /*enforce_precompiled=*/true, /*run_warmup=*/false);
  if (!loaded.is_good() || !g->get_workspace_size(workspace).is_good()) {
    clear_last_cuda_error();
    spdlog::debug("cuDNN plan {} in {} did not load ({}): building it", key, disk.path_for(key), loaded.get_message());
    return false;
  }
  e.graph = std::move(g);
  e.workspace = workspace;
  ++g_loaded;
  return true;
}

void store_plan(Entry const& e, PlanDiskCache const& disk, std::string const& key) {
  if (!disk.enabled()) return;
  std::vector<uint8_t> blob;
  if (fe::error_t s = e.graph->serialize(blob, /*serialize_structure=*/false); !s.is_good()) {
    spdlog::debug("cuDNN plan {} is not serializable: {}", key, s.get_message());
    return;
  }
  if (Status const s = disk.store(key, blob); !s.is_ok()) {
    static std::once_flag warned;
    std::call_once(warned, [&] { spdlog::warn("cuDNN plans are not kept across runs: {}", s.message()); });
    return;
  }
  ++g_stored;
}

// The cached entry for `key`, built by `build` on a miss. A refusal (kUnsupported) is cached too:
// building the plans of a shape cuDNN refuses costs as much as building them, every call. A plan
// built by an earlier run on this GPU model and library versions loads from disk instead of being
// built; one built here is stored there. `what` makes the graph's name for messages; a hit makes
// no text.
template <typename What, typename F>
Result<Entry*> cached(DeviceContext const& ctx, PlanKey const& key, What const& what, F&& build) {
  PlanCache<Entry>& cache = memory_cache();
  auto it = cache.find(key);
  if (it != cache.end()) {
    if (!it->second->refused.is_ok()) return it->second->refused;
    return it->second.get();
  }
  auto e = std::make_unique<Entry>();
  e->graph = std::make_unique<fe::graph::Graph>();
  std::vector<TensorPtr> io;
  build(*e->graph, io);
  e->pack = VariantPack(io.size());
  for (std::size_t i = 0; i < io.size(); ++i) io[i]->set_uid(static_cast<int64_t>(i + 1));
  std::string const name = key.describe();
  std::shared_ptr<PlanDiskCache const> const disk_ptr = disk_cache(ctx.device);
  PlanDiskCache const& disk = *disk_ptr;
  if (load_plan(*e, disk, name, ctx.cudnn)) return cache.emplace(key, std::move(e)).first->second.get();
  if (Status s = finish(*e, ctx.cudnn, what(), ctx.deterministic); !s.is_ok()) {
    if (s.code() != StatusCode::kUnsupported) return s;
    spdlog::debug("device {}: {}", ctx.device, s.message());
    e->graph.reset();
    e->refused = s;
    cache.emplace(key, std::move(e));
    return s;
  }
  ++g_built;
  store_plan(*e, disk, name);
  return cache.emplace(key, std::move(e)).first->second.get();
}

std::atomic<bool> g_refuse_batchnorm{false};

Status refused_for_testing(std::string const& what) {
  return unsupported("cuDNN " + what + ": refused for testing (refuse_cudnn_batchnorm_for_testing)");
}

// Binds ptrs to e's tensors, in build order, and executes e's plan on the compute stream.
template <typename What>
Status run(DeviceContext const& ctx, Entry& e, std::initializer_list<void*> ptrs, What const& what) {
  if (Status const bound = e.pack.bind(ptrs); !bound.is_ok())
    return internal_error("cuDNN " + what() + ": " + bound.message());
  Tensor ws;
  if (e.workspace > 0) {
    ASSIGN_OR_RETURN(ws, empty({e.workspace}, DType::kUInt8));
  }
  fe::error_t const done = e.graph->execute(ctx.cudnn, e.pack.map(), ws.defined() ? ws.raw() : nullptr);
  if (done.is_good()) return Status::ok();
  return fe_check(done, what(), "execute", false);
}

int64_t fe_code(fe::DataType_t t) { return static_cast<int64_t>(t); }

}  // namespace

Result<std::vector<int64_t>> cudnn_conv_output_dims(ConvShape const& s) {
  Conv4 const c = lift(s);
  fe::graph::Graph g;
  configure(g, fe::DataType_t::FLOAT);
  TensorPtr const x = input(g, "X", c.x, fe::DataType_t::FLOAT);
  TensorPtr const w = input(g, "W", c.w, fe::DataType_t::FLOAT);
  TensorPtr const y = g.conv_fprop(x, w, conv_attrs<fe::graph::Conv_fprop_attributes>(c, "fprop"));
  y->set_output(true);
  RETURN_IF_ERROR(fe_check(g.validate(), "conv fprop " + s.describe(), "validate", false));
  std::vector<int64_t> dims = y->get_dim();
  dims.resize(s.x.size());  // drop the unit dim lift() added
  return dims;
}

namespace {

// One convolution pass (`pass`: "fprop", "dgrad" or "wgrad") of s on the compute stream: its plan
// from the cache (built by `build`, which adds the pass's node to the graph and returns its
// tensors in binding order), bound to ptrs.
template <typename Build>
Status conv_pass(PlanKind kind, char const* pass, ConvShape const& s, fe::DataType_t t,
                 std::initializer_list<void*> ptrs, Build const& build) {
  ASSIGN_OR_RETURN(DeviceContext * ctx, current_context());
  auto const what = [&] { return std::string("conv ") + pass + " " + s.describe(); };
  ASSIGN_OR_RETURN(Entry * e, cached(*ctx, conv_plan_key(kind, s, fe_code(t), ctx->device, ctx->deterministic), what,
                                     [&](fe::graph::Graph& g, std::vector<TensorPtr>& io) {
                                       Conv4 const c = lift(s);
                                       configure(g, t);
                                       io = build(g, c);
                                     }));
  return run(*ctx, *e, ptrs, what);
}

}  // namespace

template <typename T>
Status conv_fprop(ConvShape const& s, T const* x, T const* w, T* y) {
  fe::DataType_t const t = fe_type<T>();
  return conv_pass(PlanKind::kConvFprop, "fprop", s, t, {const_cast<T*>(x), const_cast<T*>(w), y},
                   [&](fe::graph::Graph& g, Conv4 const& c) -> std::vector<TensorPtr> {
                     TensorPtr const X = input(g, "X", c.x, t), W = input(g, "W", c.w, t);
                     TensorPtr const Y = g.conv_fprop(X, W, conv_attrs<fe::graph::Conv_fprop_attributes>(c, "fprop"));
                     output(Y, c.y, t);
                     return {X, W, Y};
                   });
}

template <typename T>
Status conv_dgrad(ConvShape const& s, T const* dy, T const* w, T* dx) {
  fe::DataType_t const t = fe_type<T>();
  return conv_pass(PlanKind::kConvDgrad, "dgrad", s, t, {const_cast<T*>(dy), const_cast<T*>(w), dx},
                   [&](fe::graph::Graph& g, Conv4 const& c) -> std::vector<TensorPtr> {
                     TensorPtr const DY = input(g, "DY", c.y, t), W = input(g, "W", c.w, t);
                     TensorPtr const DX = g.conv_dgrad(DY, W, conv_attrs<fe::graph::Conv_dgrad_attributes>(c, "dgrad"));
                     output(DX, c.x, t);
                     return {DY, W, DX};
                   });
}

template <typename T>
Status conv_wgrad(ConvShape const& s, T const* x, T const* dy, T* dw) {
  fe::DataType_t const t = fe_type<T>();
  return conv_pass(PlanKind::kConvWgrad, "wgrad", s, t, {const_cast<T*>(x), const_cast<T*>(dy), dw},
                   [&](fe::graph::Graph& g, Conv4 const& c) -> std::vector<TensorPtr> {
                     TensorPtr const X = input(g, "X", c.x, t), DY = input(g, "DY", c.y, t);
                     TensorPtr const DW = g.conv_wgrad(DY, X, conv_attrs<fe::graph::Conv_wgrad_attributes>(c, "wgrad"));
                     output(DW, c.w, t);
                     return {X, DY, DW};
                   });
}

namespace {

std::vector<int64_t> channel_dims(std::vector<int64_t> const& x4) { return {1, x4[1], 1, 1}; }

TensorPtr scalar_by_value(fe::graph::Graph& g, char const* name) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_dim({1, 1, 1, 1})
                      .set_stride({1, 1, 1, 1})
                      .set_is_pass_by_value(true)
                      .set_data_type(fe::DataType_t::FLOAT));
}

PlanKey bn_key(PlanKind kind, std::vector<int64_t> const& x, fe::DataType_t t, DeviceContext const& ctx) {
  PlanKey key(kind, ctx.device, fe_code(t));
  key.add_list(x).add(ctx.deterministic ? 1 : 0);
  return key;
}

}  // namespace

template <typename T>
Status batchnorm_train(std::vector<int64_t> const& x_shape, float epsilon, float exp_avg_factor, BnTrainPtrs const& p) {
  ASSIGN_OR_RETURN(DeviceContext * ctx, current_context());
  fe::DataType_t const t = fe_type<T>();
  auto const what = [&] { return "batchnorm training forward x " + dims_string(x_shape); };
  if (g_refuse_batchnorm.load()) return refused_for_testing(what());
  ASSIGN_OR_RETURN(
      Entry * e, cached(*ctx, bn_key(PlanKind::kBatchNormTrain, x_shape, t, *ctx), what,
                        [&](fe::graph::Graph& g, std::vector<TensorPtr>& io) {
                          std::vector<int64_t> const x4 = at_least_4d(x_shape), c4 = channel_dims(x4);
                          fe::DataType_t const f = fe::DataType_t::FLOAT;
                          configure(g, t);
                          TensorPtr X = input(g, "X", x4, t), S = input(g, "scale", c4, f), B = input(g, "bias", c4, f);
                          TensorPtr RM = input(g, "running_mean", c4, f), RV = input(g, "running_var", c4, f);
                          TensorPtr EPS = scalar_by_value(g, "epsilon"), MOM = scalar_by_value(g, "momentum");
                          auto attrs = fe::graph::Batchnorm_attributes().set_epsilon(EPS).set_previous_running_stats(
                              RM, RV, MOM);
                          auto [Y, MEAN, INV, NM, NV] = g.batchnorm(X, S, B, attrs);
                          output(Y, x4, t);
                          for (TensorPtr const& stat : {MEAN, INV, NM, NV}) output(stat, c4, f);
                          io = {X, S, B, RM, RV, Y, MEAN, INV, NM, NV, EPS, MOM};
                        }));
  float eps = epsilon, factor = exp_avg_factor;  // pass-by-value scalars: host pointers
  return run(*ctx, *e,
             {const_cast<void*>(p.x), const_cast<void*>(p.scale), const_cast<void*>(p.bias),
              const_cast<void*>(p.running_mean), const_cast<void*>(p.running_var), p.y, p.mean, p.inv_variance,
              p.next_running_mean, p.next_running_var, &eps, &factor},
             what);
}

template <typename T>
Status batchnorm_infer(std::vector<int64_t> const& x_shape, BnInferPtrs const& p) {
  ASSIGN_OR_RETURN(DeviceContext * ctx, current_context());
  fe::DataType_t const t = fe_type<T>();
  auto const what = [&] { return "batchnorm inference forward x " + dims_string(x_shape); };
  if (g_refuse_batchnorm.load()) return refused_for_testing(what());
  ASSIGN_OR_RETURN(Entry * e, cached(*ctx, bn_key(PlanKind::kBatchNormInfer, x_shape, t, *ctx), what,
                                     [&](fe::graph::Graph& g, std::vector<TensorPtr>& io) {
                                       std::vector<int64_t> const x4 = at_least_4d(x_shape), c4 = channel_dims(x4);
                                       fe::DataType_t const f = fe::DataType_t::FLOAT;
                                       configure(g, t);
                                       TensorPtr X = input(g, "X", x4, t), S = input(g, "scale", c4, f),
                                                 B = input(g, "bias", c4, f);
                                       TensorPtr M = input(g, "mean", c4, f), IV = input(g, "inv_variance", c4, f);
                                       TensorPtr Y = g.batchnorm_inference(X, M, IV, S, B,
                                                                           fe::graph::Batchnorm_inference_attributes());
                                       output(Y, x4, t);
                                       io = {X, S, B, M, IV, Y};
                                     }));
  return run(*ctx, *e,
             {const_cast<void*>(p.x), const_cast<void*>(p.scale), const_cast<void*>(p.bias), const_cast<void*>(p.mean),
              const_cast<void*>(p.inv_variance), p.y},
             what);
}

template <typename T>
Status batchnorm_backward(std::vector<int64_t> const& x_shape, BnBackwardPtrs const& p) {
  ASSIGN_OR_RETURN(DeviceContext * ctx, current_context());
  fe::DataType_t const t = fe_type<T>();
  auto const what = [&] { return "batchnorm backward x " + dims_string(x_shape); };
  if (g_refuse_batchnorm.load()) return refused_for_testing(what());
  ASSIGN_OR_RETURN(
      Entry * e, cached(*ctx, bn_key(PlanKind::kBatchNormBackward, x_shape, t, *ctx), what,
                        [&](fe::graph::Graph& g, std::vector<TensorPtr>& io) {
                          std::vector<int64_t> const x4 = at_least_4d(x_shape), c4 = channel_dims(x4);
                          fe::DataType_t const f = fe::DataType_t::FLOAT;
                          configure(g, t);
                          TensorPtr DY = input(g, "DY", x4, t), X = input(g, "X", x4, t), S = input(g, "scale", c4, f);
                          TensorPtr M = input(g, "mean", c4, f), IV = input(g, "inv_variance", c4, f);
                          auto attrs =
                              fe::graph::Batchnorm_backward_attributes().set_saved_mean_and_inv_variance(M, IV);
                          auto [DX, DS, DB] = g.batchnorm_backward(DY, X, S, attrs);
                          output(DX, x4, t);
                          output(DS, c4, f);
                          output(DB, c4, f);
                          io = {DY, X, S, M, IV, DX, DS, DB};
                        }));
  return run(*ctx, *e,
             {const_cast<void*>(p.dy), const_cast<void*>(p.x), const_cast<void*>(p.scale), const_cast<void*>(p.mean),
              const_cast<void*>(p.inv_variance), p.dx, p.dscale, p.dbias},
             what);
}

void refuse_cudnn_batchnorm_for_testing(bool refuse) { g_refuse_batchnorm.store(refuse); }

void set_cudnn_plan_cache_folder(std::string folder) {
  std::lock_guard lock(g_disk_mu);
  g_disk_folder = std::move(folder);
  g_disk.clear();
}

CudnnPlanCounts cudnn_plan_counts() { return {g_built.load(), g_loaded.load(), g_stored.load()}; }

void clear_cudnn_plans_of_this_thread() { memory_cache().clear(); }

template Status conv_fprop<float>(ConvShape const&, float const*, float const*, float*);
template Status conv_dgrad<float>(ConvShape const&, float const*, float const*, float*);
template Status conv_wgrad<float>(ConvShape const&, float const*, float const*, float*);
#define GP_LOW(T)                                                                                    \
  template Status conv_fprop<T>(ConvShape const&, T const*, T const*, T*);                           \
  template Status conv_dgrad<T>(ConvShape const&, T const*, T const*, T*);                           \
  template Status conv_wgrad<T>(ConvShape const&, T const*, T const*, T*);                           \
  template Status batchnorm_train<T>(std::vector<int64_t> const&, float, float, BnTrainPtrs const&); \
  template Status batchnorm_backward<T>(std::vector<int64_t> const&, BnBackwardPtrs const&);
GP_FOR_LOW_FLOAT_TYPES(GP_LOW)
#undef GP_LOW
template Status batchnorm_train<float>(std::vector<int64_t> const&, float, float, BnTrainPtrs const&);
template Status batchnorm_infer<float>(std::vector<int64_t> const&, BnInferPtrs const&);
template Status batchnorm_backward<float>(std::vector<int64_t> const&, BnBackwardPtrs const&);

bool deterministic_from_environment() {
  char const* v = std::getenv("GP_CUDNN_DETERMINISTIC");
  return v != nullptr && std::string(v) == "1";
}

}  // namespace gp::exec::cuda
