"""The learning role of DQN-family agents."""
import numpy as np

from rlgraph.agents.agent import batch_size_of
from rlgraph.agents.replay_learner import ReplayLearner

#: The keys of a replay record.
RECORD_KEYS = ("states", "actions", "rewards", "terminals", "next_states")


class DQNLearner(ReplayLearner):
    """Replay memory plus Q-learning updates on the agent's update schedule.

    ``add_items`` inserts n-step transitions; ``update()`` makes one round of the schedule: ``updates_per_interval``
    updates on ``batch_size`` transitions sampled from the memory (priorities written back); ``update(batch)``
    learns from records of a replay outside the learner and returns their new "priorities" (|TD error| + the
    algorithm's ``priority_epsilon``).

    Args:
        priority_epsilon: Added to |TD error| for the priorities of ``update(batch)``.
        **kwargs: See ``ReplayLearner``.
    """

    replay_keys = RECORD_KEYS

    def __init__(self, executor, name="Learner", priority_epsilon=1e-6, **kwargs):
        super().__init__(executor, name, **kwargs)
        self.priority_epsilon = float(priority_epsilon)

    @classmethod
    def settings_of(cls, agent):
        return dict(super().settings_of(agent), priority_epsilon=agent.root.priority_epsilon)

    @property
    def stored_records(self):
        """Records inserted (into the learner's memory, or into the attached replay)."""
        return self.replay.stored

    def add_items(self, items):
        self.insert(items)
        if "weights_version" in items:
            self.record_lags(items["weights_version"])

    def insert(self, items):
        """Inserts n-step transitions (the builder's items) into the replay memory."""
        self.executor.execute("insert_records", {k: items[k] for k in RECORD_KEYS})
        self.replay.count(batch_size_of(items["rewards"]))

    def update(self, batch=None):
        if batch is None:
            for _ in range(self.spec["updates_per_interval"]):
                loss, mean_td = self.executor.execute("update_from_memory", self.spec["batch_size"],
                                                      self.time_percentage)
                self.updates += 1
            return self.finish_update(dict(loss=float(loss), mean_abs_td_error=float(mean_td)))
        batch = dict(batch)
        weights = batch.pop("importance_weights", None)
        records = {k: batch[k] for k in RECORD_KEYS}
        if weights is None:
            weights = np.ones(batch_size_of(records["rewards"]), np.float32)
        loss, td_errors = self.executor.execute("update_from_batch", records, weights, self.time_percentage)
        self.updates += 1
        if "weights_version" in batch:
            self.record_lags(batch["weights_version"])
        return self.finish_update(dict(loss=float(loss), priorities=np.abs(td_errors) + self.priority_epsilon))
