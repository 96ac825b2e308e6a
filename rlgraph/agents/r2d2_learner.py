"""The learning role of R2D2."""
import numpy as np
import optree

from rlgraph.agents.agent import batch_size_of
from rlgraph.agents.replay_learner import ReplayLearner

#: Per-step keys of the learner's sequences (besides the memory's ``mask``).
SEQUENCE_KEYS = ("states", "actions", "rewards", "terminals", "bootstrap", "resets")


class R2D2Learner(ReplayLearner):
    """Sequence replay plus R2D2 updates (Kapturowski et al. 2019) on the agent's update schedule.

    ``add_items`` inserts the sequences of the ``SequenceBuilder`` (with ``reset_key="resets"``) into the
    ``SequenceReplay``; ``update()`` makes one round of the schedule: ``updates_per_interval`` times, it samples
    ``batch_size`` sequences by priority, splits off the burn-in steps and learns (priorities written back);
    ``update(batch)`` learns from an external batch ({"sequences", "initial_states"}, or records of a replay
    outside the learner in ``replay_spec.keys`` form) and returns its "priorities". The policy lag
    of inserted sequences (by the newest version that acted in them) is reported with the next update.
    """

    replay_keys = SEQUENCE_KEYS + ("mask", "internal_states")

    def __init__(self, executor, name="Learner", burn_in=0, **kwargs):
        super().__init__(executor, name, **kwargs)
        self.burn_in = int(burn_in)

    @classmethod
    def settings_of(cls, agent):
        return dict(super().settings_of(agent), burn_in=agent.root.memory.burn_in_length)

    @property
    def stored_sequences(self):
        """Sequences inserted (into the learner's memory, or into the attached replay)."""
        return self.replay.stored

    def add_items(self, items):
        """Inserts whole sequences ({key: [B, L, ...]}, "mask", "internal_states") into the replay."""
        self.executor.execute("insert_records", {k: items[k] for k in self.replay_keys})
        self.replay.count(batch_size_of(items["rewards"]))
        if "weights_version" in items:
            self.record_lags(np.max(items["weights_version"], axis=1))

    def data_ready(self):
        return self.timesteps >= self.spec["steps_before_update"] and self.replay.stored >= self.spec["batch_size"] \
            and self.replay.can_sample(self.spec["batch_size"])

    def split_sequences(self, sequences):
        """``(burn-in {"states", "resets"} [B, burn_in, ...] or None, training steps {key: [B, L - burn_in, ...]})``."""
        b = self.burn_in
        train = {k: optree.tree_map(lambda x: x[:, b:], sequences[k]) for k in SEQUENCE_KEYS + ("mask",)}
        if b == 0:
            return None, train
        return {k: optree.tree_map(lambda x: x[:, :b], sequences[k]) for k in ("states", "resets")}, train

    def sequence_args(self, sequences):
        """(training steps, keyword arguments with the burn-in states and resets) for the update API methods."""
        burn_in, train = self.split_sequences(sequences)
        if burn_in is None:
            return train, {}
        return train, dict(burn_in_states=burn_in["states"], burn_in_resets=burn_in["resets"])

    def update(self, batch=None):
        if batch is None:
            for _ in range(self.spec["updates_per_interval"]):
                sequences, initial_states, indices, weights = self.executor.execute(
                    "get_sequences", self.spec["batch_size"])
                train, burn_in = self.sequence_args(sequences)
                loss, mean_priority = self.executor.execute("update_from_sequences", train, tuple(initial_states),
                                                            indices, weights, self.time_percentage, **burn_in)
                self.updates += 1
            results = dict(loss=float(loss), mean_priority=float(mean_priority))
        else:
            if "sequences" in batch:
                sequences, initial_states = batch["sequences"], batch["initial_states"]
            else:  # Records of a replay outside the learner (``replay_spec.keys``).
                sequences, initial_states = batch, batch["internal_states"]
            weights = batch.get("importance_weights")
            if weights is None:
                weights = np.ones(batch_size_of(sequences["rewards"]), np.float32)
            train, burn_in = self.sequence_args(sequences)
            loss, priorities = self.executor.execute("update_from_batch", train, tuple(initial_states),
                                                     weights, self.time_percentage, **burn_in)
            self.updates += 1
            results = dict(loss=float(loss), priorities=priorities)
        return self.finish_update(results)

    def get_loss_and_gradients(self, sequences, initial_states, importance_weights=None):
        """``(loss, priorities, gradients)`` of sampled-style sequences ``[B, L, ...]`` without an update."""
        if importance_weights is None:
            importance_weights = np.ones(batch_size_of(sequences["rewards"]), np.float32)
        train, burn_in = self.sequence_args(sequences)
        return self.executor.execute("get_loss_and_gradients", train, tuple(initial_states), importance_weights,
                                     **burn_in)
