"""graphpipe: graph pipeline parallelism for DNN training, from Python.

    import graphpipe as gp
    model = gp.load("model.onnx")                    # or a torch.nn.Module with example inputs
    plan = gp.partition(model, devices=4, memory="8GiB", batch=64)
    timeline = gp.simulate(plan)                     # step time, bubbles, memory per device
    result = gp.train({"model": {"path": "model.onnx"}, "steps": 20}, devices=2)

Every function calls graphpipe's C++ library in this process (never the CLI); errors arrive as
graphpipe.Error carrying the one-line message the CLI prints.
"""
from ._graphpipe import Error, __version__, set_log_level
from .model import Model, load
from .planning import (Comparison, Plan, Profile, Schedule, Stage, Timeline, compare, partition, profile, schedule,
                       simulate)
from .training import TrainResult, train

__all__ = [
    "Comparison", "Error", "Model", "Plan", "Profile", "Schedule", "Stage", "Timeline", "TrainResult", "__version__",
    "compare", "load", "partition", "profile", "schedule", "set_log_level", "simulate", "train",
]
