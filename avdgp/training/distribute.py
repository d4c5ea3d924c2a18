"""Data-parallel training with ``tf.distribute``: several devices, or several machines.

Training under :func:`strategy_from_name` ``("mirrored")`` (one machine, several GPUs or
logical CPUs) or ``("multiworker")`` (a cluster described by the ``TF_CONFIG`` environment
variable) gives the loss trajectory of single-device training with the same global batch:

* :func:`shard_global_batches` makes every worker take its slice of every *global* batch
  (``tf.data`` ``DATA`` auto-sharding, never one file or batch per worker), and each replica
  its consecutive part of that slice;
* Keras divides every replica's mean loss by the number of replicas and sums the gradients;
* the AR1/AR2 Monte Carlo draws of replica ``r`` are its rows of the draws one device makes
  for the global batch (:func:`gpflux_avdgp.propagation.propagate`'s ``replica``, with the
  global replica id, which counts across workers).

Only the chief writes files (:func:`is_chief`); other workers write to a temporary folder that
is deleted afterwards (:func:`worker_save_dir`), which is tf_keras' multi-worker saving rule.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator, Mapping, Optional

import tensorflow as tf

__all__ = [
    "STRATEGY_NAMES",
    "TFConfigError",
    "UnevenBatchesWarning",
    "barrier",
    "configure_cpu_devices",
    "is_chief",
    "read_tf_config",
    "shard_global_batches",
    "strategy_from_name",
    "uneven_batches_message",
    "worker_name",
    "worker_save_dir",
]

#: The names :func:`strategy_from_name` accepts.
STRATEGY_NAMES = ("default", "mirrored", "multiworker")

#: One worker's ``TF_CONFIG`` in a two-machine cluster (the other has ``"index": 1``).
TF_CONFIG_EXAMPLE = (
    '{"cluster": {"worker": ["host0:12345", "host1:12345"]}, '
    '"task": {"type": "worker", "index": 0}}'
)
_TASK_TYPES = ("chief", "worker")


class TFConfigError(ValueError):
    """``TF_CONFIG`` is missing, is not JSON, or does not describe this worker's cluster."""


class UnevenBatchesWarning(UserWarning):
    """Distributed training whose batches do not split evenly over the replicas, so its steps
    differ slightly from single-device steps (see :func:`uneven_batches_message`)."""


def _tf_config_error(problem: str) -> TFConfigError:
    return TFConfigError(
        f"TF_CONFIG: {problem}; multi-worker training needs the environment variable TF_CONFIG "
        "on every worker, holding JSON with the same 'cluster' (job name -> list of "
        "'host:port') and this worker's 'task' (type and index), e.g. on the first of two "
        f"machines TF_CONFIG='{TF_CONFIG_EXAMPLE}' and on the second the same with \"index\": 1"
    )


def read_tf_config(environ: Optional[Mapping[str, str]] = None) -> dict:
    """Parse and check ``TF_CONFIG`` for :class:`tf.distribute.MultiWorkerMirroredStrategy`.

    :param environ: where to read ``TF_CONFIG`` (default ``os.environ``).
    :returns: the parsed JSON: ``{"cluster": {job: ["host:port", ...]}, "task": {"type": job,
        "index": i}}`` with jobs ``"worker"`` and optionally one ``"chief"``.
    :raises TFConfigError: when it is missing or empty, not JSON, or lacks the cluster, the
        task, or this task's address.
    """
    text = (os.environ if environ is None else environ).get("TF_CONFIG", "")
    if not text.strip():
        raise _tf_config_error("not set")
    try:
        config = json.loads(text)
    except ValueError as error:
        raise _tf_config_error(f"not valid JSON ({error})") from None
    if not isinstance(config, dict):
        raise _tf_config_error(f"expected a JSON object, got {type(config).__name__}")
    cluster, task = config.get("cluster"), config.get("task")
    if not isinstance(cluster, dict) or not cluster:
        raise _tf_config_error("no 'cluster' object")
    for job, addresses in cluster.items():
        if job not in _TASK_TYPES:
            raise _tf_config_error(
                f"cluster job {job!r} is not supported (MultiWorkerMirroredStrategy uses "
                f"{' and '.join(repr(t) for t in _TASK_TYPES)})"
            )
        if (
            not isinstance(addresses, list)
            or not addresses
            or not all(isinstance(a, str) and a.rpartition(":")[2].isdigit() for a in addresses)
        ):
            raise _tf_config_error(
                f"cluster job {job!r}: expected a non-empty list of 'host:port', got {addresses!r}"
            )
    if len(cluster.get("chief", [])) > 1:
        raise _tf_config_error(f"at most one chief, got {cluster['chief']!r}")
    if not isinstance(task, dict):
        raise _tf_config_error("no 'task' object")
    task_type, index = task.get("type"), task.get("index", 0)
    if task_type not in cluster:
        raise _tf_config_error(
            f"task type {task_type!r} is not a job of the cluster ({', '.join(cluster)})"
        )
    if (
        not isinstance(index, int)
        or isinstance(index, bool)
        or not 0 <= index < len(cluster[task_type])
    ):
        raise _tf_config_error(
            f"task index {index!r} is not in 0..{len(cluster[task_type]) - 1} for job "
            f"{task_type!r}"
        )
    return config


