"""graphpipe.load and graphpipe.Model: a model read and imported once, planned and trained as is."""
import inspect
import io
import json
import os

from . import _graphpipe
from ._format import fmt_bytes, fmt_count, html_table, size_arg, text_table


class Model:
    """An imported model: its operator graph, what `graphpipe inspect` reports, and its ONNX bytes.

    Every planning and training function given a Model uses this graph; nothing is read again.
    """

    def __init__(self, handle):
        self._handle = handle
        self._summary = json.loads(handle.inspect_json())

    # -- what `graphpipe inspect` shows ------------------------------------------------------
    @property
    def name(self):
        return self._handle.name

    @property
    def path(self):
        """The file it was read from ("" for bytes, a torch module or a zoo model)."""
        return self._handle.path

    @property
    def fusion(self):
        """Whether the import fused each BatchNormalization's Relu (and a residual block's Add) into it."""
        return self._handle.fusion

    @property
    def summary(self):
        """`graphpipe inspect --json`'s dict (its `initializers` included)."""
        return json.loads(json.dumps(self._summary))

    @property
    def ops(self):
        return self._summary["num_ops"]

    @property
    def ops_by_type(self):
        return dict(self._summary["ops_by_type"])

    @property
    def parameters(self):
        return self._summary["parameters"]["count"]

    @property
    def parameter_bytes(self):
        return self._summary["parameters"]["bytes"]

    @property
    def flops(self):
        """Forward FLOPs per sample."""
        return self._summary["flops_per_sample"]["forward"]

    @property
    def branches(self):
        return self._summary["branches"]

    @property
    def inputs(self):
        return [dict(t) for t in self._summary["inputs"]]

    @property
    def outputs(self):
        return [dict(t) for t in self._summary["outputs"]]

    def initializers(self):
        """Every initializer: name, dtype, shape, whether it trains and why."""
        return [dict(i) for i in self._summary["initializers"]]

    def onnx_bytes(self):
        return self._handle.onnx_bytes

    def _rows(self):
        s = self._summary
        flops = s["flops_per_sample"]
        return [
            ("operators", f"{s['num_ops']} ({len(s['ops_by_type'])} types)"),
            ("parameters", f"{fmt_count(s['parameters']['count'])} in {s['parameters']['tensors']} tensors "
                           f"({fmt_bytes(s['parameters']['bytes'])})"),
            ("forward FLOPs/sample", fmt_count(flops["forward"], "FLOP")),
            ("backward FLOPs/sample", fmt_count(flops["backward"], "FLOP")),
            ("activations/sample", fmt_bytes(s["activation_bytes_per_sample"])),
            ("branches", f"{s['branches']} (forks {s['fork_points']}, joins {s['join_points']})"),
            ("inputs", ", ".join(f"{t['name']} {t['shape']} {t['dtype']}" for t in s["inputs"])),
            ("outputs", ", ".join(f"{t['name']} {t['shape']} {t['dtype']}" for t in s["outputs"])),
        ]

    def __repr__(self):
        return f"graphpipe.Model({self.name!r})\n" + text_table(("", ""), self._rows())

    def _repr_html_(self):
        return html_table(("", ""), self._rows(), caption=f"graphpipe.Model {self.name}")


def load(model, example_inputs=None, *, max_memory=None, exporter="torchscript", opset=17, fusion=True):
    """Loads a model: an ONNX path, ONNX bytes, "zoo:NAME[:SIZE]", or a torch.nn.Module.

    A torch.nn.Module is exported in this process with example_inputs (a tensor or a tuple of
    them) in training mode, with a dynamic batch dimension: by the TorchScript exporter at `opset`
    (exporter="torchscript", every torch version), or by the dynamo exporter (exporter="dynamo",
    torch >= 2.5 with onnxscript). max_memory ("8GiB" or bytes) bounds what the import may
    allocate (default: the machine's available memory). fusion=False keeps BatchNormalization, a
    Relu after it and a residual block's Add apart, and a MatMul apart from the Transpose of its
    operand and its constant scale (the CLI's `graphpipe --no-fusion`); a plan made for one setting
    is refused by a model imported with the other.
    """
    limit = size_arg(max_memory, "max_memory") or 0
    if isinstance(model, Model):
        return model
    if isinstance(model, (bytes, bytearray, memoryview)):
        return Model(_graphpipe.Model.from_bytes(bytes(model), "<onnx bytes>", limit, fusion))
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if path.startswith("zoo:"):
            parts = path.split(":")
            return Model(_graphpipe.Model.from_zoo(parts[1], parts[2] if len(parts) > 2 else "tiny", 0, limit, fusion))
        return Model(_graphpipe.Model.from_file(path, limit, fusion))
    if _is_torch_module(model):
        if example_inputs is None:
            raise TypeError("load(torch.nn.Module) needs example_inputs: a tensor (or a tuple of tensors) of one "
                            "batch, e.g. load(net, torch.randn(8, 3, 32, 32))")
        data = export_torch(model, example_inputs, exporter=exporter, opset=opset)
        return Model(_graphpipe.Model.from_bytes(data, type(model).__name__, limit, fusion))
    raise TypeError(f"load() takes an ONNX path, ONNX bytes, 'zoo:NAME' or a torch.nn.Module, not "
                    f"{type(model).__name__}")


def _is_torch_module(obj):
    torch = __import__("sys").modules.get("torch")
    return torch is not None and isinstance(obj, torch.nn.Module)


def export_torch(module, example_inputs, *, exporter="torchscript", opset=17):
    """The module's ONNX bytes for graphpipe: training mode, every weight an initializer, no
    constant folding, a dynamic batch dimension on every input and output."""
    import torch
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    names = ["input"] if len(example_inputs) == 1 else [f"input_{k}" for k in range(len(example_inputs))]
    params = inspect.signature(torch.onnx.export).parameters
    buffer = io.BytesIO()
    was_training = module.training
    try:
        module.train()
        if exporter == "dynamo":
            if "dynamo" not in params:
                raise _graphpipe.Error(f"exporter='dynamo' needs torch >= 2.5 (this is torch {torch.__version__}); "
                                       "use exporter='torchscript'")
            batch = torch.export.Dim("batch", min=2, max=1 << 16)
            forward = inspect.signature(module.forward).parameters
            dynamic = {name: {0: batch} for name in list(forward)[:len(example_inputs)]}
            program = torch.onnx.export(module, example_inputs, dynamo=True, external_data=False,
                                        dynamic_shapes=dynamic, input_names=names, output_names=["output"])
            return program.model_proto.SerializeToString()
        if exporter != "torchscript":
            raise _graphpipe.Error(f"exporter '{exporter}' is not 'torchscript' or 'dynamo'")
        kwargs = dict(training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, opset_version=opset,
                      input_names=names, output_names=["output"],
                      dynamic_axes={name: {0: "batch"} for name in names + ["output"]})
        if "dynamo" in params:
            kwargs["dynamo"] = False
        torch.onnx.export(module, example_inputs, buffer, **kwargs)
        return buffer.getvalue()
    finally:
        module.train(was_training)
