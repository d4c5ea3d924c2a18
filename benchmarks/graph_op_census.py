"""The census behind ``gpflux_avdgp.io.graph_ops.ALLOWED_OPS``: the op types in the SavedModels
of the package's models, the experiments' zoo, GPflux layers and Keras' standard layers.

    python benchmarks/graph_op_census.py {zoo,build,keras,gpflux}   # one group per process
    python benchmarks/graph_op_census.py check                      # ops seen, not allowed

Each group writes ``/tmp/ops/<group>.json`` (model -> op -> the functions holding it); ``check``
prints the ops seen and those outside the allow list and the checkpoint ops (none, when the
list was made: 113 op types seen).
"""

import json
import os
import sys
import tempfile

import gpflow
import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras
from tensorflow.core.protobuf import saved_model_pb2

import gpflux_avdgp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "tests"), os.path.join(ROOT, "tests", "io")]  # test models


def ops_of(path):
    sm = saved_model_pb2.SavedModel()
    sm.ParseFromString(open(os.path.join(path, "saved_model.pb"), "rb").read())
    out = {}
    for mg in sm.meta_graphs:
        for n in mg.graph_def.node:
            out.setdefault(n.op, set()).add("main")
        for f in mg.graph_def.library.function:
            for n in f.node_def:
                out.setdefault(n.op, set()).add(f.signature.name)
    return out


models = {}
rng = np.random.default_rng(0)
x = rng.normal(size=(40, 2))
y = np.sin(x[:, :1])
yc = (x[:, :1] > 0).astype(float)
which = sys.argv[1]
if which == "check":
    import glob

    from gpflux_avdgp.io.graph_ops import ALLOWED_OPS, CHECKPOINT_OPS

    seen = set()
    for name in glob.glob("/tmp/ops/*.json"):
        for ops in json.load(open(name)).values():
            seen |= set(ops)
    print(len(seen), "op types seen; not allowed:", sorted(seen - ALLOWED_OPS - CHECKPOINT_OPS))
    sys.exit()
if which == "zoo":
    from test_saving_zoo import ZOO  # every family, every rule, both tasks

    from avdgp.zoo import ModelSpec, build_model

    for kind, rule, task in ZOO:
        deep = kind in ("avdgp", "dsdgp", "dspp")
        spec = ModelSpec(
            model=kind,
            rule=rule or "ar2p",
            task=task,
            num_layers=2,
            hidden_dims=[3] if deep else None,
            num_inducing=[4, 4] if deep else [4],
            num_points=4,
        )
        built = build_model(spec, 2, 40, inputs=x)
        m = built.model
        m.compile(
            (
                gpflux_avdgp.optimizers.FlatAdam(0.01)
                if kind == "avdgp"
                else tf_keras.optimizers.Adam(0.01)
            ),
            loss=built.loss,
            metrics=[gpflux_avdgp.MixtureNLL()],
        )
        m.fit(x, yc if task == "classification" else y, epochs=1, verbose=0)
        models[f"{kind}-{rule}-{task}"] = m
elif which == "build":
    for rule in ["ar1", "ar2", "ar2p", "ar2pp"]:
        for preset in ["default", "paper"]:
            lik = gpflow.likelihoods.Gaussian(0.1)
            m = gpflux_avdgp.build_avdgp(2, [3, 1], 4, 40, lik, rule=rule, preset=preset, seed=0)
            m.compile(
                tf_keras.optimizers.Adam(0.01),
                metrics=[gpflux_avdgp.MixtureNLL(), gpflux_avdgp.MixtureRMSE(), "mse"],
            )
            m.fit(x, y, epochs=1, verbose=0)
            models[f"build-{rule}-{preset}"] = m
    m = gpflux_avdgp.build_avdgp(2, [3, 3], 4, 40, gpflow.likelihoods.Softmax(3), seed=0)
    m.compile(
        tf_keras.optimizers.Adam(0.01),
        metrics=(
            [
                gpflux_avdgp.MixtureAccuracy(),
                gpflux_avdgp.MixtureBrier(),
                gpflux_avdgp.MixtureCRPS(),
            ]
            if False
            else [gpflux_avdgp.MixtureAccuracy()]
        ),
    )
    m.fit(x, rng.integers(0, 3, (40, 1)).astype(float), epochs=1, verbose=0)
    models["softmax"] = m
    from test_saving import mixed_model

    lik = gpflow.likelihoods.Gaussian(0.1)
    m = mixed_model(lik)
    m.compile(tf_keras.optimizers.Adam(0.01), loss=gpflux_avdgp.AVDGPLoss(lik))
    m.fit(x, y, epochs=1, verbose=0)
    models["mixed"] = m
