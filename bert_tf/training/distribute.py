"""tf.distribute strategies from a config string."""

import json
import os

import tensorflow as tf

from bert_tf.config import STRATEGIES


def create_strategy(name="default", devices=None, tpu=None):
    """Builds the strategy a config names.

    Args:
        name: `default` (no distribution), `one_device`, `mirrored` (all
            local GPUs, or `devices`), `multi_worker_mirrored` (workers from
            the TF_CONFIG environment variable) or `tpu`.
        devices: device names for `one_device` / `mirrored`.
        tpu: TPU name or grpc address for `tpu` ("" or "local" for a TPU VM).

    Examples:
        >>> create_strategy("default").num_replicas_in_sync
        1
    """
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "one_device":
        device = (devices or [None])[0] or (
            "/gpu:0" if tf.config.list_logical_devices("GPU") else "/cpu:0")
        return tf.distribute.OneDeviceStrategy(device)
    if name == "mirrored":
        return tf.distribute.MirroredStrategy(devices=devices)
    if name == "multi_worker_mirrored":
        config = os.environ.get("TF_CONFIG")
        if config:
            try:
                json.loads(config)
            except json.JSONDecodeError as e:
                raise ValueError(f"TF_CONFIG is not valid JSON: {e}") from None
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "tpu":
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
            tpu=None if tpu in (None, "", "local") else tpu)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    raise ValueError(f"strategy = {name!r}: must be one of "
                     f"{', '.join(STRATEGIES)}.")


def describe(strategy):
    """One line: the strategy by its config name, its replicas and devices.

    Examples:
        >>> describe(create_strategy("default"))
        'default (no distribution), 1 replica'
    """
    names = {"_DefaultDistributionStrategy": "default (no distribution)",
             "OneDeviceStrategy": "one_device", "MirroredStrategy":
             "mirrored", "MultiWorkerMirroredStrategy":
             "multi_worker_mirrored", "TPUStrategy": "tpu"}
    name = type(strategy).__name__
    try:
        devices = strategy.extended.worker_devices
    except (RuntimeError, NotImplementedError, AttributeError):
        devices = ()  # the default strategy has none to list
    replicas = strategy.num_replicas_in_sync
    return (f"{names.get(name, name)}, {replicas} "
            f"replica{'s' if replicas > 1 else ''}"
            + (f" on {', '.join(devices)}" if devices else ""))


def is_chief(strategy):
    """True unless this process is a non-chief multi-worker task."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.cluster_spec().as_dict():
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return task_type == "chief" or (not has_chief and task_type == "worker"
                                    and task_id == 0)


def check_same_step(strategy, step):
    """Raises unless every replica (every worker) restored `step`: each
    reads the chief's checkpoints and skips the same unreadable ones, so a
    difference means the workers see different files."""
    if strategy.num_replicas_in_sync == 1:
        return
    value = tf.constant([step, step * step, 1], tf.float64)
    values = strategy.experimental_distribute_values_from_function(
        lambda context: value)
    sums = strategy.reduce("SUM", values, axis=None).numpy()
    mean = sums[0] / sums[2]
    if sums[1] / sums[2] - mean * mean > 1e-6:
        raise RuntimeError(
            f"the workers restored different steps (this one {step}, the "
            f"mean {mean:.1f}): they do not all see the same model_dir. "
            "Give every worker the same shared model_dir and restart them.")
