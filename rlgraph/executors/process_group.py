"""The learner processes of a distributed run: one process group per process, all-reduce of gradients.

Synchronous data-parallel learning over processes (and machines): every learner computes the gradients of
its own batch, the gradients are averaged over all learners by an all-reduce, and every learner applies the
same averaged gradients, so all learners keep one set of weights (as Horovod's ring all-reduce, Sergeev and
Del Balso 2018, and ``tf.distribute.MultiWorkerMirroredStrategy`` do). One implementation per backend:

- PyTorch: ``torch.distributed`` (gloo on CPUs, nccl when every learner has a CUDA device), one
  ``all_reduce`` of all gradients flattened into one buffer.
- TensorFlow: ``tf.distribute.MultiWorkerMirroredStrategy`` (collective ring all-reduce over gRPC). The update
  API methods run inside ``strategy.run`` and reduce through the replica context. TensorFlow requires the
  strategy to exist before TensorFlow runs anything in the process, so ``init_process_group`` must come
  first in a learner process.

- JAX: JAX's own multi-process runtime (``jax.distributed.initialize``, rank 0's address the coordinator; CPU
  collectives over gloo). Every learner's update runs as one program over a ``Mesh`` of one device per learner
  process (``shard_map``: each process feeds its own batch), and the gradients are averaged inside it by
  ``lax.pmean``, an all-reduce XLA runs over the processes. ``jax.distributed.initialize`` must come before JAX
  runs anything in the process (as TensorFlow's strategy), so ``init_process_group`` must come first here too.

A process holds at most one group (``current_process_group``). The ``distributed_sync`` device strategy
(``rlgraph.executors.distributed_sync``) uses it; the distributed engine (``rlgraph.engines.distributed``)
creates it. Every collective waits at most ``timeout_s``: a learner that died or fell out of step is an error,
not a hang.
"""
import datetime
import logging
import os

import numpy as np

from rlgraph.utils.errors import (RLGraphBackendError, RLGraphError, RLGraphLearnerGroupError as LearnerGroupError,
                                  RLGraphSpecError)

logger = logging.getLogger(__name__)

_current = None


class ProcessGroup:
    """One process's membership in the group of learner processes.

    Attributes:
        backend: "tf", "pytorch" or "jax".
        rank: This learner's index (0 writes checkpoints).
        world_size: The number of learner processes.
        addresses: One "host:port" per learner (TF: each learner's collective server; PyTorch: rank 0's
            rendezvous address first; JAX: rank 0's coordinator address first).
        timeout_s: Seconds a collective may wait for the other learners.
    """

    backend = None

    def __init__(self, rank, world_size, addresses, timeout_s):
        self.rank, self.world_size = int(rank), int(world_size)
        self.addresses = list(addresses)
        self.timeout_s = float(timeout_s)

    def run_update(self, fn, args, kwargs):
        """Runs an update API method (inside the backend's replicated context where it has one)."""
        return fn(*args, **kwargs)

    def all_reduce_mean(self, tensors):
        """The element-wise means over all learners of a dict of gradient tensors (same keys everywhere)."""
        raise NotImplementedError

    def destroy(self):
        """Leaves the group."""

    def describe(self):
        return f"learner {self.rank} of {self.world_size} ({self.backend}, {', '.join(self.addresses)})"


class TorchProcessGroup(ProcessGroup):
    """``torch.distributed``: gloo (CPU) or nccl (CUDA), rendezvous at rank 0's address over TCP."""

    backend = "pytorch"

    def __init__(self, rank, world_size, addresses, timeout_s, device=None):
        super().__init__(rank, world_size, addresses, timeout_s)
        import torch
        import torch.distributed as dist
        self.dist, self.torch = dist, torch
        if dist.is_initialized():
            raise RLGraphSpecError("distributed learners: this process already belongs to a torch.distributed "
                                   "process group; one learner per process.")
        self.comm_backend = "nccl" if device is not None and str(device).startswith("cuda") else "gloo"
        host, port = self.addresses[0].rsplit(":", 1)
        try:
            dist.init_process_group(self.comm_backend, init_method=f"tcp://{host}:{port}", rank=self.rank,
                                    world_size=self.world_size,
                                    timeout=datetime.timedelta(seconds=self.timeout_s))
        except Exception as e:  # The store's connect timeout, a refused port, ...
            raise LearnerGroupError(f"learner {self.rank}: could not join the group of {self.world_size} learners "
                                    f"at {host}:{port} within {self.timeout_s:g} s: {_one_line(e)}") from None

    def all_reduce_mean(self, tensors):
        torch = self.torch
        keys = list(tensors)
        if not keys:
            return {}
        with torch.no_grad():
            flat = torch.cat([tensors[k].reshape(-1).to(torch.float32) for k in keys])
            try:
                self.dist.all_reduce(flat)
            except Exception as e:
                raise LearnerGroupError(f"learner {self.rank}: the gradient all-reduce over {self.world_size} "
                                        f"learners failed (a learner died, or did not reach the same update within "
                                        f"{self.timeout_s:g} s): {_one_line(e)}") from None
            flat /= self.world_size
            out, offset = {}, 0
            for k in keys:
                n = tensors[k].numel()
                out[k] = flat[offset:offset + n].view(tensors[k].shape).to(tensors[k].dtype)
                offset += n
        return out

    def destroy(self):
        if self.dist.is_initialized():
            try:
                self.dist.destroy_process_group()
            except Exception as e:  # Best effort: the peers may be gone.
                logger.warning("Leaving the torch.distributed group failed: %s", _one_line(e))


