"""The Ray engine's common part: the cluster, the actor processes, weight broadcasts and dead actors."""
import logging
import os
import socket
import time

import numpy as np

from rlgraph.execution.remote_actors import RemoteActorEngine
from rlgraph.utils.errors import RLGraphError, RLGraphSpecError

logger = logging.getLogger(__name__)

#: Seconds ``RayEngine.kill`` waits for actors still being created (see there), the first of them without a word.
ACTOR_CREATION_WAIT_S = 60.0
ACTOR_CREATION_QUIET_S = 2.0


class RayEngine(RemoteActorEngine):
    """Trains one agent config with actor processes on a Ray cluster and the learner in this process.

    The engine is an ``Engine`` the ``Trainer`` drives (``RemoteActorEngine``), so a Ray run has the local run's
    progress bar, TensorBoard scalars, checkpoints, resume, ``summary.json`` and learning curve. Each actor
    (``RaySampler``) holds an actor-only agent built from the same config, its own vector of environments and
    its own trajectory builder; the learner is a full agent here. Weights are put into the object store once per broadcast and handed to every actor by reference
    with its next sample request. An actor whose process dies (or whose sample times out) is replaced by a
    new one, which gets the current weights; the restarts and the environment steps lost with it are counted.

    Subclasses implement ``_run`` (how samples reach the learner) for their kind of learner.

    Args: those of ``RemoteActorEngine``.
    """

    ENGINE = "ray"
    DISPLAY_NAME = "Ray engine"

    def __init__(self, config, env_kwargs, learner_agent, spec, seed=0, checkpoint_replay=True):
        import ray

        super().__init__(config, env_kwargs, learner_agent, spec, seed, checkpoint_replay)
        self.ray = ray
        self.learner = learner_agent.learner
        self.owns_ray = _init_ray(spec, self._cpus_needed())
        self._check_resources()
        self.env_steps_lost = 0
        self.actor_env_steps = np.zeros(self.num_actors, np.int64)
        self.actor_seconds = np.zeros(self.num_actors)
        self._weights_ref, self._weights_version = None, -1
        self._steps_since_sync = 0
        self.sync_steps = spec.weight_sync_steps or 0
        self._actor_versions = [-1] * self.num_actors  # The weights version each actor was last sent.
        self._in_flight = {}  # stats ref -> (actor index, items ref, vector steps, launch time)
        self._actor_class = ray.remote(**self._actor_options())(_sampler_class())
        self._creations = {}  # actor handle -> ref of its first call (answered once the actor is created)
        self.actors = [self._make_actor(i) for i in range(self.num_actors)]

    # --- setup ----------------------------------------------------------------------------------------------
    def _cpus_needed(self):
        return self.num_actors * float(self.spec.actor_resources.get("num_cpus", 1))

    def _actor_options(self):
        return dict(max_restarts=0, max_task_retries=0, **self.spec.actor_resources)

    def _check_resources(self):
        available = self.ray.cluster_resources()
        for key in ("num_cpus", "num_gpus"):
            need = self.num_actors * float(self.spec.actor_resources.get(key, 0))
            have = float(available.get("CPU" if key == "num_cpus" else "GPU", 0))
            if need > have:
                raise RLGraphSpecError(
                    f"execution_spec: {self.num_actors} actors x actor_resources.{key}="
                    f"{self.spec.actor_resources.get(key)} need {need:g}, but the Ray cluster has {have:g}; use "
                    f"fewer actors (--num-actors) or smaller actor_resources.")

    def _make_actor(self, index):
        total = self.num_actors * self.envs_per_actor
        self._actor_versions[index] = -1
        return self._created(self._actor_class.remote(index, self.config, self.actor_env_kwargs(index),
                                                      self.agent.backend, self.actor_seed(index),
                                                      index * self.envs_per_actor, total))

    def _created(self, handle):
        """Notes a new actor (a ``RaySampler`` or a replay shard): its first call, ``pid``, answers once the actor
        is created (``kill`` needs to know)."""
        self._creations[handle] = handle.pid.remote()
        return handle

    # --- weights ----------------------------------------------------------------------------------------------
    def _current_weights(self):
        """The object ref of the weights actors get now: the learner's weights are put into the object store
        (once for all actors) when they changed and ``weight_sync_steps`` env steps were collected since the
        last put."""
        version = self.learner.weights_version
        if self._weights_ref is None or (version != self._weights_version
                                         and self._steps_since_sync >= self.sync_steps):
            self._weights_ref = self.ray.put(self.agent.get_weights())
            self._weights_version = version
            self._steps_since_sync = 0
        return self._weights_ref, self._weights_version

    def _launch(self, index, vector_steps, timesteps=None):
        """Starts a sample task on actor ``index``; the current weights go along if it lacks them."""
        ref, version = self._current_weights()
        weights = None
        if self._actor_versions[index] != version:
            weights = ref
            self._actor_versions[index] = version
        items_ref, stats_ref = self.actors[index].sample.options(num_returns=2).remote(
            vector_steps, weights, version if weights is not None else None, timesteps)
        self._in_flight[stats_ref] = (index, items_ref, vector_steps, time.perf_counter())
        return stats_ref

    def _in_flight_of(self, index):
        return sum(1 for i, *_ in self._in_flight.values() if i == index)

    def _wait(self, refs, timeout):
        if not refs:
            raise RLGraphError("Ray engine: nothing in flight to wait for (the learner queue is full but the "
                               "learner did not update); please report this.")
        ready, _ = self.ray.wait(list(refs), num_returns=1, timeout=timeout)
        return ready

    def _collect(self, stats_ref):
        """``(index, items ref, stats)`` of a finished sample, or None if its actor died (then replaced)."""
        index, items_ref, vector_steps, _ = self._in_flight.pop(stats_ref)
        try:
            stats = self.ray.get(stats_ref)
        except self.ray.exceptions.RayActorError as e:
            self._replace_actor(index, f"its process died ({type(e).__name__})")
            return None
        self.actor_env_steps[index] += stats["env_steps"]
        self.actor_seconds[index] += stats["seconds"]
        return index, items_ref, stats

    def _check_timeouts(self):
        now = time.perf_counter()
        for ref, (index, _, _, started) in list(self._in_flight.items()):
            if ref in self._in_flight and now - started > self.spec.sample_timeout_s:
                self._replace_actor(index, f"a sample took more than sample_timeout_s={self.spec.sample_timeout_s}s")

    def _replace_actor(self, index, why):
        """Replaces a dead actor by a new process; its in-flight samples count as lost env steps."""
        if self.actor_restarts >= self.spec.max_actor_restarts:
            raise RLGraphError(f"Ray engine: actor {index} failed ({why}) after {self.actor_restarts} restarts "
                               f"(execution_spec.max_actor_restarts={self.spec.max_actor_restarts}); stopping.")
        lost = [ref for ref, (i, *_) in self._in_flight.items() if i == index]
        for ref in lost:
            self.env_steps_lost += self._in_flight.pop(ref)[2] * self.envs_per_actor
        self.kill(self.actors[index])
        self.actor_restarts += 1
        logger.warning("Ray engine: actor %d %s; replacing it (restart %d).", index, why, self.actor_restarts)
        self.actors[index] = self._make_actor(index)

    def kill(self, *handles):
        """Ends Ray actor processes for good (those already gone are skipped).

        Ray drops a kill that reaches an actor's worker process while the actor is still being created (the
        worker logs "Mismatched ActorID: ignoring KillActor"), yet marks the actor dead: its process lives on
        and holds its CPUs, so the next engine's actors wait for them forever. Actors still being created are
        therefore killed once their creation ends (waiting at most ``ACTOR_CREATION_WAIT_S`` for all of them
        together); the others at once.
        """
        refs = [ref for ref in (self._creations.pop(handle, None) for handle in handles) if ref is not None]
        left = self._unanswered(refs, min(ACTOR_CREATION_QUIET_S, ACTOR_CREATION_WAIT_S))
        if left:
            logger.warning("Ray engine: waiting up to %.0f s for %d actor(s) still being created before stopping "
                           "them (Ray ignores a kill during creation).", ACTOR_CREATION_WAIT_S, len(left))
            left = self._unanswered(left, max(0.0, ACTOR_CREATION_WAIT_S - ACTOR_CREATION_QUIET_S))
            if left:
                logger.warning("Ray engine: %d actor(s) still being created after %.0f s are killed now; Ray may "
                               "keep their processes (and CPUs) until the cluster shuts down.", len(left),
                               ACTOR_CREATION_WAIT_S)
        for handle in handles:
            try:
                self.ray.kill(handle, no_restart=True)
            except Exception:  # noqa: BLE001 - it is gone already.
                pass

    def _unanswered(self, refs, timeout):
        """The refs of ``refs`` still unanswered after waiting at most ``timeout`` seconds for all of them."""
        if not refs:
            return []
        return self.ray.wait(refs, num_returns=len(refs), timeout=timeout)[1]

    # --- the engine interface -----------------------------------------------------------------------------
    def run(self, num_env_steps):
        """Trains for at least ``num_env_steps`` environment steps (over all actors).

        Returns:
            dict with ``env_steps``, ``episodes`` (list of (return, length)), ``results`` (update results) and
            ``scalars`` (per-actor throughput, for TensorBoard).
        """
        out = self._run(int(num_env_steps))
        out["scalars"] = {f"actors/{i}/env_steps_per_second": float(s / max(t, 1e-9))
                          for i, (s, t) in enumerate(zip(self.actor_env_steps, self.actor_seconds))}
        return out

    def _run(self, num_env_steps):
        raise NotImplementedError

    def actor_pids(self):
        """The process ids of the actors (index order)."""
        return self.ray.get([a.pid.remote() for a in self.actors])

    def summary(self):
        """What a run's ``summary.json`` adds for this engine."""
        return dict(super().summary(), env_steps_lost=int(self.env_steps_lost),
                    actors=[dict(index=i, env_steps=int(s), env_steps_per_second=round(float(s / max(t, 1e-9)), 1))
                            for i, (s, t) in enumerate(zip(self.actor_env_steps, self.actor_seconds))],
                    execution_spec=self.spec.to_dict(redact=True))

    def _loaded(self):
        # The next sample requests carry the loaded weights. (A resumed Ray run's actors start afresh: their
        # environments and partial trajectories are not stored; their timing makes a Ray run irreproducible.)
        self._weights_ref, self._weights_version = None, -1

    def close(self):
        """Stops the actors (and the local Ray cluster this engine started)."""
        self.kill(*self.actors)
        self._in_flight.clear()
        if self.owns_ray and self.ray.is_initialized():
            self.ray.shutdown()


def _sampler_class():
    from rlgraph.execution.ray.ray_sampler import RaySampler
    return RaySampler


def _check_address(address, timeout=5.0):
    """Fails fast with a clear error if a ``host:port`` Ray address does not answer."""
    if address in ("auto", "local"):
        return
    target = address.split("://", 1)[-1]
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise RLGraphSpecError(f"--ray-address / execution_spec.ray_address: expected HOST:PORT (or 'auto'), "
                               f"got {address!r}.")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except OSError as e:
        raise RLGraphError(f"Ray address {address!r} does not answer ({e}); start a cluster there "
                           f"(`ray start --head --port {port}`) or leave the address out for a local one.") from None


def _init_ray(spec, cpus_needed):
    """Connects to ``spec.ray_address`` or starts a local Ray; True if this call started it (and owns it)."""
    import ray

    if spec.ray_address:
        _check_address(spec.ray_address)
    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if spec.ray_address:
        ray.init(address=spec.ray_address, log_to_driver=False, configure_logging=False)
    else:
        ray.init(num_cpus=max(int(np.ceil(cpus_needed)), os.cpu_count() or 1), include_dashboard=False,
                 log_to_driver=False, configure_logging=False)
    return True
