"""The ``execution_spec`` section of a training config: how an engine places actors and learners."""
import dataclasses
import logging
import os
import sys
import typing

from rlgraph.utils.errors import RLGraphSpecError
from rlgraph.utils.validation import (AnyOf, Bool, HostPort, Int, ListOf, Mapping, Number, OneOf, Optional, Str,
                                      check_spec, doc_args, json_schema)

logger = logging.getLogger(__name__)

#: The transports of the central-inference engine.
TRANSPORTS = ("shm", "grpc")

#: TensorFlow's CPU allocators (``tf_cpu_allocator``) and the value of the variable that selects them.
TF_CPU_ALLOCATORS = {"bfc": "true", "default": "false"}
#: The environment variable TensorFlow reads once, when it creates its CPU allocator (at its first op).
TF_CPU_ALLOCATOR_VARIABLE = "TF_CPU_ALLOCATOR_USE_BFC"

#: The device strategies (``rlgraph.executors.device_strategy.STRATEGIES``).
DEVICE_STRATEGIES = ("default", "multi_device_sync")

#: What each ``actor_resources`` key accepts.
RESOURCES_SCHEMA = dict(num_cpus=Number(min=0), num_gpus=Number(min=0), memory=Number(min=0),
                        resources=Mapping())
#: The keys an ``actor_resources`` dict may hold (Ray's actor options).
RESOURCE_KEYS = tuple(RESOURCES_SCHEMA)

#: What each ``execution_spec`` key accepts (the dataclass below holds the defaults and the descriptions).
SCHEMA = dict(
    num_actors=Int(min=1), envs_per_actor=Optional(Int(min=1)), sample_steps=Optional(Int(min=1)),
    max_samples_in_flight=Int(min=1), learner_queue_size=Optional(Int(min=1)), num_replay_shards=Int(min=1),
    replay_prefetch=Int(min=1), max_update_backlog=Int(min=1), weight_sync_steps=Optional(Int(min=0)),
    actor_resources=Mapping(RESOURCES_SCHEMA), ray_address=Optional(Str()), max_actor_restarts=Int(min=0),
    sample_timeout_s=Number(min=1), transport=OneOf(*TRANSPORTS), inference_batch_size=Optional(Int(min=1)),
    inference_timeout_ms=Number(min=0), server_address=Optional(HostPort()), token=Optional(Str()),
    local_actors=Bool(), device_strategy=OneOf(*DEVICE_STRATEGIES), num_learners=Int(min=1),
    learner_addresses=Optional(ListOf(HostPort(), min_items=1, what="a list of \"host:port\", one per learner")),
    learner_rank=Int(min=0), envs_per_learner=Optional(Int(min=1)), learner_timeout_s=Number(min=1),
    all_reduce=OneOf("native", "horovod"), learner_thread=Bool(),
    math_threads=Optional(AnyOf(Int(min=1), Mapping(dict(tf=Int(min=1), pytorch=Int(min=1))),
                                what="a positive int, or a dict {\"tf\": N, \"pytorch\": N} of them")),
    tf_cpu_allocator=Optional(OneOf(*TF_CPU_ALLOCATORS)), malloc_pooling=Bool(),
    devices=Optional(ListOf(Str(), min_items=1,
                            what="a non-empty list of device strings (e.g. [\"gpu:0\", \"gpu:1\"])")))


