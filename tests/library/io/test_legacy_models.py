"""Models saved by an earlier layout of the package still load and predict the same.

``tests/fixtures/legacy_layout/`` holds ``.keras`` files written before the package was split into
subpackages (see ``make_models.py`` there). Keras finds our layers and the loss by their
registered names (``gpflux_avdgp>AmortizedGPLayer``), not by module path, so moving a class
between modules must keep its registered name and its config keys.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import FIXTURES_DIR

import gpflux_avdgp
from gpflux_avdgp import AVDGPLoss, TrainableLikelihood, predict_mixture

LEGACY = FIXTURES_DIR / "legacy_layout"
FIELDS = ("weights", "f_means", "f_variances", "y_means", "y_variances")


@pytest.mark.parametrize("name", [pytest.param("avdgp_ar2pp", marks=pytest.mark.slow), "mixed_ar1"])
def test_model_saved_by_the_old_layout_loads_predicts_and_trains(name):
    expected = np.load(LEGACY / "expected.npz")
    model = gpflux_avdgp.load_model(str(LEGACY / f"{name}.keras"))

    mixture = predict_mixture(model, expected["inputs"])
    for field in FIELDS:  # same code path on this CPU; other CPUs may round differently
        np.testing.assert_allclose(
            getattr(mixture, field),
            expected[f"{name}/{field}"],
            rtol=1e-9,
            atol=1e-12,
            err_msg=field,
        )
    assert isinstance(model.loss, AVDGPLoss)
    likelihood_layer = model.layers[-1]
    assert isinstance(likelihood_layer, TrainableLikelihood)
    assert model.loss.likelihood is None  # it scores the one the model's output carries
    assert model.loss.objective.value == ("predictive" if name == "avdgp_ar2pp" else "elbo")
    assert model.optimizer.iterations.numpy() == 12  # 3 epochs of 4 batches, restored

    x = expected["inputs"]
    targets = (x[:, :1] > 0).astype(np.float64)
    history = model.fit(x, targets, batch_size=8, epochs=1, shuffle=False, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert model.optimizer.iterations.numpy() == 16
