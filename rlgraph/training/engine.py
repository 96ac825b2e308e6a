"""The engine interface: what the ``Trainer`` drives.

An engine steps environments and trains one learner agent, wherever its parts run: the local workers
(``rlgraph.workers``) in this process, the execution engines (``rlgraph.engines``: Ray, central inference,
distributed learners) with actor or learner processes elsewhere. The ``Trainer`` (progress, scalars,
checkpoints, resume, ``summary.json``) and ``rlgraph.engines.runner`` use nothing else of them.

This module sits at the level of the workers and the trainer (it imports nothing of rlgraph but its errors), so
that the workers can subclass ``Engine`` and the execution engines above them do.
"""
import abc

from rlgraph.utils.errors import RLGraphError


class Engine(abc.ABC):
    """Steps environments and trains a learner agent in chunks; stores and restores the whole run.

    Subclasses implement ``run``, ``evaluate``, ``store`` and ``load``; the other methods have defaults for an
    engine that runs everything in this process and holds nothing to release.

    Settings (e.g. whether checkpoints hold the replay memory) are constructor arguments: nothing is set on an
    engine after it is built.

    Attributes:
        agent: The learner agent in this process (the trainer writes its graph summaries and checks its weights
            when a run fails), or None.
    """

    agent = None

    @abc.abstractmethod
    def run(self, num_env_steps):
        """Trains for at least ``num_env_steps`` environment steps (over all the engine's environments).

        Returns:
            dict with ``env_steps`` (int, the steps taken), ``episodes`` (list of ``(return, length)`` finished
            since the last call), ``results`` (list of update-result dicts) and optionally ``scalars`` (name ->
            value, logged with the trainer's own).
        """

    @abc.abstractmethod
    def evaluate(self, env, num_episodes):
        """The returns of ``num_episodes`` greedy episodes of the learner's current policy on the vector
        environment ``env`` (list of floats)."""

    @abc.abstractmethod
    def store(self, path):
        """Stores the learner's model and the run's state (``get_run_state``) in the directory ``path`` (a
        checkpoint's ``model/``), so that ``load`` continues the run."""

    @abc.abstractmethod
    def load(self, path):
        """Restores what ``store`` wrote to ``path``.

        Raises:
            RLGraphCheckpointError: The stored run does not fit this engine.
        """

    def get_run_state(self):
        """Everything the run's future depends on besides the weights (memories, partial trajectories, counters,
        random-number states), as numpy arrays and JSON values (``rlgraph.utils.run_state``).

        Raises:
            RLGraphError: The engine keeps its run state in its checkpoints only (``store``).
        """
        raise RLGraphError(f"{type(self).__name__} hands out no run state: its checkpoints (store/load) hold it.")

    def set_run_state(self, state):
        """Restores what ``get_run_state`` returned (after the model was loaded).

        Raises:
            RLGraphError: The engine keeps its run state in its checkpoints only (``load``).
            RLGraphCheckpointError: The state does not fit this engine.
        """
        raise RLGraphError(f"{type(self).__name__} takes no run state: its checkpoints (store/load) hold it.")

    def summary(self):
        """What the run's ``summary.json`` adds for this engine (restarts, per-actor throughput, ...)."""
        return {}

    def processes(self):
        """The engine's other processes by role (e.g. ``{"actors": [pid, ...]}``), for monitoring and fault drills;
        the trainer writes them to ``processes.json`` in the logdir. Empty: everything runs in this process."""
        return {}

    def close(self):
        """Stops the engine's processes and threads and frees its resources; idempotent."""


class WorkerEngine(Engine):
    """An ``Engine`` over an object that offers ``run``, ``store`` and ``load`` without subclassing ``Engine``
    (``as_engine``): test doubles, or workers written before the interface. The other methods are those of the
    object where it has them, else ``Engine``'s defaults.

    Args:
        worker: The object.

    Raises:
        RLGraphError: It lacks ``run``, ``store`` or ``load``.
    """

    def __init__(self, worker):
        missing = [name for name in ("run", "store", "load") if not callable(getattr(worker, name, None))]
        if missing:
            raise RLGraphError(f"Trainer: the engine must be an rlgraph.training.engine.Engine or offer run, store "
                               f"and load; {type(worker).__name__} lacks {', '.join(missing)}.")
        self.worker = worker

    @property
    def agent(self):
        return getattr(self.worker, "agent", None)

    def _optional(self, name, *args):
        method = getattr(self.worker, name, None)
        return getattr(Engine, name)(self, *args) if method is None else method(*args)

    def run(self, num_env_steps):
        return self.worker.run(num_env_steps)

    def evaluate(self, env, num_episodes):
        if getattr(self.worker, "evaluate", None) is None:
            raise RLGraphError(f"{type(self.worker).__name__} cannot evaluate (it has no evaluate method).")
        return self.worker.evaluate(env, num_episodes)

    def store(self, path):
        self.worker.store(path)

    def load(self, path):
        self.worker.load(path)

    def get_run_state(self):
        return self._optional("get_run_state")

    def set_run_state(self, state):
        return self._optional("set_run_state", state)

    def summary(self):
        return self._optional("summary")

    def processes(self):
        return self._optional("processes")

    def close(self):
        return self._optional("close")


def as_engine(engine):
    """``engine`` itself if it is an ``Engine``, else a ``WorkerEngine`` over it."""
    return engine if isinstance(engine, Engine) else WorkerEngine(engine)
