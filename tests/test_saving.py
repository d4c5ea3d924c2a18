"""The packed-mixture models survive model.save / load_model (both formats) without
custom_objects, GPflow parameters included."""

import gpflow
import numpy as np
import pytest
from gpflow.keras import tf_keras

import gpflux_avdgp


@pytest.mark.parametrize("suffix", [".keras", ""])  # "" is the TensorFlow SavedModel format
def test_round_trip_predicts_identically(tmp_path, rng, suffix):
    x = rng.normal(size=(60, 2))
    y = x[:, :1] ** 2
    likelihood = gpflow.likelihoods.Gaussian(0.1)
    model = gpflux_avdgp.build_avdgp(
        2, [3, 2, 1], [4, 2, 2], len(x), likelihood, num_points=4, mean_function="linear", seed=0
    )
    model.compile(tf_keras.optimizers.Adam(0.05), loss=gpflux_avdgp.AVDGPLoss(likelihood))
    model.fit(x, y, batch_size=30, epochs=2, verbose=0)
    # trained GPflow parameters differ from their initial values, so a reload that ignored
    # them would be caught below
    assert not np.isclose(likelihood.variance.numpy(), 0.1)

    path = str(tmp_path / f"model{suffix}")
    model.save(path)
    reloaded = tf_keras.models.load_model(path)

    np.testing.assert_array_equal(model.predict(x, verbose=0), reloaded.predict(x, verbose=0))
    reloaded_likelihood = reloaded.layers[-1].likelihood
    assert reloaded_likelihood.variance.numpy() == likelihood.variance.numpy()
    kernel, reloaded_kernel = model.layers[0].kernel, reloaded.layers[0].kernel
    assert reloaded_kernel.lengthscales.numpy() == kernel.lengthscales.numpy()


def test_config_refuses_components_it_cannot_rebuild():
    """A layer never saves an unknown kernel or mean function as something else."""
    custom_mean = gpflux_avdgp.AmortizedGPLayer(
        1, 2, 10, mean_function=gpflow.mean_functions.Constant(np.zeros(1))
    )
    custom_mean(np.zeros((3, 2)))
    with pytest.raises(NotImplementedError, match="mean_function: Constant"):
        custom_mean.get_config()

    custom_kernel = gpflux_avdgp.AmortizedGPLayer(1, 2, 10, kernel=gpflow.kernels.Linear())
    custom_kernel(np.zeros((3, 2)))
    with pytest.raises(NotImplementedError, match="kernel Linear cannot be saved"):
        custom_kernel.get_config()

    named = gpflux_avdgp.AmortizedGPLayer(
        1, 2, 10, kernel=gpflow.kernels.Matern32(lengthscales=np.ones(2)), mean_function="linear"
    )
    named(np.zeros((3, 2)))
    config = named.get_config()
    assert (config["kernel"], config["ard"], config["mean_function"]) == (
        "matern32",
        True,
        "linear",
    )
