"""The common part of the engines whose learner runs in this process and whose actors run elsewhere."""
import abc
import logging

from rlgraph.training.engine import Engine
from rlgraph.utils.errors import RLGraphCheckpointError
from rlgraph.utils.run_state import load_run_state, save_run_state

logger = logging.getLogger(__name__)


class RemoteActorEngine(Engine):
    """An engine with the learner agent in this process and ``num_actors`` actor processes elsewhere (the Ray
    engines, the central-inference engine).

    Shared here: the settings, the actors' environment seeds, checkpoints (the learner's model and run state;
    the actors' environments and partial trajectories are not stored: a resumed run starts them afresh), greedy
    evaluation with the learner, ``processes``, and the common part of ``summary``. Subclasses implement
    ``run``, ``actor_pids`` and ``close`` and name themselves in ``ENGINE`` and ``DISPLAY_NAME``.

    Args:
        config: The training config (a dict; agent keys plus ``environment_spec``, ``execution_spec``).
        env_kwargs: ``VectorEnv`` keywords of the run's environments (``num_envs`` is replaced per actor).
        learner_agent: The learner (a ``role="both"`` agent, which also evaluates greedily).
        spec: The ``ExecutionSpec``.
        seed: The run's seed (actor i's environments get seed + 1000 * (i + 1)).
        checkpoint_replay: Store the replay memory's contents in checkpoints (``train_spec.checkpoint_replay``).
    """

    #: The engine's name in ``summary.json`` (``rlgraph train --engine``).
    ENGINE = None
    #: How messages name the engine.
    DISPLAY_NAME = "engine"

    def __init__(self, config, env_kwargs, learner_agent, spec, seed=0, checkpoint_replay=True):
        self.config = config
        self.env_kwargs = dict(env_kwargs)
        self.agent = learner_agent
        self.spec = spec
        self.seed = int(seed)
        self.checkpoint_replay = bool(checkpoint_replay)
        self.num_actors = spec.num_actors
        self.envs_per_actor = spec.envs_per_actor_for(self.env_kwargs.get("num_envs", 1))
        self.actor_restarts = 0

    def actor_seed(self, index):
        """The seed of actor ``index``'s environments."""
        return self.seed + 1000 * (index + 1)

    def actor_env_kwargs(self, index, seed=None):
        """The ``VectorEnv`` keywords of actor ``index`` (``envs_per_actor`` environments, ``actor_seed``)."""
        return dict(self.env_kwargs, num_envs=self.envs_per_actor,
                    seed=self.actor_seed(index) if seed is None else seed)

    # --- the engine interface -------------------------------------------------------------------------------
    @abc.abstractmethod
    def actor_pids(self):
        """The process ids of the actors (index order)."""

    def processes(self):
        """The engine's processes by role (``{"actors": [pid, ...]}``), e.g. for monitoring or fault drills."""
        return dict(actors=self.actor_pids())

    def summary(self):
        """What a run's ``summary.json`` adds for this engine (subclasses add their own keys)."""
        return dict(executor=self.ENGINE, num_actors=self.num_actors, envs_per_actor=self.envs_per_actor,
                    actor_restarts=self.actor_restarts)

    def evaluate(self, env, num_episodes):
        """Greedy returns of the learner's current weights (``VectorWorker.evaluate``), in this process."""
        from rlgraph.workers import VectorWorker
        return VectorWorker(self.agent, env, learn=False).evaluate(env, num_episodes)

    def store(self, path):
        """Stores the learner's run state (``get_run_state``) and model in directory ``path``."""
        save_run_state(path, self.get_run_state())
        self.agent.store_model(path)

    def load(self, path):
        """Restores the learner's model and, where stored, its run state (the actors start afresh).

        Raises:
            RLGraphCheckpointError: The stored run state is another engine's or does not fit this one.
        """
        self.agent.load_model(path)
        state = load_run_state(path)
        if state is None:
            logger.warning("'%s' holds no run state: the learner resumes with an empty memory.", path)
        else:
            try:
                self.set_run_state(state)
            except RLGraphCheckpointError as e:
                raise RLGraphCheckpointError(f"'{path}': {e}") from None
        self._loaded()

    def _loaded(self):
        """Called after ``load``: subclasses drop what the loaded weights and state make stale."""

    def get_run_state(self):
        """The learner's run state (memory, queued unrolls, counters, schedules, RNG states; see
        ``Agent.get_run_state``), tagged with the engine's class."""
        return dict(engine=type(self).__name__, agent=self.agent.get_run_state(include_replay=self.checkpoint_replay))

    def set_run_state(self, state):
        """Restores what ``get_run_state`` returned.

        Raises:
            RLGraphCheckpointError: The state is of another engine or does not fit this one.
        """
        if not isinstance(state, dict) or state.get("engine") != type(self).__name__ or "agent" not in state:
            found = state.get("engine") if isinstance(state, dict) else type(state).__name__
            raise RLGraphCheckpointError(f"{self.DISPLAY_NAME}: the stored run state belongs to {found!r}, not to a "
                                         f"{type(self).__name__}.")
        self.agent.set_run_state(state["agent"])
