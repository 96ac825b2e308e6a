"""Tests of the segment trees and the prioritized replay buffer (Schaul et al. 2016) against brute-force numpy."""
import numpy as np
import pytest

from rlgraph.components.memories.prioritized_replay_buffer import PrioritizedReplayBuffer
from rlgraph.components.memories.segment_tree import SegmentTree, SumMinSegmentTree
from rlgraph.utils.errors import RLGraphError

CAPACITIES = [1, 2, 3, 7, 16, 100, 1000]


def _apply_writes(reference, indices, values):
    """Brute-force sequential writes: the last write to an index wins."""
    for i, v in zip(indices, values):
        reference[i] = v


def _check_all_nodes(tree, reference, op):
    """Recomputes every internal node from the leaves and compares with the tree."""
    leaves = np.full(tree.tree_size, tree.neutral_element)
    leaves[: tree.capacity] = reference
    level = leaves
    start = tree.tree_size
    while start >= 1:
        np.testing.assert_allclose(tree.values[start: 2 * start], level, rtol=1e-12, atol=1e-12)
        level = op(level[0::2], level[1::2])
        start //= 2


def _random_values(rng, n, zero_fraction=0.2):
    values = rng.exponential(1.0, size=n)
    values[rng.random(n) < zero_fraction] = 0.0
    return values


@pytest.mark.parametrize("capacity", CAPACITIES)
@pytest.mark.parametrize("operation", ["sum", "min"])
def test_update_with_duplicates_matches_reference(capacity, operation):
    rng = np.random.default_rng(capacity)
    tree = SegmentTree(capacity, operation)
    neutral = 0.0 if operation == "sum" else np.inf
    reference = np.full(capacity, neutral)
    op = np.add if operation == "sum" else np.minimum
    for _ in range(30):
        batch = int(rng.integers(1, 3 * capacity + 2))
        indices = rng.integers(0, capacity, size=batch)  # Many duplicates.
        values = _random_values(rng, batch)
        tree.update(indices, values)
        _apply_writes(reference, indices, values)
        np.testing.assert_array_equal(tree.get(np.arange(capacity)), reference)
        _check_all_nodes(tree, reference, op)


def test_capacity_is_rounded_up_to_power_of_two():
    tree = SegmentTree(100, "sum")
    assert tree.capacity == 100 and tree.tree_size == 128
    with pytest.raises(RLGraphError):
        tree.update([100], [1.0])  # Padding leaves are not writable.
    for bad in [0, -4, 2.5, True]:
        with pytest.raises(RLGraphError):
            SegmentTree(bad, "sum")
    with pytest.raises(RLGraphError):
        SegmentTree(8, "max")


@pytest.mark.parametrize("capacity", CAPACITIES)
def test_range_reductions(capacity):
    rng = np.random.default_rng(100 + capacity)
    sums, mins = SegmentTree(capacity, "sum"), SegmentTree(capacity, "min")
    values = _random_values(rng, capacity)
    sums.update(np.arange(capacity), values)
    mins.update(np.arange(capacity), values)
    for _ in range(200):
        start, end = sorted(rng.integers(0, capacity + 1, size=2))
        np.testing.assert_allclose(sums.reduce(start, end), values[start:end].sum(), rtol=1e-12, atol=1e-12)
        expected_min = values[start:end].min() if end > start else np.inf
        assert mins.reduce(start, end) == expected_min
    np.testing.assert_allclose(sums.reduce(), values.sum(), rtol=1e-12)
    assert mins.reduce() == values.min()
    np.testing.assert_allclose(sums.reduce(0, -1), values[:-1].sum(), rtol=1e-12, atol=1e-12)
    with pytest.raises(RLGraphError):
        sums.reduce(2, 1) if capacity > 1 else sums.reduce(0, capacity + 1)


