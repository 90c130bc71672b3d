"""graphpipe.train: one training run on 1..N devices (worker threads in this process)."""
import json
import os
import sys

from . import _graphpipe
from .model import Model, load
from .planning import Plan


class TrainResult:
    """What a run measured and trained: losses, samples/s, per-device busy fraction and memory,
    the trained weights (NumPy arrays sharing graphpipe's memory), and export_onnx(path).
    cuda_graphs: with the config's cuda_graphs, what `train` prints of them (how many micro-batch
    graphs were captured and replayed, or why capturing stopped); "" without."""

    def __init__(self, run):
        self._run = run
        self.losses = list(run.losses)
        self.steps = run.steps_done
        self.samples_per_s = run.samples_per_s
        self.devices = run.measurements()
        self.cuda_graphs = run.cuda_graphs
        plan = run.plan
        self.plan = Plan(plan) if plan is not None else None
        self._weights = None

    @property
    def weights(self):
        """Trained weights and BatchNorm statistics by initializer name (float32/int64 arrays)."""
        if self._weights is None:
            self._weights = self._run.weights()
        return self._weights

    def export_onnx(self, path, weights="fp32"):
        """Writes the model with its trained weights (atomically). weights="bf16" or "fp16" stores the
        weights of Conv, Gemm and MatMul in that format (behind a Cast to float32): half their bytes."""
        self._run.export_onnx(os.fspath(path), weights)
        return path

    def close(self):
        """Frees the run's workers and memory (weights already read stay valid)."""
        self._run.close()

    def __repr__(self):
        last = f", loss {self.losses[-1]:.4f}" if self.losses else ""
        return (f"graphpipe.TrainResult({self.steps} steps{last}, {self.samples_per_s:.1f} samples/s on "
                f"{len(self.devices)} device(s))")


def _config_text(config, model):
    """(YAML text, source, base folder) of a config given as a dict or a YAML file's path."""
    if isinstance(config, dict):
        config = dict(config)
        if model is not None and "model" not in config:
            config["model"] = {"path": model.path or model.name}
        try:
            text = json.dumps(config)  # JSON is YAML
        except TypeError as e:
            raise TypeError(f"the config dict must hold plain values (numbers, strings, lists, dicts): {e}") from None
        return text, "config", os.getcwd()
    if isinstance(config, (str, os.PathLike)):
        path = os.fspath(config)
        try:
            with open(path) as f:
                text = f.read()
        except OSError as e:
            raise _graphpipe.Error(f"{path}: cannot read the training config ({e.strerror})") from None
        return text, path, os.path.dirname(os.path.abspath(path))
    raise TypeError(f"config must be a dict or a YAML file's path, not {type(config).__name__}")


def train(config, *, devices=None, backend="cpu", model=None, plan=None, data=None, callback=None, timeout=None,
          verbose=False):
    """Trains as `graphpipe train --config ... --devices N` does, with worker threads here.

    config: a dict of train.yaml's keys, or a YAML path. devices: workers (default 1, or the
    plan's devices). model: a graphpipe.Model (or what graphpipe.load takes) to train instead of
    the config's model. plan: a graphpipe.Plan (graphpipe.partition) to train as given instead of
    planning with the config's pipeline settings. data: (inputs, labels) arrays
    (inputs one array, or a list with one per model input, each with a leading sample dimension)
    used in place (C-contiguous float32/int64 arrays are not copied; do not change them while
    training). callback(step, loss) is called at every logged step (the config's log_interval)
    and at the last. Ctrl-C stops after the current chunk of steps; the workers shut down and a
    checkpoint is saved when the config has one, then KeyboardInterrupt propagates.
    """
    if model is not None and not isinstance(model, Model):
        model = load(model)
    text, source, base_dir = _config_text(config, model)
    inputs = labels = None
    if data is not None:
        try:
            inputs, labels = data
        except (TypeError, ValueError):
            raise TypeError("data must be (inputs, labels): arrays with a leading sample dimension") from None
        if not isinstance(inputs, (list, tuple)):
            inputs = [inputs]
        inputs = list(inputs)
    if plan is not None and not isinstance(plan, Plan):
        raise TypeError("plan must be a graphpipe.Plan (graphpipe.partition)")
    run = _graphpipe.Training(text, source, base_dir, devices or 0, backend, model._handle if model else None, inputs,
                              labels, plan._handle if plan else None, float(timeout or 0))
    try:
        total, interval = run.total_steps, max(1, run.log_interval)
        logged = 0

        def report():
            nonlocal logged
            losses = run.losses
            for step in range(logged + 1, run.steps_done + 1):
                if step % interval == 0 or step == total:
                    if callback is not None:
                        callback(step, losses[step - 1])
                    if verbose:
                        print(f"step {step}/{total}  loss {losses[step - 1]:.4f}", file=sys.stderr, flush=True)
            logged = run.steps_done

        if run.steps_done < total:  # the warm-up step (not timed)
            run.run(1)
            report()
        while run.steps_done < total:
            # Up to the next logged step: the callback sees each, and Ctrl-C lands within a chunk.
            run.run(min(interval - run.steps_done % interval, total - run.steps_done))
            report()
    except KeyboardInterrupt:
        try:
            run.checkpoint()
        finally:
            run.close()
        raise
    except BaseException:
        run.close()
        raise
    return TrainResult(run)
