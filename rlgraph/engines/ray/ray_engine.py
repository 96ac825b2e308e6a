"""The Ray engine's common part: the cluster, the actor processes, weight broadcasts and dead actors."""
import logging
import os
import socket
import time
import warnings

import numpy as np

from rlgraph.engines.remote_actors import RemoteActorEngine
from rlgraph.utils.errors import RLGraphError, RLGraphSpecError
from rlgraph.utils.process_watchdog import start_reaper, stop_reaper
from rlgraph.utils.user_modules import UserCode

logger = logging.getLogger(__name__)

#: Seconds ``RayEngine.kill`` waits for actors still being created (see there), the first of them without a word.
ACTOR_CREATION_WAIT_S = 60.0
ACTOR_CREATION_QUIET_S = 2.0

#: Ray settings of the local Ray the engine starts (``ray.init(_system_config=...)``; Ray 2.60's
#: ``ray_config_def.h``). Task events off: the workers report no per-task state events, so the GCS keeps no record
#: per sample request (with them it grew ~17 MB/min over a long run); where a worker still reports, the GCS keeps
#: at most a few thousand tasks. ``include_dashboard=False`` leaves the dashboard's web UI out; Ray 2.60 always
#: starts its minimal API server and the raylet's dashboard and runtime-env agents (no setting stops them), and
#: they, like the GCS and raylet, end with this process (Ray's kernel fate-sharing on Linux).
LOCAL_RAY_SYSTEM_CONFIG = (("task_events_report_interval_ms", 0), ("task_events_max_num_task_in_gcs", 1000))


