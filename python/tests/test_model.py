import importlib.util
import json
import subprocess
import sys

import pytest

import graphpipe as gp


def test_version():
    assert gp.__version__ and gp.__version__[0].isdigit()


def test_load_file_matches_inspect(cli, mlp_fixture):
    path = str(mlp_fixture / "model.onnx")
    model = gp.load(path)
    cli_summary = json.loads(subprocess.run([cli, "inspect", path, "--json"], check=True, capture_output=True,
                                            text=True).stdout)
    assert model.summary == cli_summary  # one JSON for both (graph::inspect_json)
    assert model.ops == cli_summary["num_ops"] > 0
    assert model.parameters == cli_summary["parameters"]["count"] > 0
    assert model.flops == cli_summary["flops_per_sample"]["forward"] > 0
    assert model.initializers() == cli_summary["initializers"]
    assert model.path == path
    assert "operators" in repr(model) and "<table>" in model._repr_html_()


def test_fusion_false_keeps_batchnorm_and_relu_apart_as_the_clis_no_fusion():
    fused = gp.load("zoo:inception:tiny")
    apart = gp.load("zoo:inception:tiny", fusion=False)
    assert fused.fusion and not apart.fusion
    assert fused.summary["fused_batchnorm_relus"] > 0 == apart.summary["fused_batchnorm_relus"]
    assert apart.ops == fused.ops + fused.summary["fused_batchnorm_relus"]
    assert apart.ops_by_type["Relu"] == fused.ops_by_type.get("Relu", 0) + fused.summary["fused_batchnorm_relus"]


def test_load_bytes_is_the_same_graph(mlp_fixture):
    data = (mlp_fixture / "model.onnx").read_bytes()
    a, b = gp.load(data), gp.load(str(mlp_fixture / "model.onnx"))
    assert a.ops_by_type == b.ops_by_type
    assert a.parameters == b.parameters > 0
    assert a.onnx_bytes() == data


def test_initializers_say_what_trains(mlp_fixture):
    inits = gp.load(str(mlp_fixture / "model.onnx")).initializers()
    assert inits and all({"name", "dtype", "shape", "trainable", "reason"} <= set(i) for i in inits)
    assert sum(i["trainable"] for i in inits) >= 2


def test_zoo_model_has_branches(mmt):
    assert mmt.branches >= 4  # MMT: 4 encoder branches


def test_missing_file_raises_the_cli_message(tmp_path):
    with pytest.raises(gp.Error, match="no such model file"):
        gp.load(str(tmp_path / "missing.onnx"))


def test_corrupt_bytes_raise():
    with pytest.raises(gp.Error):
        gp.load(b"this is not an ONNX model")


def test_unsupported_operator_is_named():
    onnx = pytest.importorskip("onnx", reason="onnx (python3-onnx) is not installed")
    from onnx import TensorProto, helper
    node = helper.make_node("Det", ["x"], ["y"], name="the_det")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    with pytest.raises(gp.Error, match="Det"):
        gp.load(model.SerializeToString())


def test_shares_a_process_with_debians_onnx_and_torch():
    """Debian's libonnx (loaded by python3-onnx and libtorch) registers the proto package `onnx` in the
    shared Protobuf; graphpipe's ONNX is onnx_gp, so both orders of import work in one interpreter
    (a second registration of one package would abort it)."""
    for modules in (["graphpipe", "onnx", "torch"], ["torch", "onnx", "graphpipe"]):
        present = [m for m in modules if m == "graphpipe" or importlib.util.find_spec(m) is not None]
        if len(present) < 2:
            pytest.skip("neither onnx nor torch is installed")
        script = "\n".join(f"import {m}" for m in present) + "\nimport graphpipe as gp\nprint(gp.load('zoo:mlp').ops)"
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
        assert done.returncode == 0, (present, done.stderr[-800:])
        assert int(done.stdout.strip()) > 0


def test_impossible_memory_limit(mlp_fixture):
    with pytest.raises(gp.Error, match="memory"):
        gp.load(str(mlp_fixture / "model.onnx"), max_memory="1KiB")
    with pytest.raises(gp.Error, match="not a size"):
        gp.load(str(mlp_fixture / "model.onnx"), max_memory="lots")


def test_wrong_argument_type():
    with pytest.raises(TypeError, match="ONNX path"):
        gp.load(42)


def test_torch_module_needs_example_inputs():
    torch = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed")
    with pytest.raises(TypeError, match="example_inputs"):
        gp.load(torch.nn.Linear(4, 2))


def test_torch_module_loads_with_its_branches():
    torch = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed")

    class Fork(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.head = torch.nn.Linear(8, 16), torch.nn.Linear(8, 16), torch.nn.Linear(32, 3)

        def forward(self, x):
            return self.head(torch.cat([torch.relu(self.a(x)), torch.tanh(self.b(x))], dim=1))

    net = Fork()
    model = gp.load(net, torch.randn(4, 8))
    assert model.parameters == sum(p.numel() for p in net.parameters())
    assert model.branches >= 2
    assert model.inputs[0]["shape"].startswith("[")


def test_log_level():
    gp.set_log_level("warning")
    gp.set_log_level("info")
    with pytest.raises(gp.Error, match="not one of"):
        gp.set_log_level("loud")


def test_torch_is_loaded_before_an_extension_that_links_nccl():
    """PyTorch's wheels need their own libnccl.so.2, which must be the process's first: with NCCL linked,
    `import graphpipe` imports an installed torch before its extension."""
    from graphpipe import _build
    if not _build.NCCL or importlib.util.find_spec("torch") is None:
        pytest.skip("this build does not link NCCL, or torch is not installed")
    done = subprocess.run([sys.executable, "-c", "import graphpipe, sys; print('torch' in sys.modules)"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.strip() == "True"
