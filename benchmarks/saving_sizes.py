"""Size on disk and load / predict times of saved models, per format.

Builds (untrained: sizes and speed do not depend on training) the paper's 3-layer AVDGP-AR2P
(dims 16/4/1, M 8/4/4, S 32) and GPflux DS-DGP (256/128/128) for elevators' D = 18, saves
each as ``.keras``, Keras SavedModel and serving export, and times loading in this process
(after one warm-up load of each kind) and predicting 1000 rows.

    python benchmarks/saving_sizes.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

import gpflux_avdgp
from avdgp.zoo import ModelSpec, build_model

ROWS, DIM = 1000, 18


def size_of(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def timed(function, repeats: int = 3) -> float:
    function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main() -> None:
    x = np.random.default_rng(0).normal(size=(ROWS, DIM))
    folder = Path(tempfile.mkdtemp())
    print("| model | format | size | load s | predict 1000 rows s |")
    print("|---|---|---:|---:|---:|")
    for name, spec in [
        ("AVDGP-AR2P", ModelSpec(model="avdgp", rule="ar2p", seed=0)),
        ("DS-DGP", ModelSpec(model="dsdgp", seed=0)),
    ]:
        tf_keras.backend.clear_session()
        built = build_model(spec, DIM, 10000, inputs=x)
        built.model.compile(tf_keras.optimizers.Adam(0.005), loss=built.loss)
        gpflux_avdgp.predict_mixture(built.model, x[:10])
        for label, path in [("`.keras`", "m.keras"), ("SavedModel", "m_savedmodel")]:
            target = folder / f"{name}_{path}"
            built.model.save(str(target))
            load_seconds = timed(lambda t=target: gpflux_avdgp.load_model(str(t)), repeats=2)
            model = gpflux_avdgp.load_model(str(target))
            predict_seconds = timed(lambda m=model: gpflux_avdgp.predict_mixture(m, x))
            print(
                f"| {name} | {label} | {size_of(target) / 1e6:.2f} MB | {load_seconds:.2f} | "
                f"{predict_seconds:.3f} |"
            )
        target = folder / f"{name}_serving"
        gpflux_avdgp.export(built.model, str(target))
        load_seconds = timed(lambda t=target: tf.saved_model.load(str(t)), repeats=2)
        served = tf.saved_model.load(str(target))
        inputs = tf.constant(x)
        predict_seconds = timed(lambda s=served, i=inputs: s.signatures["predict_y"](x=i))
        print(
            f"| {name} | serving export | {size_of(target) / 1e6:.2f} MB | {load_seconds:.2f} | "
            f"{predict_seconds:.3f} |"
        )


if __name__ == "__main__":
    main()
