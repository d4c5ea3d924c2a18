"""Learning curves of the authors' reference AVDGP (PyTorch, qxxmu/DGP-AVI) on our splits.

Runs in its own virtual environment with torch and gpytorch; the reference package is *not*
part of this project: export it from the fetched repository and put it on ``PYTHONPATH``::

    git --git-dir /work/.mirror/qxxmu+DGP-AVI/repo archive HEAD | tar -x -C /tmp/dgp-avi
    python benchmarks/learning_curves.py toy --seeds 0 --dump-split /tmp/toy_ --out /dev/null
    PYTHONPATH=/tmp/dgp-avi /work/refenv/bin/python benchmarks/reference_avdgp.py \
        /tmp/toy_0.npz --task classification --layers 3 --steps 2400 --every 300 \
        --out benchmarks/results/learning/toy_reference.jsonl

The model is the reference's ``AVDGPR``/``AVDGPC`` (``IDDGP``) in the paper's configuration:
per-datapoint inducing points from the previous layer only (``num_induc_1=None``,
``num_induc_2=M``, ``rule=0``), affine inducing maps, learned sigma points (``parametric``),
zero means, its isotropic Matern-5/2 kernel and its defaults for everything else (one hidden
layer per MLP, ``depth=2``). Adam, batch 100, the same shuffling seed for every epoch's order
is *not* ours: the batch order comes from ``torch.randperm`` with ``--seed``. Each output line
matches ``benchmarks/learning_curves.py``: step, training seconds (scoring excluded), test and
validation metrics.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import AmortizedGP  # noqa: F401  (from PYTHONPATH, see the module docstring)
import numpy as np
import torch
from AmortizedGP import AVDGPC, AVDGPR


def build(
    task: str,
    layers: int,
    dim: int,
    num_data: int,
    num_points: int,
    total_inducing: int,
    predictive: bool,
    depth: int,
):
    if task == "classification":
        hidden = [2] * (layers - 1)
        if layers == 1:
            inducing = [total_inducing]
        elif layers == 2:
            inducing = [total_inducing // 2] * 2
        else:
            inducing = [total_inducing // 2] + [total_inducing // 4] * (layers - 1)
        return AVDGPC(
            num_data,
            dim,
            hidden,
            None,
            inducing,
            parametric=True,
            num_sampl=num_points,
            rule=0,
            depth=depth,
        )
    hidden = [16, 4][: layers - 1]
    inducing = [8, 4, 4][:layers]
    return AVDGPR(
        num_data,
        dim,
        1,
        hidden,
        None,
        inducing,
        parametric=True,
        parametric_predictive=predictive,
        num_sampl=num_points,
        rule=0,
        depth=depth,
    )


def score(model, task: str, x: torch.Tensor, y: torch.Tensor) -> dict:
    model.eval()
    with torch.no_grad():
        if task == "classification":
            predicted, log_lik = model.pred(x, y)
            error = (predicted.reshape(-1).double() != y.reshape(-1)).double().mean().item()
            result = {"error_rate": error, "nll": -log_lik.mean().item()}
        else:
            mean, log_lik, _ = model.pred(x, y)
            rmse = (mean - y).square().mean().sqrt().item()
            result = {"nll": -log_lik.mean().item(), "rmse": rmse}
    model.train()
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("split", help=".npz written by learning_curves.py --dump-split")
    parser.add_argument("--task", choices=["regression", "classification"], default="regression")
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--every", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--lr", type=float, default=0.005)
    parser.add_argument("--num-points", type=int, default=32)
    parser.add_argument("--total-inducing", type=int, default=32)
    parser.add_argument("--predictive", action="store_true", help="AR2PP")
    parser.add_argument("--depth", type=int, default=2, help="MLP depth (reference default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--label", default="reference")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.set_default_dtype(torch.float64)
    torch.manual_seed(args.seed)
    data = {k: torch.tensor(v) for k, v in np.load(args.split).items()}
    x_train, y_train = data["x_train"], data["y_train"]
    num_data, dim = x_train.shape
    model = build(
        args.task,
        args.layers,
        dim,
        num_data,
        args.num_points,
        args.total_inducing,
        args.predictive,
        args.depth,
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    steps_per_epoch = math.ceil(num_data / args.batch_size)
    total = args.steps or (args.epochs or 10) * steps_per_epoch
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    label = {
        "data": Path(args.split).stem,
        "model": f"reference-{args.layers}l",
        "variant": args.label,
        "seed": args.seed,
    }
    step, seconds, losses = 0, 0.0, []
    while step < total:
        order = torch.randperm(num_data)
        for start in range(0, num_data, args.batch_size):
            index = order[start : start + args.batch_size]
            began = time.perf_counter()
            optimizer.zero_grad()
            loss = -model.elbo(x_train[index], y_train[index])
            loss.backward()
            optimizer.step()
            seconds += time.perf_counter() - began
            losses.append(loss.item())
            step += 1
            if step % args.every == 0 or step == total:
                record = {
                    **label,
                    "step": step,
                    "seconds": round(seconds, 3),
                    "train_loss": float(np.mean(losses[-args.every :])),
                }
                for name in ("test", "val"):
                    scores = score(model, args.task, data[f"x_{name}"], data[f"y_{name}"])
                    record.update({f"{name}_{k}": round(v, 5) for k, v in scores.items()})
                print(json.dumps(record), flush=True)
                with out.open("a") as handle:
                    handle.write(json.dumps(record) + "\n")
            if step >= total:
                break
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
