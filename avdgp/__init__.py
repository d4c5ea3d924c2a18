"""avdgp: the application beside the :mod:`gpflux_avdgp` library.

The ``avdgp`` command (:mod:`.cli`; also ``python -m avdgp``) and what only it needs: CSV,
``.npz`` and shard reading, splits and standardisation (:mod:`.data`), NumPy test scores
(:mod:`.metrics`), the training loop with run folders, records and progress (:mod:`.training`),
and the paper's experiments and benchmarks (:mod:`.experiments`). It uses the library through
its public modules; the library never imports it (an import contract checked in CI).
"""

from ._startup import skip_working_folder

skip_working_folder()  # first: 'python -m avdgp' in a model's folder imports nothing from it