def configure_cpu_devices(count: int) -> None:
    """Split the first physical CPU into ``count`` logical devices (for MirroredStrategy on a
    machine without GPUs, e.g. to try data-parallel training or test it).

    Must run before TensorFlow runs any operation.

    :raises ValueError: if ``count`` is not a positive integer, or TensorFlow has already
        initialised its devices.
    """
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ValueError(f"count: expected a positive integer, got {count!r}")
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(count)]
        )
    except RuntimeError as error:
        raise ValueError(
            f"cannot split the CPU into {count} logical devices: TensorFlow has already "
            f"initialised its devices ({error}); do it at program start"
        ) from None


def strategy_from_name(name: str) -> tf.distribute.Strategy:
    """The ``tf.distribute`` strategy called ``name``.

    * ``"default"``: TensorFlow's default strategy (one device, as without a strategy);
    * ``"mirrored"``: :class:`tf.distribute.MirroredStrategy` over every visible GPU, or, on a
      machine without GPUs, over every logical CPU device (one, unless
      :func:`configure_cpu_devices` split it);
    * ``"multiworker"``: :class:`tf.distribute.MultiWorkerMirroredStrategy` for the cluster in
      ``TF_CONFIG`` (checked by :func:`read_tf_config`), each worker using its GPUs or its
      CPU. Create it at program start, before TensorFlow runs an operation, on every worker.

    :raises ValueError: for an unknown name, or ``"multiworker"`` when TensorFlow already ran
        operations.
    :raises TFConfigError: for ``"multiworker"`` without a valid ``TF_CONFIG``.
    """
    if name not in STRATEGY_NAMES:
        raise ValueError(f"strategy: expected one of {', '.join(STRATEGY_NAMES)}, got {name!r}")
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
        return tf.distribute.MirroredStrategy([device.name for device in devices])
    read_tf_config()
    try:
        return tf.distribute.MultiWorkerMirroredStrategy()
    except RuntimeError as error:  # the eager context started before the cluster was known
        raise ValueError(
            f"strategy 'multiworker': create it at program start, before TensorFlow runs any "
            f"operation ({' '.join(str(error).split())})"
        ) from None


def _cluster_task(strategy: tf.distribute.Strategy) -> tuple[Optional[str], Optional[int]]:
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None:
        return None, None
    return resolver.task_type, resolver.task_id


def is_chief(strategy: Optional[tf.distribute.Strategy] = None) -> bool:
    """Whether this process writes the run's files: always, except on the non-chief workers
    of a multi-worker strategy (the chief is task ``chief``, else ``worker`` 0).

    :param strategy: default: the strategy of the current scope.
    """
    strategy = strategy or tf.distribute.get_strategy()
    return bool(strategy.extended.should_checkpoint)