def test_prefix_sum_search_on_many_random_trees():
    rng = np.random.default_rng(7)
    for trial in range(300):
        capacity = int(rng.integers(1, 2000))
        tree = SumMinSegmentTree(capacity)
        priorities = _random_values(rng, capacity, zero_fraction=rng.uniform(0.0, 0.6))
        priorities[rng.integers(capacity)] = rng.uniform(0.1, 2.0)  # At least one positive leaf.
        # Write in a few shuffled batches with duplicates so the tree history varies.
        for _ in range(3):
            idx = rng.integers(0, capacity, size=capacity)
            tree.update(idx, rng.random(capacity))
        tree.update(rng.permutation(capacity), np.zeros(capacity))
        tree.update(np.arange(capacity), priorities)
        cumsum = np.cumsum(priorities)
        total = tree.total()
        np.testing.assert_allclose(total, cumsum[-1], rtol=1e-12)
        queries = np.concatenate([[0.0], rng.uniform(0.0, total, size=500)])
        found = tree.find_prefix_sum_indices(queries)
        expected = np.searchsorted(cumsum, queries, side="right")
        # Float rounding may only matter for queries right at a boundary; none of those are compared.
        gap = np.abs(cumsum[None, :] - queries[:, None]).min(axis=1)
        safe = gap > 1e-9 * total
        assert safe.mean() > 0.99
        np.testing.assert_array_equal(found[safe], expected[safe], err_msg="trial {}".format(trial))
        assert np.all(priorities[found] > 0.0)


def test_prefix_sum_search_exact_boundaries_with_integer_priorities():
    rng = np.random.default_rng(3)
    for capacity in [1, 5, 64, 333]:
        priorities = rng.integers(0, 4, size=capacity).astype(np.float64)
        priorities[-1] = 2.0
        tree = SumMinSegmentTree(capacity)
        tree.update(np.arange(capacity), priorities)
        cumsum = np.cumsum(priorities)
        queries = np.concatenate([[0.0], cumsum[:-1], cumsum[:-1] - 0.5, cumsum[:-1] + 0.5])
        queries = queries[(queries >= 0) & (queries < cumsum[-1])]
        np.testing.assert_array_equal(
            tree.find_prefix_sum_indices(queries), np.searchsorted(cumsum, queries, side="right")
        )
        # At or past the total the last positive leaf is returned, never a zero or padding leaf.
        last_positive = np.flatnonzero(priorities > 0)[-1]
        np.testing.assert_array_equal(tree.find_prefix_sum_indices([cumsum[-1], 10 * cumsum[-1]]), last_positive)


def test_prefix_sum_search_keeps_query_shape_and_rejects_bad_input():
    tree = SumMinSegmentTree(8)
    with pytest.raises(RLGraphError):
        tree.find_prefix_sum_indices([0.0])  # Total is 0.
    tree.update(np.arange(8), np.arange(1.0, 9.0))
    assert tree.find_prefix_sum_indices(np.zeros((2, 3))).shape == (2, 3)
    for bad in [-1.0, np.nan, np.inf]:
        with pytest.raises(RLGraphError):
            tree.find_prefix_sum_indices([bad])
    with pytest.raises(RLGraphError):
        SegmentTree(8, "min").find_prefix_sum_indices([0.0])


@pytest.mark.parametrize("bad", [-1.0, -1e-300, np.nan, np.inf, -np.inf])
def test_trees_reject_negative_and_non_finite_values(bad):
    for tree in [SegmentTree(8, "sum"), SegmentTree(8, "min"), SumMinSegmentTree(8)]:
        with pytest.raises(RLGraphError):
            tree.update([0, 1], [1.0, bad])
    with pytest.raises(RLGraphError):
        SegmentTree(8, "sum").update([0.5], [1.0])


def test_sum_min_tree_and_min_ignoring_zeros():
    tree = SumMinSegmentTree(5)
    ignoring = SumMinSegmentTree(5, min_ignores_zero=True)
    for t in (tree, ignoring):
        t.update([0, 1, 2, 1], [3.0, 0.5, 0.0, 2.0])  # Index 1: last write (2.0) wins.
        assert t.total() == 5.0 and t.total(1, 3) == 2.0
        np.testing.assert_array_equal(t.get([0, 1, 2, 3]), [3.0, 2.0, 0.0, 0.0])
    assert tree.min(0, 3) == 0.0
    assert ignoring.min() == 2.0 and ignoring.min(2, 5) == np.inf


# ---------------------------------------------------------------- prioritized replay buffer


