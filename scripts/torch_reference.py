#!/usr/bin/python3
"""PyTorch reference for graphpipe's executor (tests/exec/test_torch_parity.cc, bench/train).

  export-resnet18 --out m.onnx [--classes 10 --seed 0]
      torchvision ResNet-18 with seeded weights, exported for training (BatchNorm kept,
      do_constant_folding=False, every weight an initializer).
  export-model --name mobilenet_v2|vit|lstm_tagger|rnn_tagger|stn|gpt --out m.onnx [--seed 0]
      The architectures users bring (issue 14), small and seeded, exported the same way; the
      `reference --model NAME --seed S` side rebuilds the identical module from the seed.
  reference --onnx m.onnx --data DIR [--torchvision resnet18 | --model NAME] --steps 3 --lr 0.1 --momentum 0.9
            --loss cross_entropy|mse [--float64]
      Reads DIR/input_<k>.npy, DIR/labels.npy and DIR/params.txt (the names graphpipe trains),
      runs the model in torch (the torchvision module with the ONNX's weights, or an ONNX
      interpreter built from torch.nn.functional with autograd), writes DIR/out.npy (forward of
      the initial weights), DIR/grads/<i>.npy (the gradients of the first step) and, after `steps`
      SGD steps on that batch, DIR/weights/<i>.npy and DIR/buffers/<i>.npy (BatchNorm running
      statistics), each folder with its names.txt. --float64 computes in double precision (written
      as float32): the exact answer that float32 runs of both frameworks approximate.
  bench --onnx m.onnx [--torchvision resnet18] --batch B --steps S --threads 2 --loss ...
      Training samples/s of the same model in torch (SGD, random data): prints one JSON line.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn.functional as F


def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _pool_pads(x, pads, nd, value):
    if not pads or all(p == 0 for p in pads):
        return x, 0
    begin, end = pads[:nd], pads[nd:]
    if begin == end:
        return x, tuple(begin)
    pad = []
    for b, e in zip(reversed(begin), reversed(end)):
        pad += [b, e]
    return F.pad(x, pad, value=value), 0


def _ints(t):
    return [int(v) for v in t.flatten().tolist()]


class OnnxTorch:
    """Evaluates an ONNX graph with torch ops (autograd flows through it)."""

    def __init__(self, model, trainable, dtype=torch.float32):
        self.graph = model.graph
        self.dtype = dtype
        self.params = {}
        self.consts = {}
        for init in self.graph.initializer:
            arr = onnx.numpy_helper.to_array(init).copy()
            t = self.cast(torch.from_numpy(arr))
            if init.name in trainable:
                self.params[init.name] = torch.nn.Parameter(t)
            else:
                self.consts[init.name] = t

    def cast(self, t):
        return t.to(self.dtype) if t.is_floating_point() else t

    def buffers(self):
        """BatchNorm running statistics that are not trained: updated in place by training forwards."""
        out = []
        for node in self.graph.node:
            if node.op_type == "BatchNormalization":
                out += [(n, self.consts[n]) for n in node.input[3:5] if n in self.consts]
        return out

    def run(self, feeds):
        env = dict(self.consts)
        env.update(self.params)
        env.update(feeds)
        for node in self.graph.node:
            ins = [env[n] if n else None for n in node.input]
            outs = self.op(node, ins)
            if not isinstance(outs, (list, tuple)):
                outs = [outs]
            for name, v in zip(node.output, outs):
                if name:
                    env[name] = v
        return [env[o.name] for o in self.graph.output]

    def op(self, node, x):
        a = attrs(node)
        t = node.op_type
        if t in ("Add", "Sub", "Mul", "Div", "Pow"):
            return {"Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "Div": torch.div, "Pow": torch.pow}[t](x[0], x[1])
        unary = {"Relu": torch.relu, "Sigmoid": torch.sigmoid, "Tanh": torch.tanh, "Sqrt": torch.sqrt, "Erf": torch.erf,
                 "Exp": torch.exp, "Log": torch.log, "Neg": torch.neg, "Abs": torch.abs, "Identity": lambda v: v}
        if t in unary:
            return unary[t](x[0])
        if t == "LeakyRelu":
            return F.leaky_relu(x[0], a.get("alpha", 0.01))
        if t == "Gelu":
            return F.gelu(x[0], approximate=a.get("approximate", b"none").decode() if isinstance(a.get("approximate"), bytes) else a.get("approximate", "none"))
        if t == "Gemm":
            A = x[0].t() if a.get("transA", 0) else x[0]
            B = x[1].t() if a.get("transB", 0) else x[1]
            y = a.get("alpha", 1.0) * (A @ B)
            if len(x) > 2 and x[2] is not None:
                y = y + a.get("beta", 1.0) * x[2]
            return y
        if t == "MatMul":
            return torch.matmul(x[0], x[1])
        if t == "Conv":
            nd = x[1].dim() - 2
            pads = list(a.get("pads", [0] * 2 * nd))
            inp, pad = _pool_pads(x[0], pads, nd, 0.0)
            conv = F.conv2d if nd == 2 else F.conv1d
            return conv(inp, x[1], x[2] if len(x) > 2 else None, stride=a.get("strides", [1] * nd), padding=pad,
                        dilation=a.get("dilations", [1] * nd), groups=a.get("group", 1))
        if t == "BatchNormalization":
            training = a.get("training_mode", 0) == 1 or len(node.output) > 1
            # Running statistics are state, not trained: updated in place unless they are Parameters (bench).
            mean, var = [v.detach().clone() if v.requires_grad else v for v in x[3:5]]
            y = F.batch_norm(x[0], mean, var, x[1], x[2], training=training, momentum=1.0 - a.get("momentum", 0.9),
                             eps=a.get("epsilon", 1e-5))
            return [y, mean, var]
        if t == "LayerNormalization":
            axis = a.get("axis", -1) % x[0].dim()
            shape = x[0].shape[axis:]
            return F.layer_norm(x[0], shape, x[1], x[2] if len(x) > 2 else None, a.get("epsilon", 1e-5))
        if t == "Softmax":
            return torch.softmax(x[0], a.get("axis", -1))
        if t == "Flatten":
            axis = a.get("axis", 1)
            return x[0].reshape(int(np.prod(x[0].shape[:axis])), -1)
        if t == "Reshape":
            shape = _ints(x[1])
            shape = [x[0].shape[i] if s == 0 and not a.get("allowzero", 0) else s for i, s in enumerate(shape)]
            return x[0].reshape(shape)
        if t == "Transpose":
            return x[0].permute(a.get("perm", list(reversed(range(x[0].dim())))))
        if t == "Concat":
            return torch.cat(x, a["axis"])
        if t == "Gather":
            axis = a.get("axis", 0) % x[0].dim()
            idx = x[1].long()
            flat = x[0].index_select(axis, idx.flatten())
            return flat.reshape(x[0].shape[:axis] + idx.shape + x[0].shape[axis + 1:])
        if t == "GlobalAveragePool":
            return x[0].mean(dim=tuple(range(2, x[0].dim())), keepdim=True)
        if t in ("MaxPool", "AveragePool"):
            nd = x[0].dim() - 2
            k = a["kernel_shape"]
            pads = list(a.get("pads", [0] * 2 * nd))
            inp, pad = _pool_pads(x[0], pads, nd, float("-inf") if t == "MaxPool" else 0.0)
            if t == "MaxPool":
                return F.max_pool2d(inp, k, a.get("strides", [1] * nd), pad, ceil_mode=bool(a.get("ceil_mode", 0)))
            return F.avg_pool2d(inp, k, a.get("strides", [1] * nd), pad, ceil_mode=bool(a.get("ceil_mode", 0)),
                                count_include_pad=bool(a.get("count_include_pad", 0)))
        if t in ("ReduceMean", "ReduceSum"):
            axes = a.get("axes") or (_ints(x[1]) if len(x) > 1 and x[1] is not None else list(range(x[0].dim())))
            keep = bool(a.get("keepdims", 1))
            return (torch.mean if t == "ReduceMean" else torch.sum)(x[0], dim=tuple(axes), keepdim=keep)
        if t == "Split":
            axis = a.get("axis", 0)
            sizes = _ints(x[1]) if len(x) > 1 and x[1] is not None else a.get("split")
            if sizes is None:
                n = a.get("num_outputs", len(node.output))
                sizes = [x[0].shape[axis] // n] * n
            return list(torch.split(x[0], sizes, dim=axis))
        if t == "Slice":
            starts, ends = _ints(x[1]), _ints(x[2])
            axes = _ints(x[3]) if len(x) > 3 and x[3] is not None else list(range(len(starts)))
            steps = _ints(x[4]) if len(x) > 4 and x[4] is not None else [1] * len(starts)
            idx = [slice(None)] * x[0].dim()
            for s, e, ax, st in zip(starts, ends, axes, steps):
                n = x[0].shape[ax]
                s = max(0, min(n, s + n if s < 0 else s))
                e = max(0, min(n, e + n if e < 0 else e))
                idx[ax] = slice(s, e, st)
            return x[0][tuple(idx)]
        if t == "Unsqueeze":
            axes = a.get("axes") or _ints(x[1])
            y = x[0]
            for ax in sorted(ax % (y.dim() + len(axes)) for ax in axes):
                y = y.unsqueeze(ax)
            return y
        if t == "Squeeze":
            axes = a.get("axes") or (_ints(x[1]) if len(x) > 1 and x[1] is not None else None)
            if axes is None:
                return x[0].squeeze()
            y = x[0]
            for ax in sorted((ax % y.dim() for ax in axes), reverse=True):
                y = y.squeeze(ax)
            return y
        if t == "Expand":
            shape = torch.broadcast_shapes(x[0].shape, tuple(_ints(x[1])))
            return x[0].expand(shape)
        if t == "Cast":
            return x[0].to(self.dtype) if a["to"] == 1 else x[0].long()
        if t == "Constant":
            return self.cast(torch.from_numpy(onnx.numpy_helper.to_array(a["value"]).copy()))
        if t == "Shape":
            return torch.tensor(list(x[0].shape), dtype=torch.int64)
        if t == "Dropout":
            return [x[0], torch.ones_like(x[0], dtype=torch.bool)]
        raise NotImplementedError(f"torch_reference: no mapping for ONNX op {t}")


def resnet18(classes, seed):
    import torchvision
    torch.manual_seed(seed)
    return torchvision.models.resnet18(num_classes=classes)


class TokenTagger(torch.nn.Module):
    """Embedding -> LSTM -> Linear: one class per token (a POS tagger)."""

    def __init__(self, vocab=50, dim=16, hidden=24, tags=5):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.lstm = torch.nn.LSTM(dim, hidden, batch_first=True)
        self.out = torch.nn.Linear(hidden, tags)

    def forward(self, tokens):
        y, _ = self.lstm(self.embed(tokens))
        return self.out(y)


class RnnTagger(torch.nn.Module):
    """Embedding -> 2-layer bidirectional nn.RNN (ReLU) -> Linear: one class per token (ONNX RNN)."""

    def __init__(self, vocab=50, dim=16, hidden=12, tags=5):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.rnn = torch.nn.RNN(dim, hidden, num_layers=2, nonlinearity="relu", bidirectional=True, batch_first=True)
        self.out = torch.nn.Linear(2 * hidden, tags)

    def forward(self, tokens):
        y, _ = self.rnn(self.embed(tokens))
        return self.out(y)


class SpatialTransformer(torch.nn.Module):
    """A spatial transformer: a linear localisation net predicts an affine map per sample, whose
    sampling grid reads the convolution's features (F.grid_sample: ONNX GridSample, bilinear, border
    padding), then a linear head. The grid's base coordinates are built in forward (constants folded
    at import), so the exported initializers are the parameters alone."""

    def __init__(self, size=8, classes=10):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.loc = torch.nn.Linear(3 * size * size, 6)
        self.head = torch.nn.Linear(4 * size * size, classes)
        self.size = size
        with torch.no_grad():  # near the identity map, as STNs start
            self.loc.weight.mul_(0.1)
            self.loc.bias.copy_(torch.tensor([1.0, 0.1, 0.0, -0.1, 1.0, 0.0]))

    def forward(self, x):
        n = self.size
        lin = torch.arange(n, dtype=torch.float32) * (2.0 / (n - 1)) - 1.0
        xs = lin.view(1, n).expand(n, n)
        ys = lin.view(n, 1).expand(n, n)
        base = torch.stack([xs, ys, torch.ones(n, n)], -1).view(1, n * n, 3)
        theta = self.loc(x.flatten(1)).view(-1, 2, 3)
        grid = torch.matmul(base, theta.transpose(1, 2)).view(-1, n, n, 2)
        y = torch.nn.functional.grid_sample(self.conv(x), grid, mode="bilinear", padding_mode="border",
                                            align_corners=False)
        return self.head(torch.relu(y).flatten(1))


class TinyGpt(torch.nn.Module):
    """A GPT-style causal decoder: token + learned position embeddings, pre-norm blocks with a causal
    mask (nn.TransformerEncoder, norm_first=True, batch_first=True), a final LayerNorm, a vocabulary head."""

    def __init__(self, vocab=40, seq=8, dim=32, heads=2, layers=2):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.pos = torch.nn.Parameter(0.02 * torch.randn(1, seq, dim))
        layer = torch.nn.TransformerEncoderLayer(dim, heads, dim_feedforward=2 * dim, dropout=0.0, activation="gelu",
                                                 batch_first=True, norm_first=True)
        self.blocks = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, vocab)
        self.seq = seq

    def forward(self, tokens):
        mask = torch.triu(torch.full((self.seq, self.seq), float("-inf")), diagonal=1)
        return self.head(self.norm(self.blocks(self.embed(tokens) + self.pos, mask=mask)))


def user_model(name, seed):
    """(module, example input) of an architecture from issue 14, weights drawn from `seed`."""
    import torchvision
    torch.manual_seed(seed)
    if name == "mobilenet_v2":
        return torchvision.models.mobilenet_v2(num_classes=10, width_mult=0.25, dropout=0.0), torch.randn(2, 3, 64, 64)
    if name == "vit":
        return torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                                    hidden_dim=32, mlp_dim=64, num_classes=10), torch.randn(2, 3, 32, 32)
    if name == "lstm_tagger":
        return TokenTagger(), torch.randint(0, 50, (2, 7))
    if name == "rnn_tagger":
        return RnnTagger(), torch.randint(0, 50, (2, 7))
    if name == "stn":
        return SpatialTransformer(), torch.randn(2, 3, 8, 8)
    if name == "gpt":
        return TinyGpt(), torch.randint(0, 40, (2, 8))
    sys.exit(f"torch_reference: unknown model '{name}' (mobilenet_v2, vit, lstm_tagger, rnn_tagger, stn, gpt)")


def load_module(args, model, trainable, dtype=torch.float32):
    """(callable(list of inputs) -> output, list of (name, Parameter), list of (name, running-stat buffer))."""
    if getattr(args, "model", ""):
        m, _ = user_model(args.model, args.seed)
        m.train()
        m.to(dtype)
        named = [(n, p) for n, p in m.named_parameters()]
        buffers = [(n, b) for n, b in m.named_buffers() if not n.endswith("num_batches_tracked")]
        return (lambda xs: m(xs[0] if xs[0].dtype == torch.int64 else xs[0].to(dtype))), named, buffers
    if args.torchvision:
        m = resnet18(args.classes, 0)
        inits = {i.name: torch.from_numpy(onnx.numpy_helper.to_array(i).copy()) for i in model.graph.initializer}
        sd = {k: v for k, v in m.state_dict().items() if not k.endswith("num_batches_tracked")}
        missing = [k for k in sd if k not in inits]
        if missing:
            sys.exit(f"torch_reference: the ONNX lacks torchvision weights {missing[:5]}")
        m.load_state_dict({k: inits[k] for k in sd}, strict=False)
        m.train()
        m.to(dtype)
        named = [(n, p) for n, p in m.named_parameters()]
        buffers = [(n, b) for n, b in m.named_buffers() if not n.endswith("num_batches_tracked")]
        return (lambda xs: m(xs[0].to(dtype))), named, buffers
    ev = OnnxTorch(model, trainable, dtype)
    names = [i.name for i in model.graph.input if i.name not in ev.params and i.name not in ev.consts]

    def fwd(xs):
        return ev.run(dict(zip(names, [ev.cast(x) for x in xs])))[0]

    return fwd, list(ev.params.items()), ev.buffers()


def loss_fn(kind, out, labels):
    if kind == "cross_entropy":
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), labels.reshape(-1))
    return F.mse_loss(out, labels)


def cmd_export_resnet18(args):
    m = resnet18(args.classes, args.seed)
    m.train()
    x = torch.randn(2, 3, args.image, args.image)
    torch.onnx.export(m, x, args.out, opset_version=17, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.TRAINING, input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})


def cmd_export_model(args):
    m, x = user_model(args.name, args.seed)
    m.train()
    torch.onnx.export(m, x, args.out, opset_version=17, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.TRAINING, input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})


def cmd_reference(args):
    torch.set_num_threads(args.threads)
    model = onnx.load(args.onnx)
    trainable = set(open(os.path.join(args.data, "params.txt")).read().split())
    fwd, named, buffers = load_module(args, model, trainable, torch.float64 if args.float64 else torch.float32)
    k = 0
    xs = []
    while os.path.exists(os.path.join(args.data, f"input_{k}.npy")):
        xs.append(torch.from_numpy(np.load(os.path.join(args.data, f"input_{k}.npy"))))
        k += 1
    labels = torch.from_numpy(np.load(os.path.join(args.data, "labels.npy")))
    with torch.no_grad():
        out = fwd(xs)
    np.save(os.path.join(args.data, "out.npy"), out.detach().float().numpy())
    opt = torch.optim.SGD([p for _, p in named], lr=args.lr, momentum=args.momentum)
    losses = []
    for step in range(args.steps):
        opt.zero_grad()
        loss = loss_fn(args.loss, fwd(xs), labels)
        loss.backward()
        if step == 0:
            save_tensors(os.path.join(args.data, "grads"), [(n, p.grad) for n, p in named if p.grad is not None])
        opt.step()
        losses.append(float(loss))
    save_tensors(os.path.join(args.data, "weights"), named)
    save_tensors(os.path.join(args.data, "buffers"), buffers)
    print(json.dumps({"losses": losses, "params": len(named)}))


def save_tensors(folder, named):
    """folder/<i>.npy (float32) and folder/names.txt, one name per line."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "names.txt"), "w") as f:
        for i, (n, t) in enumerate(named):
            np.save(os.path.join(folder, f"{i}.npy"), t.detach().float().numpy())
            f.write(n + "\n")