def worker_name(strategy: Optional[tf.distribute.Strategy] = None) -> str:
    """``"worker 1 of 2"`` (or ``"chief"``) under a multi-worker strategy, else ``""``."""
    strategy = strategy or tf.distribute.get_strategy()
    task_type, task_id = _cluster_task(strategy)
    if task_type is None:
        return ""
    resolver = strategy.cluster_resolver
    jobs = resolver.cluster_spec().as_dict()
    if task_type == "chief":
        return "chief"
    return f"{task_type} {task_id} of {len(jobs.get(task_type, []))}"


@contextlib.contextmanager
def worker_save_dir(
    directory: Path, strategy: Optional[tf.distribute.Strategy] = None
) -> Iterator[Path]:
    """Where this worker writes what is meant for ``directory``.

    The chief (and any single-worker run) writes to ``directory`` itself. Every worker must
    still call ``model.save`` (saving can read synchronised variables with collective ops),
    so a non-chief worker writes to a fresh temporary folder, removed when the block ends.

    :yields: ``directory`` (created) on the chief, else the temporary folder.
    """
    strategy = strategy or tf.distribute.get_strategy()
    if is_chief(strategy):
        directory.mkdir(parents=True, exist_ok=True)
        yield directory
        return
    task_type, task_id = _cluster_task(strategy)
    temporary = Path(tempfile.mkdtemp(prefix=f"avdgp-{task_type}{task_id}-"))
    try:
        yield temporary
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def barrier(strategy: tf.distribute.Strategy) -> None:
    """Wait until every replica of ``strategy``, on every worker, reaches this point (a
    cross-replica sum of ones; nothing to do on one replica)."""
    if strategy.num_replicas_in_sync == 1:
        return

    @tf.function  # eager collective calls are slow and make TensorFlow log a warning
    def count_replicas() -> tf.Tensor:
        ones = strategy.run(lambda: tf.ones([], tf.float32))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, ones, axis=None)

    total = count_replicas()
    if int(total) != strategy.num_replicas_in_sync:  # pragma: no cover - a TF failure
        raise RuntimeError(f"barrier: {int(total)} of {strategy.num_replicas_in_sync} replicas")


def shard_global_batches(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """``dataset`` of global batches, set up so that a distributed ``fit`` splits every batch.

    Sets ``tf.data``'s auto-shard policy to ``DATA``: with ``MultiWorkerMirroredStrategy``
    every worker builds the whole pipeline and keeps its consecutive slice of every global
    batch (worker 0 the first rows), exactly the rows a single device would use in that step.
    The default ``AUTO`` policy shards by *file* when the pipeline reads files, giving each
    worker different data altogether. Single-worker strategies ignore the policy.

    :param dataset: batches ``[G, ...]`` of the global batch size ``G``.
    """
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options)


def uneven_batches_message(num_rows: int, batch_size: int, num_replicas: int) -> Optional[str]:
    """Why training on ``num_replicas`` replicas would differ from one device, or ``None``.

    A replica averages its loss over its own rows and Keras divides by the number of replicas,
    so a step equals the single-device step only when every replica gets the same number of
    rows: the batch size and the last, partial batch of an epoch must be multiples of
    ``num_replicas``.

    :param num_rows: ``N``, training rows per epoch.
    :param batch_size: ``G``, the global batch size.
    :param num_replicas: replicas in sync (over all workers).
    :raises ValueError: when a batch has fewer rows than replicas (a replica would average
        its loss over no rows, which is NaN).
    """
    last = num_rows % batch_size or batch_size
    smallest = min(batch_size, num_rows, last)
    if smallest < num_replicas:
        raise ValueError(
            f"batch_size: a batch of {smallest} rows cannot be split over {num_replicas} "
            f"replicas ({num_rows} rows in batches of {batch_size}); choose a batch size, and "
            f"a last batch (N mod batch size), of at least {num_replicas} rows"
        )
    uneven = [size for size in sorted({batch_size, last}) if size % num_replicas]
    if not uneven:
        return None
    return (
        f"batches of {' and '.join(str(size) for size in uneven)} rows do not split evenly over "
        f"{num_replicas} replicas, so those steps weight rows differently from single-device "
        f"training; for the same trajectory make the batch size and the last batch ({num_rows}"
        f" mod {batch_size} = {num_rows % batch_size}) multiples of {num_replicas}"
    )
