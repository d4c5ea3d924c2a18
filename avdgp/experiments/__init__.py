"""Experiment harness: data, models, training, benchmarks, plots."""
