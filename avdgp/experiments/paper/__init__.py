"""``avdgp paper``: what the paper's tables ask for (:mod:`avdgp.experiments.paper.request`), the
runs (:mod:`avdgp.experiments.paper.run`, :mod:`avdgp.experiments.paper.toy_grid`), and the tables
beside the paper's numbers (:mod:`avdgp.experiments.paper.table_format`,
:mod:`avdgp.experiments.paper.tables`, :mod:`avdgp.experiments.paper.toy_tables`; the paper's
numbers are data in ``numbers/``)."""
