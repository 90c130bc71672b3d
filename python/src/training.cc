// Training from Python: one TrainingSession (exec/session/training.h) driven in chunks, so that the
// caller sees each logged step and Ctrl-C stops between chunks with the workers shut down cleanly.
// Arrays in (the `data` source) and out (trained weights) are shared with NumPy, not copied.
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>

#include "bindings.h"
#include "exec/npy.h"
#include "exec/session/training.h"
#include "exec/train_config.h"

namespace gp::python {
namespace {

using Array = nb::ndarray<nb::numpy, nb::c_contig, nb::device::cpu>;

graph::DType dtype_of(Array const& a, std::string const& what) {
  nb::dlpack::dtype const t = a.dtype();
  if (t == nb::dtype<float>()) return graph::DType::kFloat32;
  if (t == nb::dtype<int64_t>()) return graph::DType::kInt64;
  throw Error(what + ": arrays must be float32 or int64 (convert with .astype(numpy.float32) or numpy.int64)");
}

// A view of `a`, which the caller keeps alive for as long as the view is used.
std::shared_ptr<exec::ArrayRef const> view_of(Array const& a, std::string const& what) {
  auto ref = std::make_shared<exec::ArrayRef>();
  ref->dtype = dtype_of(a, what);
  for (std::size_t k = 0; k < a.ndim(); ++k) ref->shape.push_back(static_cast<int64_t>(a.shape(k)));
  ref->data = static_cast<std::byte const*>(a.data());
  ref->size = a.nbytes();
  return ref;
}

class Training {
 public:
  Training(std::string const& config_text, std::string const& source, std::string const& base_dir, int devices,
           std::string const& backend, std::optional<Model> const& model, std::optional<std::vector<Array>> inputs,
           std::optional<Array> labels, std::optional<partition::Plan> plan, double timeout_s,
           std::string const& fault) {
    exec::TrainConfig config = value_or_raise(exec::parse_train_config(config_text, source, base_dir));
    session::TrainOptions options;
    options.devices = devices;
    options.backend = backend;
    options.timeout_s = timeout_s;
    options.plan = std::move(plan);
    options.fault = fault;
    if (model) {
      options.model = model->file;
      options.graph = model->graph;
      options.import.fuse = model->fused;  // a re-import (trainable/frozen patterns) keeps it
    }
    if (inputs.has_value() != labels.has_value()) throw Error("data: give both the input arrays and the labels");
    if (inputs) {
      // Borrowed: this object holds the arrays for as long as the session (declared after them) lives.
      inputs_ = std::move(*inputs);
      labels_ = std::move(*labels);
      config.data.kind = exec::DataConfig::Kind::kArrays;
      config.data.inputs.clear();
      for (std::size_t k = 0; k < inputs_.size(); ++k) {
        std::string const name = "data input " + std::to_string(k);
        config.data.inputs.push_back(name);
        config.data.input_arrays.push_back(view_of(inputs_[k], name));
      }
      config.data.labels = "data labels";
      config.data.label_array = view_of(*labels_, "data labels");
    }
    nb::gil_scoped_release nogil;
    session_ = value_or_raise(session::TrainingSession::create(std::move(config), options));
  }

