"""A pure-numpy prioritized replay buffer (Schaul et al. 2016, Prioritized Experience Replay).

Records are kept in preallocated numpy arrays (one per flat key) used as a ring buffer. Priorities live in a
`SumMinSegmentTree`: sampling is stratified and proportional to priority ** alpha, importance-sampling weights
are (N * P(i)) ** -beta normalized by the largest possible weight, as in the paper and the OpenAI baselines
implementation.
"""
import logging

import numpy as np

from rlgraph.components.memories.segment_tree import SumMinSegmentTree, check_priorities, last_write_wins
from rlgraph.utils.errors import RLGraphError

logger = logging.getLogger(__name__)


def _check_fraction(name, value, low=0.0):
    value = float(value)
    if not (np.isfinite(value) and value >= low):
        raise RLGraphError("{} must be a finite float >= {}, got {!r}.".format(name, low, value))
    return value


class PrioritizedReplayBuffer(object):
    """Proportional prioritized replay (Schaul et al. 2016) over numpy ring-buffer storage.

    New records get priority max_priority ** alpha, where max_priority is the largest raw priority seen so far
    (initially 1.0). `update` stores priorities ** alpha. Zero priorities are allowed: such records are never
    sampled and are left out of the minimum used to normalize the weights.

    Args:
        capacity (int): Maximum number of records; the oldest are overwritten when full. Any positive int (the
            segment trees round up to a power of two internally).
        alpha (float): Priority exponent (0 = uniform sampling).
        beta (float): Default importance-sampling exponent (0 = no correction, 1 = full correction).
        record_spec (Optional[dict]): Flat key -> (shape, dtype) of one record; if None the storage is created
            from the first inserted batch.
        seed (Optional[int]): Seed for a new numpy Generator.
        rng (Optional[np.random.Generator]): Generator to use instead of `seed`.
    """

    def __init__(self, capacity, alpha=0.6, beta=0.4, record_spec=None, seed=None, rng=None):
        if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity < 1:
            raise RLGraphError("Replay buffer capacity must be a positive int, got {!r}.".format(capacity))
        if seed is not None and rng is not None:
            raise RLGraphError("Pass either `seed` or `rng` to PrioritizedReplayBuffer, not both.")
        self._capacity = int(capacity)
        self.alpha = _check_fraction("alpha", alpha)
        self.beta = _check_fraction("beta", beta)
        self.rng = rng if rng is not None else np.random.default_rng(seed)
        self.max_priority = 1.0
        self._tree = SumMinSegmentTree(self._capacity, min_ignores_zero=True)
        self._storage = None
        self._size = 0
        self._next_index = 0
        if record_spec is not None:
            self._allocate({k: (tuple(shape), np.dtype(dtype)) for k, (shape, dtype) in dict(record_spec).items()})

    @property
    def capacity(self):
        """int: Maximum number of records."""
        return self._capacity

    @property
    def size(self):
        """int: Number of records stored."""
        return self._size

    def __len__(self):
        return self._size

    @property
    def keys(self):
        """list: The record keys (empty before the storage exists)."""
        return [] if self._storage is None else list(self._storage)

    def _allocate(self, spec):
        if not spec:
            raise RLGraphError("A replay record needs at least one key.")
        self._storage = {key: np.zeros((self._capacity,) + shape, dtype=dtype) for key, (shape, dtype) in spec.items()}
        logger.debug("Allocated prioritized replay storage: %s", {k: (s, str(d)) for k, (s, d) in spec.items()})

    def _check_records(self, records):
        if not isinstance(records, dict) or not records:
            raise RLGraphError("Records must be a non-empty dict of key -> array with a batch dimension.")
        arrays = {}
        for key, value in records.items():
            if isinstance(value, dict):
                raise RLGraphError("Record key {!r} holds a dict; records must be flat (key -> array).".format(key))
            value = np.asarray(value)
            if value.ndim == 0:
                raise RLGraphError("Record key {!r} has no batch dimension.".format(key))
            arrays[key] = value
        batch_sizes = {key: value.shape[0] for key, value in arrays.items()}
        if len(set(batch_sizes.values())) != 1:
            raise RLGraphError("All record arrays need the same batch size, got {}.".format(batch_sizes))
        if self._storage is None:
            self._allocate({key: (value.shape[1:], value.dtype) for key, value in arrays.items()})
        if set(arrays) != set(self._storage):
            raise RLGraphError(
                "Record keys {} do not match the buffer's keys {}.".format(sorted(arrays), sorted(self._storage))
            )
        for key, value in arrays.items():
            if value.shape[1:] != self._storage[key].shape[1:]:
                raise RLGraphError(
                    "Record key {!r} has shape {} per record, expected {}.".format(
                        key, value.shape[1:], self._storage[key].shape[1:]
                    )
                )
        return arrays, next(iter(batch_sizes.values()))

    def insert(self, records, priorities=None):
        """Inserts a batch of records, overwriting the oldest ones when full.

        Args:
            records (dict): Flat key -> array of shape [batch, *record_shape].
            priorities (Optional[array-like]): Raw priorities (finite, >= 0) for the batch; by default each new
                record gets the current max priority.
        """
        arrays, batch = self._check_records(records)
        if priorities is not None:
            priorities = check_priorities(priorities)
            if priorities.size != batch:
                raise RLGraphError("Got {} priorities for {} records.".format(priorities.size, batch))
        if batch == 0:
            return
        if batch > self._capacity:
            # Only the last `capacity` records survive a ring buffer; the rest would be overwritten at once.
            skip = batch - self._capacity
            arrays = {key: value[skip:] for key, value in arrays.items()}
            self._next_index = (self._next_index + skip) % self._capacity
            if priorities is not None:
                priorities = priorities[skip:]
            batch = self._capacity
        start = self._next_index
        if start + batch <= self._capacity:
            # No wrap: one contiguous block of slots, sorted and unique (the trees' unchecked write path).
            indices = np.arange(start, start + batch, dtype=np.int64)
            for key, value in arrays.items():
                self._storage[key][start:start + batch] = value
        else:
            indices = (start + np.arange(batch, dtype=np.int64)) % self._capacity
            for key, value in arrays.items():
                self._storage[key][indices] = value
        if priorities is None:
            stored = np.full(batch, self.max_priority ** self.alpha)
        else:
            stored = priorities ** self.alpha
            self.max_priority = max(self.max_priority, float(priorities.max()))
        if start + batch <= self._capacity:
            self._tree.write_checked(indices, check_priorities(stored, "values"))
        else:
            self._tree.update(indices, stored)
        self._next_index = (self._next_index + batch) % self._capacity
        self._size = min(self._size + batch, self._capacity)

    def sample(self, num_records, beta=None, rng=None):
        """Samples records with probability P(i) = p_i ** alpha / sum_k p_k ** alpha (stratified).

        [0, total) is split into `num_records` equal segments with one uniform draw in each.

        Args:
            num_records (int): Batch size, 1 <= num_records <= size.
            beta (Optional[float]): Importance-sampling exponent; defaults to the buffer's `beta`.
            rng (Optional[np.random.Generator]): Generator for this call; defaults to the buffer's.

        Returns:
            tuple: (records dict key -> array [num_records, ...], int64 indices, float32 importance weights
                w_i = (N * P(i)) ** -beta / max_j w_j with max_j w_j = (N * p_min / total) ** -beta).
        """
        if isinstance(num_records, bool) or not isinstance(num_records, (int, np.integer)) or num_records < 1:
            raise RLGraphError("num_records must be a positive int, got {!r}.".format(num_records))
        if self._size == 0:
            raise RLGraphError("Cannot sample from an empty prioritized replay buffer.")
        if num_records > self._size:
            raise RLGraphError(
                "Cannot sample {} records from a prioritized replay buffer holding {}.".format(num_records, self._size)
            )
        beta = self.beta if beta is None else _check_fraction("beta", beta)
        rng = self.rng if rng is None else rng
        total = self._tree.total()
        if not total > 0.0:
            raise RLGraphError("Cannot sample: all stored priorities are 0.")
        segment = total / num_records
        prefix_sums = (np.arange(num_records, dtype=np.float64) + rng.random(num_records)) * segment
        indices = self._tree.find_prefix_sum_indices(prefix_sums)
        # (N P(i))^-beta / (N p_min / total)^-beta == (p_min / p_i)^beta.
        weights = (self._tree.min() / self._tree.sum_tree.values.take(indices + self._tree.tree_size)) ** beta
        records = {key: value.take(indices, axis=0) for key, value in self._storage.items()}
        return records, indices, weights.astype(np.float32)

    def update(self, indices, priorities):
        """Sets the raw priorities of stored records (stored as priorities ** alpha) and tracks max_priority.

        Args:
            indices (array-like): int indices of stored records, e.g. from `sample`.
            priorities (array-like): Raw priorities (e.g. |TD error| + eps), finite and >= 0, one per index.
        """
        indices = np.asarray(indices).reshape(-1)
        priorities = check_priorities(priorities)
        if priorities.size != indices.size:
            raise RLGraphError("Got {} priorities for {} indices.".format(priorities.size, indices.size))
        if indices.size == 0:
            return
        if indices.dtype.kind not in "iu" or indices.min() < 0 or indices.max() >= self._size:
            raise RLGraphError("Indices must be ints of stored records in [0, {}).".format(self._size))
        stored = check_priorities(priorities ** self.alpha, "values")
        self._tree.write_checked(*last_write_wins(indices.astype(np.int64, copy=False), stored))
        self.max_priority = max(self.max_priority, float(priorities.max()))

    def get_priorities(self, indices):
        """Returns the stored priorities (raw priority ** alpha) at `indices`."""
        return self._tree.get(indices)

    def get_state(self):
        """Returns a copy of the whole mutable state (storage, trees, counters, generator state)."""
        return {
            "storage": None if self._storage is None else {k: v.copy() for k, v in self._storage.items()},
            "sum_tree": self._tree.sum_tree.values.copy(),
            "min_tree": self._tree.min_tree.values.copy(),
            "size": self._size,
            "next_index": self._next_index,
            "max_priority": self.max_priority,
            "rng": self.rng.bit_generator.state,
        }

    def set_state(self, state):
        """Restores what `get_state` returned (the arrays are copied in place)."""
        if state["storage"] is None:
            self._storage = None
        else:
            if self._storage is None or set(self._storage) != set(state["storage"]):
                self._storage = {k: np.empty_like(v) for k, v in state["storage"].items()}
            for k, v in state["storage"].items():
                self._storage[k][...] = v
        self._tree.sum_tree.values[...] = state["sum_tree"]
        self._tree.min_tree.values[...] = state["min_tree"]
        self._size = int(state["size"])
        self._next_index = int(state["next_index"])
        self.max_priority = float(state["max_priority"])
        self.rng.bit_generator.state = state["rng"]
