#!/usr/bin/env python3
"""What planning costs from Python against the CLI, on the same model and problem.

For each model: the wall time of graphpipe.partition() on a model loaded once (what a notebook pays
per call) against the search time the CLI reports for `graphpipe partition` on the same ONNX file
(its own import excluded), median of --repeats runs each, and the ratio. Issue 25's bar: <= 1.10.

    PYTHONPATH=build/python python3 bench/python/bench_partition.py [--cli build/cli/graphpipe] [--repeats 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import graphpipe as gp

CASES = [  # (zoo model, size, devices, memory, batch)
    ("mmt", "small", 8, "4GiB", 64),
    ("inception", "small", 4, "4GiB", 32),
    ("transformer", "small", 8, "4GiB", 64),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default=os.path.join("build", "cli", "graphpipe"))
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print(f"{'model':<22} {'python partition()':>18} {'CLI search':>12} {'python/CLI':>10}")
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for name, size, devices, memory, batch in CASES:
            model = gp.load(f"zoo:{name}:{size}")
            path = os.path.join(tmp, f"{name}.onnx")
            with open(path, "wb") as f:
                f.write(model.onnx_bytes())
            py, cli = [], []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                gp.partition(model, devices=devices, memory=memory, batch=batch)
                py.append(time.perf_counter() - t0)
                out = subprocess.run([args.cli, "partition", path, "--devices", str(devices), "--memory", memory,
                                      "--batch", str(batch), "--json"], check=True, capture_output=True, text=True)
                cli.append(json.loads(out.stdout)["search_time_s"])
            ratio = statistics.median(py) / statistics.median(cli)
            worst = max(worst, ratio)
            print(f"{name + ' (' + size + ')':<22} {statistics.median(py) * 1e3:15.1f} ms {statistics.median(cli) * 1e3:9.1f} ms "
                  f"{ratio:10.2f}")
    print(f"worst ratio {worst:.2f} (median of {args.repeats})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