  // `steps` more steps (fewer at the end). The first call is the warm-up (graphpipe.train makes it
  // one step) and is not timed; samples/s is over the calls after it.
  void run(int64_t steps) {
    if (!session_) throw Error(closed_message());
    int64_t const before = session_->steps_done();
    auto const start = std::chrono::steady_clock::now();
    Status run;
    {
      nb::gil_scoped_release nogil;
      run = session_->run(steps, /*checkpoint_at_stop=*/false);
    }
    if (!run.is_ok() && session_->has_stuck_workers()) {
      // A worker stuck in compute was detached and runs on against the session and the arrays it
      // reads: they are let go of on purpose, held until the process exits, never freed under it
      // (the CLI exits at once instead).
      (void)session_.release();
      (void)new std::vector<Array>(std::move(inputs_));
      if (labels_) (void)new Array(std::move(*labels_));
      abandoned_ = true;
      throw Error(run.message() +
                  " (the run is abandoned: the stuck worker's thread runs on, and its memory is held until the "
                  "process exits)");
    }
    check(run);
    if (before == 0) return;
    timed_steps_ += session_->steps_done() - before;
    timed_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  void checkpoint() {
    nb::gil_scoped_release nogil;
    check(session().checkpoint());
  }

  double samples_per_s() const {
    return timed_seconds_ > 0 ? double(timed_steps_ * session().config().batch) / timed_seconds_ : 0.0;
  }

  nb::dict weights() {
    std::map<std::string, exec::Tensor> tensors;
    {
      nb::gil_scoped_release nogil;
      tensors = value_or_raise(session().trained_tensors());
    }
    nb::dict out;
    for (auto& [name, t] : tensors) {
      if (t.dtype() != graph::DType::kFloat32 && t.dtype() != graph::DType::kInt64)
        throw Error("weight '" + name + "' has dtype " + graph::dtype_name(t.dtype()) + " (not float32/int64)");
      nb::dlpack::dtype const dt = t.dtype() == graph::DType::kInt64 ? nb::dtype<int64_t>() : nb::dtype<float>();
      std::vector<std::size_t> shape(t.shape().begin(), t.shape().end());
      // The array shares the tensor's host memory; the capsule keeps it alive.
      auto* owner = new exec::Tensor(std::move(t));
      nb::capsule keep(owner, [](void* p) noexcept { delete static_cast<exec::Tensor*>(p); });
      out[nb::str(name.c_str())] = nb::ndarray<nb::numpy>(owner->raw(), shape.size(), shape.data(), keep, nullptr, dt);
    }
    return out;
  }

  void export_onnx(std::string const& path, std::string const& weights) {
    auto w = graph::parse_precision(weights);
    if (!w.is_ok()) throw Error("export_onnx weights=: " + w.status().message());
    nb::gil_scoped_release nogil;
    check(session().export_onnx(path, *w));
  }

  nb::list measurements() const {
    nb::list out;
    for (auto const& m : session().measurements()) {
      nb::dict d;
      d["device"] = m.device;
      d["busy_fraction"] = m.busy_fraction;
      d["peak_bytes"] = m.peak_bytes;
      d["predicted_peak_bytes"] = m.predicted_peak_bytes;
      out.append(d);
    }
    return out;
  }

  std::optional<partition::Plan> plan() const {
    if (auto const* p = session().plan()) return p->plan;
    return std::nullopt;
  }

  // Stops the workers and frees the model's memory (the arrays given as data are let go after).
  void close() {
    nb::gil_scoped_release nogil;
    session_.reset();
  }

  session::TrainingSession const& session() const {
    if (!session_) throw Error(closed_message());
    return *session_;
  }
  session::TrainingSession& session() {
    if (!session_) throw Error(closed_message());
    return *session_;
  }
  std::string closed_message() const {
    return abandoned_ ? "this training run was abandoned: a worker got stuck in compute (start a new process to "
                        "free its memory)"
                      : "this training run was closed";
  }

 private:
  std::vector<Array> inputs_;
  std::optional<Array> labels_;
  std::unique_ptr<session::TrainingSession> session_;
  bool abandoned_ = false;
  int64_t timed_steps_ = 0;
  double timed_seconds_ = 0;
};

}  // namespace

void bind_training(nb::module_& m) {
  nb::class_<Training>(m, "Training")
      .def(nb::init<std::string const&, std::string const&, std::string const&, int, std::string const&,
                    std::optional<Model> const&, std::optional<std::vector<Array>>, std::optional<Array>,
                    std::optional<partition::Plan>, double, std::string const&>(),
           nb::arg("config"), nb::arg("source"), nb::arg("base_dir"), nb::arg("devices") = 0,
           nb::arg("backend") = "cpu", nb::arg("model").none() = nb::none(), nb::arg("inputs").none() = nb::none(),
           nb::arg("labels").none() = nb::none(), nb::arg("plan").none() = nb::none(), nb::arg("timeout_s") = 0.0,
           nb::arg("fault") = "")  // testing: a fault to inject, DEVICE:LINE:KIND (exec/runtime/worker.h)
      .def("run", &Training::run, nb::arg("steps"))
      .def("checkpoint", &Training::checkpoint)
      .def("close", &Training::close)
      .def("weights", &Training::weights)
      .def("export_onnx", &Training::export_onnx, nb::arg("path"), nb::arg("weights") = "fp32")
      .def("measurements", &Training::measurements)
      .def_prop_ro("plan", &Training::plan)
      .def_prop_ro("samples_per_s", &Training::samples_per_s)
      .def_prop_ro("steps_done", [](Training const& t) { return t.session().steps_done(); })
      .def_prop_ro("total_steps", [](Training const& t) { return t.session().config().steps; })
      .def_prop_ro("batch", [](Training const& t) { return t.session().config().batch; })
      .def_prop_ro("log_interval", [](Training const& t) { return t.session().config().log_interval; })
      .def_prop_ro("losses", [](Training const& t) { return t.session().losses(); })
      .def_prop_ro("devices", [](Training const& t) { return t.session().devices(); })
      .def_prop_ro("pipeline", [](Training const& t) { return t.session().pipeline(); })
      .def_prop_ro("cuda_graphs", [](Training const& t) { return t.session().cuda_graphs_summary(); })
      .def("describe", [](Training const& t) { return t.session().describe(); });
}

}  // namespace gp::python
