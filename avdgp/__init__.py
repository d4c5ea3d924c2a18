"""avdgp: the application beside the :mod:`gpflux_avdgp` library.

The ``avdgp`` command (:mod:`.cli`; also ``python -m avdgp``) and what only it needs: CSV,
``.npz`` and shard reading, splits and standardisation (:mod:`.data`), NumPy test scores
(:mod:`.metrics`), the training loop with run folders, records and progress (:mod:`.training`),
and the paper's experiments and benchmarks (:mod:`.experiments`). It uses the library through
its public modules; the library never imports it (an import contract checked in CI).
"""

from ._startup import check_address_space, skip_working_folder

skip_working_folder()  # first: 'python -m avdgp' in a model's folder imports nothing from it

from ._quiet_tensorflow import import_tensorflow_quietly, running_the_cli  # noqa: E402

if running_the_cli():  # a test or script importing the application leaves these alone
    check_address_space()
    import_tensorflow_quietly()