def _records(start, n):
    x = np.arange(start, start + n)
    return {
        "states": np.stack([x, x, x, x], axis=1).astype(np.float32),
        "actions": x.astype(np.int64),
        "rewards": x.astype(np.float32),
        "terminals": (x % 2).astype(bool),
        "next_states": np.stack([x, x, x, x], axis=1).astype(np.float32) + 1,
    }


def _chi_square(counts, probabilities):
    expected = counts.sum() * probabilities
    return float(((counts - expected) ** 2 / expected).sum())


def test_sampling_frequencies_are_proportional_to_priority_to_the_alpha():
    n, alpha = 50, 0.7
    buffer = PrioritizedReplayBuffer(64, alpha=alpha, beta=0.5, seed=12345)
    buffer.insert(_records(0, n))
    rng = np.random.default_rng(0)
    priorities = rng.uniform(0.05, 5.0, size=n)
    buffer.update(np.arange(n), priorities)
    probabilities = priorities ** alpha / (priorities ** alpha).sum()
    counts = np.zeros(n)
    for batch in (1, 7, 32):
        for _ in range(5_000):
            records, indices, _ = buffer.sample(batch)
            np.testing.assert_array_equal(records["actions"], indices)
            counts += np.bincount(indices, minlength=n)
    chi2 = _chi_square(counts, probabilities)
    # 200k draws, 49 degrees of freedom: mean 49, sd ~10; stratification only lowers it. Seeds are fixed, so no flakes.
    assert chi2 < 150.0, chi2
    # Meaningful: sampling proportional to the raw priorities (alpha ignored) or uniformly is rejected hard.
    assert _chi_square(counts, priorities / priorities.sum()) > 2000.0
    assert _chi_square(counts, np.full(n, 1.0 / n)) > 2000.0


def test_importance_weights_match_closed_form():
    n, alpha, beta = 40, 0.6, 0.4
    buffer = PrioritizedReplayBuffer(100, alpha=alpha, beta=beta, seed=1)
    buffer.insert(_records(0, n))
    priorities = np.random.default_rng(2).uniform(0.01, 3.0, size=n)
    priorities[5] = 0.0  # Never sampled; left out of the normalizing minimum.
    buffer.update(np.arange(n), priorities)
    p = priorities ** alpha
    probabilities = p / p.sum()
    max_weight = (n * probabilities[p > 0].min()) ** -beta
    for b in (None, 0.0, 1.0, 0.7):
        _, indices, weights = buffer.sample(16, beta=b)
        used_beta = beta if b is None else b
        assert weights.dtype == np.float32 and indices.dtype == np.int64
        assert not np.any(indices == 5)
        expected = (n * probabilities[indices]) ** -used_beta / (n * probabilities[p > 0].min()) ** -used_beta
        np.testing.assert_allclose(weights, expected, rtol=1e-5)
        assert np.all(weights <= 1.0 + 1e-6)
    _, indices, weights = buffer.sample(8)
    np.testing.assert_allclose(weights, (n * probabilities[indices]) ** -beta / max_weight, rtol=1e-5)


def test_new_records_get_max_priority_and_max_priority_tracks_updates():
    buffer = PrioritizedReplayBuffer(8, alpha=0.5, seed=0)
    buffer.insert(_records(0, 2))
    np.testing.assert_allclose(buffer.get_priorities([0, 1]), 1.0)
    buffer.update([0, 1], [9.0, 0.25])
    assert buffer.max_priority == 9.0
    buffer.insert(_records(2, 1))
    np.testing.assert_allclose(buffer.get_priorities([0, 1, 2]), [3.0, 0.5, 3.0])
    buffer.update([2], [4.0])
    assert buffer.max_priority == 9.0
    buffer.insert(_records(3, 1), priorities=[16.0])
    assert buffer.max_priority == 16.0 and buffer.get_priorities(3) == 4.0


