"""The learning role of replay-based agents: the update and target-sync schedule in env steps."""
import numpy as np

from rlgraph.agents.learner import Learner


class ReplayLearner(Learner):
    """A learner with a replay memory, updated every ``update_interval`` env steps and syncing its target
    network every ``sync_interval`` env steps (``agent.update_spec``).

    Subclasses insert items (``add_items``, calling ``record_lags`` with the versions that acted), decide
    ``ready_to_update`` and learn (``update``, ending with ``finish_update``). The policy lag of the items
    inserted since the last update (learner version at insertion minus the version that acted) is reported
    with the next update's results.
    """

    #: The item keys a replay record holds (what a distributed replay stores of the builder's items).
    replay_keys = ()

    def __init__(self, agent):
        super().__init__(agent)
        self.spec = agent.update_spec
        self.last_update_timestep = 0
        self.last_sync_timestep = 0
        self._lags = []
        self._reanchor = False

    # --- a replay outside the learner (distributed engines) ------------------------------------------------
    def replay_settings(self):
        """``capacity``, ``alpha`` and ``beta`` of the configured memory (alpha 0: uniform sampling), so that a
        distributed replay holds what the local one would."""
        memory = self.agent.root.memory
        return dict(capacity=int(memory.capacity), alpha=float(getattr(memory, "alpha", 0.0)),
                    beta=float(getattr(memory, "beta", 0.0)))

    def count_stored(self, num_items):
        """Counts items stored in a replay outside the learner (``data_ready`` looks at the count)."""
        raise NotImplementedError

    def data_ready(self):
        """Whether the replay holds enough for the first update (``steps_before_update``, ``batch_size``)."""
        raise NotImplementedError

    def batch_from_replay(self, records, importance_weights):
        """The ``update(batch)`` argument for records sampled from a distributed replay."""
        raise NotImplementedError

    def pop_priorities(self, results):
        """Takes the new raw priorities of an ``update(batch)``'s records out of its results."""
        raise NotImplementedError

    def interval_elapsed(self):
        """Whether ``update_interval`` env steps have passed since the last update."""
        return self.timesteps - self.last_update_timestep >= self.spec["update_interval"]

    def steps_to_next_update(self):
        """See ``Learner``: the first update anchors the schedule at now, later ones follow it every
        ``update_interval`` env steps (``advance_update_schedule``)."""
        interval = self.spec["update_interval"]
        if self.updates == 0 or self._reanchor:
            return interval
        return interval - (self.timesteps - self.last_update_timestep) % interval

    def advance_update_schedule(self):
        """Moves the update schedule on by one ``update_interval`` (the first update anchors it at now).

        A vector step of more environment steps than ``update_interval`` thus gets as many update rounds as the
        config's replay ratio asks for (two per step for 16 environments and an interval of 8), as on the
        distributed replay engine: one config, one replay ratio, on every engine.
        """
        if self.updates == 0 or self._reanchor:
            self.last_update_timestep = self.timesteps
            self._reanchor = False
        else:
            self.last_update_timestep += self.spec["update_interval"]

    def forget_replay(self):
        # The memory refills before the next update: no rounds are owed for the steps that takes.
        self._reanchor = True

    def record_lags(self, versions):
        """Notes the policy lag of items acted on by weights of ``versions``."""
        self._lags.append(self.policy_lag(versions))

    def finish_update(self, results):
        """Adds the lags noted since the last update to ``results``, syncs the target network when due."""
        if self._lags:
            lags = np.concatenate(self._lags)
            results.update(policy_lag_mean=float(lags.mean()), policy_lag_max=int(lags.max()))
            self._lags = []
        if self.timesteps - self.last_sync_timestep >= self.spec["sync_interval"]:
            self.sync_target()
        return results

    def sync_target(self):
        """Copies the online network's weights into the target network."""
        self.executor.execute("sync_target")
        self.last_sync_timestep = self.timesteps

    def restore_counters(self, timesteps, updates):
        super().restore_counters(timesteps, updates)
        self.last_update_timestep = self.last_sync_timestep = self.timesteps

    def get_state(self):
        return dict(super().get_state(), last_update_timestep=int(self.last_update_timestep),
                    last_sync_timestep=int(self.last_sync_timestep), lags=[np.array(lag) for lag in self._lags])

    def set_state(self, state):
        super().set_state(state)
        self.last_update_timestep = int(state["last_update_timestep"])
        self.last_sync_timestep = int(state["last_sync_timestep"])
        self._lags = [np.asarray(lag, np.int64) for lag in state["lags"]]
