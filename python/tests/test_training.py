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


def run_onnx(model, feeds):
    """The ops of the MLP fixture (and the export's Casts), evaluated in NumPy: a runtime independent of
    graphpipe's importer (Debian's onnx 1.12 has no onnx.reference)."""
    from math import erf
    from onnx import helper, numpy_helper
    env = dict(feeds)
    env.update({t.name: numpy_helper.to_array(t) for t in model.graph.initializer})
    for n in model.graph.node:
        a = {x.name: helper.get_attribute_value(x) for x in n.attribute}
        x = [env[i] for i in n.input]
        if n.op_type == "Cast":
            assert a["to"] == 1, "only casts to float32"
            y = x[0].astype(np.float32)
        elif n.op_type == "Gemm":
            b = x[1].T if a.get("transB", 0) else x[1]
            y = a.get("alpha", 1.0) * (x[0] @ b) + a.get("beta", 1.0) * x[2]
        elif n.op_type == "Relu":
            y = np.maximum(x[0], 0)
        elif n.op_type == "LayerNormalization":
            mean = x[0].mean(axis=-1, keepdims=True)
            var = ((x[0] - mean) ** 2).mean(axis=-1, keepdims=True)
            y = (x[0] - mean) / np.sqrt(var + a["epsilon"]) * x[1] + x[2]
        elif n.op_type == "Constant":
            y = numpy_helper.to_array(a["value"])
        elif n.op_type in ("Div", "Add", "Mul"):
            y = {"Div": np.divide, "Add": np.add, "Mul": np.multiply}[n.op_type](x[0], x[1])
        elif n.op_type == "Erf":
            y = np.vectorize(erf)(x[0]).astype(np.float32)
        else:
            raise AssertionError("run_onnx has no " + n.op_type)
        env[n.output[0]] = np.asarray(y, dtype=np.float32)
    return env[model.graph.output[0].name]


def test_export_of_16_bit_weights_computes_from_the_rounded_weights(mlp_fixture, tmp_path):
    """weights="fp16"/"bf16": the Gemm weights are stored in 16 bits behind a Cast; ONNX's own checker
    accepts the file, and it computes what the float32 export computes from the same weights rounded to
    nearest even."""
    onnx = pytest.importorskip("onnx", reason="onnx (python3-onnx) is not installed")
    from onnx import numpy_helper
    ref = json.loads((mlp_fixture / "reference.json").read_text())
    x = np.load(mlp_fixture / "input_0.npy")
    result = gp.train(fixture_config(ref, mlp_fixture / "model.onnx"), data=(x, np.load(mlp_fixture / "labels.npy")))
    full = onnx.load(str(result.export_onnx(tmp_path / "fp32.onnx")))
    half = onnx.load(str(result.export_onnx(tmp_path / "fp16.onnx", weights="fp16")))
    bf16 = onnx.load(str(result.export_onnx(tmp_path / "bf16.onnx", weights="bf16")))
    for model in (half, bf16):
        onnx.checker.check_model(model, full_check=True)
    stored = {t.name: t for t in bf16.graph.initializer}
    low = [n for n in stored if n.endswith(".bf16")]
    assert {n[:-len(".bf16")] for n in low} == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight",
                                                "fc3.bias"}, "the Gemms' operands, not LayerNorm's"
    for n in low:  # the master's top 16 bits, rounded to nearest even
        assert stored[n].data_type == onnx.TensorProto.BFLOAT16
        master = result.weights[n[:-len(".bf16")]].view(np.uint32).astype(np.uint64)
        want = ((master + 0x7FFF + ((master >> 16) & 1)) >> 16).astype(np.uint16)
        np.testing.assert_array_equal(np.frombuffer(stored[n].raw_data, dtype=np.uint16).reshape(want.shape), want)
    feeds = {full.graph.input[0].name: x[:4]}
    plain = run_onnx(full, feeds)
    halved = {t.name[:-len(".fp16")] for t in half.graph.initializer if t.name.endswith(".fp16")}
    for t in full.graph.initializer:
        if t.name in halved:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16).astype(np.float32), t.name))
    got = run_onnx(half, feeds)
    np.testing.assert_array_equal(got, run_onnx(full, feeds))
    assert not np.array_equal(plain, got)  # the rounding is there
    np.testing.assert_allclose(got, plain, rtol=0.05, atol=0.05)


