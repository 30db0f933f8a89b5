"""Write a small Criteo-format click log for tests: `python data/make_criteo_sample.py`.

The real Criteo logs cannot be shipped, so this makes lines of the same format
(label, 13 integer and 26 hexadecimal categorical features, tab separated, about 5% of
fields empty) from the package's synthetic teacher, so a model trained on the sample
can learn. Ids are Zipf-distributed over 10,000 values per feature and written as
32-bit hex hashes, as in the real logs.
"""

import argparse
import math
from pathlib import Path

import torch

from dlrm_study.config import preset
from dlrm_study.data.synthetic import SyntheticData

VOCABULARY = 10_000
EMPTY = 0.05


def hex_hash(ids: torch.Tensor, feature: int) -> list[str]:
    """A fixed bijection of [0, 2^32) scrambling ids, per feature, written as 8 hex digits."""
    mixed = (ids * 2654435761 + feature * 40503) % (1 << 32)
    return [f"{int(v):08x}" for v in mixed]


def lines(count: int, seed: int) -> list[str]:
    cfg = preset("kaggle")
    cfg.model.table_rows = [VOCABULARY] * 26
    cfg.data.id_distribution = "zipf"
    cfg.train.batch_size = count
    cfg.train.seed = seed
    batch = SyntheticData(cfg).batch(0)
    gen = torch.Generator().manual_seed(seed)
    empty = torch.rand(count, 39, generator=gen) < EMPTY
    counts = torch.expm1(batch.dense * math.log1p(1000)).round().long()  # log-uniform ints
    hashes = [hex_hash(ids, t) for t, ids in enumerate(batch.indices)]
    out = []
    for i in range(count):
        dense = ["" if empty[i, j] else str(int(counts[i, j])) for j in range(13)]
        cats = ["" if empty[i, 13 + t] else hashes[t][i] for t in range(26)]
        out.append("\t".join([str(int(batch.labels[i])), *dense, *cats]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("criteo_sample.tsv"))
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    args.out.write_text("\n".join(lines(args.lines, args.seed)) + "\n")
    print(f"wrote {args.lines} lines to {args.out}")


if __name__ == "__main__":
    main()
