"""Array-based segment trees for prioritized experience replay.

Schaul et al. 2016 (Prioritized Experience Replay, https://arxiv.org/abs/1511.05952) sample transitions with
probability proportional to their priority. A sum tree gives O(log N) priority updates and O(log N) prefix-sum
search; a min tree gives the smallest priority, needed to normalize importance-sampling weights.

All batch operations are vectorized: they loop over the depth of the tree (log2 of the capacity), never over
the items of a batch.
"""
import logging
import operator

import numpy as np

from rlgraph.utils.errors import RLGraphError

logger = logging.getLogger(__name__)

_OPS = {
    "sum": (np.add, 0.0, operator.add),
    "min": (np.minimum, np.inf, min),
}


# Batches of more nodes than this are deduplicated level by level while propagating.
_DEDUPE_ABOVE = 2048


def _next_power_of_two(n):
    """Returns the smallest power of two that is >= n (n >= 1)."""
    return 1 << (int(n) - 1).bit_length()


def _as_capacity(capacity):
    """Checks that capacity is a positive int and returns it as a Python int."""
    if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity < 1:
        raise RLGraphError("Segment tree capacity must be a positive int, got {!r}.".format(capacity))
    return int(capacity)


def check_priorities(values, what="priorities"):
    """Returns `values` as a 1-D float64 array; raises RLGraphError if any is negative, NaN or infinite."""
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    if values.size and not (np.isfinite(values).all() and values.min() >= 0.0):
        bad = values[~(np.isfinite(values) & (values >= 0.0))]
        raise RLGraphError(
            "All {} must be finite and >= 0; got {} bad value(s), e.g. {!r}.".format(what, bad.size, float(bad[0]))
        )
    return values


def last_write_wins(indices, values):
    """Deduplicates a batch of writes so that for a repeated index the last value in the batch wins.

    Args:
        indices (np.ndarray): 1-D int64 indices, possibly repeated.
        values (np.ndarray): 1-D values, same length.

    Returns:
        tuple: (sorted unique indices, the matching values).
    """
    if indices.size <= 1:
        return indices, values
    order = np.argsort(indices, kind="stable")
    sorted_indices = indices[order]
    keep = np.empty(sorted_indices.size, dtype=bool)
    keep[-1] = True
    np.not_equal(sorted_indices[1:], sorted_indices[:-1], out=keep[:-1])
    order = order[keep]
    return sorted_indices[keep], values[order]


