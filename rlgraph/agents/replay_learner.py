"""The learning role of replay-based agents: the replay ratio in env steps, the target-sync schedule, and the seam
between the learner and the replay it learns from."""
import dataclasses

import numpy as np

from rlgraph.agents.learner import Learner


@dataclasses.dataclass(frozen=True)
class ReplaySpec:
    """What a replay outside the learner must hold and serve so that it learns as from its own memory.

    Attributes:
        keys: The item keys a replay record holds (of the builder's items).
        capacity: Records the configured memory holds.
        alpha: Prioritization exponent (0: uniform sampling).
        beta: Importance-sampling exponent.
        batch_size: Records per update.
    """
    keys: tuple
    capacity: int
    alpha: float
    beta: float
    batch_size: int


class LocalReplay:
    """The replay seam for the memory inside the learner's graph: counts the records inserted by this process
    (a loaded model comes without its memory's contents). A distributed replay offers the same three members
    (``rlgraph.engines.ray.replay_engine.ShardedReplay``) and is given to the learner with ``attach_replay``."""

    def __init__(self):
        self.stored = 0

    def count(self, num_records):
        """Counts records inserted."""
        self.stored += int(num_records)

    def can_sample(self, batch_size):
        """Whether a batch of ``batch_size`` records can be sampled."""
        return self.stored >= batch_size

    def restore(self, stored):
        """Sets the count from a run state (``forget_replay``: 0)."""
        self.stored = int(stored)