def cmd_bench(args):
    torch.set_num_threads(args.threads)
    model = onnx.load(args.onnx)
    trainable = {i.name for i in model.graph.initializer if i.data_type == onnx.TensorProto.FLOAT}
    fwd, named, _ = load_module(args, model, trainable)
    xs = []
    for inp in model.graph.input:
        if inp.name in trainable or any(i.name == inp.name for i in model.graph.initializer):
            continue
        dims = [args.batch if (d.dim_param or i == 0) else d.dim_value for i, d in enumerate(inp.type.tensor_type.shape.dim)]
        if inp.type.tensor_type.elem_type == onnx.TensorProto.INT64:
            xs.append(torch.zeros(dims, dtype=torch.int64))
        else:
            xs.append(torch.randn(dims))
    with torch.no_grad():
        out = fwd(xs)
    labels = torch.zeros(out.shape[:-1], dtype=torch.int64) if args.loss == "cross_entropy" else torch.randn(out.shape)
    opt = torch.optim.SGD([p for _, p in named], lr=1e-3, momentum=0.9)

    def step():
        opt.zero_grad()
        if args.bf16:  # automatic mixed precision as PyTorch users know it on a CPU
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = loss_fn(args.loss, fwd(xs).float(), labels)
        else:
            loss = loss_fn(args.loss, fwd(xs), labels)
        loss.backward()
        opt.step()

    for _ in range(args.warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    dt = time.perf_counter() - t0
    cfg = torch.__config__.show()
    blas = "openblas" if "openblas" in cfg.lower() else ("mkl" if "mkl" in cfg.lower() else "unknown")
    print(json.dumps({"samples_per_s": args.batch * args.steps / dt, "threads": torch.get_num_threads(),
                      "torch": torch.__version__, "blas_build": blas}))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export-resnet18")
    e.add_argument("--out", required=True)
    e.add_argument("--classes", type=int, default=10)
    e.add_argument("--image", type=int, default=64)
    e.add_argument("--seed", type=int, default=0)
    e = sub.add_parser("export-model")
    e.add_argument("--name", required=True)
    e.add_argument("--out", required=True)
    e.add_argument("--seed", type=int, default=0)
    for name in ("reference", "bench"):
        r = sub.add_parser(name)
        r.add_argument("--onnx", required=True)
        r.add_argument("--torchvision", default="")
        r.add_argument("--model", default="")
        r.add_argument("--seed", type=int, default=0)
        r.add_argument("--classes", type=int, default=10)
        r.add_argument("--loss", default="cross_entropy")
        r.add_argument("--threads", type=int, default=1)
        if name == "reference":
            r.add_argument("--data", required=True)
            r.add_argument("--steps", type=int, default=3)
            r.add_argument("--lr", type=float, default=0.1)
            r.add_argument("--momentum", type=float, default=0.0)
            r.add_argument("--float64", action="store_true")
        else:
            r.add_argument("--batch", type=int, default=32)
            r.add_argument("--steps", type=int, default=10)
            r.add_argument("--warmup", type=int, default=2)
            r.add_argument("--bf16", action="store_true", help="train under torch.autocast('cpu', bfloat16)")
    args = p.parse_args()
    {"export-resnet18": cmd_export_resnet18, "export-model": cmd_export_model, "reference": cmd_reference, "bench": cmd_bench}[args.cmd](args)


if __name__ == "__main__":
    main()
