"""The input guard: a defensive mixture of the model and an SVGP on ``x`` off the data."""

from __future__ import annotations

import gpflow
import numpy as np
import pytest
import reference
import tensorflow as tf
from gpflow.keras import tf_keras

import gpflux_avdgp
from gpflux_avdgp.callbacks import BestEpochStopping
from gpflux_avdgp.core.mixture import unpack_numpy
from gpflux_avdgp.layers.input_guard import InputGuard, guard_gp_layer
from gpflux_avdgp.optimizers import FlatAdam


def _gap_data(rng, rows: int = 60):
    """1-D rows either side of a gap ``(-0.6, 0.6)``."""
    x = np.concatenate([rng.uniform(-2, -0.6, rows // 2), rng.uniform(0.6, 2, rows // 2)])
    x = x[:, None]
    return x, np.sin(3 * x) + 0.1 * rng.standard_normal(x.shape)


def _guarded(num_data: int, input_dim: int = 1, **kwargs) -> gpflux_avdgp.AVDGPModel:
    kwargs.setdefault("guard", True)
    return gpflux_avdgp.build_avdgp(
        input_dim, [2, 1], [3, 3], num_data, gpflow.likelihoods.Gaussian(0.1), num_points=4,
        seed=0, **kwargs,
    )  # fmt: skip


@pytest.fixture(scope="module")
def trained():
    """A guarded model fitted 2 epochs on the gap data, with its data: shared by the tests that
    only read it (one fit and trace instead of one per test)."""
    x, y = _gap_data(np.random.default_rng(20261122))  # the seed of conftest.py's rng
    model = _guarded(len(x))
    model.compile(FlatAdam(0.01))
    model.fit(x, y, epochs=2, batch_size=30, verbose=0)
    return model, x, y


def _reach_gate_numpy(x, anchors, reach, scale):
    distances = np.sqrt(((x[:, None, :] - anchors[None]) ** 2).sum(-1)).min(-1)
    return np.exp(-0.5 * (np.maximum(distances - reach, 0.0) / (scale * reach)) ** 2)


def test_the_share_is_the_reach_gate_on_x_against_numpy(rng):
    x, _ = _gap_data(rng)
    guard = InputGuard(
        guard_gp_layer(1, 1, 5, len(x)), gpflow.likelihoods.Gaussian(), input_dim=1,
        num_anchors=7, keep=0.3, scale=0.5, range_gate=False,
    )  # fmt: skip
    tests = np.linspace(-4, 4, 41)[:, None]
    np.testing.assert_array_equal(guard.share(tf.constant(tests)).numpy(), np.zeros(41))
    guard.place(tf.constant(x))
    rows = np.arange(7) * len(x) // 7
    np.testing.assert_array_equal(guard.anchors.numpy(), x[rows])
    np.testing.assert_array_equal(
        guard.svgp.inducing_variable.inducing_variable.Z.numpy(), x[np.arange(5) * 60 // 5]
    )
    others = np.sort(np.sqrt(((x[:, None] - x[rows][None]) ** 2).sum(-1)).min(-1))
    others = others[others > 1e-150]  # rows that are not anchors
    reach = others[int(0.99 * (len(others) - 1))]
    assert float(guard.reach.numpy()) == pytest.approx(reach, rel=1e-12)
    expected = (1 - _reach_gate_numpy(tests, x[rows], reach, 0.5)) * (1 - 0.3)
    np.testing.assert_allclose(guard.share(tf.constant(tests)).numpy(), expected, rtol=1e-12)


def test_the_range_gate_takes_over_beyond_the_rows_range_along_one_input(rng):
    """A shift along one of two inputs stays within the anchors' reach; the range gate sees it:
    ``a_x = min(reach gate, range gate)``, the range and spread those of the placed rows."""
    x = rng.uniform(-1.0, 1.0, (400, 2))
    guard = InputGuard(
        guard_gp_layer(2, 1, 5, len(x)), gpflow.likelihoods.Gaussian(), input_dim=2,
        num_anchors=64, variance_gate=False,
    )  # fmt: skip
    tests = np.array([[0.0, 0.0], [0.0, 1.1], [-1.3, 0.0], [0.0, 6.0]])
    np.testing.assert_array_equal(guard.share(tf.constant(tests)).numpy(), np.zeros(4))
    guard.place(tf.constant(x))
    np.testing.assert_array_equal(guard.lower.numpy(), x.min(0))
    np.testing.assert_array_equal(guard.upper.numpy(), x.max(0))
    np.testing.assert_allclose(guard.spread.numpy(), x.std(0), rtol=1e-12)
    reach = _reach_gate_numpy(tests, guard.anchors.numpy(), float(guard.reach.numpy()), 0.5)
    by_range = reference.range_weight(tests, x.min(0), x.max(0), x.std(0), 0.5)
    expected = (1 - np.minimum(reach, by_range)) * 0.8
    np.testing.assert_allclose(guard.share(tf.constant(tests)).numpy(), expected, rtol=1e-12)
    assert reach[1] == 1.0 and by_range[1] < 0.95  # 0.1 beyond: within the reach, not the range
    off = InputGuard.from_config({**guard.get_config(), "range_gate": False})
    off.set_weights(guard.get_weights())
    assert off.share(tf.constant(tests[1:2])).numpy()[0] == 0.0  # without it, no share there


@pytest.mark.slow
def test_the_range_widens_to_every_training_row_not_only_the_placement_rows(rng):
    """Placement reads 1024 rows spread over the data; the training steps widen the range to
    every row's (distribution-free, a held-in row is then beyond it along one of ``D`` inputs
    with probability about ``2 D / N``)."""
    x = rng.standard_normal((3000, 2))
    y = np.sin(x[:, :1]) + 0.1 * rng.standard_normal((3000, 1))
    model = _guarded(len(x), input_dim=2)
    gpflux_avdgp.layers.place_anchors(model, x)
    placed = x[np.arange(1024) * 3000 // 1024]
    np.testing.assert_array_equal(model.guard.upper.numpy(), placed.max(0))
    assert np.all(placed.max(0) < x.max(0))  # the subset misses the extremes
    model.compile(FlatAdam(0.01))
    model.fit(x, y, epochs=1, batch_size=500, verbose=0)
    rounded = x.astype(np.float32).astype(np.float64)  # as Keras' data adapter passes them
    np.testing.assert_array_equal(model.guard.lower.numpy(), rounded.min(0))
    np.testing.assert_array_equal(model.guard.upper.numpy(), rounded.max(0))
    np.testing.assert_allclose(model.guard.spread.numpy(), placed.std(0), rtol=1e-12)


def test_the_variance_gate_follows_the_svgp_s_variance_on_training_rows():
    """``rho_r`` is the batch's 0.99 quantile of ``rho`` on the first step, then followed
    with the momentum; the gate is ``min(reach gate, clip(1 - (rho - rho_r) / (1 - rho_r)))``
    while ``rho_r <= VARIANCE_GATE_LIMIT``, the reach gate alone above it."""
    from gpflux_avdgp.core.anchors import REACH_MOMENTUM
    from gpflux_avdgp.layers.input_guard import VARIANCE_GATE_LIMIT

    x = np.concatenate([np.linspace(-2, -0.6, 30), np.linspace(0.6, 2, 30)])[:, None]
    y = np.sin(3 * x)
    guard = InputGuard(
        guard_gp_layer(1, 1, 12, len(x)), gpflow.likelihoods.Gaussian(), input_dim=1,
        num_anchors=7, range_gate=False,
    )  # fmt: skip
    guard.place(tf.constant(x))
    svgp = guard.svgp
    svgp.kernel.kernel.lengthscales.assign(0.3)  # 12 points leave holes in the data's span
    svgp.q_sqrt.assign(0.05 * svgp.q_sqrt)  # a posterior that knows its data

    def ratio(rows):
        return svgp.predict(tf.constant(rows))[1].numpy()[:, 0] / float(
            svgp.kernel.kernel.variance.numpy()
        )

    def quantile(values):
        return np.sort(values)[int(0.99 * (len(values) - 1))]

    first = quantile(ratio(x))
    guard.training_loss(tf.constant(x), tf.constant(y))
    assert float(guard.variance_reach.numpy()) == pytest.approx(first, rel=1e-12)
    svgp.q_sqrt.assign(0.5 * svgp.q_sqrt)
    second = quantile(ratio(x[:30]))
    guard.training_loss(tf.constant(x[:30]), tf.constant(y[:30]))
    followed = REACH_MOMENTUM * first + (1 - REACH_MOMENTUM) * second
    assert float(guard.variance_reach.numpy()) == pytest.approx(followed, rel=1e-12)
    assert followed <= VARIANCE_GATE_LIMIT
    tests = np.linspace(-4, 4, 41)[:, None]
    by_variance = np.clip(1 - (ratio(tests) - followed) / (1 - followed), 0, 1)
    reach = _reach_gate_numpy(tests, guard.anchors.numpy(), float(guard.reach.numpy()), 0.5)
    gate = guard(tf.constant(tests))[1].numpy()
    np.testing.assert_allclose(gate, np.minimum(reach, by_variance), rtol=1e-10, atol=1e-12)
    assert (by_variance < reach - 1e-3).any()  # the variance part acts (the reach part: above)
    guard.variance_reach.assign(0.6)  # above the limit: the SVGP does not know the data
    np.testing.assert_allclose(guard(tf.constant(tests))[1].numpy(), reach, rtol=1e-10)


def test_prediction_mixes_the_guard_in_with_its_share_against_numpy(trained):
    model, x, y = trained
    tests = tf.constant(np.concatenate([np.linspace(-4, 4, 17), x[:1, 0]])[:, None])  # a row
    guard = model.guard
    hidden = model.layers[-3](tests, training=False)
    component, gate = guard(tests, training=False)
    packed = model.layers[-2](hidden, training=False, gate=gate)
    means, variances, log_weights = unpack_numpy(packed.numpy())
    g_mean, g_var = (t.numpy() for t in guard.svgp.predict(tests))  # [N, 1] each
    share = 0.8 * (1 - gate.numpy()[:, None])
    np.testing.assert_array_equal(share[:, 0], guard.share(tests).numpy())
    mixed = gpflux_avdgp.predict_mixture(model, tests.numpy())
    np.testing.assert_allclose(
        mixed.weights, np.concatenate([np.exp(log_weights) * (1 - share), share], 1),
        rtol=1e-12, atol=1e-300,
    )  # fmt: skip
    # the same layers, traced by predict_mixture and eager here: equal to rounding
    np.testing.assert_allclose(mixed.f_means[:, :-1], means, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(mixed.f_variances[:, :-1], variances, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(mixed.f_means[:, -1], g_mean, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(mixed.f_variances[:, -1], g_var, rtol=1e-9, atol=1e-11)
    assert share.max() == pytest.approx(0.8) and share.min() == 0.0


def test_beyond_the_reach_the_last_layer_reverts_to_its_prior(trained):
    """The gate on x caps the last layer's reversion weight: where it is 0 the layer's
    components are its prior's, mean 0 (no mean function) and the kernel's variance."""
    model, x, y = trained
    far = np.array([[-30.0], [30.0]])
    assert not model.guard(tf.constant(far))[1].numpy().any()
    mixed = gpflux_avdgp.predict_mixture(model, far)
    prior = float(model.layers[-2].kernel.variance.numpy())
    np.testing.assert_allclose(mixed.f_means[:, :-1], 0.0, atol=1e-100)  # sqrt(tiny) m
    np.testing.assert_allclose(mixed.f_variances[:, :-1], prior, rtol=1e-12)
    hidden = model.layers[-3](tf.constant(far), training=False)
    ungated = unpack_numpy(model.layers[-2](hidden, training=False).numpy())
    assert np.abs(ungated[0]).min() > 0.0  # the test would hold without the gate otherwise


@pytest.mark.slow
def test_within_the_reach_the_prediction_is_the_model_s_to_the_bit(trained):
    model, x, y = trained
    inside = x[model.guard.share(tf.constant(x)).numpy() == 0]
    assert len(inside) >= 0.9 * len(x)
    rows = np.concatenate([inside, [[0.0]]])  # and the gap's middle, where the guard acts
    guarded = model.predict(rows, verbose=0)
    guard, model.guard = model.guard, None  # drops the traced functions
    try:
        plain = model.predict(rows, verbose=0)
        assert gpflux_avdgp.predict_mixture(model, rows).weights.shape[1] == 4  # S, no guard
    finally:
        model.guard = guard  # the model is shared (the module's fixture)
    assert gpflux_avdgp.predict_mixture(model, rows).weights.shape[1] == 5
    for key in plain:
        np.testing.assert_array_equal(guarded[key][:-1], plain[key][:-1])
        assert guarded[key][-1] != plain[key][-1]


@pytest.mark.slow
def test_the_guard_trains_on_its_own_elbo_and_not_through_the_model_s_likelihood(rng):
    x, y = _gap_data(rng)
    model = _guarded(len(x))
    model.compile(FlatAdam(0.01))
    model.fit(x, y, epochs=1, batch_size=60, verbose=0)  # places, builds the optimizer
    guard = model.guard
    noise = guard.likelihood.variance
    with tf.GradientTape(persistent=True) as tape:
        guard_loss = guard.training_loss(tf.constant(x), tf.constant(y))
        model_loss = model.compute_loss(
            x, tf.constant(y), model(tf.constant(x), training=True), None
        )
    model_noise = model.likelihood.variance.unconstrained_variable
    assert tape.gradient(guard_loss, model_noise) is None
    for variable in guard.trainable_variables:
        assert tape.gradient(model_loss, variable) is None
    # the data term against the Gaussian expected log likelihood in closed form
    mean, var = (t.numpy() for t in guard.svgp.predict(tf.constant(x)))
    sigma2 = float(noise.numpy())
    expected = 0.5 * np.log(2 * np.pi * sigma2) + ((y - mean) ** 2 + var) / (2 * sigma2)
    kl = float(guard.svgp.prior_kl().numpy()) / len(x)
    assert float(guard_loss) == pytest.approx(expected.mean() + kl, rel=1e-10)
    before = [v.numpy().copy() for v in (guard.likelihood.variance.unconstrained_variable,
                                         guard.svgp.q_mu)]  # fmt: skip
    model.fit(x, y, epochs=1, batch_size=60, verbose=0)
    after = [guard.likelihood.variance.unconstrained_variable.numpy(), guard.svgp.q_mu]
    for old, new in zip(before, after):
        assert not np.array_equal(old, np.asarray(new))


@pytest.mark.parametrize(
    "path", ["model.keras", pytest.param("saved_model", marks=pytest.mark.slow)]
)  # a SavedModel folder traces every layer: slow, as in tests/library/io/test_saving.py
def test_a_saved_guarded_model_reloads_with_its_guard(trained, tmp_path, path):
    model, x, y = trained
    tests = np.linspace(-4, 4, 9)[:, None]
    expected = model.predict(tests, verbose=0)
    model.save(tmp_path / path)
    loaded = gpflux_avdgp.load_model(tmp_path / path)
    assert loaded.guard is not None and loaded.guard.placed
    got = loaded.predict(tests, verbose=0)
    for key in expected:
        np.testing.assert_allclose(got[key], expected[key], rtol=1e-12)


@pytest.mark.slow
def test_a_guarded_classifier_fits_and_predicts_probabilities(rng):
    x = rng.normal(size=(40, 2))
    labels = (x[:, :1] > 0).astype(float)
    model = gpflux_avdgp.build_avdgp(
        2, [2, 1], 3, 40, gpflow.likelihoods.Bernoulli(), num_points=4, seed=0, guard=True
    )
    model.compile(FlatAdam(0.01))
    model.fit(x, labels, epochs=2, batch_size=20, verbose=0)
    far = model.predict(np.array([[30.0, 30.0]]), verbose=0)["probabilities"]
    assert far.shape == (1, 1) and 0.0 < float(far[0, 0]) < 1.0
    assert model.guard.share(tf.constant([[30.0, 30.0]], tf.float64)).numpy()[0] == 0.8


def test_build_avdgp_passes_the_guard_s_options():
    model = gpflux_avdgp.build_avdgp(
        2, [2, 1], 3, 40, gpflow.likelihoods.Gaussian(), seed=0,
        guard={
            "num_anchors": 16, "num_inducing": 8, "variance_gate": False, "keep": 0.1,
            "range_gate": False,
        },
    )  # fmt: skip
    guard = model.guard
    assert guard.anchors.shape == (16, 2) and not guard.variance_gate and guard.keep == 0.1
    assert not guard.range_gate
    default = gpflux_avdgp.build_avdgp(2, [2, 1], 3, 40, gpflow.likelihoods.Gaussian(), guard=True)
    assert default.guard.range_gate and default.guard.variance_gate
    assert guard.svgp.inducing_variable.inducing_variable.Z.shape == (8, 2)
    assert guard.likelihood is not model.likelihood
    with pytest.raises(TypeError, match="num_anchor"):
        gpflux_avdgp.build_avdgp(
            2, [2, 1], 3, 40, gpflow.likelihoods.Gaussian(), guard={"num_anchor": 16}
        )


@pytest.fixture(scope="module")
def lean_guard(tmp_path_factory):
    """A guard with its kernel fixed and a mean-field ``q(u)``, fitted two epochs on the gap data,
    saved and loaded, with its values before the fit: shared by the tests of the two options
    (each reads only its own part of the guard)."""
    x, y = _gap_data(np.random.default_rng(20261122))  # the seed of conftest.py's rng
    model = gpflux_avdgp.build_avdgp(
        1, [2, 1], 4, len(x), gpflow.likelihoods.Gaussian(), seed=0,
        guard={"num_anchors": 8, "num_inducing": 6, "train_kernel": False, "mean_field": True},
    )  # fmt: skip
    svgp = model.guard.svgp
    before = {
        "trainable": list(model.trainable_variables),
        "q_mu": svgp.q_mu.numpy().copy(),
        "q_sqrt": svgp.q_sqrt.numpy().copy(),
    }
    model.compile(FlatAdam(0.05))
    model.fit(x, y, epochs=2, batch_size=30, verbose=0)
    path = tmp_path_factory.mktemp("lean_guard") / "model.keras"
    model.save(path)
    return model, gpflux_avdgp.load_model(path), before


@pytest.mark.slow
def test_a_guard_with_its_kernel_fixed_trains_the_rest_and_saves_the_kernel_fixed(lean_guard):
    model, loaded, before = lean_guard
    kernel = model.guard.svgp.kernel.kernel  # GPflux's SharedIndependent holds the Matern52
    assert not kernel.trainable_parameters
    assert float(kernel.lengthscales.numpy()) == 1.0 and float(kernel.variance.numpy()) == 1.0
    assert not np.array_equal(before["q_mu"], model.guard.svgp.q_mu.numpy())
    assert not loaded.guard.svgp.kernel.kernel.trainable_parameters
    trained = gpflux_avdgp.build_avdgp(1, [2, 1], 4, 60, gpflow.likelihoods.Gaussian(), guard=True)
    assert len(trained.guard.svgp.kernel.kernel.trainable_parameters) == 2


@pytest.mark.slow
def test_a_mean_field_guard_trains_its_standard_deviations_and_saves_them(lean_guard):
    model, loaded, before = lean_guard
    q_sqrt = model.guard.svgp.q_sqrt
    assert q_sqrt.shape == (6, 1)  # [M, L] standard deviations, not GPflux's [L, M, M]
    assert any(v is q_sqrt.unconstrained_variable for v in before["trainable"])
    np.testing.assert_allclose(before["q_sqrt"], 1.0, rtol=1e-12)  # GPflux starts at I
    assert not np.allclose(q_sqrt.numpy(), 1.0)
    np.testing.assert_array_equal(loaded.guard.svgp.q_sqrt.numpy(), q_sqrt.numpy())


def test_a_frozen_guarded_model_keeps_the_guard_s_weights_among_its_non_trainable_ones():
    model = _guarded(40)
    count = len(model.weights)
    model.trainable = False
    assert not model.trainable_weights and len(model.non_trainable_weights) == count


def test_the_guard_refuses_bad_options():
    gp = guard_gp_layer(1, 1, 3, 10)
    with pytest.raises(ValueError, match="keep, scale"):
        InputGuard(gp, gpflow.likelihoods.Gaussian(), input_dim=1, keep=1.0)
    with pytest.raises(TypeError, match="svgp: expected a GPflux GPLayer"):
        InputGuard("svgp", gpflow.likelihoods.Gaussian(), input_dim=1)
    with pytest.raises(TypeError, match="guard: expected an InputGuard"):
        gpflux_avdgp.AVDGPModel([tf_keras.Input((1,))], guard="yes")


@pytest.mark.slow  # two XLA compilations, about a minute
def test_a_guarded_model_trains_under_xla_as_without(rng):
    """The guard's step compiles with XLA (its quantile is a sort and a gather) and gives the
    eager graph's first-step loss."""
    x, y = _gap_data(rng)
    losses = []
    for jit_compile in (False, True):
        model = _guarded(len(x))
        model.compile(FlatAdam(0.01), jit_compile=jit_compile)
        history = model.fit(x, y, epochs=1, batch_size=60, verbose=0)
        losses.append(history.history["loss"][0])
        assert float(model.guard.variance_reach.numpy()) > 0.0
    assert losses[1] == pytest.approx(losses[0], rel=1e-6)


def test_a_guard_trained_every_kth_step_gets_its_gradients_then_and_zeros_otherwise(rng):
    x, y = _gap_data(rng)
    guard = _guarded(len(x), guard={"train_every": 3}).guard
    guard.place(x)
    x, y = tf.constant(x), tf.constant(y)
    with tf.GradientTape() as tape:
        expected_loss = guard.training_loss(x, y)
    expected = tape.gradient(expected_loss, guard.trainable_variables)
    for step in (0, 3, 6):
        loss, gradients = guard.training_gradients(x, y, None, tf.constant(step, tf.int64))
        assert float(loss) == pytest.approx(float(expected_loss), rel=1e-12)
        for got, want in zip(gradients, expected):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10)
    for step in (1, 2, 4):
        loss, gradients = guard.training_gradients(x, y, None, tf.constant(step, tf.int64))
        assert float(loss) == 0.0 and all(not np.any(g.numpy()) for g in gradients)
    assert len(gradients) == len(guard.trainable_variables)


@pytest.mark.slow
def test_a_guard_trained_every_kth_step_is_left_alone_in_the_others_but_its_range_widens(rng):
    x, y = _gap_data(rng)
    model = _guarded(len(x), guard={"train_every": 1000})
    model.compile(FlatAdam(0.05))
    gpflux_avdgp.layers.place_anchors(model, x[:20])  # placed on the left of the gap only
    model.optimizer.build(model.trainable_variables)
    model.optimizer.iterations.assign(1)  # steps 1..4: none is a multiple of 1000
    guard_before = [v.numpy().copy() for v in model.guard.trainable_variables]
    layers_before = [v.numpy().copy() for v in model.layers[0].trainable_variables]
    model.fit(x, y, epochs=2, batch_size=30, verbose=0)
    for old, new in zip(guard_before, model.guard.trainable_variables):
        np.testing.assert_array_equal(old, new.numpy())  # Adam moves nothing without a gradient
    assert any(
        not np.array_equal(old, new.numpy())
        for old, new in zip(layers_before, model.layers[0].trainable_variables)
    )
    assert float(model.guard.upper.numpy()[0]) == pytest.approx(x.max())
    every_step = _guarded(len(x))
    assert every_step.guard.train_every == 1
    config = model.guard.get_config()
    assert InputGuard.from_config(config).train_every == 1000
    with pytest.raises(ValueError, match="train_every"):
        InputGuard(guard_gp_layer(1, 1, 3, 10), gpflow.likelihoods.Gaussian(), input_dim=1,
                   train_every=0)  # fmt: skip


@pytest.mark.slow
def test_a_frozen_guarded_model_fits_without_moving_its_guard(rng):
    x, y = _gap_data(rng)
    model = _guarded(len(x))
    model.trainable = False  # its trainable_weights leave the guard's out: no step for it
    model.compile(FlatAdam(0.05))
    gpflux_avdgp.layers.place_anchors(model, x)  # places the guard's inducing points too
    before = [v.numpy().copy() for v in model.guard.svgp.variables]
    model.fit(x, y, epochs=1, batch_size=30, verbose=0)
    for old, new in zip(before, model.guard.svgp.variables):
        np.testing.assert_array_equal(old, new.numpy())


class _Score(tf_keras.callbacks.Callback):
    """Writes a made-up validation score into the logs: the best epoch is the second."""

    def on_epoch_end(self, epoch, logs=None):
        logs["score"] = [3.0, 1.0, 2.0, 4.0][epoch]


class _Weights(tf_keras.callbacks.Callback):
    """Keeps the model's weights after every epoch."""

    def __init__(self):
        super().__init__()
        self.after_epoch = []

    def on_epoch_end(self, epoch, logs=None):
        self.after_epoch.append(self.model.get_weights())


@pytest.mark.parametrize(
    "stopping", ["BestEpochStopping", pytest.param("EarlyStopping", marks=pytest.mark.slow)]
)
def test_the_best_epoch_restored_leaves_the_guard_at_its_last_weights(rng, stopping):
    """``BestEpochStopping`` gives the layers the best epoch's weights and the guard (which has
    no share in the score) its last; Keras' ``EarlyStopping`` cuts the guard to the best epoch."""
    x, y = _gap_data(rng)
    model = _guarded(len(x))
    model.compile(FlatAdam(0.05))
    callback = (
        BestEpochStopping if stopping == "BestEpochStopping" else tf_keras.callbacks.EarlyStopping
    )
    kept = _Weights()
    stop = callback("score", patience=10, restore_best_weights=True)
    model.fit(x, y, epochs=4, batch_size=30, verbose=0, callbacks=[_Score(), kept, stop])
    guard = np.array([any(v is w for w in model.guard.weights) for v in model.weights])
    best, last = kept.after_epoch[1], kept.after_epoch[3]
    moved = [not np.array_equal(b, e) for b, e, g in zip(best, last, guard) if g]
    assert sum(moved) >= 3  # the guard trained after the best epoch
    expected_guard = last if stopping == "BestEpochStopping" else best
    for weight, is_guard, at_best, at_guard in zip(
        model.get_weights(), guard, best, expected_guard
    ):
        np.testing.assert_array_equal(weight, at_guard if is_guard else at_best)


@pytest.mark.slow
def test_best_epoch_stopping_restores_a_model_without_a_guard_as_early_stopping_does(rng):
    x, y = _gap_data(rng)
    model = _guarded(len(x), guard=None)
    model.compile(FlatAdam(0.05))
    kept = _Weights()
    stop = BestEpochStopping("score", patience=10, restore_best_weights=True)
    model.fit(x, y, epochs=4, batch_size=30, verbose=0, callbacks=[_Score(), kept, stop])
    for weight, at_best in zip(model.get_weights(), kept.after_epoch[1], strict=True):
        np.testing.assert_array_equal(weight, at_best)
