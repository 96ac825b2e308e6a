"""What runs inside one Ray actor process: an actor-only agent stepping its own vector of environments."""
import os
import pickle
import time

import numpy as np

from rlgraph.utils.errors import RLGraphError


class ActorBuildError(RLGraphError):
    """An actor could not build its environments or agent (raised by each of its calls; a retry would only repeat
    it, so the engine ends the run with ``error``).

    Args:
        index: The actor's index.
        error: The exception, where it is one of rlgraph's (they travel between processes), else None.
        text: ``"TypeName: message"`` of the exception.
    """

    def __init__(self, index, error, text):
        super().__init__(f"actor {index} cannot build its environments or agent: {text}")
        self.index, self.error, self.text = index, error, text

    def __reduce__(self):
        return type(self), (self.index, self.error, self.text)


class RaySampler:
    """An actor process of the Ray engine: environments, an actor-only agent and a trajectory builder.

    It steps its environments through an ``ActorLoop`` as ``VectorWorker`` does, but sends its items to the
    engine instead of a learner. It never learns: it acts with the weights (and version) the engine hands in
    with a ``sample`` call, and explores by the run's env steps (``timesteps``) that the engine hands in too,
    counted on by its own steps.

    Args:
        index: The actor's index (0..N-1).
        config: The training config (agent keys; run keys are ignored by ``Agent.from_spec``).
        env_kwargs: ``VectorEnv`` keywords (``env_spec``, ``num_envs``, ``seed``, ...).
            Either may come ``Deferred`` (the engine's way: what refers to the user's modules, e.g. an
            environment creator, is deserialized only once ``user_code`` is installed).
        backend: "tf", "pytorch" or "jax" (weights travel as numpy arrays on every backend).
        seed: The agent's seed.
        slot_offset: The global index of this actor's first environment among all actors' environments.
        total_slots: All actors' environments together (Ape-X epsilons are spread over them).
        threads: Math threads of this process (``OMP_NUM_THREADS`` unless set).
        user_code: The driver's ``UserCode`` (modules of the config's types and environment), installed before
            anything is built (None: none).

    A build that fails does not fail the actor's creation: every call then raises ``ActorBuildError`` with the
    error, which the engine tells apart from a death (a death is replaced, a build error would only repeat).
    """

    def __init__(self, index, config, env_kwargs, backend, seed, slot_offset, total_slots, threads=1,
                 user_code=None):
        os.environ.setdefault("OMP_NUM_THREADS", str(threads))
        self.index = index
        self.build_error = None
        try:
            if user_code is not None:
                user_code.install()
            config, env_kwargs = (v.get() if isinstance(v, Deferred) else v for v in (config, env_kwargs))
            self._build(config, env_kwargs, backend, seed, slot_offset, total_slots)
        except Exception as e:  # noqa: BLE001 - any build error ends the run with its own line (the engine's).
            self.build_error = ActorBuildError(index, e if _travels(e) else None,
                                               f"{type(e).__name__}: {_first_line(e)}")
            env = getattr(self, "env", None)
            if env is not None:
                env.close()

    def _build(self, config, env_kwargs, backend, seed, slot_offset, total_slots):
        from rlgraph.agents import Agent
        from rlgraph.environments import VectorEnv
        from rlgraph.workers import ActorLoop

        self.env = VectorEnv(**env_kwargs)
        self.agent = Agent.from_spec(config, state_space=self.env.state_space, action_space=self.env.action_space,
                                     backend=backend, seed=seed, role="actor")
        self.actor = self.agent.actor
        self.actor.place(slot_offset, total_slots)
        # The items of a ``sample`` call are completed at its end, in one go (``Actor.process_item_list``).
        self.loop = ActorLoop(self.actor, self.agent.make_trajectory_builder(), defer_processing=True)
        self.obs = self.env.reset()
        #: The run's env steps as the engine last told them, plus this sampler's steps since (the exploration
        #: schedule's clock).
        self.timesteps = 0

    def pid(self):
        """The process id (the fault tests kill it).

        Raises:
            ActorBuildError: The actor could not build its environments or agent.
        """
        if self.build_error is not None:
            raise self.build_error
        return os.getpid()

    def weights(self):
        """``(weights, version)``: the actor agent's trainable weights (numpy, whatever the backend) and the
        learner version they came from; what it acts with now.

        Raises:
            ActorBuildError: The actor could not build its environments or agent.
        """
        if self.build_error is not None:
            raise self.build_error
        return self.agent.get_weights(), self.actor.weights_version

    def sample(self, num_vector_steps, weights=None, version=None, timesteps=None):
        """Steps all environments ``num_vector_steps`` times and returns what the steps completed.

        Args:
            num_vector_steps: Vector steps to take.
            weights: New weights (a dict; an object ref resolved by Ray) or None to keep the current ones.
            version: The learner version of ``weights``.
            timesteps: The run's total environment steps so far (drives exploration schedules).

        Returns:
            ``(items, stats)``: the list of the builder's items (completed by the actor) and a dict with
            "env_steps", "num_items" (rows, unroll columns or sequences), "episodes" (list of (return,
            length)), "versions" (the weights versions that acted on the items), "seconds" (spent in this
            call), "index", "weights_version". The engine calls it with two object refs for the two, so that
            items can go to a replay shard without passing through the learner's process.
        """
        if self.build_error is not None:
            raise self.build_error
        start = time.perf_counter()
        if weights is not None:
            self.agent.set_weights(weights, version)
        if timesteps is not None:
            self.timesteps = int(timesteps)
        loop, env = self.loop, self.env
        items, versions = [], []
        for _ in range(int(num_vector_steps)):
            self.obs, out, num_steps = loop.step(env, self.obs, timesteps=self.timesteps)
            self.timesteps += num_steps
            if out is not None:
                items.append(out)
        items = self.actor.process_item_list(items)
        for item in items:
            versions.append(np.ravel(_versions_of(item)))
        versions = np.concatenate(versions) if versions else np.zeros(0, np.int64)
        return items, dict(env_steps=int(num_vector_steps) * self.env.num_envs, num_items=int(versions.size),
                           episodes=self.env.pop_finished_episodes(), versions=versions,
                           seconds=time.perf_counter() - start, index=self.index,
                           weights_version=self.actor.weights_version)


class Deferred:
    """A value an actor takes from Ray's object store only when it asks (``get``): after the user's code is
    installed, so that what it holds (an environment creator of the user's module) can be deserialized. (Ray
    resolves an object ref passed as an argument before the actor's ``__init__`` runs.)"""

    def __init__(self, ref):
        self.ref = ref

    def get(self):
        import ray
        return ray.get(self.ref)


def _travels(error):
    """Whether ``error`` is one of rlgraph's errors and pickles (so the engine can raise it as it is)."""
    if not isinstance(error, RLGraphError):
        return False
    try:
        pickle.dumps(error)
        type(error)(*error.args)  # (What unpickling an exception does.)
    except Exception:  # noqa: BLE001 - then its text travels instead.
        return False
    return True


def _first_line(error):
    lines = str(error).strip().splitlines()
    return lines[0] if lines else repr(error)


def _versions_of(item):
    """One weights version per item of a batch: per n-step row, per unroll column or per sequence (the newest
    version that acted in it)."""
    if "unroll" in item:
        return np.asarray(item["unroll"]["weights_version"]).max(axis=0)
    if "weights_version" in item:
        versions = np.asarray(item["weights_version"])
        return versions.max(axis=1) if versions.ndim > 1 else versions
    return np.zeros(0, np.int64)