def test_ring_buffer_overwrites_oldest():
    buffer = PrioritizedReplayBuffer(5, alpha=0.6, seed=3)
    assert len(buffer) == 0 and buffer.capacity == 5
    buffer.insert(_records(0, 3))
    assert buffer.size == 3
    buffer.update([0, 1, 2], [0.1, 7.0, 0.2])
    buffer.insert(_records(3, 4))  # Overwrites slots 0 and 1 with records 5 and 6.
    assert len(buffer) == 5
    stored_actions = np.array([5, 6, 2, 3, 4])
    # New and overwritten slots get the max priority; slot 2 keeps its own.
    np.testing.assert_allclose(buffer.get_priorities(np.arange(5)), np.array([7.0, 7.0, 0.2, 7.0, 7.0]) ** 0.6)
    seen = set()
    for _ in range(200):
        records, indices, _ = buffer.sample(5)
        np.testing.assert_array_equal(records["actions"], stored_actions[indices])
        np.testing.assert_array_equal(records["states"][:, 0], stored_actions[indices].astype(np.float32))
        seen.update(records["actions"].tolist())
    assert seen == {2, 3, 4, 5, 6}
    # A batch larger than the capacity keeps only its last `capacity` records, oldest-first order preserved.
    buffer.insert(_records(100, 12))
    records, indices, _ = buffer.sample(5)
    ring = np.empty(5, dtype=np.int64)
    ring[(2 + np.arange(5) + 7) % 5] = np.arange(107, 112)  # Next slot was 2; 7 records skipped.
    np.testing.assert_array_equal(records["actions"], ring[indices])


def test_record_spec_preallocates_and_casts():
    spec = {"states": ((4,), np.float32), "actions": ((), np.int32)}
    buffer = PrioritizedReplayBuffer(16, record_spec=spec, seed=0)
    assert sorted(buffer.keys) == ["actions", "states"]
    buffer.insert({"states": np.ones((3, 4)), "actions": [1, 2, 3]})
    records, _, _ = buffer.sample(3)
    assert records["states"].dtype == np.float32 and records["states"].shape == (3, 4)
    assert records["actions"].dtype == np.int32
    with pytest.raises(RLGraphError):
        buffer.insert({"states": np.ones((3, 5)), "actions": [1, 2, 3]})
    with pytest.raises(RLGraphError):
        buffer.insert({"states": np.ones((3, 4))})
    with pytest.raises(RLGraphError):
        buffer.insert({"states": np.ones((3, 4)), "actions": [1, 2]})


def test_same_seed_same_samples():
    a, b = (PrioritizedReplayBuffer(32, seed=42) for _ in range(2))
    for buffer in (a, b):
        buffer.insert(_records(0, 20))
        buffer.update(np.arange(20), np.linspace(0.1, 2.0, 20))
    for _ in range(5):
        (_, ia, wa), (_, ib, wb) = a.sample(8), b.sample(8)
        np.testing.assert_array_equal(ia, ib)
        np.testing.assert_array_equal(wa, wb)
    c = PrioritizedReplayBuffer(32, rng=np.random.default_rng(42))
    with pytest.raises(RLGraphError):
        PrioritizedReplayBuffer(32, seed=1, rng=np.random.default_rng(1))
    assert c.rng is not a.rng


@pytest.mark.parametrize("bad", [-0.5, np.nan, np.inf, -np.inf])
def test_buffer_rejects_negative_and_non_finite_priorities(bad):
    buffer = PrioritizedReplayBuffer(8, seed=0)
    buffer.insert(_records(0, 4))
    before = buffer.get_priorities(np.arange(4)).copy()
    with pytest.raises(RLGraphError):
        buffer.update([0, 1], [1.0, bad])
    with pytest.raises(RLGraphError):
        buffer.insert(_records(4, 2), priorities=[bad, 1.0])
    np.testing.assert_array_equal(buffer.get_priorities(np.arange(4)), before)
    assert buffer.size == 4


def test_buffer_sampling_errors():
    buffer = PrioritizedReplayBuffer(8, seed=0)
    with pytest.raises(RLGraphError, match="empty"):
        buffer.sample(1)
    buffer.insert(_records(0, 3))
    with pytest.raises(RLGraphError, match="3"):
        buffer.sample(4)
    for bad in (0, -1, 1.5):
        with pytest.raises(RLGraphError):
            buffer.sample(bad)
    with pytest.raises(RLGraphError):
        buffer.update([3], [1.0])  # Slot 3 holds no record yet.
    with pytest.raises(RLGraphError):
        buffer.update([0, 1], [1.0])
    buffer.update([0, 1, 2], [0.0, 0.0, 0.0])
    with pytest.raises(RLGraphError, match="0"):
        buffer.sample(2)


