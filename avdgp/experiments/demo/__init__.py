"""``avdgp demo``: the letters toy problem (:mod:`avdgp.experiments.demo.toy`) and the demo's run
(:mod:`avdgp.experiments.demo.run`)."""
