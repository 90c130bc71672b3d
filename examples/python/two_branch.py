#!/usr/bin/env python3
"""A two-branch PyTorch model through graphpipe from Python, checked against PyTorch.

Defines the model in PyTorch, loads it into graphpipe (exported in this process), compares GPP with
the sequential planners on 2 devices, simulates GPP's plan, trains that plan on 2 worker threads
and checks the trained weights against PyTorch training the same batches with the same SGD.

    python3 examples/python/two_branch.py            # prints each part; exit 1 if the weights differ
"""
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import graphpipe as gp


class TwoBranch(nn.Module):
    """Two independent branches joined by a head: GPP can run the branches on different devices."""

    def __init__(self, features=32, hidden=64, classes=10):
        super().__init__()
        self.left = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.right = nn.Sequential(nn.Linear(features, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.ReLU())
        self.head = nn.Linear(2 * hidden, classes)

    def forward(self, x):
        return self.head(torch.cat([self.left(x), self.right(x)], dim=1))


def torch_reference(net, x, y, steps, batch, lr):
    """PyTorch's SGD on the batches graphpipe trains on (sample i of step s is s * batch + i)."""
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    losses = []
    for s in range(steps):
        xb, yb = x[s * batch:(s + 1) * batch], y[s * batch:(s + 1) * batch]
        opt.zero_grad()
        loss = F.cross_entropy(net(xb), yb)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {name: p.detach().numpy() for name, p in net.named_parameters()}, losses


def run(steps=6, batch=16, lr=0.05, quiet=False):
    """Returns (largest weight difference against PyTorch, graphpipe's losses, torch's losses)."""
    say = (lambda *a: None) if quiet else print
    torch.manual_seed(0)
    net = TwoBranch()
    x = torch.randn(steps * batch, 32)
    y = torch.randint(0, 10, (steps * batch,))

    model = gp.load(net, x[:batch])
    say(model)
    rows = gp.compare(model, devices=2, memory="1GiB", batch=batch, micro_batch=batch // 4)
    say(rows.to_markdown())
    plan = next(r["plan"] for r in rows if r["planner"] == "gpp")
    say(plan)
    timeline = gp.simulate(plan)
    say(f"simulated: step {timeline.step_time_s * 1e3:.3f} ms, bubbles {timeline.bubble_fraction:.1%}")

    config = {"steps": steps, "batch": batch, "micro_batches": plan.micro_batches, "optimizer": "sgd", "lr": lr,
              "momentum": 0.0, "log_interval": 1}
    result = gp.train(config, model=model, plan=plan, data=(x.numpy(), y.numpy()),
                      callback=lambda step, loss: say(f"graphpipe step {step}: loss {loss:.5f}"))
    say(result)
    weights, torch_losses = torch_reference(net, x, y, steps, batch, lr)
    diff = max(float(np.abs(result.weights[name] - w).max()) for name, w in weights.items())
    say(f"torch losses: {' '.join(f'{v:.5f}' for v in torch_losses)}")
    say(f"largest weight difference against PyTorch: {diff:.2e}")
    return diff, result.losses, torch_losses


if __name__ == "__main__":
    diff, _, _ = run()
    sys.exit(0 if diff < 1e-4 else 1)
