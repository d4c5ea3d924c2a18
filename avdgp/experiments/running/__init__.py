"""One model on one split: the shared skeleton (:mod:`avdgp.experiments.running.skeleton`),
in-memory runs (:mod:`avdgp.experiments.running.runner`), streamed runs from shards
(:mod:`avdgp.experiments.running.streaming`), and the memory a step needs
(:mod:`avdgp.experiments.running.memory`)."""
