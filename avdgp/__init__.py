"""avdgp: the application beside the :mod:`gpflux_avdgp` library.

The ``avdgp`` command (:mod:`.cli`; also ``python -m avdgp``) and what only it needs: CSV,
``.npz`` and shard reading, splits and standardisation (:mod:`.data`), NumPy test scores
(:mod:`.metrics`), the training loop with run folders, records and progress (:mod:`.training`),
and the paper's experiments and benchmarks (:mod:`.experiments`). It uses the library through
its public modules; the library never imports it (an import contract checked in CI).
"""

from ._quiet_tensorflow import import_tensorflow_quietly, running_the_cli

if running_the_cli():  # a test or script importing the application leaves stderr alone
    import_tensorflow_quietly()
