"""One folder, one run (``avdgp/training/rundir.py``): a second process on a ``--save`` folder in
use is refused in one line, the lock goes with its process (crash included), and ``run.json``
is written atomically."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from helpers import assert_one_line_cli_error, run_cli

from avdgp.training import rundir
from avdgp.training.rundir import (
    LOCK_FILE,
    RunDirInUse,
    _write_atomically,
    holding_run_dir,
    locks_save_dir,
)

_HOLDER = """
import sys, time
from pathlib import Path
from avdgp.training.rundir import holding_run_dir
with holding_run_dir(Path(sys.argv[1])):
    print("holding", flush=True)
    time.sleep(60)
"""


@pytest.fixture
def holder(tmp_path):
    """Another process holding ``tmp_path / "m"``, killed (a crash) at the end."""
    folder = tmp_path / "m"
    process = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(folder)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout.readline().strip() == "holding"
    yield folder, process
    process.kill()
    process.wait()


@pytest.mark.slow  # a second process holds the folder
def test_a_folder_held_by_another_process_is_refused_and_free_after_it_dies(holder):
    folder, process = holder
    with pytest.raises(RunDirInUse) as caught:
        with holding_run_dir(folder):
            pass
    (line,) = str(caught.value).splitlines()
    assert line == (
        f"{folder}: another avdgp run is using this folder (pid {process.pid}); wait for it to "
        "finish or choose another --save folder"
    )
    process.send_signal(signal.SIGKILL)  # a crash: no clean-up runs
    process.wait()
    with holding_run_dir(folder):  # the operating system released the lock
        assert (folder / LOCK_FILE).read_text() == f"pid {os.getpid()}"


@pytest.mark.slow  # a second process holds the folder
def test_avdgp_fit_on_a_folder_in_use_exits_2_with_one_line(capsys, tmp_path, holder, rng):
    folder, _ = holder
    data = tmp_path / "d.csv"
    np.savetxt(data, rng.normal(size=(40, 3)), delimiter=",")
    status, out, err = run_cli(capsys, ["fit", data, "--epochs", "1", "--save", folder])
    assert_one_line_cli_error(status, out, err, "another avdgp run is using this folder")
    assert not (folder / "settings.json").exists()  # refused before touching the run


def test_the_lock_is_held_while_the_run_runs_and_released_after_it(tmp_path):
    folder = tmp_path / "m"
    seen = []

    @locks_save_dir
    def run(*, save_dir=None, strategy=None):
        with pytest.raises(RunDirInUse):
            with holding_run_dir(folder):
                pass
        seen.append(save_dir)
        raise ValueError("the run failed")

    with pytest.raises(ValueError, match="the run failed"):
        run(save_dir=folder)
    assert seen == [folder]
    with holding_run_dir(folder):  # released after the failure
        pass
    assert run.__wrapped__ is not None  # functools.wraps keeps the runner's docs


def test_run_json_is_replaced_whole(tmp_path, monkeypatch):
    path = tmp_path / "run.json"
    path.write_text('{"old": true}')
    writes = []
    original = rundir.open_own_file

    def slow_open(partial, mode):
        writes.append(partial.name)
        assert json.loads(path.read_text()) == {"old": True}  # readers still see the old file
        time.sleep(0.01)
        return original(partial, mode)

    monkeypatch.setattr(rundir, "open_own_file", slow_open)
    _write_atomically(path, '{"new": true}')
    assert writes == [f".run.json.{os.getpid()}"]
    assert json.loads(path.read_text()) == {"new": True}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


def test_a_rerun_without_a_finished_epoch_says_it_trains_from_epoch_0(tmp_path):
    """A run stopped in its first epoch or during its final save leaves ``settings.json`` but no
    backup: the rerun says it trains again from epoch 0 (it said nothing); with a backup it says
    it resumes."""
    import io

    from avdgp.training import TrainConfig
    from avdgp.training.rundir import prepare_run_dir
    from avdgp.zoo import ModelSpec

    def prepare() -> str:
        stream = io.StringIO()
        options = dict(spec=ModelSpec(), config=TrainConfig(), dataset="toy", data={"rows": 3})
        prepare_run_dir(tmp_path / "run", stream=stream, **options)
        return stream.getvalue()

    assert prepare() == ""  # a new folder
    assert prepare() == (
        f"[avdgp-ar2p] the interrupted run in {tmp_path / 'run'} left no backup to resume "
        "from; training again from epoch 0\n"
    )
    (tmp_path / "run" / "backup" / "chief").mkdir(parents=True)
    assert prepare() == f"[avdgp-ar2p] resuming the interrupted run in {tmp_path / 'run'}\n"
    (tmp_path / "run" / "progress.json").write_text('{"seconds": [1.0], "finished": true}')
    assert prepare() == (
        f"[avdgp-ar2p] the interrupted run in {tmp_path / 'run'} had finished training; "
        "scoring and saving it\n"
    )


def test_a_full_disk_while_saving_ends_in_one_line_and_leaves_no_partial_model(tmp_path):
    """``fit --save``'s final save: ``model.keras`` is written under a temporary name and
    renamed; a full disk is a one-line UsageError naming the folder (was "internal error")."""
    import errno
    from types import SimpleNamespace

    from avdgp.errors import UsageError
    from avdgp.training.rundir import save_run

    class FullDisk:
        def save_weights(self, path):
            open(path + ".index", "w").close()

        def save(self, path):
            open(path, "w").write("half")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.raises(UsageError, match=r"could not save the run \(No space left on device\)"):
        save_run(SimpleNamespace(model=FullDisk()), None, None, tmp_path / "run")
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["weights.index"]
