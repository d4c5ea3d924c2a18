"""Named sets of layer settings: the package's defaults, or the AVDGP paper's exact settings.

Each difference from the paper is listed in :data:`PAPER_DIFFERENCES` with the measurement
behind it; ``preset="paper"`` restores the paper's layers. (The training settings of the
presets belong to the application's harness: ``avdgp.training.config``.)
"""

from __future__ import annotations

import enum
from typing import Optional

from .checks import check_choice

__all__ = ["Preset", "PAPER_DIFFERENCES", "hidden_mean_function", "layer_options"]


class Preset(str, enum.Enum):
    """``"default"``: the package's defaults; ``"paper"``: the paper's settings."""

    DEFAULT = "default"
    PAPER = "paper"


#: ``setting: (default, paper, why)`` for every setting where the defaults depart from the paper.
PAPER_DIFFERENCES: dict[str, tuple[str, str, str]] = {
    "inducing_init": (
        "global (W_m = 0)",
        "input (W_m = I)",
        "with W_m = I a stationary kernel makes the layer input-independent at the start; "
        "the toy 3-layer model reaches 4-7 % test error in 2400 steps instead of 15-22 %",
    ),
    "prior_reversion": (
        "32 anchors per layer, whitened q(u), linear mean functions on hidden layers",
        "none: unwhitened q(u), zero mean functions",
        "the paper's layers keep their in-data confidence off the data (std 1.0x the in-data "
        "std at x = 6..30 on a 1-D problem); prior reversion returns to the prior there (6.5x; "
        "SVGP 8.2x) at the same accuracy on the data (docs/uncertainty.md)",
    ),
    "reach_gate": (
        "1.0: reversion also beyond the training rows' reach of the anchors",
        "none",
        "in gaps of 1-D data the kernel's weight keeps q(u) (gap band 0.00-0.28, gap NLL up to "
        "19); with the gate the band is 0.53-0.89 and the gap NLL 0.14-2.76 (means of 3 seeds), "
        "at the same in-data accuracy on 24 UCI splits (docs/design.md)",
    ),
}

#: Global anchors per layer of the default preset's prior reversion.
DEFAULT_NUM_ANCHORS = 32
#: The default preset's reach gate (``AmortizedGPLayer(reach_gate=...)``).
DEFAULT_REACH_GATE = 1.0


def layer_options(preset: str | Preset = Preset.DEFAULT) -> dict:
    """Keyword options of :class:`~gpflux_avdgp.AmortizedGPLayer` that ``preset`` sets: the
    default's prior reversion (``num_anchors``, ``whiten``, ``reach_gate``), where the inducing
    points start."""
    preset = check_choice("preset", preset, Preset)
    if preset is Preset.PAPER:
        return {"inducing_init": "input"}
    return {
        "inducing_init": "global",
        "whiten": True,
        "num_anchors": DEFAULT_NUM_ANCHORS,
        "reach_gate": DEFAULT_REACH_GATE,
    }


def hidden_mean_function(preset: str | Preset = Preset.DEFAULT) -> Optional[str]:
    """The mean function of every GP layer but the last that ``preset`` sets: ``"linear"`` by
    default (a far input stays far for the next layer, so prior reversion reaches the output),
    none in the paper."""
    preset = check_choice("preset", preset, Preset)
    return None if preset is Preset.PAPER else "linear"
