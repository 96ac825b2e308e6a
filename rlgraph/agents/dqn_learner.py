"""The learning role of DQN-family agents."""
import numpy as np

from rlgraph.agents.agent import batch_size_of
from rlgraph.agents.learner import Learner

#: The keys of a replay record.
RECORD_KEYS = ("states", "actions", "rewards", "terminals", "next_states")


class DQNLearner(Learner):
    """Replay memory plus Q-learning updates on the agent's update schedule.

    ``add_items`` inserts n-step transitions; ``update()`` samples ``batch_size`` of them (``update_interval``
    env steps apart, after ``steps_before_update``) and writes priorities back; ``update(batch)`` learns from
    an external batch and returns its TD errors (for a distributed replay). The target network is synced
    every ``sync_interval`` env steps. The policy lag of inserted transitions (learner version at insertion
    minus the version that acted) is reported with the next update's results.
    """

    def __init__(self, agent):
        super().__init__(agent)
        self.spec = agent.update_spec
        self.last_update_timestep = 0
        self.last_sync_timestep = 0
        # Records inserted by this process (a loaded model comes without its replay memory's contents).
        self.stored_records = 0
        self._lags = []

    @property
    def time_percentage(self):
        return min(1.0, self.timesteps / self.agent.schedule_timesteps)

    def add_items(self, items):
        self.insert(items)
        if "weights_version" in items:
            self._lags.append(self.policy_lag(items["weights_version"]))

    def insert(self, items):
        """Inserts n-step transitions (the builder's items) into the replay memory."""
        self.executor.execute("insert_records", {k: items[k] for k in RECORD_KEYS})
        self.stored_records += batch_size_of(items["rewards"])

    def ready_to_update(self):
        spec = self.spec
        return (self.stored_records >= max(spec["steps_before_update"], spec["batch_size"])
                and self.timesteps - self.last_update_timestep >= spec["update_interval"])

    def update(self, batch=None):
        if batch is None:
            self.last_update_timestep = self.timesteps
            for _ in range(self.spec["updates_per_interval"]):
                loss, mean_td = self.executor.execute("update_from_memory", self.spec["batch_size"],
                                                      self.time_percentage)
                self.updates += 1
            results = dict(loss=float(loss), mean_abs_td_error=float(mean_td))
        else:
            batch = dict(batch)
            weights = batch.pop("importance_weights", None)
            records = {k: batch[k] for k in RECORD_KEYS}
            if weights is None:
                weights = np.ones(batch_size_of(records["rewards"]), np.float32)
            loss, td_errors = self.executor.execute("update_from_batch", records, weights, self.time_percentage)
            self.updates += 1
            results = dict(loss=float(loss), td_errors=td_errors)
            if "weights_version" in batch:
                self._lags.append(self.policy_lag(batch["weights_version"]))
        if self._lags:
            lags = np.concatenate(self._lags)
            results.update(policy_lag_mean=float(lags.mean()), policy_lag_max=int(lags.max()))
            self._lags = []
        if self.timesteps - self.last_sync_timestep >= self.spec["sync_interval"]:
            self.sync_target()
        return results

    def sync_target(self):
        self.executor.execute("sync_target")
        self.last_sync_timestep = self.timesteps

    def restore_counters(self, timesteps, updates):
        super().restore_counters(timesteps, updates)
        self.last_update_timestep = self.last_sync_timestep = self.timesteps