class TFProcessGroup(ProcessGroup):
    """``tf.distribute.MultiWorkerMirroredStrategy`` with one replica per learner process (ring all-reduce)."""

    backend = "tf"

    def __init__(self, rank, world_size, addresses, timeout_s):
        super().__init__(rank, world_size, addresses, timeout_s)
        import tensorflow as tf
        self.tf = tf
        resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
            tf.train.ClusterSpec({"worker": self.addresses}), task_type="worker", task_id=self.rank,
            rpc_layer="grpc")
        options = tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.RING,
            timeout_seconds=self.timeout_s)
        try:
            self.strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver,
                                                                      communication_options=options)
        except (RuntimeError, ValueError) as e:
            raise RLGraphSpecError(
                f"distributed learners on TensorFlow: the learner's MultiWorkerMirroredStrategy must be created "
                f"before TensorFlow runs anything in the process ({_one_line(e)}); start learners with "
                f"`rlgraph train CONFIG --executor distributed` (or call init_process_group first).") from None

    def run_update(self, fn, args, kwargs):
        return self.strategy.run(fn, args=args, kwargs=kwargs)

    def all_reduce_mean(self, tensors):
        if not tensors:
            return {}
        context = self.tf.distribute.get_replica_context()
        if context is None:
            raise RLGraphError("distributed_sync: an all-reduce outside of the strategy's replica context; "
                               "please report this.")
        return context.all_reduce(self.tf.distribute.ReduceOp.MEAN, dict(tensors))


class JaxProcessGroup(ProcessGroup):
    """JAX's multi-process runtime: ``jax.distributed.initialize`` with rank 0's address as the coordinator, CPU
    collectives over gloo, one device per learner process in the group's ``mesh``.

    The update programs of a ``distributed_sync`` executor run over ``mesh`` (``shard_map``, each process its own
    batch on its own device, ``rlgraph.executors.jax_executor.LearnerSharding``); ``all_reduce_mean`` is
    ``lax.pmean`` over the mesh's axis, which XLA runs as an all-reduce between the processes. The runtime is made
    recoverable (``jax_enable_recoverability``): a learner that dies fails the others' next all-reduce at once
    ("connection closed by peer") instead of JAX's coordination service aborting them after its heartbeat timeout.
    XLA's collectives have no deadline of their own: the executor waits at most ``timeout_s`` for an update
    (``LearnerSharding``; a program's first run, which compiles it, longer).

    Attributes:
        mesh: The ``jax.sharding.Mesh`` of one device per learner process (rank order), axis ``AXIS``.
        device: This process's device in ``mesh`` (its first local device).
    """

    backend = "jax"
    #: The mesh axis the learners' programs reduce over.
    AXIS = "learners"

    def __init__(self, rank, world_size, addresses, timeout_s):
        super().__init__(rank, world_size, addresses, timeout_s)
        from rlgraph.utils.backend import jax
        _check_jax_not_started()
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.config.update("jax_enable_recoverability", True)
        timeout = max(1, int(round(self.timeout_s)))
        try:
            jax.distributed.initialize(coordinator_address=self.addresses[0], num_processes=self.world_size,
                                       process_id=self.rank, initialization_timeout=timeout,
                                       heartbeat_timeout_seconds=max(10, timeout), shutdown_timeout_seconds=timeout)
        except RuntimeError as e:
            if "before any JAX" in str(e):
                raise RLGraphSpecError(f"distributed learners on JAX: {_one_line(e)}; call init_process_group before "
                                       f"JAX runs anything.") from None
            raise LearnerGroupError(f"learner {self.rank}: could not join the group of {self.world_size} learners at "
                                    f"{self.addresses[0]} within {self.timeout_s:g} s: {_one_line(e)}") from None
        except Exception as e:  # The coordinator's deadline, a refused port, ...
            raise LearnerGroupError(f"learner {self.rank}: could not join the group of {self.world_size} learners at "
                                    f"{self.addresses[0]} within {self.timeout_s:g} s: {_one_line(e)}") from None
        self.jax = jax
        first = {}
        for device in jax.devices():  # The default backend's devices of all processes.
            first.setdefault(device.process_index, device)
        if sorted(first) != list(range(self.world_size)):
            raise LearnerGroupError(f"learner {self.rank}: JAX sees devices of processes {sorted(first)}, expected "
                                    f"{self.world_size} learner processes.")
        self.device = first[self.rank]
        from jax.sharding import Mesh
        self.mesh = Mesh(np.array([first[r] for r in range(self.world_size)]), (self.AXIS,))

    def all_reduce_mean(self, tensors):
        """The means over the learners of ``tensors`` (any pytree of arrays); only inside a program over ``mesh``
        (``shard_map`` with axis ``AXIS``): XLA all-reduces them between the processes, as one flat buffer per
        dtype (one collective per dtype, not one per tensor: each is a round trip between the processes)."""
        jax = self.jax
        leaves, tree = jax.tree_util.tree_flatten(tensors)
        out = list(leaves)
        by_dtype = {}
        for i, leaf in enumerate(leaves):
            by_dtype.setdefault(jax.numpy.result_type(leaf), []).append(i)
        for indices in by_dtype.values():
            flat = jax.lax.pmean(jax.numpy.concatenate([jax.numpy.ravel(leaves[i]) for i in indices]), self.AXIS)
            offset = 0
            for i in indices:
                size = int(np.prod(np.shape(leaves[i]), dtype=np.int64))
                out[i] = flat[offset:offset + size].reshape(np.shape(leaves[i]))
                offset += size
        return jax.tree_util.tree_unflatten(tree, out)

    def destroy(self):
        try:
            self.jax.distributed.shutdown()
        except Exception as e:  # Best effort: the peers may be gone.
            logger.warning("Leaving the JAX distributed runtime failed: %s", _one_line(e))


