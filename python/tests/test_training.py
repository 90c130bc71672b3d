import json
import signal

import numpy as np
import pytest

import graphpipe as gp


def fixture_config(ref, model_path):
    return {"model": {"path": str(model_path)}, "loss": "cross_entropy", "batch": ref["batch"], "steps": ref["steps"],
            "optimizer": "sgd", "lr": ref["lr"], "momentum": ref["momentum"], "log_interval": 1}


def test_train_matches_torch_losses_with_arrays(mlp_fixture):
    """torch 2.15 trained this fixture (reference.json); graphpipe trains it from NumPy arrays."""
    ref = json.loads((mlp_fixture / "reference.json").read_text())
    x = np.load(mlp_fixture / "input_0.npy")
    y = np.load(mlp_fixture / "labels.npy")
    seen = []
    result = gp.train(fixture_config(ref, mlp_fixture / "model.onnx"), data=(x, y),
                      callback=lambda step, loss: seen.append((step, loss)))
    assert result.steps == ref["steps"]
    np.testing.assert_allclose(result.losses, ref["losses"], rtol=1e-4)
    assert [s for s, _ in seen] == list(range(1, ref["steps"] + 1))
    assert [loss for _, loss in seen] == result.losses


def test_arrays_train_exactly_like_npy_files(mlp_fixture):
    ref = json.loads((mlp_fixture / "reference.json").read_text())
    config = fixture_config(ref, mlp_fixture / "model.onnx")
    from_arrays = gp.train(config, data=(np.load(mlp_fixture / "input_0.npy"), np.load(mlp_fixture / "labels.npy")))
    config["data"] = {"inputs": [str(mlp_fixture / "input_0.npy")], "labels": str(mlp_fixture / "labels.npy")}
    from_files = gp.train(config)
    assert from_arrays.losses == from_files.losses
    for name, w in from_files.weights.items():
        np.testing.assert_array_equal(from_arrays.weights[name], w)


def test_weights_are_numpy_views_and_export_round_trips(mlp_fixture, tmp_path):
    ref = json.loads((mlp_fixture / "reference.json").read_text())
    result = gp.train(fixture_config(ref, mlp_fixture / "model.onnx"),
                      data=(np.load(mlp_fixture / "input_0.npy"), np.load(mlp_fixture / "labels.npy")))
    w = result.weights
    assert w and all(isinstance(a, np.ndarray) and a.dtype == np.float32 for a in w.values())
    trainable = {i["name"] for i in gp.load(str(mlp_fixture / "model.onnx")).initializers() if i["trainable"]}
    assert trainable <= set(w)
    arr = next(iter(w.values()))
    assert not arr.flags.owndata  # shares graphpipe's tensor, not a copy
    out = result.export_onnx(tmp_path / "trained.onnx")
    onnx = pytest.importorskip("onnx", reason="onnx (python3-onnx) is not installed")
    from onnx import numpy_helper
    saved = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(out)).graph.initializer}
    for name, a in w.items():
        np.testing.assert_array_equal(saved[name], a)


def test_pipeline_on_two_workers_equals_one_device():
    config = {"model": {"zoo": "mmt", "size": "tiny"}, "batch": 16, "micro_batches": 4, "steps": 4,
              "optimizer": "sgd", "lr": 0.05, "momentum": 0.9, "seed": 3,
              "pipeline": {"cost": "analytic", "memory": "2GiB"}}
    one = gp.train(config)
    two = gp.train(config, devices=2)
    assert len(two.devices) == 2 and two.plan is not None and len(two.plan.stages) >= 1
    assert all(0 <= d["busy_fraction"] <= 1 and d["peak_bytes"] > 0 for d in two.devices)
    np.testing.assert_allclose(two.losses, one.losses, rtol=1e-4)
    for name, w in one.weights.items():
        np.testing.assert_allclose(two.weights[name], w, rtol=1e-3, atol=1e-5)
    assert two.samples_per_s > 0


