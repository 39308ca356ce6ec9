"""The pre-training input pipeline on the tf.data service.

The standard tf.data service processes (`bert-tf data-service dispatcher`
and `bert-tf data-service worker`) run the masking pipeline of
`bert_tf.data.pretraining` on any number of hosts; the trainer only
receives finished batches. The dataset graph travels to the workers, so
each worker loads tf-text's ops and must see the shard paths (a shared
file system, or GCS/S3/HDFS).

Workers process in `parallel_epochs` mode: each one reads every shard in
its own random order with its own masks. A fixed seed would make all
workers send the same stream, so under the service the order and masks
are drawn afresh (a run on the service is not bit-reproducible; the
local pipeline stays the reference).
"""

import socket

import tensorflow as tf

# Said when a server starts, and in docs/guides/security.md: TF 2.20's
# servers take a port but no address (DispatcherConfig and WorkerConfig
# have no bind field), so they listen on every interface.
EXPOSURE_WARNING = (
    "warning: the tf.data service listens on every network interface and "
    "has no authentication (TF takes no bind address): whoever reaches "
    "its port can register a dataset graph that the workers run. Run it "
    "only on a trusted network, fenced by a firewall that lets in the "
    "trainers and workers alone (docs/guides/security.md).")

SCHEME = "grpc://"


def split_address(address):
    """(host, port) of `HOST:PORT` or `grpc://HOST:PORT`.

    Examples:
        >>> split_address("grpc://localhost:5050")
        ('localhost', 5050)
    """
    bare = address[len(SCHEME):] if address.startswith(SCHEME) else address
    host, sep, port = bare.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(
            f"tf.data service address {address!r}: must be HOST:PORT or "
            f"{SCHEME}HOST:PORT (the dispatcher's `--port`).")
    return host, int(port)


def check_dispatcher(address, timeout=10.0):
    """Raises a clear error if nothing listens at the dispatcher's
    address (the service client itself would retry for a long time)."""
    host, port = split_address(address)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as error:
        raise RuntimeError(
            f"no tf.data service dispatcher answers at {host}:{port} "
            f"({error.strerror or error}); start one with `bert-tf "
            f"data-service dispatcher --port {port}` and at least one "
            f"`bert-tf data-service worker --dispatcher {host}:{port}`, "
            "or clear data.service to build batches on this host.") \
            from None


def distribute(dataset, address, job_name=None):
    """`dataset` computed by the service's workers.

    Args:
        dataset: a `tf.data.Dataset` (finished batches).
        address: the dispatcher, `HOST:PORT` or `grpc://HOST:PORT`.
        job_name: consumers with the same job name share one stream
            (each element goes to one of them); None: this iterator's own.
    """
    check_dispatcher(address)
    host, port = split_address(address)
    return dataset.apply(tf.data.experimental.service.distribute(
        processing_mode=tf.data.experimental.service.ShardingPolicy.OFF,
        service=f"{SCHEME}{host}:{port}", job_name=job_name))


def start_dispatcher(port, work_dir=None):
    """A running `DispatchServer` on `port` (0: any free port).

    Args:
        port: the port to listen on.
        work_dir: where the dispatcher journals its state (a restarted
            dispatcher then resumes its jobs); None: in memory.
    """
    return tf.data.experimental.service.DispatchServer(
        tf.data.experimental.service.DispatcherConfig(
            port=port, work_dir=work_dir,
            fault_tolerant_mode=work_dir is not None))


def start_worker(dispatcher, port=0, host=None):
    """A running `WorkerServer` registered with `dispatcher`.

    Returns (server, the address it advertises).

    Args:
        dispatcher: the dispatcher's `HOST:PORT`.
        port: the worker's port (0: any free port).
        host: the name trainers reach this worker by (default: this
            machine's host name).
    """
    import tensorflow_text  # noqa: F401  (the pipeline's ops)

    check_dispatcher(dispatcher)
    dispatcher_host, dispatcher_port = split_address(dispatcher)
    host = host or socket.gethostname()
    if not port:  # the server would pick one but not tell it
        with socket.socket() as probe:
            probe.bind(("", 0))
            port = probe.getsockname()[1]
    server = tf.data.experimental.service.WorkerServer(
        tf.data.experimental.service.WorkerConfig(
            dispatcher_address=f"{dispatcher_host}:{dispatcher_port}",
            worker_address=f"{host}:{port}", port=port))
    return server, f"{host}:{port}"


def serve_until_stopped(server):
    """Keeps this process serving until Ctrl-C or SIGTERM (a cluster
    scheduler's stop, handled like Ctrl-C), then stops `server`. The server
    runs in its own threads; `join()` would block the signals."""
    import signal
    import time

    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()
