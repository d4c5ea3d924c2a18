"""AmortizedGPLayer's prior reversion (``num_anchors``) and the default model off the data."""

from __future__ import annotations

import gpflow
import numpy as np
import pytest
import reference
import tensorflow as tf
from gpflow.keras import tf_keras

import gpflux_avdgp
from gpflux_avdgp import AmortizedGPLayer
from gpflux_avdgp.core.anchors import anchor_weight
from gpflux_avdgp.core.mixture import unpack_numpy
from gpflux_avdgp.optimizers import FlatAdam

#: The default preset's prior reversion, spelled out (the tests hold without the preset too).
REVERTING = dict(whiten=True, num_anchors=32, hidden_mean_function="linear")


def test_prior_reversion_needs_the_whitened_q():
    with pytest.raises(ValueError) as caught:
        AmortizedGPLayer(1, 4, 100, num_anchors=8, whiten=False)
    assert str(caught.value) == (
        "num_anchors: prior reversion acts on the whitened q(u); pass whiten=True with "
        "num_anchors=8, or num_anchors=0"
    )


def test_a_graph_traced_before_placement_places_on_its_first_batch_and_only_there(rng):
    """The fallback of any model type: rows spread over the first training batch
    (``floor(k N / K)``: rows 0, 1, 3, 4 of 6), then never again."""
    layer = AmortizedGPLayer(2, 3, 100, num_anchors=4, whiten=True, seed=0)
    first, second = rng.normal(size=(6, 2)), rng.normal(size=(6, 2))
    layer(tf.constant(first), training=False)  # prediction moves nothing
    np.testing.assert_array_equal(layer.anchors.numpy(), np.zeros((4, 2)))
    step = tf.function(lambda inputs: layer(inputs, training=True))
    step(tf.constant(first))
    np.testing.assert_array_equal(layer.anchors.numpy(), first[[0, 1, 3, 4]])
    step(tf.constant(second))
    np.testing.assert_array_equal(layer.anchors.numpy(), first[[0, 1, 3, 4]])


def test_a_batch_smaller_than_the_anchors_is_repeated(rng):
    layer = AmortizedGPLayer(1, 3, 100, num_anchors=5, whiten=True, seed=0)
    rows = rng.normal(size=(2, 1))
    layer(tf.constant(rows), training=True)
    np.testing.assert_array_equal(layer.anchors.numpy(), rows[[0, 0, 0, 1, 1]])


def _reverting_model(num_data: int, **kwargs) -> gpflux_avdgp.AVDGPModel:
    model = gpflux_avdgp.build_avdgp(
        1,
        [2, 1],
        [3, 3],
        num_data,
        gpflow.likelihoods.Gaussian(),
        num_points=4,
        seed=0,
        **{**REVERTING, "num_anchors": 8, **kwargs},
    )
    model.compile(tf_keras.optimizers.SGD(0.0))  # the weights stay where fit found them
    return model


