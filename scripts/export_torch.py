#!/usr/bin/python3
"""Export reference PyTorch models to ONNX for graphpipe's importer tests.

Run with Debian's interpreter (/usr/bin/python3: the python3 on PATH does not see python3-torch):
  /usr/bin/python3 scripts/export_torch.py --out DIR [--models resnet18,googlenet,inception_v3,transformer] [--opsets 13,17]
Writes DIR/<model>_op<opset>.onnx in TRAINING mode without constant folding (BatchNormalization,
Dropout and every weight stay in the graph) with a dynamic batch axis, and prints one line per
file: `<file> params=<trainable parameter count> buffers=<count>`.
"""
import argparse
import os
import sys

import warnings

import torch
import torchvision


def transformer():
    layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.1,
                                             activation="gelu", batch_first=True)
    return torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False), torch.randn(2, 10, 32)


MODELS = {
    "resnet18": lambda: (torchvision.models.resnet18(weights=None), torch.randn(2, 3, 224, 224)),
    "googlenet": lambda: (torchvision.models.googlenet(weights=None, aux_logits=False, init_weights=True),
                          torch.randn(2, 3, 224, 224)),
    "inception_v3": lambda: (torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=True),
                             torch.randn(2, 3, 299, 299)),
    "transformer": transformer,
}


def main():
    warnings.filterwarnings("ignore")
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--opsets", default="13,17")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    for name in args.models.split(","):
        if name not in MODELS:
            sys.exit(f"unknown model '{name}'; choose from {', '.join(MODELS)}")
        model, example = MODELS[name]()
        model.train()
        params = sum(p.numel() for p in model.parameters())
        buffers = sum(b.numel() for b in model.buffers())
        for opset in [int(o) for o in args.opsets.split(",")]:
            path = os.path.join(args.out, f"{name}_op{opset}.onnx")
            torch.onnx.export(model, example, path, training=torch.onnx.TrainingMode.TRAINING,
                              do_constant_folding=False, opset_version=opset, input_names=["input"],
                              output_names=["output"],
                              dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
            print(f"{path} params={params} buffers={buffers}", flush=True)


if __name__ == "__main__":
    main()
