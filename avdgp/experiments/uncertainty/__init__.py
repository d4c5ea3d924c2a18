"""``avdgp uncertainty``: the off-data and calibration study
(:mod:`avdgp.experiments.uncertainty.run`) and its report
(:mod:`avdgp.experiments.uncertainty.report`)."""
