#!/usr/bin/env python3
"""Exports real architectures with a current PyTorch and tries each with graphpipe, as a user would:
torch.onnx.export in training mode with a dynamic batch (both exporters), then `graphpipe train`
for 2 steps on synthetic data. Prints one Markdown row per model: "trains (loss a -> b)" or
graphpipe's one-line refusal. A measurement for the README, not a test: CI never runs it.

Needs torch, torchvision, onnx, onnxscript and transformers, e.g. the venv of
scripts/export_torch2_fixtures.py:
  /work/venv-torch/bin/python scripts/sweep_architectures.py [--graphpipe build/cli/graphpipe]
      [--models resnet18,hf_bert,...] [--exporters dynamo,torchscript] [--out /tmp/sweep]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_torch2_fixtures as fx  # noqa: E402  (the exporters' settings and the HF wrappers)

IMAGE = 64
VISION = ["alexnet", "vgg11_bn", "resnet18", "resnet50", "resnext50_32x4d", "wide_resnet50_2", "densenet121",
          "googlenet", "inception_v3", "squeezenet1_1", "mobilenet_v2", "mobilenet_v3_small", "mnasnet0_5",
          "shufflenet_v2_x0_5", "efficientnet_b0", "efficientnet_v2_s", "regnet_x_400mf", "regnet_y_400mf",
          "convnext_tiny", "swin_t", "swin_v2_t", "vit_b_32", "maxvit_t"]
# Vision transformers with a fixed image size.
FIXED_IMAGE = {"vit_b_32": 224, "maxvit_t": 224, "inception_v3": 75}


def vision(name):
    import torchvision
    kwargs = {"weights": None, "num_classes": 10}
    if name in ("googlenet", "inception_v3"):
        kwargs["aux_logits"] = False
        kwargs["init_weights"] = True
    return getattr(torchvision.models, name)(**kwargs), (3, FIXED_IMAGE.get(name, IMAGE), FIXED_IMAGE.get(name, IMAGE))


def hf(name):
    import transformers as t
    small = dict(vocab_size=fx.VOCAB, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=32, max_position_embeddings=16)
    makers = {
        "hf_bert": lambda: t.BertForSequenceClassification(t.BertConfig(num_labels=4, **small)),
        "hf_roberta": lambda: t.RobertaForSequenceClassification(t.RobertaConfig(num_labels=4, pad_token_id=1,
                                                                                 **dict(small, max_position_embeddings=20))),
        "hf_albert": lambda: t.AlbertForSequenceClassification(t.AlbertConfig(num_labels=4, embedding_size=8, **small)),
        "hf_electra": lambda: t.ElectraForSequenceClassification(t.ElectraConfig(num_labels=4, embedding_size=8, **small)),
        "hf_gpt2": lambda: t.GPT2ForSequenceClassification(t.GPT2Config(
            vocab_size=fx.VOCAB, n_positions=16, n_embd=16, n_layer=2, n_head=2, num_labels=4, pad_token_id=0)),
        "hf_llama": lambda: t.LlamaForSequenceClassification(t.LlamaConfig(num_key_value_heads=1, num_labels=4,
                                                                           pad_token_id=0, **small)),
        "hf_qwen2": lambda: t.Qwen2ForSequenceClassification(t.Qwen2Config(num_key_value_heads=1, num_labels=4,
                                                                           pad_token_id=0, **small)),
        "hf_mistral": lambda: t.MistralForSequenceClassification(t.MistralConfig(num_key_value_heads=1, num_labels=4,
                                                                                 pad_token_id=0, **small)),
        "hf_phi": lambda: t.PhiForSequenceClassification(t.PhiConfig(num_labels=4, pad_token_id=0, **small)),
        "hf_vit": lambda: t.ViTForImageClassification(t.ViTConfig(image_size=32, patch_size=8, num_labels=4,
                                                                   **{k: v for k, v in small.items()
                                                                      if k not in ("vocab_size", "max_position_embeddings")})),
    }
    model = makers[name]()
    for m in model.modules():  # no dropout: the sweep is about import and training, not noise
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    if name == "hf_vit":
        return fx.HfImageClassifier(lambda: model), (3, 32, 32)
    return fx.HfClassifier(lambda: model), "ids"


HF = ["hf_bert", "hf_roberta", "hf_albert", "hf_electra", "hf_gpt2", "hf_llama", "hf_qwen2", "hf_mistral", "hf_phi",
      "hf_vit"]


def try_one(name, exporter, graphpipe, out_dir):
    torch.manual_seed(0)
    model, shape = hf(name) if name.startswith("hf_") else vision(name)
    model.train()
    x = torch.randint(1, fx.VOCAB, (2, fx.SEQ)) if shape == "ids" else torch.randn((2,) + shape)
    path = os.path.join(out_dir, f"{name}_{exporter}.onnx")
    t0 = time.time()
    try:
        fx.export(model, x, path, exporter)
    except Exception as e:  # noqa: BLE001  (the exporter's own failure is a result too)
        return "torch cannot export it: " + str(e).strip().splitlines()[0][:160], 0.0
    export_s = time.time() - t0
    cfg = os.path.join(out_dir, f"{name}_{exporter}.yaml")
    with open(cfg, "w") as f:
        f.write(f"model: {path}\nloss: cross_entropy\noptimizer: sgd\nlr: 0.01\nbatch: 2\nsteps: 2\nlog_interval: 1\n")
    r = subprocess.run([graphpipe, "train", "--config", cfg], capture_output=True, text=True, timeout=1800)
    text = r.stdout + r.stderr
    if r.returncode != 0:
        err = [line for line in text.splitlines() if "error" in line.lower()]
        return (err[-1] if err else text.strip().splitlines()[-1])[:220], export_s
    losses = re.findall(r"^step \d+/\d+ +loss (\S+)", text, re.M)
    return ("trains" + (f" (loss {losses[0]} -> {losses[-1]})" if losses else "")), export_s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--graphpipe", default=os.path.join(here, "..", "build", "cli", "graphpipe"))
    ap.add_argument("--models", default=",".join(VISION + HF))
    ap.add_argument("--exporters", default="dynamo,torchscript")
    ap.add_argument("--out", default=None, help="keep the exports here (default: a temporary folder)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    out_dir = args.out or tempfile.mkdtemp(prefix="gp_sweep_")
    os.makedirs(out_dir, exist_ok=True)
    print(f"torch {torch.__version__}; exports in {out_dir}", flush=True)
    print("| model | " + " | ".join(args.exporters.split(",")) + " |")
    print("| --- |" + " --- |" * len(args.exporters.split(",")))
    for name in args.models.split(","):
        cells = []
        for exporter in args.exporters.split(","):
            result, _ = try_one(name, exporter, args.graphpipe, out_dir)
            cells.append(result.replace("|", "/"))
            for f in os.listdir(out_dir):  # the exports of big models add up: keep none unless asked
                if args.out is None and f.startswith(f"{name}_{exporter}"):
                    os.remove(os.path.join(out_dir, f))
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
