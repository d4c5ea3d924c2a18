"""The tables of ``benchmarks/speed.py``: AVDGP against DS-DGP per configuration, and epoch
time against the number of training steps per call of the train function."""

from helpers import load_benchmark


def _speed_module():
    return load_benchmark("speed")


def _record(model, seconds, steps_per_execution=None, predict=0.5):
    record = {
        "dataset": "elevators",
        "model": model,
        "dtype": "float64",
        "jit": False,
        "n_train": 13446,
        "predict_rows": 1659,
        "seconds_per_epoch": seconds,
        "predict_seconds": predict,
        "peak_rss_mb": 900.0,
    }
    if steps_per_execution is not None:
        record["steps_per_execution"] = steps_per_execution
    return record


def test_model_table_has_one_row_per_steps_per_call():
    speed = _speed_module()
    records = [
        _record("avdgp-ar2p", 2.0, 1),
        _record("dsdgp", 8.0, 1, predict=1.0),
        _record("avdgp-ar2p", 1.5, 10),
        _record("dsdgp", 7.5, 10, predict=1.0),
    ]
    rows = speed.table(records).splitlines()[2:]
    assert len(rows) == 2
    assert "| no | 1 | 2.0 | 8.0 | 0.25 | 0.50 | 1.00 | 0.50 |" in rows[0]
    assert "| no | 10 | 1.5 | 7.5 | 0.20 |" in rows[1]


def test_steps_per_call_table_compares_with_one_step_per_call():
    speed = _speed_module()
    records = [
        _record("avdgp-ar2p", 2.0, 1),
        _record("avdgp-ar2p", 1.5, 10),
        _record("dsdgp", 8.0, 1),
        _record("dsdgp", 7.6, 10),
    ]
    rows = speed.steps_per_call_table(records).splitlines()
    assert rows[0] == (
        "| data | model | dtype | jit | 1 step/call s/epoch | 10 steps/call s/epoch | ratio |"
    )
    assert rows[2] == "| elevators | avdgp-ar2p | float64 | no | 2.00 | 1.50 | 0.75 |"
    assert rows[3] == "| elevators | dsdgp | float64 | no | 8.00 | 7.60 | 0.95 |"


def test_results_written_before_the_option_count_as_one_step_per_call():
    speed = _speed_module()
    old = [_record("avdgp-ar2p", 2.0), _record("dsdgp", 8.0)]
    assert "| no | 1 | 2.0 | 8.0 | 0.25 |" in speed.table(old)
    assert speed.steps_per_call_table(old) == ""
