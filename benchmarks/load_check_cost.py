"""What the model-file check costs: ``check_model_file`` and the whole ``load_model`` of the
paper's 3-layer AVDGP (8 inputs, 16/4/1, M 8/4/4, one epoch of Adam) as ``.keras`` and as a
SavedModel, median of 5 after a warm load.

    python benchmarks/load_check_cost.py make FOLDER   # write the two files once
    python benchmarks/load_check_cost.py run FOLDER    # time them with the installed package
    python benchmarks/load_check_cost.py run FOLDER --package OTHER_CHECKOUT   # another version

Alternate versions in separate processes on a quiet machine (docs/design.md quotes a run).
"""

import argparse
import json
import os
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("mode", choices=["make", "run"])
parser.add_argument("folder")
parser.add_argument("--package", help="a checkout whose gpflux_avdgp to import instead")
args = parser.parse_args()
if args.package:
    sys.path.insert(0, args.package)

import gpflow  # noqa: E402
import numpy as np  # noqa: E402
from gpflow.keras import tf_keras  # noqa: E402

import gpflux_avdgp  # noqa: E402
from gpflux_avdgp.io.model_file import check_model_file  # noqa: E402

print("package:", gpflux_avdgp.__file__, file=sys.stderr)
if args.mode == "make":
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 8))
    likelihood = gpflow.likelihoods.Gaussian(0.1)
    model = gpflux_avdgp.build_avdgp(8, [16, 4, 1], [8, 4, 4], 200, likelihood, seed=0)
    model.compile(tf_keras.optimizers.Adam(0.01), metrics=[gpflux_avdgp.MixtureNLL()])
    model.fit(x, x[:, :1], epochs=1, verbose=0)
    model.save(os.path.join(args.folder, "model.keras"))
    model.save(os.path.join(args.folder, "model"))
    sys.exit()
for name in ("model.keras", "model"):
    path = os.path.join(args.folder, name)
    gpflux_avdgp.load_model(path)  # warm: imports, first traces
    checks, loads = [], []
    for _ in range(5):
        start = time.perf_counter()
        check_model_file(path)
        checks.append(time.perf_counter() - start)
        start = time.perf_counter()
        gpflux_avdgp.load_model(path)
        loads.append(time.perf_counter() - start)
    print(json.dumps({"file": name, "check_s": sorted(checks)[2], "load_s": sorted(loads)[2]}))
