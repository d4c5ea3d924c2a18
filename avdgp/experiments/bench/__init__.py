"""The UCI benchmark: runs (:mod:`avdgp.experiments.bench.run`), the results file
(:mod:`avdgp.experiments.bench.results`) and its tables and figures
(:mod:`avdgp.experiments.bench.tables`)."""