class RayEngine(RemoteActorEngine):
    """Trains one agent config with actor processes on a Ray cluster and the learner in this process.

    The engine is an ``Engine`` the ``Trainer`` drives (``RemoteActorEngine``), so a Ray run has the local run's
    progress bar, TensorBoard scalars, checkpoints, resume, ``summary.json`` and learning curve. Each actor
    (``RaySampler``) holds an actor-only agent built from the same config, its own vector of environments and
    its own trajectory builder; the learner is a full agent here. Weights are put into the object store once per broadcast and handed to every actor by reference
    with its next sample request. An actor whose process dies (or whose sample times out) is replaced by a
    new one, which gets the current weights; the restarts and the environment steps lost with it are counted.
    Deaths while an actor is created, builds its agent or takes its first sample take the same path. An actor
    that cannot build its environments or agent (an error a new process would only repeat) ends the run with
    that error.

    The user's own code travels with the actors: the modules the driver resolved the config's types and
    environment from, and the gymnasium ids it registered (``rlgraph.utils.user_modules.UserCode``), are
    installed in each actor before it builds; joining a cluster (``ray_address``), the engine sends the modules
    that are not installed packages with the job (Ray's ``runtime_env`` ``py_modules``), so that actors on other
    machines find them.

    A local Ray (no ``ray_address``) gets this machine's cores: ``num_actors`` x ``actor_resources.num_cpus``
    beyond them is refused before any actor starts; oversubscribe on purpose with a fractional
    ``actor_resources.num_cpus`` (e.g. 0.25: four actors per core).

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
        self.owns_ray = False
        check_local_ray_resources(spec)
        self.user_code = UserCode.of_run(config, env_kwargs)
        # A local Ray's processes end with this one, even when it is killed: its GCS and raylet by Ray's kernel
        # fate-sharing, the rest (its agents and workers, which wait on a GCS that is gone) by a reaper.
        local = not spec.ray_address and not ray.is_initialized()
        self._reaper = start_reaper() if local else None
        try:
            self.owns_ray = _init_ray(spec, _travelling_modules(self.user_code))
        except BaseException:
            if local:  # (Ctrl-C in ray.init: what it started goes; the reaper ends the rest when this process ends.)
                ray.shutdown()
            raise
        self.actors, self._creations = [], {}  # actor handle -> ref of its first call (answered once created)
        try:
            self._check_resources(ray.cluster_resources(), local=self.owns_ray and not spec.ray_address)
            if not self.owns_ray and _alive_nodes(ray) > 1 and _travelling_modules(self.user_code):
                logger.warning("Ray engine: this process joined a Ray cluster of several machines before the run, "
                               "so the run cannot send your modules %s with it; pass them when you join "
                               "(ray.init(..., runtime_env={'py_modules': [...]})) or install them on every node.",
                               [name for name, _ in self.user_code.modules])
            self.env_steps_lost = 0
            self.actor_env_steps = np.zeros(self.num_actors, np.int64)
            self.actor_seconds = np.zeros(self.num_actors)
            self._weights_ref, self._weights_version = None, -1
            self._steps_since_sync = 0
            self.sync_steps = spec.weight_sync_steps or 0
            self._actor_versions = [-1] * self.num_actors  # The weights version each actor was last sent.
            self._in_flight = {}  # stats ref -> (actor index, items ref, vector steps, launch time)
            self._actor_class = ray.remote(**self._actor_options())(_sampler_class())
            for index in range(self.num_actors):
                self.actors.append(self._make_actor(index))
        except BaseException:
            RayEngine.close(self)  # (not a subclass's close: its parts do not exist yet)
            raise

    # --- setup ----------------------------------------------------------------------------------------------
    def _actor_options(self):
        return dict(max_restarts=0, max_task_retries=0, **self.spec.actor_resources)

    def _check_resources(self, available, local):
        _check_resources(self.spec, available, local)

    def _make_actor(self, index):
        total = self.num_actors * self.envs_per_actor
        self._actor_versions[index] = -1
        # The config and the environment's keywords (an environment creator too) travel through Ray's object store
        # and are taken out after the user's code is installed in the actor.
        from rlgraph.engines.ray.ray_sampler import Deferred
        put = self.ray.put
        return self._created(self._actor_class.remote(index, Deferred(put(self.config)),
                                                      Deferred(put(self.actor_env_kwargs(index))),
                                                      self.agent.backend, self.actor_seed(index),
                                                      index * self.envs_per_actor, total,
                                                      user_code=self.user_code))

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
        except Exception as e:  # noqa: BLE001 - sorted by _on_failure: a death (replaced) or a build error.
            self._on_failure(index, e, "its process died")
            return None
        self.actor_env_steps[index] += stats["env_steps"]
        self.actor_seconds[index] += stats["seconds"]
        return index, items_ref, stats

    def _check_timeouts(self):
        now = time.perf_counter()
        for ref, (index, _, _, started) in list(self._in_flight.items()):
            if ref in self._in_flight and now - started > self.spec.sample_timeout_s:
                self._replace_actor(index, f"a sample took more than sample_timeout_s={self.spec.sample_timeout_s}s")

    def _on_failure(self, index, error, why):
        """Handles a call of actor ``index`` that failed with ``error``: a death (``why``) replaces the actor
        (counted); a build error, which a new actor would only repeat, ends the run with that error's own line.

        Raises:
            RLGraphError: The actor cannot build its environments or agent (the original error where it is one
                of rlgraph's), or too many actors died.
            Exception: ``error`` itself where it is neither (a bug in the sampler).
        """
        from rlgraph.engines.ray.ray_sampler import ActorBuildError

        exceptions = self.ray.exceptions
        build = getattr(error, "cause", error) if isinstance(error, exceptions.RayTaskError) else error
        if isinstance(build, ActorBuildError):
            logger.error("Ray engine: actor %d cannot build its environments or agent; stopping the run (a new "
                         "actor would fail the same way).", index)
            raise (build.error if build.error is not None else RLGraphError(f"Ray engine: {build}")) from None
        if isinstance(error, exceptions.RayActorError) and getattr(error, "actor_init_failed", False):
            lines = [line for line in str(getattr(error, "error_msg", error)).splitlines() if line.strip()]
            raise RLGraphError(f"Ray engine: actor {index} failed in its creation: "
                               f"{lines[-1].strip() if lines else type(error).__name__}") from None
        if isinstance(error, (exceptions.RayActorError, exceptions.GetTimeoutError)):
            self._replace_actor(index, f"{why} ({type(error).__name__})")
            return
        raise error

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
        """The process ids of the actors (index order), once each is created and built.

        An actor that died on the way (or did not start within ``sample_timeout_s``) is replaced and counted,
        like an actor that dies later.

        Raises:
            RLGraphError: An actor cannot build its environments or agent, or too many actors died.
        """
        refs = [actor.pid.remote() for actor in self.actors]
        pids = []
        for index in range(self.num_actors):
            deadline = time.perf_counter() + self.spec.sample_timeout_s
            while True:
                try:
                    pids.append(self.ray.get(refs[index], timeout=max(0.0, deadline - time.perf_counter())))
                    break
                except Exception as e:  # noqa: BLE001 - sorted by _on_failure (re-raised unless a death).
                    self._on_failure(index, e, "died while starting" if not isinstance(
                        e, self.ray.exceptions.GetTimeoutError) else f"did not start within sample_timeout_s="
                        f"{self.spec.sample_timeout_s:g}s")
                    refs[index] = self.actors[index].pid.remote()
                    deadline = time.perf_counter() + self.spec.sample_timeout_s
        return pids

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
        getattr(self, "_in_flight", {}).clear()
        self._shutdown_ray()

    def _shutdown_ray(self):
        if self.owns_ray and self.ray.is_initialized():
            self.ray.shutdown()
        stop_reaper(getattr(self, "_reaper", None))
        self._reaper = None


def _sampler_class():
    from rlgraph.engines.ray.ray_sampler import RaySampler
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


def check_local_ray_resources(spec):
    """Refuses, before anything is built, actors that the local Ray this run would start cannot place: it gets this
    machine's cores (its GPUs are Ray's to detect). Nothing to check on a cluster (``ray_address``) or a Ray this
    process already joined: the engine checks their resources once joined."""
    import sys
    ray = sys.modules.get("ray")
    if spec.ray_address or (ray is not None and ray.is_initialized()):
        return
    _check_resources(spec, {"CPU": float(os.cpu_count() or 1), "GPU": float("inf")}, local=True)


def _check_resources(spec, available, local):
    """Refuses actors that ``available`` (Ray's resources: a local Ray has this machine's cores) cannot place,
    before any actor starts."""
    num_actors = spec.num_actors
    for key in ("num_cpus", "num_gpus"):
        per_actor = spec.actor_resources.get(key, 1 if key == "num_cpus" else 0)
        need = num_actors * float(per_actor)
        have = float(available.get("CPU" if key == "num_cpus" else "GPU", 0))
        if need <= have:
            continue
        where = (f"this machine has {have:g} {'cores' if key == 'num_cpus' else 'GPUs'} (the local Ray places "
                 f"no more)" if local else f"the Ray cluster has {have:g}")
        raise RLGraphSpecError(
            f"--num-actors {num_actors}: {num_actors} actors x actor_resources.{key}={per_actor:g} "
            f"need {need:g}, but {where}; use fewer actors, or oversubscribe on purpose with a fractional "
            f"execution_spec.actor_resources.{key} (e.g. --set execution_spec.actor_resources.{key}="
            f"{_fraction(have, num_actors)}).")


def _fraction(cpus, actors):
    """A per-actor share that places ``actors`` actors on ``cpus`` CPUs (rounded down to 1/64)."""
    return f"{max(1, int(64 * cpus / max(actors, 1))) / 64:g}"


def _alive_nodes(ray):
    try:
        return sum(1 for node in ray.nodes() if node.get("Alive"))
    except Exception:  # noqa: BLE001 - a cluster that cannot list its nodes: treat it as one machine.
        return 1


def _travelling_modules(user_code):
    """The user's modules that travel with the actors to other machines (Ray's ``runtime_env`` ``py_modules``):
    the paths (a package's directory, a one-file module's file) of the top-level packages of ``user_code``'s
    modules that are not installed packages (site-packages)."""
    import sys
    import sysconfig

    installed = {os.path.realpath(p) for p in (sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"])}
    out = []
    for name, root in user_code.modules:
        module = sys.modules.get(name.split(".")[0])
        if module is None or root is None or os.path.realpath(root) in installed:
            continue
        paths = list(getattr(module, "__path__", ()))  # A package's directory ...
        path = paths[0] if len(paths) == 1 else None if paths else getattr(module, "__file__", None)  # ... a file.
        if path and path not in out:
            out.append(path)
    return out


def _init_ray(spec, py_modules=()):
    """Connects to ``spec.ray_address`` (sending ``py_modules``, paths of the user's modules, with the job) or
    starts a local Ray with this machine's cores; True if this call started it (and owns it)."""
    import ray

    if spec.ray_address:
        _check_address(spec.ray_address)
    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    with warnings.catch_warnings():
        # Ray starts its processes by fork + exec; JAX (a JAX learner built before the engine) warns at every fork
        # of its multithreaded process, though the child only execs.
        warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
        if spec.ray_address:
            ray.init(address=spec.ray_address, log_to_driver=False, configure_logging=False,
                     runtime_env={"py_modules": list(py_modules)} if py_modules else None)
        else:
            # address="local": a Ray of this run's own, even where another one runs on this machine (ray.init()
            # would join that one).
            ray.init(address="local", num_cpus=os.cpu_count() or 1, include_dashboard=False, log_to_driver=False,
                     configure_logging=False, _system_config=dict(LOCAL_RAY_SYSTEM_CONFIG))
    return True
