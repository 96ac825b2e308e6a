"""The ``execution_spec`` section of a training config: how an engine places actors and learners."""
import dataclasses
import difflib
from typing import Optional

from rlgraph.utils.errors import RLGraphSpecError

#: The keys an ``actor_resources`` dict may hold (Ray's actor options).
RESOURCE_KEYS = ("num_cpus", "num_gpus", "memory", "resources")


def _int(minimum):
    def check(value):
        return not isinstance(value, bool) and isinstance(value, int) and value >= minimum
    check.what = f"an int >= {minimum}"
    return check


def _optional(check):
    def optional(value):
        return value is None or check(value)
    optional.what = f"null or {check.what}"
    return optional


def _number(minimum):
    def check(value):
        return not isinstance(value, bool) and isinstance(value, (int, float)) and value >= minimum
    check.what = f"a number >= {minimum}"
    return check


def _string(value):
    return isinstance(value, str) and bool(value)


_string.what = "a non-empty string"


def _resources(value):
    return isinstance(value, dict) and set(value) <= set(RESOURCE_KEYS)


_resources.what = f"a dict with keys among {list(RESOURCE_KEYS)}"

def _bool(value):
    return isinstance(value, bool)


_bool.what = "true or false"

#: The transports of the central-inference engine.
TRANSPORTS = ("shm", "grpc")


def _transport(value):
    return value in TRANSPORTS


_transport.what = f"one of {list(TRANSPORTS)}"


def _address(value):
    if not isinstance(value, str):
        return False
    host, _, port = value.rpartition(":")
    return bool(host) and port.isdigit() and int(port) < 65536


_address.what = "a 'HOST:PORT' string (port 0: any free port)"

#: The device strategies (``rlgraph.executors.device_strategy.STRATEGIES``).
DEVICE_STRATEGIES = ("default", "multi_device_sync")


def _device_strategy(value):
    return value in DEVICE_STRATEGIES


_device_strategy.what = f"one of {list(DEVICE_STRATEGIES)}"


def _devices(value):
    return isinstance(value, list) and bool(value) and all(isinstance(d, str) and d for d in value)


_devices.what = "a non-empty list of device strings (e.g. [\"gpu:0\", \"gpu:1\"])"


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
    """

    num_actors: int = 2
    envs_per_actor: Optional[int] = None
    sample_steps: Optional[int] = None
    max_samples_in_flight: int = 2
    learner_queue_size: Optional[int] = None
    num_replay_shards: int = 2
    replay_prefetch: int = 4
    max_update_backlog: int = 8
    weight_sync_steps: Optional[int] = None
    actor_resources: dict = dataclasses.field(default_factory=lambda: {"num_cpus": 1})
    ray_address: Optional[str] = None
    max_actor_restarts: int = 10
    sample_timeout_s: float = 300.0
    transport: str = "shm"
    inference_batch_size: Optional[int] = None
    inference_timeout_ms: float = 2.0
    server_address: Optional[str] = None
    token: Optional[str] = None
    local_actors: bool = True
    device_strategy: str = "default"
    devices: Optional[list] = None

    _CHECKS = dict(num_actors=_int(1), envs_per_actor=_optional(_int(1)), sample_steps=_optional(_int(1)),
                   max_samples_in_flight=_int(1), learner_queue_size=_optional(_int(1)),
                   num_replay_shards=_int(1), replay_prefetch=_int(1), max_update_backlog=_int(1),
                   weight_sync_steps=_optional(_int(0)), actor_resources=_resources,
                   ray_address=_optional(_string), max_actor_restarts=_int(0), sample_timeout_s=_number(1),
                   transport=_transport, inference_batch_size=_optional(_int(1)),
                   inference_timeout_ms=_number(0), server_address=_optional(_address), token=_optional(_string),
                   local_actors=_bool,
                   device_strategy=_device_strategy, devices=_optional(_devices))

    @classmethod
    def from_config(cls, config, path="execution_spec", **overrides):
        """The spec from a training config's ``execution_spec`` (absent: defaults), then ``overrides``
        (command-line values; None leaves the config's). Unknown keys and bad values raise
        ``RLGraphSpecError`` naming ``path.key``."""
        spec = config.get("execution_spec") if isinstance(config, dict) else None
        if spec is None:
            spec = {}
        if not isinstance(spec, dict):
            raise RLGraphSpecError(f"{path}: expected a JSON object, got {spec!r}.")
        values = dict(spec)
        values.update({k: v for k, v in overrides.items() if v is not None})
        names = [f.name for f in dataclasses.fields(cls)]
        for key in values:
            if key not in names:
                close = difflib.get_close_matches(key, names, n=3)
                hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
                raise RLGraphSpecError(f"{path}.{key}: unknown key.{hint} Accepted: {', '.join(names)}.")
        for key, value in values.items():
            check = cls._CHECKS[key]
            if not check(value):
                raise RLGraphSpecError(f"{path}.{key}: expected {check.what}, got {value!r}.")
        if values.get("device_strategy", "default") == "multi_device_sync" and not values.get("devices"):
            raise RLGraphSpecError(f"{path}.devices: device_strategy 'multi_device_sync' needs a list of devices, "
                                   f"one per tower (e.g. [\"gpu:0\", \"gpu:1\"]).")
        if values.get("device_strategy", "default") == "default" and values.get("devices"):
            raise RLGraphSpecError(f"{path}.devices: devices need device_strategy 'multi_device_sync'.")
        return cls(**values)

    def envs_per_actor_for(self, num_envs):
        """Environments per actor: the spec's value, else ``num_envs`` divided over the actors (>= 1)."""
        return self.envs_per_actor or max(1, int(num_envs) // self.num_actors)

    def to_dict(self):
        return dataclasses.asdict(self)