@dataclasses.dataclass
class ExecutionSpec:
    """Settings of the execution engines; every key has a default, so every config runs on every engine.

    Attributes:
        num_actors: Actor processes (each steps its own vector of environments).
        envs_per_actor: Environments per actor (default: the config's ``environment_spec.num_envs`` divided
            over the actors, so that the total equals the local run's).
        sample_steps: Vector steps per actor task (default: the agent's unroll length for IMPALA/APPO,
            else 32).
        max_samples_in_flight: Sample tasks outstanding per actor (2 lets an actor step while its last
            result travels).
        learner_queue_size: IMPALA/APPO: actor results the learner holds or awaits at most; when it is
            full no new sample is requested (back-pressure: the object store never grows without bound).
        num_replay_shards: Replay agents: prioritized-replay shards (Ray actors) the replay is split over.
        replay_prefetch: Replay agents: replay batches requested ahead of the learner.
        max_update_backlog: Replay agents: updates the learner may fall behind the config's replay ratio
            before actors are paused.
        weight_sync_steps: Environment steps between weight broadcasts (0: after every update).
        actor_resources: Resources of each actor process (Ray's ``num_cpus``, ``num_gpus``, ...).
        ray_address: The Ray cluster to join (None: start a local one).
        max_actor_restarts: Dead actors (or replay shards) replaced in one run before the run fails.
        sample_timeout_s: Seconds a sample task may take before its actor counts as dead (first-call
            graph builds included); for central inference, seconds an actor may take to send its next step.
        transport: Central inference: how actors reach the inference server, "shm" (shared memory on one
            machine) or "grpc" (across machines).
        inference_batch_size: Central inference: the most environment rows one inference call serves (None:
            all actors' environments).
        inference_timeout_ms: Central inference: how long the server waits for more actors' requests to
            join a batch before it serves the rows it has (0: serve whatever is ready).
        server_address: Central inference over gRPC: the address the server binds (default: the loopback
            address, any free port).
        token: Central inference over gRPC: a shared secret that every actor's stream must carry (None: none).
        local_actors: Central inference over gRPC: start the actor processes on this machine (false: wait for
            remote actors to connect; see ``examples/central_inference_cartpole.py``).
        device_strategy: How the learner's graph is placed on devices: "default" (one device) or
            "multi_device_sync" (one tower per entry of ``devices`` on a slice of each update batch, gradients
            averaged, one step; ``rlgraph.executors.multi_device_sync``). The agent reads both keys.
        devices: The towers' devices for "multi_device_sync", e.g. ["gpu:0", "gpu:1"] (a device may repeat).
        num_learners: Distributed learners (``--engine distributed``): learner processes that all-reduce
            their gradients and keep one set of weights, each with its own environments.
        learner_addresses: Distributed learners on several machines: one "host:port" per learner, rank order
            (TensorFlow's collective server of each learner; learner 0's port is also PyTorch's rendezvous,
            and its port + 1 the control channel). None: all learners on this machine, started by learner 0.
        learner_rank: This process's learner index when ``learner_addresses`` are given (0 trains and writes
            checkpoints; start the others with ``--learner-rank R``).
        envs_per_learner: Environments per learner (default: ``environment_spec.num_envs`` divided over the
            learners, so that their union is the local run's batch).
        learner_timeout_s: Seconds a learner waits for the others (start-up, each all-reduce, each command)
            before the run fails with an error naming the learner.
        all_reduce: How learners average gradients: "native" (``torch.distributed`` gloo/nccl, TensorFlow's
            ``MultiWorkerMirroredStrategy``) or "horovod" (the optional adapter, ``pip install
            rlgraph[horovod]``; learners launched by ``horovodrun``).
        learner_thread: Local runs: learn in a thread beside the sampling loop, the actor acting with its own
            copy of the weights, handed over at fixed points (IMPALA/APPO: each unroll; DQN, Ape-X, R2D2: each
            scheduled update; ``rlgraph.workers.PipelinedWorker``): sampling and learning overlap on two cores,
            every sample is one hand-over's updates older when learned from, and runs stay repeatable and
            resume exactly.
        math_threads: Local runs: threads the backend uses inside one op (PyTorch's ``torch.set_num_threads``,
            TensorFlow's intra-op pool) for the run (PyTorch's count is restored after it): one count, or one
            per backend (``{"pytorch": 2, "tf": 1}``; a backend left out keeps its default). None: the
            process's defaults (``rlgraph train`` runs with ``OMP_NUM_THREADS=1`` unless it is set, which
            PyTorch follows; TensorFlow's pool defaults to the machine's cores). The other engines keep the
            process's setting: there the learner shares the cores with actor processes or other learners, and
            more busy threads than cores stall (spinning OpenMP threads).
        tf_cpu_allocator: TensorFlow's allocator for CPU tensors in the training process, "bfc" (its pooling
            best-fit-with-coalescing allocator: freed buffers are kept for the next step's tensors) or
            "default" (TensorFlow's default: the system's allocator, which hands large freed buffers back, so a
            learner whose update makes megabyte-sized intermediates faults their pages in anew on every update,
            ~1000 page faults and ~5 ms of system time per R2D2 update on CartPole; or, where TensorFlow turns
            oneDNN on by default, on CPUs with AVX-512 VNNI/BF16 or AMX, oneDNN's own pooling allocator, with
            which "bfc" changes nothing measurable). Set before TensorFlow's first op (it reads
            ``TF_CPU_ALLOCATOR_USE_BFC`` once); where TensorFlow has already run, the run keeps the allocator it
            has (logged as a warning). None: the process's environment decides (TensorFlow's default allocator
            unless ``TF_CPU_ALLOCATOR_USE_BFC`` is set). PyTorch runs ignore it.
        malloc_pooling: Pooling in the C allocator (glibc's malloc) of the training process and the
            processes it starts after: freed buffers of up to 32 MiB are kept for the next update instead of
            being handed back to the system and faulted in anew (``rlgraph.utils.malloc_pooling``; fixed
            mmap threshold 32 MiB, trim threshold 1 GiB). PyTorch's CPU tensors come from this allocator: its
            learner's per-update intermediates are what it saves (on TensorFlow, ``tf_cpu_allocator`` "bfc"
            pools them). Where the C library is not glibc it is not applied (logged as a warning).
    """

    num_actors: int = 2
    envs_per_actor: typing.Optional[int] = None
    sample_steps: typing.Optional[int] = None
    max_samples_in_flight: int = 2
    learner_queue_size: typing.Optional[int] = None
    num_replay_shards: int = 2
    replay_prefetch: int = 4
    max_update_backlog: int = 8
    weight_sync_steps: typing.Optional[int] = None
    actor_resources: dict = dataclasses.field(default_factory=lambda: {"num_cpus": 1})
    ray_address: typing.Optional[str] = None
    max_actor_restarts: int = 10
    sample_timeout_s: float = 300.0
    transport: str = "shm"
    inference_batch_size: typing.Optional[int] = None
    inference_timeout_ms: float = 2.0
    server_address: typing.Optional[str] = None
    token: typing.Optional[str] = None
    local_actors: bool = True
    device_strategy: str = "default"
    devices: typing.Optional[list] = None
    num_learners: int = 1
    learner_addresses: typing.Optional[list] = None
    learner_rank: int = 0
    envs_per_learner: typing.Optional[int] = None
    learner_timeout_s: float = 120.0
    all_reduce: str = "native"
    learner_thread: bool = False
    math_threads: typing.Union[int, dict, None] = None
    tf_cpu_allocator: typing.Optional[str] = None
    malloc_pooling: bool = False

    @classmethod
    def from_config(cls, config, path="execution_spec", **overrides):
        """The spec from a training config's ``execution_spec`` (absent: defaults), then ``overrides``
        (command-line values; None leaves the config's). Unknown keys and bad values raise
        ``RLGraphSpecError`` naming ``path.key`` (checked by ``SCHEMA``)."""
        spec = config.get("execution_spec") if isinstance(config, dict) else None
        check_spec(spec, SCHEMA, path)
        values = dict(spec or {})
        values.update({k: v for k, v in overrides.items() if v is not None})
        values = check_spec(values, SCHEMA, path)
        if values.get("device_strategy", "default") == "multi_device_sync" and not values.get("devices"):
            raise RLGraphSpecError(f"{path}.devices: device_strategy 'multi_device_sync' needs a list of devices, "
                                   f"one per tower (e.g. [\"gpu:0\", \"gpu:1\"]).")
        if values.get("device_strategy", "default") == "default" and values.get("devices"):
            raise RLGraphSpecError(f"{path}.devices: devices need device_strategy 'multi_device_sync'.")
        addresses = values.get("learner_addresses")
        learners = values.get("num_learners", 1)
        if addresses is not None and len(addresses) != learners:
            raise RLGraphSpecError(f"{path}.learner_addresses: {len(addresses)} addresses for num_learners="
                                   f"{learners}; give one \"host:port\" per learner (or set num_learners to "
                                   f"{len(addresses)}).")
        if values.get("learner_rank", 0) >= learners:
            raise RLGraphSpecError(f"{path}.learner_rank: {values['learner_rank']} is not below num_learners="
                                   f"{learners}.")
        if values.get("learner_rank", 0) and addresses is None:
            raise RLGraphSpecError(f"{path}.learner_rank: a learner of rank > 0 joins the learners at "
                                   f"learner_addresses, which are not given.")
        return cls(**values)

    def math_threads_for(self, backend):
        """The ``math_threads`` of ``backend`` ("tf" or "pytorch"; None: not set for it)."""
        if isinstance(self.math_threads, dict):
            return self.math_threads.get(backend)
        return self.math_threads

    def apply_math_threads(self, backend):
        """Sets ``backend``'s math threads in this process, if the spec sets them (before the agent is built:
        TensorFlow fixes its pools when it first runs); returns a function restoring the previous count where
        the backend can (PyTorch)."""
        threads = self.math_threads_for(backend)
        if threads is None:
            return lambda: None
        from rlgraph.backends import get_backend
        target = get_backend(backend)
        previous = target.set_math_threads(threads)
        return (lambda: None) if previous is None else (lambda: target.set_math_threads(previous))

    def apply_tf_cpu_allocator(self):
        """Selects TensorFlow's CPU allocator for this process (and the processes it starts after), if the spec
        sets one; warns where TensorFlow has already created its allocator, which then stays."""
        if self.tf_cpu_allocator is None:
            return
        value = TF_CPU_ALLOCATORS[self.tf_cpu_allocator]
        if os.environ.get(TF_CPU_ALLOCATOR_VARIABLE) == value:
            return
        os.environ[TF_CPU_ALLOCATOR_VARIABLE] = value
        if _tensorflow_has_run():
            logger.warning("tf_cpu_allocator %r not applied: TensorFlow has already run in this process and keeps "
                           "its CPU allocator (select it before anything runs on TensorFlow, e.g. in a fresh "
                           "process, or set %s=%s).", self.tf_cpu_allocator, TF_CPU_ALLOCATOR_VARIABLE, value)

    def apply_malloc_pooling(self):
        """Turns on pooling in glibc's malloc for this process and the processes it starts after, if the spec
        asks for it (a process's own setting, which a run leaves on)."""
        if self.malloc_pooling:
            from rlgraph.utils.malloc_pooling import enable_malloc_pooling
            enable_malloc_pooling()

    def envs_per_actor_for(self, num_envs):
        """Environments per actor: the spec's value, else ``num_envs`` divided over the actors (>= 1)."""
        return self.envs_per_actor or max(1, int(num_envs) // self.num_actors)

    @classmethod
    def json_schema(cls):
        """The JSON Schema (draft 2020-12) of an ``execution_spec`` section."""
        defaults = {f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
                    for f in dataclasses.fields(cls)}
        return json_schema(SCHEMA, descriptions=doc_args(cls), defaults=defaults)

    def to_dict(self, redact=False):
        """The spec as a dict; ``redact``: the gRPC ``token`` as "***" (for summaries and logs)."""
        out = dataclasses.asdict(self)
        if redact and out["token"] is not None:
            out["token"] = "***"
        return out


def _tensorflow_has_run():
    """Whether TensorFlow has started its runtime in this process (imports nothing that is not imported)."""
    if "tensorflow" not in sys.modules:
        return False
    try:
        from tensorflow.python.eager import context
        return context.context()._context_handle is not None
    except (ImportError, AttributeError):  # A TensorFlow without the attribute: assume it has run.
        return True
