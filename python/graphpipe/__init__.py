"""graphpipe: graph pipeline parallelism for DNN training, from Python.

    import graphpipe as gp
    model = gp.load("model.onnx")                    # or a torch.nn.Module with example inputs
    plan = gp.partition(model, devices=4, memory="8GiB", batch=64)
    timeline = gp.simulate(plan)                     # step time, bubbles, memory per device
    result = gp.train({"model": {"path": "model.onnx"}, "steps": 20}, devices=2)

Every function calls graphpipe's C++ library in this process (never the CLI); errors arrive as
graphpipe.Error carrying the one-line message the CLI prints.
"""
import importlib.util as _importlib_util
import sys as _sys

from . import _build

# The CUDA build links the CUDA toolkit's NCCL, and PyTorch's wheels bring their own, newer one; the
# dynamic linker keeps the first libnccl.so.2 a process loads, and PyTorch needs its own (loaded
# after graphpipe, it fails with "undefined symbol: ncclCommResume"). So with NCCL linked, an
# installed PyTorch is imported first.
if _build.NCCL and "torch" not in _sys.modules and _importlib_util.find_spec("torch") is not None:
    try:
        import torch  # noqa: F401
    except Exception:  # a broken PyTorch must not stop graphpipe from loading
        pass

from ._graphpipe import Error, __version__, set_log_level  # noqa: E402
from .model import Model, load  # noqa: E402
from .planning import (Comparison, Plan, Profile, Schedule, Stage, Timeline,  # noqa: E402
                       compare, partition, profile, schedule, simulate)
from .training import TrainResult, train  # noqa: E402

__all__ = [
    "Comparison", "Error", "Model", "Plan", "Profile", "Schedule", "Stage", "Timeline", "TrainResult", "__version__",
    "compare", "load", "partition", "profile", "schedule", "set_log_level", "simulate", "train",
]
