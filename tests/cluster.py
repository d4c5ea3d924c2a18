"""Start a local MultiWorkerMirroredStrategy cluster of worker processes on 127.0.0.1.

Used by test_multiworker.py and test_cli_distributed.py. Every process has a deadline; when
one fails or the deadline passes, the others are killed, so a hung collective op cannot block
the test run. Ports are picked free by binding to port 0; a start that still loses a port to
another program is retried once with new ports.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

#: What a worker writes when its gRPC server cannot have its port.
PORT_CLASH = ("Address already in use", "Could not start gRPC server", "Failed to add port")


@dataclass
class Finished:
    """A process that ended (or was killed)."""

    command: list[str]
    returncode: Optional[int]  #: ``None``: killed at the deadline
    stdout: str
    stderr: str

    def describe(self) -> str:
        """The status and the end of stderr, for assertion messages."""
        tail = "\n".join(line for line in self.stderr.splitlines() if "I0000" not in line)
        return f"{' '.join(self.command[-3:])}: exit {self.returncode}\n{tail[-3000:]}"


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports on 127.0.0.1 that were free a moment ago."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def tf_config(ports: Sequence[int], index: int) -> str:
    """``TF_CONFIG`` of worker ``index`` in a cluster of workers on ``ports``."""
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    return json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})


def base_environment(**extra: str) -> dict:
    """The test environment for a TensorFlow subprocess: CPU only, quiet, no inherited cluster."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    env.pop("TF_CONFIG", None)
    env.pop("AVDGP_CPU_DEVICES", None)
    env.update(extra)
    return env


def run_processes(
    commands: Sequence[Sequence[str]],
    environments: Sequence[dict],
    logs: Path,
    *,
    timeout: float,
    cwd: Optional[Path] = None,
) -> list[Finished]:
    """Run ``commands`` at the same time and wait for all of them, at most ``timeout`` s.

    When one exits with a non-zero status, the others get 20 s to finish (a worker whose peer
    died otherwise waits on a collective op) and are then killed; at the deadline, all are.
    """
    logs.mkdir(parents=True, exist_ok=True)
    started, handles = [], []
    try:
        for i, (command, env) in enumerate(zip(commands, environments)):
            out = open(logs / f"{i}.out", "w+")
            err = open(logs / f"{i}.err", "w+")
            handles += [out, err]
            process = subprocess.Popen(list(command), stdout=out, stderr=err, env=env, cwd=cwd)
            started.append((process, out, err))
        deadline = time.monotonic() + timeout
        while any(p.poll() is None for p, _, _ in started):
            now = time.monotonic()
            if any(p.returncode not in (None, 0) for p, _, _ in started):
                deadline = min(deadline, now + 20)
            if now > deadline:
                break
            time.sleep(0.2)
    finally:
        for process, _, _ in started:
            if process.poll() is None:
                process.kill()
                process.wait()
    finished = []
    for (process, out, err), command in zip(started, commands):
        out.seek(0), err.seek(0)
        returncode = process.returncode if process.returncode >= 0 else None
        finished.append(Finished(list(command), returncode, out.read(), err.read()))
    for handle in handles:
        handle.close()
    return finished


def run_cluster(
    worker_commands: Sequence[Sequence[str]],
    logs: Path,
    *,
    timeout: float,
    others: Sequence[Sequence[str]] = (),
    worker_env: Optional[Sequence[dict]] = None,
    others_env: Optional[Sequence[dict]] = None,
    cwd: Optional[Path] = None,
) -> tuple[list[Finished], list[Finished]]:
    """Run one worker per command (each with its ``TF_CONFIG``) and ``others`` (no cluster,
    e.g. a single-device reference) at the same time.

    :param worker_env: extra environment variables per worker.
    :param others_env: extra environment variables per other command.
    :returns: ``(workers, others)``, finished.
    """
    count = len(worker_commands)
    extra = list(worker_env or [{}] * count)
    for attempt in range(2):
        ports = free_ports(count)
        environments = [
            base_environment(TF_CONFIG=tf_config(ports, i), **extra[i]) for i in range(count)
        ]
        environments += [base_environment(**env) for env in others_env or [{}] * len(others)]
        finished = run_processes(
            [*worker_commands, *others],
            environments,
            logs / f"attempt{attempt}",
            timeout=timeout,
            cwd=cwd,
        )
        workers = finished[:count]
        clash = any(any(text in w.stderr for text in PORT_CLASH) for w in workers)
        if not clash:
            break
    return workers, finished[count:]
