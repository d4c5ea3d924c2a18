"""The memory a training step of a model needs, estimated from its sizes before TensorFlow
builds anything, so that ``avdgp fit --inducing 100000`` is refused in one line instead of
dying in the allocator (or being killed by the kernel).

The estimate counts the largest tensors of a step, in the model's float type, and doubles it
for the backward pass and doubles it again for temporaries:

* amortized models (``avdgp``, ``sgp-avi``, ``idsgp``: inducing points per datapoint): per
  layer ``B * S * (M^2 + M * (D_in + Q))`` values (``K_uu`` and its factor, ``K_uf`` and the
  inducing inputs of every datapoint and sigma point);
* global inducing points (``svgp``, ``dsdgp``, ``dspp``, ``solve-gp``): per layer
  ``Q * M^2 + B * S * M * (D_in + 1)`` values (``q_sqrt`` and ``K_uu``, then ``K_uf``).

``S`` is 1 for the one-layer models, which propagate no points. It is a lower bound on the
order of magnitude, meant to catch sizes a thousand times too large,
not to budget memory.
"""

from __future__ import annotations

import os
import resource
from typing import Optional

from avdgp._startup import TENSORFLOW_BYTES
from avdgp.zoo import SHALLOW, ModelKind, ModelSpec

__all__ = ["available_bytes", "step_bytes"]

_AMORTIZED = (ModelKind.AVDGP, ModelKind.SGP_AVI, ModelKind.IDSGP)
#: Backward pass and temporaries.
_OVERHEAD = 4


def step_bytes(spec: ModelSpec, input_dim: int, batch_size: int, itemsize: int = 8) -> int:
    """Estimated bytes of one training step of ``spec`` on inputs of width ``input_dim``."""
    widths = [input_dim, *spec.resolved_dims()]
    inducing = spec.resolved_inducing()
    if spec.kind is ModelKind.SOLVE_GP:
        inducing = [sum(inducing)]
    samples = 1 if spec.kind in SHALLOW else spec.num_points  # shallow: no points propagate
    values = 0
    for layer, m in enumerate(inducing[: len(widths) - 1]):
        d_in, q = widths[layer], widths[layer + 1]
        if spec.kind in _AMORTIZED:
            values += batch_size * samples * (m * m + m * (d_in + q))
        else:
            values += q * m * m + batch_size * samples * m * (d_in + 1)
    return values * itemsize * _OVERHEAD


def available_bytes() -> Optional[int]:
    """The memory a model may use: the physical memory, or the address-space limit
    (``ulimit -v``) less what TensorFlow takes, whichever is smaller; ``None`` if unknown."""
    limits = []
    try:
        limits.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        pass
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        limits.append(max(0, soft - TENSORFLOW_BYTES))
    return min(limits) if limits else None