def _check_jax_not_started():
    """Refuses a process in which JAX has initialised its backends: ``jax.distributed.initialize`` is too late there
    (a JAX without the private check passes: initialize's own error then says it)."""
    try:
        from jax._src import xla_bridge
        started = bool(xla_bridge.backends_are_initialized())
    except Exception:
        return
    if started:
        raise RLGraphSpecError(
            "distributed learners on JAX: jax.distributed.initialize must come before JAX runs anything in the "
            "process, and JAX has run already; start learners with `rlgraph train CONFIG --engine distributed` "
            "in a fresh process (or call init_process_group first).")


class HorovodProcessGroup(ProcessGroup):
    """The optional Horovod adapter (``pip install rlgraph[horovod]``): gradients averaged by Horovod's ring
    all-reduce (Sergeev and Del Balso 2018) instead of the backend's own collectives.

    Horovod's last release (0.28.1, 2023) builds against neither PyTorch 2.13 nor TensorFlow 2.21; the
    native groups above are the working path. Horovod's processes get their rank and size from Horovod's
    launcher: start every learner with ``horovodrun -np N rlgraph train CONFIG --executor distributed
    --learner-rank R`` and ``execution_spec.all_reduce: "horovod"`` plus ``learner_addresses`` (learner 0's
    control channel); the rank each process gets from Horovod must equal its learner rank.
    """

    def __init__(self, backend, rank, world_size, addresses, timeout_s):
        super().__init__(rank, world_size, addresses, timeout_s)
        self.backend = backend
        module = "horovod.tensorflow" if backend == "tf" else "horovod.torch"
        try:
            import importlib
            self.hvd = importlib.import_module(module)
        except Exception as e:  # ImportError, or a build that does not match the installed backend.
            raise RLGraphBackendError(
                f"execution_spec.all_reduce 'horovod': {module} does not import ({_one_line(e)}). Install it with "
                f"`pip install rlgraph[horovod]` (Horovod 0.28.1 builds against neither PyTorch 2.13 nor "
                f"TensorFlow 2.21), or use all_reduce 'native' (torch.distributed / tf.distribute), which "
                f"needs nothing else.") from None
        self.hvd.init()
        if (self.hvd.rank(), self.hvd.size()) != (self.rank, self.world_size):
            raise RLGraphSpecError(f"execution_spec.all_reduce 'horovod': Horovod made this process rank "
                                   f"{self.hvd.rank()} of {self.hvd.size()}, but it is learner {self.rank} of "
                                   f"{self.world_size}; launch learner R as Horovod's rank R (horovodrun -np "
                                   f"{self.world_size}).")

    def all_reduce_mean(self, tensors):
        if not tensors:
            return {}
        keys = list(tensors)
        try:
            reduced = self.hvd.grouped_allreduce([tensors[k] for k in keys], op=self.hvd.Average)
        except Exception as e:
            raise LearnerGroupError(f"learner {self.rank}: Horovod's all-reduce failed: {_one_line(e)}") from None
        return dict(zip(keys, reduced))

    def destroy(self):
        self.hvd.shutdown()