def test_train_given_plan(mmt):
    plan = gp.partition(mmt, devices=2, memory="2GiB", batch=16)
    config = {"batch": 16, "micro_batches": plan.micro_batches, "steps": 2, "optimizer": "sgd", "lr": 0.01}
    result = gp.train(config, model=mmt, plan=plan)
    assert len(result.devices) == 2 and result.plan.to_json() == plan.to_json()
    assert len(result.losses) == 2 and all(np.isfinite(result.losses))


def test_config_from_yaml_file(tmp_path):
    path = tmp_path / "train.yaml"
    path.write_text("model: {zoo: mlp, size: tiny}\nsteps: 3\nbatch: 8\nlr: 0.01\n")
    assert len(gp.train(str(path)).losses) == 3


def test_bad_configs_raise_the_cli_message(tmp_path):
    with pytest.raises(gp.Error, match="missing 'model'"):
        gp.train({"steps": 3})
    with pytest.raises(gp.Error, match="no such model file"):
        gp.train({"model": {"path": str(tmp_path / "none.onnx")}, "steps": 1})
    with pytest.raises(gp.Error, match="cannot read"):
        gp.train(str(tmp_path / "none.yaml"))
    with pytest.raises(gp.Error, match="bogus"):
        gp.train({"model": {"zoo": "mlp"}, "bogus": 1})
    with pytest.raises(gp.Error, match="memory|fit"):
        gp.train({"model": {"zoo": "mmt"}, "steps": 1, "batch": 8, "pipeline": {"memory": "1KiB", "cost": "analytic"}},
                 devices=2)


def test_bad_data_raises(mlp_fixture):
    ref = json.loads((mlp_fixture / "reference.json").read_text())
    config = fixture_config(ref, mlp_fixture / "model.onnx")
    x = np.load(mlp_fixture / "input_0.npy")
    y = np.load(mlp_fixture / "labels.npy")
    with pytest.raises(gp.Error, match="per-sample shape"):
        gp.train(config, data=(x[:, :-1].copy(), y))
    with pytest.raises(gp.Error, match="samples"):
        gp.train(config, data=(x, y[:-1].copy()))
    with pytest.raises(gp.Error, match="float32 or int64"):
        gp.train(config, data=(x.astype(np.float16), y))
    with pytest.raises(TypeError, match="inputs, labels"):
        gp.train(config, data=x)


def test_ctrl_c_stops_the_workers_cleanly(tmp_path):
    """A KeyboardInterrupt (here raised by the callback, as Ctrl-C raises it between chunks) shuts the
    workers down, saves the configured checkpoint, and the next run starts normally."""
    ck = tmp_path / "ck"
    config = {"model": {"zoo": "mmt", "size": "tiny"}, "batch": 8, "micro_batches": 2, "steps": 50,
              "log_interval": 1, "lr": 0.01, "pipeline": {"cost": "analytic"},
              "checkpoint": {"path": str(ck), "resume": True}}

    def stop(step, loss):
        if step == 3:
            signal.raise_signal(signal.SIGINT)  # Python's handler raises KeyboardInterrupt here

    with pytest.raises(KeyboardInterrupt):
        gp.train(config, devices=2, callback=stop)
    assert ck.exists()
    config["steps"] = 5
    resumed = gp.train(config, devices=2)
    assert resumed.steps == 5 and len(resumed.losses) >= 2


def test_bf16_mixed_precision_and_loss_scaling(mmt):
    """precision and loss_scale are config keys; a Graph loaded in float32 is rewritten for bf16."""
    config = {"model": {"zoo": "mlp", "size": "tiny"}, "steps": 3, "batch": 8, "lr": 0.01,
              "precision": "bf16", "loss_scale": {"init": 1024}}
    result = gp.train(config)
    assert len(result.losses) == 3 and all(np.isfinite(result.losses))
    on_graph = gp.train({"batch": 16, "micro_batches": 2, "steps": 2, "lr": 0.01, "precision": "bf16"}, model=mmt)
    assert len(on_graph.losses) == 2 and all(np.isfinite(on_graph.losses))
    with pytest.raises(Exception, match="fp16 runs on CUDA only"):
        gp.train({**config, "precision": "fp16"})