def test_bf16_weights_of_an_opset_12_model_are_refused(tmp_path):
    """Cast from bfloat16 came with opset 13: an opset-12 model's bf16 export is refused with the way
    out and writes nothing; its fp16 export (Cast from float16 is older) is a valid model."""
    onnx = pytest.importorskip("onnx", reason="onnx (python3-onnx) is not installed")
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("Gemm", ["x", "w"], ["y"], transB=1)], "gemm12",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)], ir_version=7)
    path = tmp_path / "gemm12.onnx"
    onnx.save(model, str(path))
    result = gp.train({"model": {"path": str(path)}, "batch": 4, "steps": 1, "optimizer": "sgd", "lr": 0.1})
    with pytest.raises(gp.Error, match="opset 13 or later"):
        result.export_onnx(tmp_path / "bf16.onnx", weights="bf16")
    assert not (tmp_path / "bf16.onnx").exists()
    onnx.checker.check_model(onnx.load(str(result.export_onnx(tmp_path / "fp16.onnx", weights="fp16"))), full_check=True)
    with pytest.raises(gp.Error, match="fp32, bf16, fp16"):
        result.export_onnx(tmp_path / "x.onnx", weights="int8")


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
    result = gp.train(str(path))
    assert len(result.losses) == 3
    assert result.cuda_graphs == ""  # not asked for


def test_bad_configs_raise_the_cli_message(tmp_path):
    with pytest.raises(gp.Error, match="missing 'model'"):
        gp.train({"steps": 3})
    with pytest.raises(gp.Error, match="no such model file"):
        gp.train({"model": {"path": str(tmp_path / "none.onnx")}, "steps": 1})
    with pytest.raises(gp.Error, match="cannot read"):
        gp.train(str(tmp_path / "none.yaml"))
    with pytest.raises(gp.Error, match="bogus"):
        gp.train({"model": {"zoo": "mlp"}, "bogus": 1})
    with pytest.raises(gp.Error, match="--backend cuda"):  # CUDA graphs: nothing on a CPU captures work
        gp.train({"model": {"zoo": "mlp"}, "steps": 1, "cuda_graphs": True})
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

    # Python installs that handler only where its parent left SIGINT at the default (a job started
    # in the background by a script ignores it): install it for this test.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            gp.train(config, devices=2, callback=stop)
    finally:
        signal.signal(signal.SIGINT, previous)
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


def test_a_stuck_worker_abandons_the_run_and_is_never_freed_under_its_thread(cli, tmp_path):
    # Device 0 stalls in its first forward for 3x the 2 s timeout (6 s): device 1's receive times out
    # (2 s), the run fails after the grace (timeout + 1 s: 5 s in all), and device 0's thread, detached,
    # wakes up later and runs on against the session. The session is abandoned (held until the
    # process exits), not freed under it. (With a 1 s timeout the stall and the grace both ended near
    # 3 s: a loaded machine let the stall end first, and the run was not abandoned.)
    import gc
    import subprocess
    import time
    from graphpipe import _graphpipe
    model, plan, sched = tmp_path / "mlp.onnx", tmp_path / "p.json", tmp_path / "s.txt"
    for args in (["models", "export", "mlp", "--size", "tiny", "-o", str(model)],
                 ["partition", str(model), "--devices", "2", "--batch", "8", "--no-replication", "-o", str(plan)],
                 ["schedule", str(plan), "-o", str(sched)]):
        subprocess.run([cli, *args], check=True, capture_output=True)
    lines = sched.read_text().splitlines()
    micro_batches = int(next(x for x in lines if x.startswith("micro-batches ")).split()[1])
    first = lines.index("device 0:")
    line = next(i + 1 for i in range(first, len(lines)) if lines[i].strip().startswith("F "))
    text = (f"model: {{path: {model}}}\nbatch: 8\nmicro_batches: {micro_batches}\nsteps: 3\n"
            f"pipeline: {{plan: {plan}, schedule: {sched}}}\n")
    run = _graphpipe.Training(text, "stall.yaml", str(tmp_path), 2, "cpu", None, None, None, None, 2.0,
                              f"0:{line}:stall")
    start = time.monotonic()
    with pytest.raises(gp.Error, match="arrived before the deadline.*abandoned"):
        run.run(3)
    assert time.monotonic() - start < 10
    with pytest.raises(gp.Error, match="abandoned"):
        run.run(1)
    run.close()
    del run
    gc.collect()
    time.sleep(2.0)  # the stalled thread wakes (3 s after it stalled) and finishes its step
    again = _graphpipe.Training(text, "again.yaml", str(tmp_path), 2, "cpu", None, None, None, None, 5.0)
    again.run(3)
    assert again.steps_done == 3
