"""Synchronous data-parallel learning over processes: towers in each learner, gradients all-reduced over all.

The ``distributed_sync`` device strategy is ``multi_device_sync`` (one tower per local device on a slice of
the batch, the towers' gradients averaged) followed by an all-reduce of the averaged gradients over the
learner processes of the run (``rlgraph.executors.process_group``), so that every learner applies the same
step and all keep one set of weights; one learner with the union of the learners' batches makes the same
update (losses that are batch means, equal batch sizes). Every other API method (acting, evaluation) runs
locally. On TensorFlow the update methods run inside ``MultiWorkerMirroredStrategy.run`` and reduce through
its replica context (collective ring all-reduce); on PyTorch through one ``torch.distributed.all_reduce``. On
JAX an update stays one program, run over the group's ``Mesh`` of one device per learner process (``shard_map``:
each learner's program on its own batch, ``rlgraph.executors.jax_executor.LearnerSharding``), its gradients
averaged inside by ``lax.pmean`` (``_reduce_gradients``), which XLA runs as an all-reduce over the processes;
one tower per learner (its first device).

The distributed engine (``rlgraph train CONFIG --executor distributed``) sets this strategy on its learners
and creates the process group first; a config's ``multi_device_sync`` devices become each learner's towers.
"""
import logging

from rlgraph.executors.multi_device_sync import MultiDeviceSyncStrategy
from rlgraph.executors.process_group import current_process_group
from rlgraph.utils.errors import RLGraphSpecError

logger = logging.getLogger(__name__)


class DistributedSyncStrategy(MultiDeviceSyncStrategy):
    """Towers on ``devices`` in each learner process, gradients averaged over towers and over learners.

    Args:
        devices: This learner's tower devices (None: one tower on the learner's default device: TF's first
            GPU if it has one, else the CPU; PyTorch's where the weights are; JAX's first local device). On JAX
            every tower must be the process's first local device (one tower per learner process).
        where: The config path named in errors.

    Attributes:
        group: The process's ``ProcessGroup`` (after ``prepare``).
    """

    type_name = "distributed_sync"

    def __init__(self, devices=None, where="device_strategy"):
        self._default_devices = devices is None
        super().__init__(devices if devices is not None else ["cpu"], where=where)
        self.group = None

    def to_spec(self):
        return {"type": self.type_name, "devices": None if self._default_devices else list(self.devices)}

    def __repr__(self):
        return f"DistributedSyncStrategy(devices={self.devices}, group={self.group and self.group.describe()})"

    def prepare(self, executor):
        self.group = current_process_group()
        if self.group is None:
            raise RLGraphSpecError(f"{self.where}: 'distributed_sync' needs this process to be one of a run's "
                                   f"learners: start it with `rlgraph train CONFIG --executor distributed "
                                   f"--num-learners N` (or call rlgraph.executors.process_group."
                                   f"init_process_group first).")
        if self.group.backend != executor.backend.name:
            raise RLGraphSpecError(f"{self.where}: the learner group runs {self.group.backend}, but this executor "
                                   f"{executor.backend.name}.")
        if self._default_devices:
            self.devices = [_default_device(executor)]
            from rlgraph.executors.device_strategy import parse_device
            self.parsed = [parse_device(self.devices[0])]
        super().prepare(executor)
        executor.meta_graph.learners = self.group.world_size
        logger.info("distributed_sync: %s; towers %s.", self.group.describe(), self.tower_devices)

    def _check_devices(self, backend, root):
        if backend != "jax":
            return super()._check_devices(backend, root)
        # JAX: "cpu:i" names this process's local devices (``jax.devices`` lists every learner's).
        from rlgraph.utils.backend import jax
        first = self.group.device
        for i, (kind, idx) in enumerate(self.parsed):
            try:
                local = jax.local_devices(backend=kind)
            except RuntimeError:  # No backend of that platform.
                local = []
            if idx >= len(local) or local[idx] != first:
                raise RLGraphSpecError(
                    f"{self.where}.devices[{i}]: {self.devices[i]!r} is not this learner's device: distributed JAX "
                    f"learners run one tower each, on the process's first device ({first}); leave "
                    f"execution_spec.devices out (or name only that device).")
        return [f"{first.platform}:0"]

    def _reduce_gradients(self, gradients):
        return self.group.all_reduce_mean(gradients)

    def _wrap_towers(self, towers):
        group = self.group

        def replicated(*args, **kwargs):
            return group.run_update(towers, args, kwargs)
        replicated.__name__ = getattr(towers, "__name__", "update")
        replicated.__wrapped__ = towers
        return replicated


def _default_device(executor):
    if executor.backend.name == "tf":
        from rlgraph.utils.backend import tf
        return "gpu:0" if tf.config.list_logical_devices("GPU") else "cpu"
    if executor.backend.name == "jax":
        return f"{current_process_group().device.platform}:0"
    return str(executor.root.device or "cpu")


__all__ = ["DistributedSyncStrategy"]