class SegmentTree(object):
    """A binary segment tree over `capacity` leaves stored in one flat numpy array.

    The capacity is rounded up internally to a power of two (`tree_size`); the padding leaves hold the neutral
    element of the operation (0 for "sum", +inf for "min") and cannot be written. Node 1 is the root, node i has
    children 2i and 2i+1, leaf j lives at node `tree_size + j`. Values must be finite and >= 0 (they are
    priorities, Schaul et al. 2016).

    Args:
        capacity (int): Number of usable leaves (any positive int).
        operation (str): "sum" or "min".
    """

    def __init__(self, capacity, operation="sum"):
        if operation not in _OPS:
            raise RLGraphError("Segment tree operation must be one of {}, got {!r}.".format(sorted(_OPS), operation))
        self.capacity = _as_capacity(capacity)
        self.operation = operation
        self._np_op, self.neutral_element, self._py_op = _OPS[operation]
        self.tree_size = _next_power_of_two(self.capacity)
        self.depth = self.tree_size.bit_length() - 1
        self.values = np.full(2 * self.tree_size, self.neutral_element, dtype=np.float64)
        # Row i of this view holds the two children (2i, 2i+1) of node i.
        self._children = self.values.reshape(self.tree_size, 2)

    def _check_indices(self, indices):
        indices = np.asarray(indices)
        if indices.dtype.kind not in "iu":
            if indices.size == 0:
                return indices.astype(np.int64)
            raise RLGraphError("Segment tree indices must be integers, got dtype {}.".format(indices.dtype))
        indices = indices.astype(np.int64, copy=False)
        if indices.size and (indices.min() < 0 or indices.max() >= self.capacity):
            raise RLGraphError(
                "Segment tree indices must lie in [0, {}), got range [{}, {}].".format(
                    self.capacity, indices.min(), indices.max()
                )
            )
        return indices

    def update(self, indices, values):
        """Sets leaves `indices` to `values` and recomputes their ancestors.

        For an index repeated in one batch the last value wins.

        Args:
            indices (array-like): int indices in [0, capacity).
            values (array-like): finite values >= 0, broadcastable to the shape of `indices`.
        """
        indices = self._check_indices(indices).reshape(-1)
        values = check_priorities(np.broadcast_to(np.asarray(values, dtype=np.float64), indices.shape), "values")
        indices, values = last_write_wins(indices, values)
        self._write(indices, values)

    def _write(self, indices, values):
        """Writes checked, deduplicated, sorted leaf `indices` and propagates up the tree."""
        if indices.size == 0:
            return
        nodes = indices + self.tree_size
        self.values[nodes] = values
        _propagate((self,), nodes, self.depth)

    def get(self, indices):
        """Returns the leaf values at `indices` (same shape as `indices`; a scalar index gives a float)."""
        indices = self._check_indices(indices)
        out = self.values[indices + self.tree_size]
        return float(out) if out.ndim == 0 else out

    def reduce(self, start=0, end=None):
        """Reduces the leaves in [start, end) with the tree's operation in O(log N).

        Args:
            start (int): First leaf, inclusive.
            end (Optional[int]): Last leaf, exclusive; None means capacity, negative counts from capacity.

        Returns:
            float: The sum or min of the range; the neutral element (0 or +inf) for an empty range.
        """
        if end is None:
            end = self.capacity
        elif end < 0:
            end += self.capacity
        if not 0 <= start <= end <= self.capacity:
            raise RLGraphError(
                "Invalid reduce range [{}, {}) for a segment tree of capacity {}.".format(start, end, self.capacity)
            )
        if start == 0 and end == self.capacity:
            return float(self.values[1])
        result = self.neutral_element
        lo, hi = int(start) + self.tree_size, int(end) + self.tree_size
        values, op = self.values, self._py_op
        while lo < hi:
            if lo & 1:
                result = op(result, values[lo])
                lo += 1
            if hi & 1:
                hi -= 1
                result = op(result, values[hi])
            lo >>= 1
            hi >>= 1
        return float(result)

    def find_prefix_sum_indices(self, prefix_sums):
        """For each v returns the smallest leaf index i with sum(leaves[:i+1]) > v (sum trees only).

        All queries descend the tree together, one numpy step per level. The descent never enters a subtree
        whose sum is 0, so every returned leaf holds a positive value even when v >= total() or float rounding
        pushes v past a boundary (then the last positive leaf in the range is returned).

        Args:
            prefix_sums (array-like): Values in [0, total()).

        Returns:
            np.ndarray: int64 indices, same shape as `prefix_sums`.
        """
        if self.operation != "sum":
            raise RLGraphError("find_prefix_sum_indices needs a 'sum' segment tree, not {!r}.".format(self.operation))
        v = np.array(prefix_sums, dtype=np.float64)
        shape = v.shape
        v = v.reshape(-1)
        if not self.values[1] > 0.0:
            raise RLGraphError("Cannot search a segment tree whose total is 0 (nothing to sample).")
        if v.size and not (np.isfinite(v).all() and v.min() >= 0.0):
            raise RLGraphError("Prefix sums must be finite and >= 0.")
        nodes = np.ones(v.size, dtype=np.int64)
        go_right = np.empty(v.size, dtype=bool)
        right_positive = np.empty(v.size, dtype=bool)
        step = np.empty(v.size, dtype=np.float64)
        children = self._children
        for _ in range(self.depth):
            pair = children.take(nodes, axis=0)
            left = pair[:, 0]
            np.greater_equal(v, left, out=go_right)
            np.greater(pair[:, 1], 0.0, out=right_positive)
            go_right &= right_positive
            np.multiply(left, go_right, out=step)
            v -= step
            nodes += nodes
            nodes += go_right
        nodes -= self.tree_size
        return nodes.reshape(shape)


# Once the touched nodes of a level span at most this many nodes, the whole span is recomputed from contiguous
# slices (one ufunc call per level and tree) instead of gathering and scattering the touched nodes.
_SPAN_BELOW = 512

# Shift amounts for the path from a node to the root.
_SHIFTS = np.arange(64, dtype=np.int64)


