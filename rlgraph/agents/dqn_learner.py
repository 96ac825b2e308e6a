"""The learning role of DQN-family agents."""
import numpy as np

from rlgraph.agents.agent import batch_size_of
from rlgraph.agents.replay_learner import ReplayLearner

#: The keys of a replay record.
RECORD_KEYS = ("states", "actions", "rewards", "terminals", "next_states")


class DQNLearner(ReplayLearner):
    """Replay memory plus Q-learning updates on the agent's update schedule.

    ``add_items`` inserts n-step transitions; ``update()`` samples ``batch_size`` of them (``update_interval``
    env steps apart, once ``steps_before_update`` transitions are stored) and writes priorities back;
    ``update(batch)`` learns from an external batch and returns its TD errors (for a distributed replay).
    """

    replay_keys = RECORD_KEYS

    def __init__(self, agent):
        super().__init__(agent)
        # Records inserted by this process (a loaded model comes without its replay memory's contents).
        self.stored_records = 0

    def add_items(self, items):
        self.insert(items)
        if "weights_version" in items:
            self.record_lags(items["weights_version"])

    def insert(self, items):
        """Inserts n-step transitions (the builder's items) into the replay memory."""
        self.executor.execute("insert_records", {k: items[k] for k in RECORD_KEYS})
        self.stored_records += batch_size_of(items["rewards"])

    def count_stored(self, num_items):
        self.stored_records += int(num_items)

    def get_state(self):
        return dict(super().get_state(), stored_records=int(self.stored_records))

    def set_state(self, state):
        super().set_state(state)
        self.stored_records = int(state["stored_records"])

    def forget_replay(self):
        super().forget_replay()
        self.stored_records = 0

    def data_ready(self):
        return self.stored_records >= max(self.spec["steps_before_update"], self.spec["batch_size"])

    def ready_to_update(self):
        return self.data_ready() and self.interval_elapsed()

    def batch_from_replay(self, records, importance_weights):
        return dict(records, importance_weights=importance_weights)

    def pop_priorities(self, results):
        return np.abs(results.pop("td_errors")) + self.agent.root.priority_epsilon

    def update(self, batch=None):
        if batch is None:
            self.advance_update_schedule()
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
        return self.finish_update(dict(loss=float(loss), td_errors=td_errors))
