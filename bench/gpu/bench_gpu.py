#!/usr/bin/env python3
"""bench_gpu: training throughput of graphpipe against PyTorch eager on the same GPU.

For each model (torchvision ResNet-18 and ResNet-50 at 224x224, 1000 classes, and a GPT-style
decoder), the model is built in PyTorch with random weights, exported once to ONNX (TorchScript
exporter, training mode, no constant folding), and trained with SGD (lr 1e-3, momentum 0.9) on one
fixed synthetic batch:

- torch fp32 / tf32: the nn.Module in eager mode, with TF32 off / on for matmuls and convolutions;
- graphpipe fp32 / tf32: `graphpipe train --backend cuda` on the exported ONNX, with `tf32: false`
  and NVIDIA_TF32_OVERRIDE=0 (no TF32 anywhere) / `tf32: true` (TF32 matrix products, and cuDNN's
  default math, which uses TF32 in convolutions);
- bf16 / fp16 (mixed precision): torch under torch.autocast with that dtype (fp16 with
  torch.amp.GradScaler), graphpipe with `precision: bf16` / `precision: fp16` (its policy table,
  graph/precision.h; fp16 scales the loss dynamically by default); TF32 off on both sides for the
  float32 rest.

Both sides copy the batch from host memory every step by default (torch: a pinned tensor copied with
non_blocking=True, as a DataLoader with pin_memory=True gives it; graphpipe: its data path, which
makes each batch ahead on a thread in pinned memory and copies it on the compute stream);
`--torch-batch device` keeps torch's batch on the GPU (how the first tables of 2026-11-27 were
measured).

Samples/s are measured over the timed steps after the warm-up steps: for torch with CUDA events
around the timed loop, for graphpipe from the arrival times of its per-step log lines (each line is
printed after the step's loss has been read back, so a line marks the end of a step). Ratios are
graphpipe / torch with the same math (> 1: graphpipe faster).

    bench/gpu/bench_gpu.py [--graphpipe PATH] [--models resnet18,resnet50,gpt] [--batch N]
                           [--warmup N] [--steps N] [--device cuda|cpu] [--tiny]
                           [--math fp32,tf32,bf16,fp16]
                           [--torch-batch host|device] [--predict] [--out DIR]

`--predict` also profiles each model (`graphpipe profile --backend ...`) and prints what
`graphpipe partition --devices 1` predicts from that profile next to the measured samples/s.

`--device cpu --tiny` runs the same comparison on the CPU with small shapes (a smoke test of the
script on a machine without a GPU; the numbers mean nothing for the GPU).
Needs torch and torchvision in the python that runs it.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings


def die(msg):
    sys.exit(f"bench_gpu: {msg}")


try:
    import torch
    import torchvision
except ImportError as e:  # the benchmark compares with torch: without it there is nothing to compare
    die(f"needs torch and torchvision ({e}); run it with the python that has them")


class Block(torch.nn.Module):
    def __init__(self, d, heads, seq):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.fc1 = torch.nn.Linear(d, 4 * d)
        self.fc2 = torch.nn.Linear(4 * d, d)
        # A constant causal mask of 0 and -1e4 (a buffer, never trained; finite so it exports plainly).
        mask = torch.triu(torch.full((seq, seq), -1e4), diagonal=1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q = q.reshape(b, t, h, d // h).transpose(1, 2)
        k = k.reshape(b, t, h, d // h).transpose(1, 2)
        v = v.reshape(b, t, h, d // h).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(2, 3) * (1.0 / (d // h) ** 0.5) + self.mask, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


class Gpt(torch.nn.Module):
    def __init__(self, vocab, d, heads, layers, seq):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Parameter(torch.randn(1, seq, d) * 0.02)
        self.blocks = torch.nn.Sequential(*[Block(d, heads, seq) for _ in range(layers)])
        self.ln = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, vocab)

    def forward(self, ids):
        return self.head(self.ln(self.blocks(self.tok(ids) + self.pos)))


def models(tiny):
    """name -> (constructor, example input maker(batch), classes, default batch)."""
    img = 32 if tiny else 224
    classes = 10 if tiny else 1000
    gpt = dict(vocab=256, d=64, heads=4, layers=2, seq=32) if tiny else dict(vocab=8192, d=768, heads=12, layers=6,
                                                                             seq=256)
    return {
        "resnet18": (lambda: torchvision.models.resnet18(weights=None, num_classes=classes),
                     lambda b: torch.randn(b, 3, img, img), classes, 4 if tiny else 64),
        "resnet50": (lambda: torchvision.models.resnet50(weights=None, num_classes=classes),
                     lambda b: torch.randn(b, 3, img, img), classes, 4 if tiny else 64),
        "gpt": (lambda: Gpt(**gpt), lambda b: torch.randint(0, gpt["vocab"], (b, gpt["seq"])), gpt["vocab"],
                4 if tiny else 16),
    }


def export(model, example, path):
    model.train()
    kwargs = dict(training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, opset_version=17,
                  input_names=["input"], output_names=["output"],
                  dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    try:
        torch.onnx.export(model, (example,), path, dynamo=False, **kwargs)
    except TypeError:  # a torch without the dynamo argument exports with TorchScript anyway
        torch.onnx.export(model, (example,), path, **kwargs)


def torch_run(model, x, y, device, math, warmup, steps, host_batch):
    tf32 = math == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    low = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(math)
    scaler = torch.amp.GradScaler(device) if math == "fp16" else None
    model = model.to(device).train()
    if host_batch and device == "cuda":  # what a DataLoader with pin_memory=True hands the loop
        x_host, y_host = x.pin_memory(), y.pin_memory()
    x, y = x.to(device), y.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        nonlocal x, y
        if host_batch and device == "cuda":
            x, y = x_host.to(device, non_blocking=True), y_host.to(device, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device, dtype=low, enabled=low is not None):
            out = model(x)
            loss = loss_fn(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        return loss

    for _ in range(warmup):
        step()
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    float(loss)  # waits for the last step
    if device == "cuda":
        torch.cuda.synchronize()
    return steps * x.shape[0] / (time.perf_counter() - t0)


STEP_LINE = re.compile(r"^step (\d+)/(\d+)\s+loss ([-0-9.naifNAIF]+)")


def graphpipe_run(exe, onnx_path, batch, backend, math, warmup, steps, workdir, log, graphs=False):
    """(samples/s over the timed steps, seconds to the first step, graphpipe's 'cuda graphs:' line or '')."""
    tf32 = math == "tf32"
    precision = math if math in ("bf16", "fp16") else "fp32"
    cfg = os.path.join(workdir, "train.yaml")
    with open(cfg, "w") as f:
        f.write(f"model: {onnx_path}\nloss: cross_entropy\noptimizer: sgd\nlr: 1.0e-3\nmomentum: 0.9\n"
                f"batch: {batch}\nmicro_batches: 1\nsteps: {warmup + steps}\n"
                f"data: {{kind: synthetic, samples: {batch}}}\nseed: 0\nlog_interval: 1\n"
                f"tf32: {'true' if tf32 else 'false'}\nprecision: {precision}\n"
                f"cuda_graphs: {'true' if graphs else 'false'}\n")
    env = dict(os.environ)
    if not tf32:
        env["NVIDIA_TF32_OVERRIDE"] = "0"
    stamps = {}
    lines = []
    start = time.perf_counter()
    with subprocess.Popen([exe] + GRAPHPIPE_FLAGS + ["train", "--config", cfg, "--backend", backend],
                          stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, env=env, bufsize=1) as p:
        for line in p.stdout:
            now = time.perf_counter()
            lines.append(line.rstrip())
            m = STEP_LINE.match(line)
            if m:
                stamps[int(m.group(1))] = now
        rc = p.wait()
    log.write(f"$ {' '.join([exe] + GRAPHPIPE_FLAGS)} train --config {cfg} --backend {backend}"
              f"{'' if tf32 else '  (NVIDIA_TF32_OVERRIDE=0)'}\n")
    log.write("\n".join(lines) + "\n")
    if rc != 0:
        tail = next((ln for ln in reversed(lines) if ln.strip()), "no output")
        raise RuntimeError(f"graphpipe train exited {rc}: {tail}")
    if warmup not in stamps or warmup + steps not in stamps:
        raise RuntimeError("graphpipe printed no per-step lines")
    first = stamps.get(1, start) - start
    graphs_line = next((ln[ln.index("cuda graphs:"):] for ln in reversed(lines) if "cuda graphs:" in ln), "")
    return steps * batch / (stamps[warmup + steps] - stamps[warmup]), first, graphs_line


# Root flags of every graphpipe command this script runs (--no-fusion).
GRAPHPIPE_FLAGS = []

PREDICTION_LINE = re.compile(r"^prediction: .* ([0-9.]+) samples/s")


def graphpipe_predict(exe, onnx_path, name, batch, backend, math, workdir, log):
    """The cost model's samples/s for one device: `graphpipe profile` then `partition --devices 1`."""
    tf32 = math == "tf32"
    precision = ["--precision", math] if math in ("bf16", "fp16") else []
    prof = os.path.join(workdir, f"{name}.{math}.profile.json")
    env = dict(os.environ)
    if not tf32:
        env["NVIDIA_TF32_OVERRIDE"] = "0"
    profile = [exe] + GRAPHPIPE_FLAGS + precision + ["profile", onnx_path, "--backend", backend, "--batch-sizes", str(batch),
                                   "--repeats", "3", "-o", prof] + (["--tf32"] if tf32 else [])
    partition = [exe] + GRAPHPIPE_FLAGS + precision + ["partition", onnx_path, "--devices", "1", "--batch", str(batch), "-b",
                                     str(batch), "--cost", prof]
    for cmd in (profile, partition):
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        log.write("$ " + " ".join(cmd) + "\n" + r.stdout)
        if r.returncode != 0:
            tail = next((ln for ln in reversed(r.stdout.splitlines()) if ln.strip()), "no output")
            raise RuntimeError(f"graphpipe {' '.join(cmd[1:len(GRAPHPIPE_FLAGS) + len(precision) + 2])} exited {r.returncode}: {tail}")
    m = next((PREDICTION_LINE.match(ln) for ln in r.stdout.splitlines() if PREDICTION_LINE.match(ln)), None)
    if not m:
        raise RuntimeError("graphpipe partition printed no prediction line")
    return float(m.group(1))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    default_exe = next((c for c in (os.environ.get("GP_GRAPHPIPE", ""), os.path.join(here, "..", "bin", "graphpipe"),
                                    os.path.join(here, "..", "..", "build", "cli", "graphpipe"))
                        if c and os.access(c, os.X_OK)), "graphpipe")
    p.add_argument("--graphpipe", default=default_exe, help="the graphpipe binary (default: %(default)s)")
    p.add_argument("--models", default="resnet18,resnet50,gpt")
    p.add_argument("--batch", type=int, default=0, help="batch size (default: 64 for ResNets, 16 for gpt)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--tiny", action="store_true", help="small shapes (a smoke test on the CPU)")
    p.add_argument("--math", default="fp32,tf32",
                   help="any of fp32, tf32, bf16, fp16, comma-separated (default: %(default)s)")
    p.add_argument("--torch-batch", choices=["host", "device"], default="host",
                   help="host: torch copies its batch from pinned host memory every step, as graphpipe copies "
                        "its own (default); device: the batch stays on the GPU (the tables of 2026-11-27)")
    p.add_argument("--predict", action="store_true",
                   help="also profile each model with graphpipe and print the cost model's prediction for one "
                        "device next to the measured samples/s (issue 23's cost-model check)")
    p.add_argument("--no-fusion", action="store_true",
                   help="graphpipe keeps BatchNorm, Add and Relu apart, and attention's K transpose and scale apart "
                        "from its MatMul (its root --no-fusion): to measure the fusions")
    p.add_argument("--cuda-graphs", action="store_true",
                   help="graphpipe captures each step's micro-batch as a CUDA graph from its second step and replays "
                        "it (cuda_graphs: true; every row, fp16's dynamic loss scale included)")
    p.add_argument("--out", default="", help="keep the exported models and logs here (default: a temporary folder)")
    args = p.parse_args()
    if args.no_fusion:
        GRAPHPIPE_FLAGS.append("--no-fusion")
    warnings.filterwarnings("ignore")  # the exporter's notes on BatchNorm's step counters
    if args.warmup < 1 or args.steps < 1:
        die("--warmup and --steps must be at least 1")
    if shutil.which(args.graphpipe) is None and not os.access(args.graphpipe, os.X_OK):
        die(f"no graphpipe binary at '{args.graphpipe}' (pass --graphpipe PATH or set GP_GRAPHPIPE)")
    if args.cuda_graphs and args.device != "cuda":
        die("--cuda-graphs needs --device cuda (the CPU backend captures nothing)")
    if args.device == "cuda" and not torch.cuda.is_available():
        die("torch sees no CUDA GPU (use --device cpu --tiny for a smoke test)")
    table = models(args.tiny)
    names = [m for m in args.models.split(",") if m]
    for m in names:
        if m not in table:
            die(f"unknown model '{m}'; choose from {', '.join(table)}")
    maths = [m for m in args.math.split(",") if m]
    if any(m not in ("fp32", "tf32", "bf16", "fp16") for m in maths) or not maths:
        die("--math takes a comma-separated list of fp32, tf32, bf16, fp16")
    workdir = args.out or tempfile.mkdtemp(prefix="bench_gpu.")
    os.makedirs(workdir, exist_ok=True)
    log_path = os.path.join(workdir, "bench_gpu.log")
    device_name = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    print(f"bench_gpu: {device_name}, torch {torch.__version__}, graphpipe {args.graphpipe}; "
          f"SGD(lr 1e-3, momentum 0.9), one fixed synthetic batch, warm-up {args.warmup}, timed {args.steps} steps; "
          f"torch's batch {'copied from pinned host memory every step' if args.torch_batch == 'host' else 'on the GPU'}"
          f", graphpipe's made ahead in pinned host memory and copied every step; graphpipe's BatchNorm training "
          f"kernels: {'ours' if os.environ.get('GP_CUDA_BATCHNORM') == 'ours' else 'cuDNN graphs'} "
          f"(GP_CUDA_BATCHNORM=ours picks ours); BatchNorm+Relu and residual BatchNorm+Add+Relu "
          f"{'apart (--no-fusion)' if args.no_fusion else 'fused'}; CUDA graphs "
          f"{'on' if args.cuda_graphs else 'off'}", flush=True)
    print("fp32: no TF32 (torch: allow_tf32 off; graphpipe: tf32: false, NVIDIA_TF32_OVERRIDE=0); tf32: TF32 in "
          "matrix products and convolutions (torch: allow_tf32 on; graphpipe: tf32: true); bf16/fp16: torch.autocast "
          "(fp16 with GradScaler) against graphpipe's precision: bf16/fp16 (fp16: dynamic loss scaling)", flush=True)
    print(f"{'model':<10} {'batch':>5} {'math':<5} {'torch s/s':>10} {'graphpipe s/s':>14} {'ratio':>6} "
          f"{'gp first step':>14}" + (f" {'predicted s/s':>14} {'pred/meas':>9}" if args.predict else ""),
          flush=True)
    failed = False
    with open(log_path, "w") as log:
        for name in names:
            make, example, classes, default_batch = table[name]
            batch = args.batch or default_batch
            torch.manual_seed(0)
            model = make()
            onnx_path = os.path.join(workdir, f"{name}.onnx")
            export(model, example(2), onnx_path)
            x = example(batch)
            out_shape = model.eval()(example(2)).shape
            y = torch.randint(0, classes, (batch,) + tuple(out_shape[1:-1]))
            for math in maths:
                try:
                    ts = torch_run(model, x, y, args.device, math, args.warmup, args.steps,
                                   args.torch_batch == "host")
                except Exception as e:  # noqa: BLE001 (report and go on with the next row)
                    ts, failed = float("nan"), True
                    log.write(f"torch {name} {math}: {e}\n")
                try:
                    gs, first, graphs_line = graphpipe_run(args.graphpipe, onnx_path, batch, args.device, math,
                                                           args.warmup, args.steps, workdir, log,
                                                           graphs=args.cuda_graphs)
                except Exception as e:  # noqa: BLE001
                    gs, first, graphs_line, failed = float("nan"), float("nan"), "", True
                    print(f"  graphpipe {name} {math}: {e}", flush=True)
                ratio = gs / ts if ts == ts and gs == gs and ts > 0 else float("nan")
                extra = ""
                if args.predict:
                    try:
                        ps = graphpipe_predict(args.graphpipe, onnx_path, name, batch, args.device, math, workdir,
                                               log)
                    except Exception as e:  # noqa: BLE001
                        ps, failed = float("nan"), True
                        print(f"  graphpipe prediction {name} {math}: {e}", flush=True)
                    extra = f" {ps:>14.1f} {ps / gs if gs == gs and gs > 0 else float('nan'):>9.2f}"
                print(f"{name:<10} {batch:>5} {math:<5} {ts:>10.1f} {gs:>14.1f} {ratio:>6.2f} {first:>13.1f}s{extra}",
                      flush=True)
                if graphs_line:
                    print(f"  graphpipe {name} {math}: {graphs_line}", flush=True)
                model = model.cpu()
                if args.device == "cuda":
                    torch.cuda.empty_cache()
    print(f"bench_gpu: logs and models in {workdir}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
