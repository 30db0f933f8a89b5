"""The DLRM training step as facebookresearch/dlrm ran it on a CPU in 2020 (SC20's baseline).

Self-contained on purpose: Python 3.8 syntax and torch 1.5 APIs only, no import from the
rest of the package, so the identical step runs on the 2020 stack (torch 1.5.1, Python 3.8:
`make baseline-2020` builds `.venv-2020`) and on today's. The semantics are those of
`dlrm_s_pytorch.py` at the time:

- one `nn.EmbeddingBag(mode="sum", sparse=True)` per table, rows U(-sqrt(1/n), sqrt(1/n));
- MLPs of `nn.Linear` + ReLU, weights N(0, sqrt(2/(m+n))), biases N(0, sqrt(1/m)); the
  top MLP ends in a sigmoid and the loss is `nn.BCELoss`;
- the dot interaction by `bmm` over [dense, embeddings], its strict lower triangle;
- one `torch.optim.SGD` over the dense and the sparse gradients.

As a script it times the step and prints one JSON line (the parent process makes the record):

    python baseline_2020.py --config '{"dense_features": 512, ...}' --steps 10 --warmup 2 --threads 1
"""

import argparse
import json
import platform
import sys
import time

import numpy as np
import torch
from torch import nn


class DLRM2020(nn.Module):
    """The model of dlrm_s_pytorch.py (dot interaction, no self-interaction), initialised by `rng`."""

    def __init__(self, dense_features, bottom_mlp, table_rows, dim, top_mlp, rng):
        super().__init__()
        self.bottom = self.create_mlp([dense_features, *list(bottom_mlp)], rng, sigmoid=False)
        self.embeddings = nn.ModuleList([self.create_emb(rows, dim, rng) for rows in table_rows])
        features = len(table_rows) + 1
        self.li = torch.tensor([i for i in range(features) for j in range(i)])
        self.lj = torch.tensor([j for i in range(features) for j in range(i)])
        top_in = dim + features * (features - 1) // 2
        self.top = self.create_mlp([top_in, *list(top_mlp)], rng, sigmoid=True)

    @staticmethod
    def create_mlp(widths, rng, sigmoid):
        layers = []
        for i in range(len(widths) - 1):
            n, m = widths[i], widths[i + 1]
            linear = nn.Linear(n, m, bias=True)
            linear.weight.data = torch.tensor(rng.normal(0.0, np.sqrt(2 / (m + n)), size=(m, n)).astype(np.float32))
            linear.bias.data = torch.tensor(rng.normal(0.0, np.sqrt(1 / m), size=m).astype(np.float32))
            layers.append(linear)
            last = i == len(widths) - 2
            layers.append(nn.Sigmoid() if (sigmoid and last) else nn.ReLU())
        return nn.Sequential(*layers)

    @staticmethod
    def create_emb(rows, dim, rng):
        bag = nn.EmbeddingBag(rows, dim, mode="sum", sparse=True)
        weight = rng.uniform(low=-np.sqrt(1 / rows), high=np.sqrt(1 / rows), size=(rows, dim)).astype(np.float32)
        bag.weight.data = torch.tensor(weight, requires_grad=True)
        return bag

    def forward(self, dense, offsets, indices):
        x = self.bottom(dense)
        ly = [bag(indices[k], offsets[k]) for k, bag in enumerate(self.embeddings)]
        batch, dim = x.shape
        t = torch.cat([x, *ly], dim=1).view((batch, -1, dim))
        z = torch.bmm(t, torch.transpose(t, 1, 2))
        r = torch.cat([x, z[:, self.li, self.lj]], dim=1)
        return self.top(r)


def make_model(cfg, seed=0):
    """The model of a config dict (dense_features, bottom_mlp, table_rows, embedding_dim, top_mlp)."""
    rng = np.random.RandomState(seed)
    return DLRM2020(
        cfg["dense_features"], cfg["bottom_mlp"], cfg["table_rows"], cfg["embedding_dim"], cfg["top_mlp"], rng
    )


def make_batches(cfg, count, seed=1):
    """`count` random batches as dlrm's random data generator makes them (fixed pooling, uniform ids)."""
    gen = torch.Generator()
    gen.manual_seed(seed)
    batch, lookups = cfg["batch_size"], cfg["lookups_per_table"]
    out = []
    for _ in range(count):
        dense = torch.rand((batch, cfg["dense_features"]), generator=gen)
        offsets = [torch.arange(0, batch * lookups, lookups) for _ in cfg["table_rows"]]
        indices = [torch.randint(0, rows, (batch * lookups,), generator=gen) for rows in cfg["table_rows"]]
        labels = torch.randint(0, 2, (batch, 1), generator=gen).float()
        out.append((dense, offsets, indices, labels))
    return out


class Trainer:
    """The training step of dlrm_s_pytorch.py: forward, BCE loss, backward, one SGD step."""

    def __init__(self, model, lr):
        self.model = model
        self.loss_fn = nn.BCELoss(reduction="mean")
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr)

    def step(self, batch):
        dense, offsets, indices, labels = batch
        out = self.model(dense, offsets, indices)
        loss = self.loss_fn(out, labels)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


def time_steps(cfg, steps, warmup, seed=0):
    """Milliseconds of each of `steps` timed steps after `warmup` untimed ones (a few batches, cycled)."""
    trainer = Trainer(make_model(cfg, seed), cfg["learning_rate"])
    batches = make_batches(cfg, min(steps + warmup, 8), seed + 1)
    times = []
    for i in range(warmup + steps):
        start = time.perf_counter()
        trainer.step(batches[i % len(batches)])
        if i >= warmup:
            times.append((time.perf_counter() - start) * 1e3)
    return times


def main(argv=None):
    parser = argparse.ArgumentParser(description="time the 2020 DLRM CPU training step")
    parser.add_argument("--config", required=True, help="JSON: the model, batch, lookups and learning rate")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    times = time_steps(json.loads(args.config), args.steps, args.warmup, args.seed)
    print(
        json.dumps(
            {
                "ms": times,
                "torch_version": torch.__version__,
                "python_version": platform.python_version(),
                "threads": torch.get_num_threads(),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