def _propagate(trees, nodes, depth):
    """Recomputes all ancestors of the leaf `nodes` in every tree of `trees` (all of the same size).

    Level by level, each parent is recomputed from its two children. `nodes` must be sorted. Small batches skip
    deduplicating parents (cheaper): a parent listed twice gets the same value twice, because all its children
    were finalized one level below. Once the parents of a level lie within `_SPAN_BELOW` consecutive nodes, every
    node of that range is recomputed with slices: the untouched ones keep their value (a parent always equals
    the operation of its children), the touched ones get exactly the value the gather/scatter path gives.
    """
    nodes = nodes >> 1
    lo, hi = int(nodes[0]), int(nodes[-1]) + 1
    level = 0
    while level < depth and hi - lo > _SPAN_BELOW:
        if nodes.size > _DEDUPE_ABOVE:
            # Large batches: drop repeated parents so the work shrinks geometrically towards the root.
            keep = np.empty(nodes.size, dtype=bool)
            keep[0] = True
            np.not_equal(nodes[1:], nodes[:-1], out=keep[1:])
            nodes = nodes[keep]
        for tree in trees:
            pair = tree._children.take(nodes, axis=0)
            tree.values[nodes] = tree._np_op(pair[:, 0], pair[:, 1])
        nodes >>= 1
        lo, hi = lo >> 1, ((hi - 1) >> 1) + 1
        level += 1
    while level < depth and hi - lo > 1:
        for tree in trees:
            pair = tree._children[lo:hi]
            tree._np_op(pair[:, 0], pair[:, 1], out=tree.values[lo:hi])
        lo, hi = lo >> 1, ((hi - 1) >> 1) + 1
        level += 1
    if level < depth:
        # One node left per level: the path from `lo` to the root. Parent = op(child, sibling) along the path is
        # one sequential accumulate (np.add.accumulate adds left to right; both operations commute exactly).
        path = lo >> _SHIFTS[: depth - level]
        siblings = path[:-1] ^ 1
        for tree in trees:
            values = tree.values
            chain = np.empty(path.size, dtype=np.float64)
            chain[0] = tree._py_op(values[2 * lo], values[2 * lo + 1])
            values.take(siblings, out=chain[1:])
            values[path] = tree._np_op.accumulate(chain)


class SumMinSegmentTree(object):
    """A sum tree and a min tree over the same leaves, written through one update path.

    The sum tree drives proportional sampling, the min tree gives the smallest priority for normalizing
    importance weights (Schaul et al. 2016, Sec. 3.4). Capacity is rounded up internally to a power of two.

    Args:
        capacity (int): Number of leaves (any positive int).
        min_ignores_zero (bool): If True, leaves with value 0 are left out of `min()` (stored as +inf in the
            min tree), so `min()` is the smallest priority of the records that can actually be sampled.
    """

    def __init__(self, capacity, min_ignores_zero=False):
        self.sum_tree = SegmentTree(capacity, "sum")
        self.min_tree = SegmentTree(capacity, "min")
        self.capacity = self.sum_tree.capacity
        self.tree_size = self.sum_tree.tree_size
        self.min_ignores_zero = bool(min_ignores_zero)

    def update(self, indices, values):
        """Sets leaves `indices` to `values` (finite, >= 0) in both trees; for repeated indices the last wins."""
        indices = self.sum_tree._check_indices(indices).reshape(-1)
        values = np.asarray(values, dtype=np.float64)
        if values.shape != indices.shape:
            values = np.broadcast_to(values, indices.shape)
        values = check_priorities(values, "values")
        indices, values = last_write_wins(indices, values)
        self.write_checked(indices, values)

    def write_checked(self, indices, values):
        """`update` without its checks, for callers that made the indices and values themselves.

        Args:
            indices (np.ndarray): 1-D int64 leaf indices in [0, capacity), sorted and unique.
            values (np.ndarray): 1-D float64 values (finite, >= 0), one per index.
        """
        if indices.size == 0:
            return
        nodes = indices + self.tree_size
        self.sum_tree.values[nodes] = values
        self.min_tree.values[nodes] = np.where(values > 0.0, values, np.inf) if self.min_ignores_zero else values
        _propagate((self.sum_tree, self.min_tree), nodes, self.sum_tree.depth)

    def get(self, indices):
        """Returns the leaf values at `indices`."""
        return self.sum_tree.get(indices)

    def total(self, start=0, end=None):
        """Returns the sum of the leaves in [start, end) (all leaves by default)."""
        return self.sum_tree.reduce(start, end)

    def min(self, start=0, end=None):
        """Returns the min of the leaves in [start, end) (all leaves by default); +inf if there is none."""
        return self.min_tree.reduce(start, end)

    def find_prefix_sum_indices(self, prefix_sums):
        """For each v in [0, total()) returns the smallest index i with cumsum(leaves)[i] > v (vectorized)."""
        return self.sum_tree.find_prefix_sum_indices(prefix_sums)