class ReplayLearner(Learner):
    """A learner with a replay memory, updated ``updates_per_interval`` times every ``update_interval`` env steps
    and syncing its target network every ``sync_interval`` env steps (``update_spec``).

    Subclasses insert items (``add_items``, calling ``record_lags`` with the versions that acted), say when the
    replay holds enough (``data_ready``) and learn (``update``, ending with ``finish_update``). The policy lag of
    the items inserted since the last update (learner version at insertion minus the version that acted) is
    reported with the next update's results. Where the replay lives is the learner's ``replay`` seam: its own
    memory (``LocalReplay``) or one outside (``attach_replay``), whose records reach ``update(batch)`` in the
    ``replay_spec.keys`` form with "importance_weights"; the results then carry the records' new
    "priorities".

    Args:
        update_spec: The agent's checked ``update_spec`` (``update_interval``, ``updates_per_interval``,
            ``batch_size``, ``steps_before_update``, ``sync_interval``).
        replay_spec: The ``ReplaySpec`` of the configured memory.
        **kwargs: See ``Learner``.
    """

    #: The item keys a replay record holds (what a distributed replay stores of the builder's items).
    replay_keys = ()

    def __init__(self, executor, name="Learner", schedule_timesteps=None, update_spec=None, replay_spec=None,
                 learning_rate=None):
        super().__init__(executor, name, schedule_timesteps, learning_rate)
        self.spec = dict(update_spec)
        self.replay_spec = replay_spec
        self.replay = LocalReplay()
        # The env step of the last round's schedule (set where the ratio's origin is forgotten).
        self.last_update_timestep = 0
        self.last_sync_timestep = 0
        # The replay ratio's origin: the env step at which updates began, and the update count then.
        self._anchor = None
        self._updates_at_anchor = 0
        self._lags = []

    @classmethod
    def settings_of(cls, agent):
        memory = agent.root.memory
        return dict(super().settings_of(agent), update_spec=agent.update_spec, replay_spec=ReplaySpec(
            keys=tuple(cls.replay_keys), capacity=int(memory.capacity), alpha=float(getattr(memory, "alpha", 0.0)),
            beta=float(getattr(memory, "beta", 0.0)), batch_size=int(agent.update_spec["batch_size"])))

    # --- the replay seam -------------------------------------------------------------------------------------
    def attach_replay(self, replay):
        """Learns from ``replay`` (an object with ``stored``, ``can_sample(batch_size)``, ``restore(stored)``)
        instead of the graph's memory: the schedule waits until it can serve a batch, and its records come in
        through ``update(batch)``."""
        self.replay = replay

    def data_ready(self):
        """Whether the replay holds enough for the first update (``steps_before_update``, ``batch_size``)."""
        return self.replay.stored >= max(self.spec["steps_before_update"], self.spec["batch_size"]) \
            and self.replay.can_sample(self.spec["batch_size"])

    def forget_replay(self):
        # The memory refills before the next update: no rounds are owed for the steps that takes.
        self.replay.restore(0)
        self._reanchor()

    # --- the update schedule ---------------------------------------------------------------------------------
    def updates_due(self):
        """Optimizer updates the replay ratio asks for now minus those made: ``updates_per_interval`` for the
        moment the replay first holds enough (and ``update_interval`` env steps have passed since the last
        update), then as many again every ``update_interval`` env steps. A vector step of more environment
        steps than ``update_interval`` thus gets as many rounds as the ratio asks for (two per step for 16
        environments and an interval of 8), whether the learner samples its own memory (each ``update()`` one
        round) or gets batches from a distributed replay (each ``update(batch)`` one update)."""
        interval, per = self.spec["update_interval"], self.spec["updates_per_interval"]
        if self._anchor is None:
            if not (self.data_ready() and self.timesteps - self.last_update_timestep >= interval):
                return 0
            self._anchor, self._updates_at_anchor = self.timesteps, self.updates
        rounds = (self.timesteps - self._anchor) // interval + 1
        return max(0, rounds * per - (self.updates - self._updates_at_anchor))

    def steps_to_next_update(self):
        """See ``Learner``: the first update anchors the schedule at now, later ones follow it every
        ``update_interval`` env steps."""
        interval = self.spec["update_interval"]
        if self._anchor is None:
            return interval
        return interval - (self.timesteps - self._anchor) % interval

    def _reanchor(self):
        """Forgets the ratio's origin: updates begin again once the replay holds enough and an interval has
        passed since the last round."""
        if self._anchor is not None:
            made = (self.updates - self._updates_at_anchor) // self.spec["updates_per_interval"]
            self.last_update_timestep = self._anchor + max(made - 1, 0) * self.spec["update_interval"]
        self._anchor = None

    # --- results --------------------------------------------------------------------------------------------
    def record_lags(self, versions):
        """Notes the policy lag of items acted on by weights of ``versions`` (items that enter the replay); items
        the agent did not act on (a negative version) have none."""
        versions = np.asarray(versions, np.int64)
        acted = versions[versions >= 0]
        if acted.size:
            self._lags.append(self.policy_lag(acted))

    def finish_update(self, results):
        """Adds the lags noted since the last update to ``results``, syncs the target network when due."""
        if self._lags:
            lags = np.concatenate(self._lags)
            results.update(policy_lag_mean=float(lags.mean()), policy_lag_max=int(lags.max()))
            self._lags = []
        if self.timesteps - self.last_sync_timestep >= self.spec["sync_interval"]:
            self.sync_target()
        results.update(self.schedule_results())
        return results

    def sync_target(self):
        """Copies the online network's weights into the target network."""
        self.executor.execute("sync_target")
        self.last_sync_timestep = self.timesteps

    # --- counters and run state -------------------------------------------------------------------------------
    def restore_counters(self, timesteps, updates):
        super().restore_counters(timesteps, updates)
        self.last_update_timestep = self.last_sync_timestep = self.timesteps
        self._anchor = None

    def get_state(self):
        return dict(super().get_state(), last_update_timestep=int(self.last_update_timestep),
                    last_sync_timestep=int(self.last_sync_timestep), lags=[np.array(lag) for lag in self._lags],
                    anchor=self._anchor, updates_at_anchor=int(self._updates_at_anchor),
                    stored=int(self.replay.stored))

    def set_state(self, state):
        super().set_state(state)
        self.last_update_timestep = int(state["last_update_timestep"])
        self.last_sync_timestep = int(state["last_sync_timestep"])
        self._lags = [np.asarray(lag, np.int64) for lag in state["lags"]]
        if "anchor" in state:
            self._anchor = None if state["anchor"] is None else int(state["anchor"])
            self._updates_at_anchor = int(state["updates_at_anchor"])
        elif self.updates:  # An older run state (no anchor): one round was made at last_update_timestep.
            self._anchor = self.last_update_timestep
            self._updates_at_anchor = self.updates - self.spec["updates_per_interval"]
        else:
            self._anchor = None
        stored = state.get("stored", state.get("stored_records", state.get("stored_sequences", 0)))
        self.replay.restore(stored)
