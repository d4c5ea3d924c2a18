"""The toy "DGP" letters classification problem."""

from __future__ import annotations

import numpy as np
import pytest

from avdgp.experiments.demo.toy import TOY_BOX, letters_mask, make_toy_dataset, toy_splits

# Landmarks of the layout (text stretched into TOY_BOX), read off the glyph outlines:
# at height 0.5 the "D" is solid on x in [0.05, 0.125] (stem) and [0.246, 0.324] (bowl) with its
# hole between; at height 0.62 the "P" has its stem on [0.71, 0.785], hole on [0.785, 0.872]
# and bowl on [0.872, 0.949].
D_STEM, D_HOLE, D_BOWL = (0.085, 0.5), (0.19, 0.5), (0.285, 0.5)
P_STEM, P_HOLE, P_BOWL = (0.745, 0.62), (0.83, 0.62), (0.915, 0.62)


def test_letter_strokes_are_inside_and_holes_outside():
    points = np.array([D_STEM, D_HOLE, D_BOWL, P_STEM, P_HOLE, P_BOWL])
    np.testing.assert_array_equal(letters_mask(points), [True, False, True, True, False, True])


def test_points_outside_the_letters():
    corners = np.array([[0.01, 0.01], [0.99, 0.99], [0.5, 0.05], [0.5, 0.95], [0.02, 0.5]])
    assert not letters_mask(corners).any()


def test_holes_of_another_text():
    # The "O" spans the whole box: its centre is its hole, its left edge is ink.
    x_left = TOY_BOX[0] + 0.02
    points = np.array([[0.5, 0.5], [x_left, 0.5], [0.5, TOY_BOX[2] + 0.01]])
    np.testing.assert_array_equal(letters_mask(points, text="O"), [False, True, True])


def test_mask_input_checks():
    assert letters_mask(np.zeros((0, 2))).shape == (0,)
    with pytest.raises(ValueError, match=r"points: expected an array of shape \[N, 2\]"):
        letters_mask(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="text: expected a non-empty string"):
        letters_mask(np.zeros((3, 2)), text=" ")


def test_toy_dataset_labels():
    dataset = make_toy_dataset(20_000, seed=1)
    assert dataset.name == "dgp-letters"
    assert dataset.inputs.shape == (20_000, 2) and dataset.targets.shape == (20_000,)
    assert dataset.test_masks is None
    assert np.all((dataset.inputs >= 0.0) & (dataset.inputs < 1.0))
    assert set(np.unique(dataset.targets).tolist()) == {0.0, 1.0}
    assert 0.25 <= dataset.targets.mean() <= 0.40
    np.testing.assert_array_equal(dataset.targets, letters_mask(dataset.inputs).astype(float))


def test_toy_dataset_is_deterministic_per_seed():
    first, again, other = (make_toy_dataset(300, seed=s) for s in (4, 4, 5))
    np.testing.assert_array_equal(first.inputs, again.inputs)
    np.testing.assert_array_equal(first.targets, again.targets)
    assert not np.allclose(first.inputs, other.inputs)


def test_toy_splits_proportions():
    split = toy_splits(600, seed=2)
    assert split.x_train.shape == (300, 2) and split.y_train.shape == (300, 1)
    assert split.x_test.shape == (200, 2) and split.y_test.shape == (200, 1)
    assert split.x_val.shape == (100, 2) and split.y_val.shape == (100, 1)
    everything = np.concatenate([split.x_train, split.x_val, split.x_test])
    np.testing.assert_array_equal(
        np.sort(everything[:, 0]), np.sort(make_toy_dataset(600, seed=2).inputs[:, 0])
    )
    for x, y in [(split.x_train, split.y_train), (split.x_test, split.y_test)]:
        np.testing.assert_array_equal(y[:, 0], letters_mask(x).astype(float))


def test_toy_splits_are_deterministic_per_seed():
    first, again, other = (toy_splits(120, seed=s) for s in (9, 9, 10))
    np.testing.assert_array_equal(first.x_test, again.x_test)
    np.testing.assert_array_equal(first.x_val, again.x_val)
    np.testing.assert_array_equal(first.y_train, again.y_train)
    assert not np.allclose(first.x_test, other.x_test)
