"""Write the UCI bike-sharing set without the two columns that give its target away.

Our copy (``../shared/data/uci/bike``, 17 features) keeps the casual and registered counts
(features 15 and 16, centred). The target is ``log(casual + registered)``: this script checks
that (correlation of the target with ``log1p`` of their shifted sum, 0.999 on our copy) and
writes the data without them (D = 15; the paper's bike has D = 12), with the same test masks::

    python benchmarks/derive_bike.py ../shared/data/uci/bike /tmp/uci_derived/bike
    avdgp bench --data-root /tmp/uci_derived --datasets bike --epochs 100 --out bench100

(a folder named ``bike`` under its own data root keeps the data set's name in the tables).
"""

from __future__ import annotations

import argparse
import gzip
import shutil
from pathlib import Path

import numpy as np

COUNT_COLUMNS = (15, 16)  # casual, registered


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("source", type=Path, help="UCI folder with data.csv.gz")
    parser.add_argument("target", type=Path, help="folder to write")
    args = parser.parse_args(argv)

    table = np.loadtxt(args.source / "data.csv.gz", delimiter=",")  # [N, D + 1], target last
    features, target = table[:, :-1], table[:, -1]
    counts = sum(features[:, j] - features[:, j].min() for j in COUNT_COLUMNS)
    correlation = float(np.corrcoef(np.log1p(counts), target)[0, 1])
    if correlation < 0.99:
        raise SystemExit(
            f"{args.source}: the target is not log(casual + registered) of columns "
            f"{COUNT_COLUMNS} (correlation {correlation:.3f}); nothing written"
        )
    kept = np.delete(features, COUNT_COLUMNS, axis=1)
    args.target.mkdir(parents=True, exist_ok=True)
    with gzip.open(args.target / "data.csv.gz", "wt") as handle:
        np.savetxt(handle, np.column_stack([kept, target]), delimiter=",", fmt="%.10g")
    mask = args.source / "test_mask.csv.gz"
    if mask.exists():
        shutil.copy(mask, args.target / "test_mask.csv.gz")
    print(
        f"{args.target}: {len(kept)} rows, D = {kept.shape[1]} (dropped columns {COUNT_COLUMNS}, "
        f"correlation of the target with log(casual + registered) {correlation:.4f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