#: The all-reduce implementations (``execution_spec.all_reduce``).
ALL_REDUCE = ("native", "horovod")

#: The backends with a gradient all-reduce over learner processes (``init_process_group``).
GROUP_BACKENDS = ("tf", "pytorch", "jax")


def check_group_backend(backend):
    """The canonical name of ``backend`` ("tensorflow" -> "tf"); refuses, before any learner process starts, a
    backend without a gradient all-reduce over processes, and JAX in a process where JAX has run already (its
    learner group must come first).

    Raises:
        RLGraphBackendError: An unknown backend, or one not in ``GROUP_BACKENDS``.
        RLGraphSpecError: JAX, where it has run in this process already.
    """
    from rlgraph.utils.backend import normalize_backend
    backend = normalize_backend(backend)
    if backend == "jax":
        _check_jax_not_started()
    if backend in GROUP_BACKENDS:
        return backend
    raise RLGraphBackendError(f"--engine distributed: backend {backend!r} has no gradient all-reduce over learner "
                              f"processes; use one of {GROUP_BACKENDS}.")


def init_process_group(backend, rank, world_size, addresses, timeout_s=120.0, device=None, all_reduce="native"):
    """Makes this process learner ``rank`` of ``world_size``; returns its ``ProcessGroup``.

    Args:
        backend: "tf", "pytorch" or "jax" (others are refused: ``check_group_backend``).
        rank: This learner's index in [0, world_size).
        world_size: The number of learners.
        addresses: One "host:port" per learner (TF servers; PyTorch rendezvous and JAX coordinator at
            ``addresses[0]``).
        timeout_s: Seconds a collective (and the rendezvous) may wait for the others.
        device: PyTorch: the learner's device ("cuda:i" selects nccl).
        all_reduce: "native" (``torch.distributed`` / ``tf.distribute`` / ``jax.distributed``) or "horovod" (the
            optional adapter; TF and PyTorch).

    Raises:
        RLGraphSpecError: A bad rank, address list, a second group in this process, Horovod with JAX, or (JAX,
            TensorFlow) a group created after the backend ran something in the process.
        RLGraphBackendError: A backend without an all-reduce over processes.
        LearnerGroupError: The rendezvous failed.
    """
    global _current
    from rlgraph.utils.backend import normalize_backend
    if all_reduce == "horovod" and normalize_backend(backend) == "jax":
        raise RLGraphSpecError("execution_spec.all_reduce 'horovod': Horovod has no JAX binding; JAX learners "
                               "all-reduce through jax.distributed (all_reduce 'native').")
    backend = check_group_backend(backend)
    if _current is not None:
        raise RLGraphSpecError(f"distributed learners: this process already is {_current.describe()}.")
    if not 0 <= int(rank) < int(world_size):
        raise RLGraphSpecError(f"distributed learners: rank {rank} outside [0, {world_size}).")
    if len(addresses) != int(world_size) and backend == "tf":
        raise RLGraphSpecError(f"distributed learners: {world_size} learners need {world_size} addresses, got "
                               f"{len(addresses)} ({addresses}).")
    if all_reduce not in ALL_REDUCE:
        raise RLGraphSpecError(f"execution_spec.all_reduce: expected one of {ALL_REDUCE}, got {all_reduce!r}.")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if all_reduce == "horovod":
        group = HorovodProcessGroup(backend, rank, world_size, addresses, timeout_s)
    elif backend == "tf":
        group = TFProcessGroup(rank, world_size, addresses, timeout_s)
    elif backend == "jax":
        group = JaxProcessGroup(rank, world_size, addresses, timeout_s)
    else:
        group = TorchProcessGroup(rank, world_size, addresses, timeout_s, device)
    _current = group
    logger.info("Joined the learner group: %s.", group.describe())
    return group


def current_process_group():
    """This process's ``ProcessGroup`` (None outside a distributed run)."""
    return _current


def destroy_process_group():
    """Leaves the group (PyTorch, JAX's runtime); TensorFlow's strategy stays until the process ends. JAX's devices
    stay as the runtime made them: a process holds one JAX learner group in its life."""
    global _current
    if _current is not None:
        _current.destroy()
        _current = None


def _one_line(error):
    text = " ".join(str(error).split())
    return text[:300] + ("..." if len(text) > 300 else "")


__all__ = ["ALL_REDUCE", "GROUP_BACKENDS", "HorovodProcessGroup", "JaxProcessGroup", "ProcessGroup",
           "check_group_backend",
           "current_process_group", "destroy_process_group", "init_process_group"]