elif which == "keras":
    L = tf_keras.layers
    img = np.random.default_rng(0).normal(size=(16, 8, 8, 3)).astype("float32")
    seq = np.random.default_rng(0).normal(size=(16, 5, 4)).astype("float32")
    ids = np.random.default_rng(0).integers(0, 10, (16, 5))
    cases = {
        "dense": (
            tf_keras.Sequential(
                [
                    tf_keras.Input((2,)),
                    L.Dense(8, activation="relu"),
                    L.Dropout(0.1),
                    L.BatchNormalization(),
                    L.LayerNormalization(),
                    L.Dense(1, activation="sigmoid"),
                ]
            ),
            x.astype("float32"),
            yc,
        ),
        "cnn": (
            tf_keras.Sequential(
                [
                    tf_keras.Input((8, 8, 3)),
                    L.Conv2D(4, 3, activation="relu"),
                    L.MaxPooling2D(),
                    L.Conv2D(4, 3, padding="same"),
                    L.AveragePooling2D(),
                    L.GlobalAveragePooling2D(),
                    L.Dense(3, activation="softmax"),
                ]
            ),
            img,
            np.arange(16) % 3,
        ),
        "rnn": (
            tf_keras.Sequential(
                [tf_keras.Input((5, 4)), L.LSTM(4, return_sequences=True), L.GRU(3), L.Dense(1)]
            ),
            seq,
            np.ones((16, 1)),
        ),
        "emb": (
            tf_keras.Sequential(
                [
                    tf_keras.Input((5,), dtype="int64"),
                    L.Embedding(10, 4),
                    L.Flatten(),
                    L.Reshape((5, 4)),
                    L.Conv1D(2, 2),
                    L.GlobalMaxPooling1D(),
                    L.Dense(1),
                ]
            ),
            ids,
            np.ones((16, 1)),
        ),
        "misc": (
            tf_keras.Sequential(
                [
                    tf_keras.Input((2,)),
                    L.Dense(4, activation="elu"),
                    L.LeakyReLU(),
                    L.PReLU(),
                    L.GaussianNoise(0.1),
                    L.Activation("softplus"),
                    L.Dense(2, activation="tanh"),
                    L.Softmax(),
                ]
            ),
            x.astype("float32"),
            np.eye(2)[np.arange(40) % 2],
        ),
    }
    inp = tf_keras.Input((2,))
    a = L.Dense(3)(inp)
    b = L.Dense(3, activation="swish")(inp)
    c = L.Concatenate()([a, b])
    d = L.Add()([a, b])
    e = L.Multiply()([a, b])
    o = L.Dense(1)(L.Concatenate()([c, d, e, inp[:, :1] * 2.0 + tf.math.exp(inp[:, 1:])]))
    cases["functional"] = (tf_keras.Model(inp, o), x.astype("float32"), y)
    for name, (m, xx, yy) in cases.items():
        m.compile("adam", loss="mse", metrics=["mae", "accuracy"])
        m.fit(xx, yy, epochs=1, verbose=0)
        models[name] = m
    # legacy optimizers, sgd, rmsprop
    m = tf_keras.Sequential([tf_keras.Input((2,)), L.Dense(1)])
    m.compile(tf_keras.optimizers.SGD(0.1, momentum=0.9), loss="mse")
    m.fit(x, y, epochs=1, verbose=0)
    models["sgd"] = m
    m = tf_keras.Sequential([tf_keras.Input((2,)), L.Dense(1)])
    m.compile(tf_keras.optimizers.RMSprop(), loss="mse")
    m.fit(x, y, epochs=1, verbose=0)
    models["rms"] = m
    m = tf_keras.Sequential([tf_keras.Input((2,)), L.Dense(1)])
    m.compile(tf_keras.optimizers.legacy.Adam(), loss="mse")
    m.fit(x, y, epochs=1, verbose=0)
    models["legacyadam"] = m
elif which == "gpflux":
    from gpflux.architectures import Config, build_constant_input_dim_deep_gp

    cfg = Config(
        num_inducing=5, inner_layer_qsqrt_factor=1e-5, likelihood_noise_variance=1e-2, whiten=True
    )
    dg = build_constant_input_dim_deep_gp(x, num_layers=2, config=cfg)
    m = dg.as_training_model()
    m.compile(tf_keras.optimizers.Adam(0.01))
    m.fit({"inputs": x, "targets": y}, epochs=1, verbose=0)
    models["gpflux-train"] = m
    pm = dg.as_prediction_model()
    pm(x[:2])
    models["gpflux-pred"] = pm
    bm = gpflux_avdgp.build_avdgp(2, [2, 1], 4, 40, gpflow.likelihoods.Gaussian(0.1), seed=0)
    dgp = gpflux_avdgp.as_deep_gp(bm.layers[:-1], gpflow.likelihoods.Gaussian(0.1))
    m = dgp.as_training_model()
    m.compile(tf_keras.optimizers.Adam(0.01))
    m.fit({"inputs": x, "targets": y}, epochs=1, verbose=0)
    models["asdeepgp-train"] = m

res = {}
for name, m in models.items():
    d = tempfile.mkdtemp()
    try:
        m.save(os.path.join(d, "m"))
    except Exception as e:
        print("SAVE FAIL", name, type(e).__name__, str(e)[:200])
        continue
    res[name] = {op: sorted(places) for op, places in ops_of(os.path.join(d, "m")).items()}
json.dump(res, open(f"/tmp/ops/{which}.json", "w"), indent=0)
print(which, "done", len(res))
