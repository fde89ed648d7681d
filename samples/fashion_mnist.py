#!/usr/bin/env python3
"""The models of samples/fashion_mnist.c in PyTorch, for a side-by-side look
at accuracy and speed: the same layers, initial weight bounds, input
normalisation, batch size, Adam settings, shuffling per epoch and dropped last
batch. Not part of the test suite.

    python3 samples/fashion_mnist.py [--model cnn|mlp] [--epochs E] [--batch B]
        [--lr LR] [--threads T] [--data DIR]

Debian: apt-get install python3-torch dataset-fashion-mnist (run it with
/usr/bin/python3 when another python3 comes first on PATH).
"""
import argparse
import gzip
import os
import struct
import time

import torch
import torch.nn.functional as F


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic, count = struct.unpack(">II", data[:8])
    head = 16 if magic == 0x803 else 8
    t = torch.frombuffer(bytearray(data[head:]), dtype=torch.uint8)
    return t.view(count, 1, 28, 28) if magic == 0x803 else t.view(count)


def load(data, prefix):
    def find(name):
        for ext in (".gz", ""):
            p = os.path.join(data, name + ext)
            if os.path.exists(p):
                return p
        raise SystemExit(f"fashion_mnist.py: no {name}(.gz) in {data}")

    x = read_idx(find(f"{prefix}-images-idx3-ubyte")).float() / 255.0
    y = read_idx(find(f"{prefix}-labels-idx1-ubyte")).long()
    return (x - 0.2860) / 0.3530, y


def model(kind):
    # PyTorch's default init is uniform in +-1/sqrt(fan_in) for the biases and
    # close to it for the weights: the C sample uses that bound for both.
    if kind == "mlp":
        return torch.nn.Sequential(
            torch.nn.Flatten(), torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)
        )
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 7 * 7, 10),
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["cnn", "mlp"], default="cnn")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--threads", type=int, default=0, help="0: PyTorch's default")
    ap.add_argument("--data", default=os.environ.get("TVK_FASHION_MNIST",
                                                    "/usr/share/datasets/fashion-mnist"))
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    xtr, ytr = load(a.data, "train")
    xte, yte = load(a.data, "t10k")
    net = model(a.model)
    for m in net.modules():
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
            bound = 1 / (m.weight[0].numel() ** 0.5)
            torch.nn.init.uniform_(m.weight, -bound, bound)
            torch.nn.init.uniform_(m.bias, -bound, bound)
    opt = torch.optim.Adam(net.parameters(), lr=a.lr)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; model {a.model}; "
          f"batch {a.batch}, Adam lr {a.lr}")
    steps = len(xtr) // a.batch
    for epoch in range(a.epochs):
        order = torch.randperm(len(xtr))
        t0, total = time.perf_counter(), 0.0
        net.train()
        for b in range(steps):
            idx = order[b * a.batch:(b + 1) * a.batch]
            loss = F.cross_entropy(net(xtr[idx]), ytr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        dt = time.perf_counter() - t0
        net.eval()
        with torch.no_grad():
            acc = sum((net(xte[i:i + 500]).argmax(1) == yte[i:i + 500]).sum().item()
                      for i in range(0, len(xte), 500)) / len(xte) * 100
        print(f"epoch {epoch + 1}: {steps} steps, loss {total / steps:.4f}, test accuracy "
              f"{acc:.2f}%, {steps * a.batch / dt:.0f} images/s ({dt:.1f} s)")


if __name__ == "__main__":
    main()
