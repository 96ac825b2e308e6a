"""One shard of a distributed prioritized replay (Horgan et al. 2018), run as a Ray actor."""
import os

import numpy as np
import optree

from rlgraph.components.memories.prioritized_replay_buffer import PrioritizedReplayBuffer


class ReplayShard:
    """A prioritized replay over numpy storage holding any nested record structure.

    Records are the items of an agent's trajectory builder restricted to ``keys`` (n-step transitions for
    DQN/Ape-X, sequences with their stored recurrent state for R2D2). Items that carry "priorities" (Ape-X
    actors compute them) enter with those; others with the largest priority seen so far.

    Args:
        keys: The item keys a record holds (nested values allowed).
        capacity: Records this shard holds.
        alpha: Priority exponent.
        beta: Importance-sampling exponent.
        seed: Seed of the shard's sampling.
    """

    def __init__(self, keys, capacity, alpha, beta, seed):
        self.keys = tuple(keys)
        self.buffer = PrioritizedReplayBuffer(int(capacity), alpha=alpha, beta=beta, seed=seed)
        self.treedef = None
        self.inserted = 0
        self.priority_updates = 0

    def pid(self):
        return os.getpid()

    def add(self, items):
        """Inserts a list of item batches (as a ``RaySampler`` returns them); returns the records added."""
        added = 0
        for item in items:
            record = {k: item[k] for k in self.keys}
            leaves, treedef = optree.tree_flatten(record)
            if self.treedef is None:
                self.treedef = treedef
            self.buffer.insert({str(i): np.asarray(x) for i, x in enumerate(leaves)}, item.get("priorities"))
            added += int(np.shape(leaves[0])[0])
        self.inserted += added
        return added

    def size(self):
        return self.buffer.size

    def stats(self):
        """``size``, ``inserted`` (records ever added), ``priority_updates`` (calls) and ``max_priority``."""
        return dict(size=self.buffer.size, inserted=self.inserted, priority_updates=self.priority_updates,
                    max_priority=float(self.buffer.max_priority))

    def sample(self, num_records):
        """``(records, indices, importance weights)`` of ``num_records`` records drawn by priority."""
        flat, indices, weights = self.buffer.sample(int(num_records))
        leaves = [flat[str(i)] for i in range(len(flat))]
        return optree.tree_unflatten(self.treedef, leaves), indices, weights

    def update_priorities(self, indices, priorities):
        """Sets the raw priorities (e.g. |TD error| + epsilon) of sampled records."""
        self.buffer.update(indices, priorities)
        self.priority_updates += 1

    def get_state(self):
        """The shard's records, priorities, sampling generator and counters (arrays and JSON scalars)."""
        structure = None if self.treedef is None else \
            optree.tree_unflatten(self.treedef, list(range(self.treedef.num_leaves)))
        return dict(buffer=self.buffer.get_state(), structure=structure, inserted=int(self.inserted),
                    priority_updates=int(self.priority_updates))

    def set_state(self, state):
        """Restores what ``get_state`` returned."""
        self.buffer.set_state(state["buffer"])
        self.treedef = None if state["structure"] is None else optree.tree_structure(state["structure"])
        self.inserted, self.priority_updates = int(state["inserted"]), int(state["priority_updates"])