@pytest.mark.slow
@pytest.mark.parametrize("batch_size", [7, 50])
def test_fit_places_the_anchors_over_the_whole_training_set_whatever_the_batch(rng, batch_size):
    """``AVDGPModel.fit`` places the anchors before training on rows spread over all of ``x``
    (sorted here: the first batch alone would put every anchor at one end), so the batch size,
    the replicas of a strategy and the steps per call cannot change them."""
    x = np.sort(rng.uniform(-2, 2, (50, 1)), axis=0)
    model = _reverting_model(len(x))
    model.fit(x, np.sin(x), batch_size=batch_size, epochs=1, shuffle=False, verbose=0)
    first = model.layers[0]
    np.testing.assert_array_equal(first.anchors.numpy(), x[np.arange(8) * 50 // 8])
    assert int(first.anchors_placed.numpy()) == 1


@pytest.mark.slow
def test_the_training_graph_after_placement_has_no_placement_ops(rng):
    """Placed before ``fit`` traces its step, the step reads the anchors and never assigns
    them: no per-step placement ops, nothing to order between steps or replicas (the reach
    gate's reach, a running statistic, is the one assign)."""
    x = rng.normal(size=(20, 1))
    model = _reverting_model(len(x))
    model.fit(x, np.sin(x), batch_size=10, epochs=1, verbose=0)
    graph = model.train_function.get_concrete_function(
        iter(tf.data.Dataset.from_tensor_slices((x, np.sin(x))).batch(10))
    ).graph
    assigns = [
        op.name
        for op in graph.get_operations()
        if "prior_reversion" in op.name and op.type.startswith("Assign")
    ]
    assert len(assigns) == 2 and all("/reach_update/" in name for name in assigns), assigns


@pytest.mark.slow
def test_fit_reads_the_pipeline_only_to_train_when_nothing_needs_placing(rng):
    """``fit`` of a model without anchors (the paper's layers) or with anchors already placed
    reads a dataset once per epoch, as Keras does: an extra read would advance a reshuffling
    dataset for nothing."""
    x = rng.normal(size=(40, 1))
    reads = []

    def rows():
        reads.append(1)
        yield x[:20], np.sin(x[:20])
        yield x[20:], np.sin(x[20:])

    spec = (tf.TensorSpec([None, 1], tf.float64), tf.TensorSpec([None, 1], tf.float64))
    data = tf.data.Dataset.from_generator(rows, output_signature=spec)
    paper = gpflux_avdgp.build_avdgp(
        1, [2, 1], [3, 3], 40, gpflow.likelihoods.Gaussian(), num_points=4, preset="paper"
    )
    paper.compile(FlatAdam(0.01))
    paper.fit(data, epochs=1, verbose=0)
    assert len(reads) == 1
    placed = _reverting_model(len(x))
    assert gpflux_avdgp.layers.place_anchors(placed, x) is True
    placed.fit(data, epochs=1, verbose=0)
    assert len(reads) == 2
    assert gpflux_avdgp.layers.place_anchors(placed, data) is False
    assert len(reads) == 2


def test_place_anchors_places_each_layer_on_its_own_inputs_once(rng):
    """The second layer's anchors are the first layer's outputs (its amortization inputs) at
    the spread rows, in prediction mode: the draw counter and every other weight stay."""
    x = rng.normal(size=(40, 1))
    model = _reverting_model(len(x), rule="ar2")
    before = {w.name: w.numpy() for w in model.weights if "anchor" not in w.name}
    assert gpflux_avdgp.layers.place_anchors(model, x) is True
    assert gpflux_avdgp.layers.place_anchors(model, x + 5.0) is False  # placed: left alone
    after = {w.name: w.numpy() for w in model.weights if "anchor" not in w.name}
    for name, value in before.items():
        np.testing.assert_array_equal(after[name], value, err_msg=name)
    first, second = model.layers[0], model.layers[1]
    rows = np.arange(8) * 40 // 8
    np.testing.assert_array_equal(first.anchors.numpy(), x[rows])
    hidden = unpack_numpy(first(tf.constant(x[rows])).numpy())[0][:, 0]  # AR2: the means
    np.testing.assert_allclose(second.anchors.numpy(), hidden, rtol=1e-12)


def test_far_from_the_anchors_the_layer_is_its_prior(rng):
    """``a = 0``: mean ``m(x)`` and variance ``k(x, x)``, whatever the inference network says."""
    layer = AmortizedGPLayer(2, 3, 100, num_anchors=4, whiten=True, mean_function="linear")
    layer(tf.constant(rng.normal(size=(8, 1))), training=True)
    far = np.array([[60.0], [-80.0]])
    means, variances, _ = unpack_numpy(layer(tf.constant(far)).numpy())
    expected_mean = far @ layer.mean_function.A.numpy() + layer.mean_function.b.numpy()
    np.testing.assert_allclose(means[:, 0], expected_mean, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(variances[:, 0], layer.kernel.variance.numpy(), rtol=1e-12)
    assert float(layer.losses[-1]) == pytest.approx(0.0, abs=1e-12)  # KL of the prior


@pytest.fixture(scope="module")
def saved_and_loaded(tmp_path_factory):
    """A three-layer model with 32 anchors, the reach gate at 0.5 and the fixed identity hidden
    means, fitted three epochs, saved and loaded, with its rows: shared by the tests that read
    what the file keeps (one fit, save and load instead of one per test)."""
    x = np.random.default_rng(20261122).normal(size=(50, 1))  # the seed of conftest.py's rng
    model = gpflux_avdgp.build_avdgp(
        1, [3, 2, 1], [3, 3, 3], 50, gpflow.likelihoods.Gaussian(), num_points=4, seed=0,
        **{**REVERTING, "reach_gate": 0.5, "hidden_mean_function": "identity"},
    )  # fmt: skip
    model.compile(FlatAdam(0.1))
    model.fit(x, np.sin(3 * x), batch_size=25, epochs=3, verbose=0)
    path = tmp_path_factory.mktemp("prior_reversion") / "m.keras"
    model.save(path)
    return model, gpflux_avdgp.load_model(path), x


@pytest.mark.slow
def test_the_config_keeps_the_anchors_and_a_file_reloads_them(saved_and_loaded):
    model, loaded, x = saved_and_loaded
    layers = [layer for layer in model.layers if isinstance(layer, AmortizedGPLayer)]
    assert [layer.get_config()["num_anchors"] for layer in layers] == [32, 32, 32]
    for before, after in zip(layers, [layer for layer in loaded.layers if layer.weights]):
        np.testing.assert_array_equal(after.anchors.numpy(), before.anchors.numpy())
    np.testing.assert_allclose(loaded.predict(x, verbose=0)["std"], model.predict(x)["std"])


@pytest.mark.slow
def test_hidden_mean_function_is_every_layer_but_the_last():
    model = gpflux_avdgp.build_avdgp(
        1, [2, 2, 1], 3, 50, gpflow.likelihoods.Gaussian(), hidden_mean_function="linear"
    )
    layers = [layer for layer in model.layers if isinstance(layer, AmortizedGPLayer)]
    assert [layer.get_config()["mean_function"] for layer in layers] == ["linear"] * 2 + [None]


def test_hidden_mean_function_per_hidden_layer():
    model = gpflux_avdgp.build_avdgp(
        1, [2, 2, 1], 3, 50, gpflow.likelihoods.Gaussian(),
        hidden_mean_function=("identity", "linear"),
    )  # fmt: skip
    layers = [layer for layer in model.layers if isinstance(layer, AmortizedGPLayer)]
    assert [layer.get_config()["mean_function"] for layer in layers] == [
        "identity", "linear", None
    ]  # fmt: skip
    first, second = (layer.mean_function for layer in layers[:2])
    assert [len(first.trainable_variables), len(second.trainable_variables)] == [0, 2]
    with pytest.raises(ValueError, match=r"hidden_mean_function: expected one per hidden layer"):
        gpflux_avdgp.build_avdgp(
            1, [2, 2, 1], 3, 50, gpflow.likelihoods.Gaussian(), hidden_mean_function=["linear"]
        )


def _layer_options(**kwargs) -> list[tuple]:
    model = gpflux_avdgp.build_avdgp(1, [2, 2, 1], 3, 50, gpflow.likelihoods.Gaussian(), **kwargs)
    return [
        (layer.num_anchors, layer.whiten, layer.get_config()["mean_function"])
        for layer in model.layers
        if isinstance(layer, AmortizedGPLayer)
    ]


def test_the_default_reverts_to_the_prior_and_the_paper_does_not():
    assert _layer_options() == [(32, True, "linear")] * 2 + [(32, True, None)]
    assert _layer_options(preset="paper") == [(0, False, None)] * 3


@pytest.mark.slow
def test_a_mean_function_given_for_all_layers_wins_over_the_presets_hidden_one():
    assert _layer_options(mean_function="linear") == [(32, True, "linear")] * 3
    assert _layer_options(mean_function=None) == [(32, True, None)] * 3
    assert _layer_options(hidden_mean_function=None) == [(32, True, None)] * 3


@pytest.mark.slow
def test_the_default_gates_by_reach_unless_the_anchors_are_given_away():
    def gates(**kwargs):
        model = gpflux_avdgp.build_avdgp(1, [2, 1], 3, 50, gpflow.likelihoods.Gaussian(), **kwargs)
        return [layer.reach_gate for layer in model.layers if isinstance(layer, AmortizedGPLayer)]

    assert gates() == [1.0, 1.0]
    assert gates(reach_gate=None) == [None, None]
    assert gates(reach_gate=0.5) == [0.5, 0.5]
    assert gates(num_anchors=0, whiten=False) == [None, None]
    assert gates(preset="paper") == [None, None]
    with pytest.raises(ValueError, match="reach_gate: expected a scale > 0 with num_anchors > 0"):
        gates(num_anchors=0, reach_gate=1.0)


def test_the_paper_layers_under_the_default_preset_name_the_options():
    with pytest.raises(ValueError, match="pass whiten=True with num_anchors=32, or num_anchors=0"):
        _layer_options(whiten=False)
    assert (
        _layer_options(whiten=False, num_anchors=0, hidden_mean_function=None)
        == [(0, False, None)] * 3
    )


def test_the_default_model_predicts_its_prior_far_from_its_data():
    """README's model (prior reversion and linear hidden means by default) on ``sin(3 x)``, ``x`` in
    [-2, 2]: at ``x = 30`` every layer is back to its prior (the linear hidden means carry the
    input far for the next layer), so the predictive variance of ``y`` is the last kernel's
    variance plus the noise; inside the data it is smaller (the measured profile is in
    docs/uncertainty.md)."""
    tf_keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, (300, 1))
    y = np.sin(3 * x) + 0.1 * rng.standard_normal(x.shape)
    likelihood = gpflow.likelihoods.Gaussian(0.1)
    model = gpflux_avdgp.build_avdgp(1, [4, 4, 1], [8, 4, 4], len(x), likelihood, seed=0)
    model.compile(FlatAdam(0.01))
    model.fit(x, y, batch_size=100, epochs=10, verbose=0)
    std = model.predict(np.array([[0.0], [1.0], [30.0]]), verbose=0)["std"][:, 0]
    prior = model.layers[-2].kernel.variance.numpy() + likelihood.variance.numpy()
    assert std[-1] ** 2 == pytest.approx(prior, rel=1e-9)
    assert std[:2].max() < 0.8 * std[-1], std


@pytest.mark.slow
def test_the_identity_hidden_mean_is_fixed_through_training_and_a_file(saved_and_loaded, rng):
    """``"identity"``: ``m(F) = F A`` with ``A = I[D_in, D_out]``, not trained, and saved by
    name (a reloaded model has the same fixed map)."""
    model, loaded, x = saved_and_loaded  # trained three epochs at a learning rate of 0.1
    layers = [layer for layer in model.layers if isinstance(layer, AmortizedGPLayer)]
    assert [layer.get_config()["mean_function"] for layer in layers] == ["identity"] * 2 + [None]
    for layer in layers[:2]:
        mean = layer.mean_function
        assert not any(v.trainable for v in mean.trainable_variables + mean.variables)
        np.testing.assert_array_equal(mean.A.numpy(), np.eye(layer.input_dim, layer.units))
        np.testing.assert_array_equal(mean.b.numpy(), np.zeros(layer.units))
        points = rng.normal(size=(4, layer.input_dim))
        np.testing.assert_array_equal(mean(points).numpy(), points @ np.eye(*mean.A.shape))
    loaded_layers = [layer for layer in loaded.layers if isinstance(layer, AmortizedGPLayer)]
    for layer in loaded_layers[:2]:
        assert layer.get_config()["mean_function"] == "identity"
        np.testing.assert_array_equal(
            layer.mean_function.A.numpy(), np.eye(*layer.mean_function.A.shape)
        )
    np.testing.assert_allclose(loaded.predict(x, verbose=0)["std"], model.predict(x)["std"])


@pytest.mark.slow
def test_a_trained_linear_mean_moves_where_the_identity_does_not(rng):
    """The fixed map is the option's whole point: the same fit moves ``"linear"``'s ``A``."""
    model = gpflux_avdgp.build_avdgp(
        1, [3, 1], [3, 3], 50, gpflow.likelihoods.Gaussian(), hidden_mean_function="linear"
    )
    x = rng.normal(size=(50, 1))
    model.compile(FlatAdam(0.1))
    model.fit(x, np.sin(3 * x), batch_size=25, epochs=3, verbose=0)
    assert not np.array_equal(model.layers[0].mean_function.A.numpy(), np.eye(1, 3))


def test_the_reach_is_measured_where_the_anchors_are_placed_then_follows_training(rng):
    from gpflux_avdgp.core.anchors import REACH_MOMENTUM

    x = np.concatenate([rng.uniform(-2.0, -0.6, (60, 1)), rng.uniform(0.6, 2.0, (60, 1))])
    model = gpflux_avdgp.build_avdgp(
        1, [1], 3, len(x), gpflow.likelihoods.Gaussian(), num_anchors=8, reach_gate=1.0, seed=0
    )
    layer = model.layers[0]
    gpflux_avdgp.layers.place_anchors(model, x)
    assert float(layer.anchor_reach) == pytest.approx(
        reference.reach_of(x, layer.anchors.numpy()), rel=1e-12
    )
    before, batch = float(layer.anchor_reach), x[:50]
    layer(tf.constant(batch), training=True)
    expected = REACH_MOMENTUM * before + (1 - REACH_MOMENTUM) * reference.reach_of(
        batch, layer.anchors.numpy()
    )
    assert float(layer.anchor_reach) == pytest.approx(expected, rel=1e-12)
    layer(tf.constant(batch))  # prediction leaves it
    assert float(layer.anchor_reach) == pytest.approx(expected, rel=1e-12)
    with pytest.raises(tf.errors.InvalidArgumentError, match="inputs x of"):
        layer(tf.constant(np.full((5, 1), np.nan)), training=True)  # refused before it moves
    assert float(layer.anchor_reach) == pytest.approx(expected, rel=1e-12)


def test_a_frozen_layer_keeps_its_reach_as_batch_normalization_keeps_its_moments(rng):
    """Issue 74, row 7: ``layer.trainable = False`` then a training call moved the reach; a
    frozen layer keeps it (the control: the same call moves it when trainable)."""
    x = rng.uniform(-2.0, 2.0, (80, 1))
    model = gpflux_avdgp.build_avdgp(
        1, [1], 3, len(x), gpflow.likelihoods.Gaussian(), num_anchors=8, reach_gate=1.0, seed=0
    )
    layer = model.layers[0]
    gpflux_avdgp.layers.place_anchors(model, x)
    placed = float(layer.anchor_reach)
    layer.trainable = False
    layer(tf.constant(x[:30]), training=True)
    assert float(layer.anchor_reach) == placed
    layer.trainable = True
    layer(tf.constant(x[:30]), training=True)
    assert float(layer.anchor_reach) != placed


def test_with_fewer_rows_than_anchors_training_keeps_the_gaps_between_rows_in_reach():
    """Anchors placed on ``N <= K`` rows move off them in training; the reach stays half their
    spacing, so the middle between neighbouring rows keeps the gate's weight near 1."""
    x = np.linspace(-2.0, 2.0, 6)[:, None]
    model = gpflux_avdgp.build_avdgp(
        1, [1], 3, len(x), gpflow.likelihoods.Gaussian(), num_anchors=8, reach_gate=1.0, seed=0
    )
    layer = model.layers[0]
    gpflux_avdgp.layers.place_anchors(model, x)
    placed = layer.anchors.numpy().copy()
    model.compile(FlatAdam(0.01))
    model.fit(x, np.sin(x), batch_size=len(x), epochs=10, verbose=0)
    anchors = layer.anchors.numpy()
    assert np.abs(anchors - placed).max() > 1e-3  # training moved them off the rows
    middles = 0.5 * (x[1:] + x[:-1])
    gate = reference.reach_weight(middles, anchors, float(layer.anchor_reach), 1.0)
    assert gate.min() > 0.9, gate


def test_the_reach_gate_reverts_beyond_the_training_rows_reach(rng):
    """Rows on both sides of a gap the kernel spans: with ``reach_gate`` the gap's middle is
    (nearly) the prior, blended by the gate's weight, and a training row keeps the kernel's
    weight alone."""
    x = np.concatenate([np.linspace(-2.0, -0.6, 40), np.linspace(0.6, 2.0, 40)])[:, None]
    points = tf.constant([[0.0], [-2.0]], tf.float64)  # the gap's middle, a training row
    layers, marginals = [], []
    for gate in (None, 1.0):
        layer = AmortizedGPLayer(
            1, 3, 100, num_anchors=16, whiten=True, reach_gate=gate, seed=1,
            kernel=gpflow.kernels.Matern52(lengthscales=2.0),
        )  # fmt: skip
        model = tf_keras.Sequential([tf_keras.Input((1,), dtype=tf.float64), layer])
        gpflux_avdgp.layers.place_anchors(model, x)
        weights = np.random.default_rng(7)  # the same network in both layers, q(u) not the prior
        for weight in layer.inference.trainable_weights:
            weight.assign(0.5 * weights.standard_normal(weight.shape))
        layers.append(layer)
        marginals.append(unpack_numpy(layer(points).numpy())[:2])
    (mean, var), (gated_mean, gated_var) = marginals
    variance = layers[0].kernel.variance.numpy()
    assert abs(mean[0, 0, 0]) > 1e-3 and var[0, 0, 0] < 0.9 * variance  # q(u) kept in the gap
    # q from the plain layer's kernel weight, then blended by the gated layer's min(a_k, a_r)
    plain, gated = (anchor_weight(one.kernel, points, one.anchors).numpy() for one in layers)
    assert plain[0] > 0.9 and gated[0] > 0.9  # the kernel spans the gap
    gate = reference.reach_weight(
        points.numpy(), layers[1].anchors.numpy(), float(layers[1].anchor_reach), 1.0
    )
    assert gate[0] < 0.01 and gate[1] == 1.0
    weight = np.minimum(gated, gate)
    q_mean = mean[:, 0, 0] / np.sqrt(plain)
    q_var = (var[:, 0, 0] - (1 - plain) * variance) / plain
    np.testing.assert_allclose(gated_mean[:, 0, 0], np.sqrt(weight) * q_mean, rtol=1e-6)
    np.testing.assert_allclose(
        gated_var[:, 0, 0], weight * q_var + (1 - weight) * variance, rtol=1e-6
    )


def test_the_reach_gate_is_checked():
    with pytest.raises(ValueError, match="reach_gate: expected a scale > 0 with num_anchors"):
        AmortizedGPLayer(1, 3, 10, whiten=True, num_anchors=0, reach_gate=1.0)
    with pytest.raises(TypeError, match="reach_gate: expected a number"):
        AmortizedGPLayer(1, 3, 10, whiten=True, num_anchors=4, reach_gate="far")


@pytest.mark.slow  # default suite: test_input_guard's saved model keeps anchors and reach
def test_a_file_keeps_the_reach(saved_and_loaded):
    model, loaded, _ = saved_and_loaded
    for before, after in zip(model.layers[:2], loaded.layers[:2]):
        assert after.reach_gate == 0.5
        assert float(after.anchor_reach) == float(before.anchor_reach) > 0
    far = np.array([[40.0]])
    np.testing.assert_allclose(loaded.predict(far, verbose=0)["std"], model.predict(far)["std"])


def test_a_graph_traced_before_placement_measures_the_reach_on_its_first_batch(rng):
    layer = AmortizedGPLayer(1, 3, 100, num_anchors=4, whiten=True, reach_gate=1.0)
    batch = tf.constant(rng.normal(size=(30, 1)))
    tf.function(lambda x: layer(x, training=True))(batch)
    expected = reference.reach_of(batch.numpy(), layer.anchors.numpy())
    assert float(layer.anchor_reach) == pytest.approx(expected, rel=1e-12) and expected > 0


def test_a_layer_built_by_hand_is_the_papers_and_layer_options_make_it_the_builders():
    """Issue 74, row 8: 0 anchors by hand, 32 from the builder, under one name; the layer's
    docstring names the difference and ``presets.layer_options()`` closes it."""
    built = gpflux_avdgp.build_avdgp(2, [1], 4, 50, gpflow.likelihoods.Gaussian(), seed=0)
    options = gpflux_avdgp.presets.layer_options()
    by_hand = gpflux_avdgp.AmortizedGPLayer(1, 4, num_data=50)
    like_builder = gpflux_avdgp.AmortizedGPLayer(1, 4, num_data=50, **options)
    builder_config = built.layers[0].get_config()
    for key in options:
        assert like_builder.get_config()[key] == builder_config[key], key
    assert (by_hand.num_anchors, builder_config["num_anchors"]) == (0, 32)
    assert "Built by hand, the layer is the paper's" in gpflux_avdgp.AmortizedGPLayer.__doc__
