"""Which held-in rows the guard touches on a shift split, and what it costs in RMSE/NLL."""

import sys

import numpy as np
import tensorflow as tf
from gpflow.keras import tf_keras

from avdgp.experiments.uncertainty.run import UncertaintySettings, _problem_data
from avdgp.training import TrainConfig, fit_model, float_type
from avdgp.training.fit import best_epoch_callbacks
from avdgp.zoo import ModelSpec, build_model
from gpflux_avdgp.core.anchors import nearest_anchor_distance, reach_weight
from gpflux_avdgp.prediction import predict_mixture

problem = sys.argv[1]
settings = UncertaintySettings(
    problems=[problem],
    models=["avdgp-ar2p:guard"],
    seeds=[0],
    epochs=30,
    rows=4000,
    data_root="/work/shared/data/uci",
)
data, scaler, _ = _problem_data(problem, 0, settings)
split = data.split
config = TrainConfig.from_preset("default", epochs=30, seed=0)
with float_type(config.dtype):
    tf_keras.utils.set_random_seed(0)
    built = build_model(
        ModelSpec(model="avdgp", rule="ar2p", seed=0, design="guard"),
        split.x_train.shape[1],
        len(split.x_train),
        inputs=split.x_train,
    )
    fit_model(
        built,
        split.x_train,
        split.y_train,
        config,
        callbacks=best_epoch_callbacks(built, split, config),
    )
    model, guard = built.model, built.model.guard
    x = tf.constant(split.x_test)
    component, gate = guard(x, training=False)
    reach = reach_weight(
        nearest_anchor_distance(x, guard.anchors), guard.reach, guard.scale
    ).numpy()
    gate = gate.numpy()
    print(
        "reach", float(guard.reach.numpy()), "variance_reach", float(guard.variance_reach.numpy())
    )
    print(
        "held-in rows",
        len(gate),
        "gate<1:",
        (gate < 1).mean().round(3),
        "reach<1:",
        (reach < 1).mean().round(3),
        "gate<0.5:",
        (gate < 0.5).mean().round(3),
        "mean share",
        (0.8 * (1 - gate)).mean().round(4),
    )
    y = np.reshape(split.y_test, [-1])

    def scores(m):
        mean, var = m.y_moments()
        return np.sqrt(np.mean((mean[:, 0] - y) ** 2)), -np.mean(
            m.log_density(np.reshape(split.y_test, [-1, 1]))
        )

    guarded = predict_mixture(model, split.x_test)
    print("guarded rmse/nll", scores(guarded))
    saved = model.guard
    model.guard = None
    print("no guard rmse/nll", scores(predict_mixture(model, split.x_test)))
    model.guard = saved
    saved_vr = float(guard.variance_reach.numpy())
    guard.variance_reach.assign(0.0)
    model.__dict__.pop("_avdgp_mixture_function", None)
    print("reach gate only rmse/nll", scores(predict_mixture(model, split.x_test)))
    guard.variance_reach.assign(saved_vr)
    # training rows: the ratio quantile measured after training
    xt = tf.constant(split.x_train)
    comp_t, _ = guard(xt, training=False)
    ratio_t = guard._variance_ratio(xt, comp_t).numpy()
    ratio_h = guard._variance_ratio(x, component).numpy()
    print(
        "ratio q99 train after training",
        np.quantile(ratio_t, 0.99).round(4),
        "held-in q99",
        np.quantile(ratio_h, 0.99).round(4),
        "followed",
        round(saved_vr, 4),
        "held-in share above followed",
        (ratio_h > saved_vr).mean().round(3),
    )