def test_alpha_zero_is_uniform():
    buffer = PrioritizedReplayBuffer(16, alpha=0.0, beta=1.0, seed=5)
    buffer.insert(_records(0, 10))
    buffer.update(np.arange(10), np.linspace(0.0, 100.0, 10))
    _, indices, weights = buffer.sample(10)
    np.testing.assert_array_equal(np.sort(indices), np.arange(10))  # Stratified: one per equal segment.
    np.testing.assert_array_equal(weights, 1.0)


def test_buffer_state_round_trip():
    buffer = PrioritizedReplayBuffer(16, alpha=0.7, seed=4)
    buffer.insert(_records(0, 10))
    buffer.update(np.arange(10), np.linspace(0.5, 5.0, 10))
    state = buffer.get_state()
    first = buffer.sample(6)
    buffer.insert(_records(10, 9), priorities=np.full(9, 50.0))
    buffer.update([0, 1], [0.0, 9.0])
    buffer.set_state(state)
    assert buffer.size == 10 and buffer.max_priority == 5.0
    second = buffer.sample(6)  # Same storage, trees and generator state: the same draws.
    for a, b in zip(first[1:], second[1:]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(first[0]["actions"], second[0]["actions"])
    np.testing.assert_allclose(buffer.get_priorities(np.arange(10)), np.linspace(0.5, 5.0, 10) ** 0.7)
    state["sum_tree"][:] = -1.0  # The buffer holds copies, not the state's arrays.
    assert buffer._tree.total() > 0


def _rebuilt(tree):
    """Every node of ``tree`` recomputed level by level from its leaves (parent = op(left, right))."""
    values = tree.values.copy()
    start = tree.tree_size // 2
    while start >= 1:
        values[start:2 * start] = tree._np_op(values[2 * start:4 * start:2], values[2 * start + 1:4 * start:2])
        start //= 2
    return values


@pytest.mark.parametrize("capacity", [1, 2, 5, 64, 1000, 5000, 70000])
def test_incremental_updates_match_a_full_rebuild_bit_for_bit(capacity):
    # Contiguous blocks (inserts), few random leaves and many random leaves take the gather/scatter, the slice
    # and the root-path stages of the propagation in different mixes: all must give exactly a full rebuild.
    rng = np.random.default_rng(capacity)
    tree = SumMinSegmentTree(capacity, min_ignores_zero=True)
    start = 0
    for step in range(60):
        kind = step % 3
        if kind == 0:
            n = int(rng.integers(1, 33))
            indices = (start + np.arange(n)) % capacity
            start = (start + n) % capacity
        else:
            indices = rng.integers(0, capacity, size=int(rng.integers(1, 65 if kind == 1 else 4000)))
        tree.update(indices, _random_values(rng, indices.size))
        np.testing.assert_array_equal(tree.sum_tree.values, _rebuilt(tree.sum_tree))
        np.testing.assert_array_equal(tree.min_tree.values, _rebuilt(tree.min_tree))


def test_buffer_inserts_with_and_without_wrap_match_a_full_rebuild():
    buffer = PrioritizedReplayBuffer(37, alpha=0.6, seed=1)
    rng = np.random.default_rng(2)
    for step in range(30):
        n = int(rng.integers(1, 12))
        priorities = None if step % 2 else rng.exponential(1.0, n) + 0.01
        buffer.insert(_records(step * 12, n), priorities=priorities)
        buffer.update(rng.integers(0, buffer.size, 5), rng.exponential(1.0, 5))
        for tree in (buffer._tree.sum_tree, buffer._tree.min_tree):
            np.testing.assert_array_equal(tree.values, _rebuilt(tree))
    with pytest.raises(RLGraphError, match="finite"), np.errstate(over="ignore"):
        PrioritizedReplayBuffer(4, alpha=2.0).insert(_records(0, 2), priorities=[1e200, 1.0])
