"""Tests of the memories (ReplayMemory, PrioritizedReplay, FIFOQueue, SequenceReplay) on both backends.

Expected values come from numpy references written here, independent of the components' code.
"""
import threading
import time

import numpy as np
import pytest

from rlgraph.components.memories import FIFOQueue, PrioritizedReplay, ReplayMemory, SequenceReplay
from rlgraph.spaces import BoolBox, Dict, FloatBox, IntBox
from rlgraph.tests import ComponentTest, run_on_backends
from rlgraph.utils.errors import RLGraphRuntimeError, RLGraphSpaceError, RLGraphSpecError

RECORDS = Dict(states=FloatBox(shape=(2,)), actions=IntBox(10 ** 6), add_batch_rank=True)
INDICES = IntBox(shape=(), dtype="int64", add_batch_rank=True)
PRIORITIES = FloatBox(add_batch_rank=True)
PRIORITIZED_SPACES = dict(records=RECORDS, num_records=int, indices=INDICES, priorities=PRIORITIES)


def records(start, n):
    """Records whose 'actions' are their ids start, start+1, ..."""
    ids = np.arange(start, start + n)
    return {"states": np.stack([ids, -ids], axis=1).astype(np.float32), "actions": ids.astype(np.int32)}


def chi_square(counts, probabilities):
    expected = counts.sum() * probabilities
    return float(((counts - expected) ** 2 / expected).sum())


# ------------------------------------------------------------------------------------------- ReplayMemory


def test_replay_memory_ring_buffer_matches_numpy(backend):
    capacity = 5
    test = ComponentTest(ReplayMemory(capacity), input_spaces=dict(records=RECORDS, num_records=int), backend=backend)
    ring = {"states": np.zeros((capacity, 2), np.float32), "actions": np.zeros(capacity, np.int32)}
    index = size = 0
    start = 0
    for n in (3, 4, 1, 12, 2):  # Wraps around; 12 > capacity keeps only the last 5 of that batch.
        batch = records(start, n)
        start += n
        for i in range(n):  # Reference: one record at a time into a ring.
            for k in ring:
                ring[k][index] = batch[k][i]
            index = (index + 1) % capacity
            size = min(size + 1, capacity)
        test.test(("insert_records", [batch]))
        assert test.test("get_size") == size
        stored = test.read_variable_values(test.component)
        np.testing.assert_array_equal(stored["replay-memory/storage/actions"], ring["actions"])
        np.testing.assert_array_equal(stored["replay-memory/storage/states"], ring["states"])
        np.testing.assert_array_equal(stored["replay-memory/index"], index)
        sample = test.test(("get_records", [size]))
        assert set(sample["actions"].tolist()) <= set(ring["actions"][:size].tolist())
        np.testing.assert_array_equal(sample["states"][:, 0], sample["actions"])
    with pytest.raises(RLGraphRuntimeError):
        test.test(("get_records", [capacity + 1]))


# --------------------------------------------------------------------------------------- PrioritizedReplay


def prioritized(backend, capacity=64, alpha=0.6, beta=0.4, seed=7):
    return ComponentTest(PrioritizedReplay(capacity, alpha=alpha, beta=beta, seed=seed),
                         input_spaces=PRIORITIZED_SPACES, backend=backend)


def test_prioritized_sampling_frequencies_follow_priority_to_the_alpha(backend):
    n, alpha = 40, 0.7
    test = prioritized(backend, alpha=alpha)
    test.test(("insert_records", [records(0, n)]))
    priorities = np.random.default_rng(0).uniform(0.05, 5.0, size=n).astype(np.float32)
    test.test(("update_records", [np.arange(n, dtype=np.int64), priorities]))
    counts = np.zeros(n)
    for _ in range(1500):
        batch, indices, _ = test.test(("get_records", [32]))
        np.testing.assert_array_equal(batch["actions"], indices)  # Slot i holds record i (no wrap yet).
        counts += np.bincount(batch["actions"], minlength=n)
    p = priorities.astype(np.float64) ** alpha
    # 48k draws, 39 degrees of freedom: mean 39, sd ~9; stratified sampling only lowers it. Fixed seed.
    assert chi_square(counts, p / p.sum()) < 120.0
    assert chi_square(counts, priorities / priorities.sum()) > 1000.0  # Alpha matters.
    assert chi_square(counts, np.full(n, 1.0 / n)) > 1000.0


def test_prioritized_importance_weights_match_closed_form(backend):
    n, alpha, beta = 20, 0.6, 0.4
    test = prioritized(backend, alpha=alpha, beta=beta)
    test.test(("insert_records", [records(0, n)]))
    priorities = np.random.default_rng(1).uniform(0.01, 3.0, size=n)
    test.test(("update_records", [np.arange(n, dtype=np.int64), priorities.astype(np.float32)]))
    p = priorities.astype(np.float32).astype(np.float64) ** alpha
    probabilities = p / p.sum()
    for _ in range(5):
        batch, indices, weights = test.test(("get_records", [16]))
        assert weights.dtype == np.float32 and indices.dtype == np.int64 and weights.shape == (16,)
        expected = (n * probabilities[indices]) ** -beta / (n * probabilities.min()) ** -beta
        np.testing.assert_allclose(weights, expected, rtol=1e-5)
    # A new record gets the largest priority seen so far: its weight is (p_min / max_p ** alpha) ** beta.
    test.test(("insert_records", [records(n, 1)]))
    p_new = np.append(p, priorities.astype(np.float32).max() ** alpha)
    batch, indices, weights = test.test(("get_records", [n + 1]))
    expected = (p_new.min() / p_new[indices]) ** beta
    np.testing.assert_allclose(weights, expected, rtol=1e-5)


@pytest.mark.parametrize("bad", [-0.5, np.nan, np.inf])
def test_prioritized_update_rejects_negative_and_non_finite_priorities(backend, bad):
    test = prioritized(backend, alpha=1.0, beta=1.0)
    test.test(("insert_records", [records(0, 4)]))
    test.test(("update_records", [np.arange(4, dtype=np.int64), np.array([1.0, 2.0, 4.0, 8.0], np.float32)]))
    with pytest.raises(RLGraphRuntimeError, match="priorities must be finite and >= 0"):
        test.test(("update_records", [np.array([0, 1], np.int64), np.array([1.0, bad], np.float32)]))
    with pytest.raises(RLGraphRuntimeError, match="Indices"):
        test.test(("update_records", [np.array([4], np.int64), np.array([1.0], np.float32)]))  # Slot 4 is empty.
    # Nothing changed: with alpha = beta = 1 the weights are p_min / p_i = 1 / p_i.
    _, indices, weights = test.test(("get_records", [4]))
    np.testing.assert_allclose(weights, 1.0 / np.array([1.0, 2.0, 4.0, 8.0])[indices], rtol=1e-6)


def test_prioritized_get_more_than_held_raises(backend):
    test = prioritized(backend)
    with pytest.raises(RLGraphRuntimeError, match="empty"):
        test.test(("get_records", [1]))
    test.test(("insert_records", [records(0, 3)]))
    with pytest.raises(RLGraphRuntimeError, match=r"PrioritizedReplay prioritized-replay.*get_records.*4.*3"):
        test.test(("get_records", [4]))
    assert test.test(("get_records", [3]))[0]["actions"].shape == (3,)  # Still usable afterwards.


def test_prioritized_ring_buffer_and_build_leave_no_trace(backend):
    test = prioritized(backend, capacity=5, alpha=0.0)  # alpha 0: stratified sampling of all = a permutation.
    assert test.test("get_size") == 0  # The PyTorch build's sample run stored nothing.
    test.test(("insert_records", [records(0, 3)]))
    test.test(("insert_records", [records(3, 4)]))
    assert test.test("get_size") == 5
    batch, indices, _ = test.test(("get_records", [5]))
    ring = np.array([5, 6, 2, 3, 4])
    np.testing.assert_array_equal(batch["actions"], ring[indices])
    np.testing.assert_array_equal(np.sort(batch["actions"]), np.arange(2, 7))


def test_prioritized_state_round_trip():
    test = prioritized("pytorch")
    memory = test.component
    test.test(("insert_records", [records(0, 10)]))
    state = memory.get_state()
    first = test.test(("get_records", [8]))
    test.test(("insert_records", [records(10, 5)]))
    memory.set_state(state)
    assert test.test("get_size") == 10
    second = test.test(("get_records", [8]))  # Same generator state: same draws.
    np.testing.assert_array_equal(first[1], second[1])
    np.testing.assert_array_equal(first[0]["actions"], second[0]["actions"])


def test_prioritized_backends_agree():
    calls = [("insert_records", [records(0, 30)]),
             ("update_records", [np.arange(30, dtype=np.int64), np.linspace(0.1, 3.0, 30).astype(np.float32)]),
             ("get_records", [16]), ("insert_records", [records(30, 50)]), ("get_records", [32]), ("get_size", [])]
    run_on_backends(lambda: PrioritizedReplay(64, alpha=0.6, beta=0.4, seed=3), PRIORITIZED_SPACES, calls)


def test_prioritized_rejects_bad_specs():
    for kwargs in (dict(alpha=-1.0), dict(beta=np.nan), dict(capacity=0), dict(seed=1.5)):
        with pytest.raises(RLGraphSpecError):
            PrioritizedReplay(**{"capacity": 8, **kwargs})
    with pytest.raises(RLGraphSpaceError, match="TextBox"):
        from rlgraph.spaces import TextBox
        ComponentTest(PrioritizedReplay(8), input_spaces=dict(
            records=Dict(a=TextBox(), add_batch_rank=True), num_records=int, indices=INDICES, priorities=PRIORITIES),
            backend="pytorch")


# ------------------------------------------------------------------------------------------------ FIFOQueue


def fifo(backend, capacity=8, timeout=0.05):
    return ComponentTest(FIFOQueue(capacity, timeout=timeout), input_spaces=dict(records=RECORDS, num_records=int),
                         backend=backend)


def test_fifo_order_and_wrap_around(backend):
    test = fifo(backend)
    assert test.test("get_size") == 0
    reference, start = [], 0
    for put, get in ((5, 3), (4, 2), (2, 6), (7, 5)):  # Wraps around the ring several times.
        test.test(("insert_records", [records(start, put)]))
        reference.extend(range(start, start + put))
        start += put
        out = test.test(("get_records", [get]))
        np.testing.assert_array_equal(out["actions"], reference[:get])
        np.testing.assert_array_equal(out["states"][:, 1], -np.array(reference[:get], np.float32))
        del reference[:get]
        assert test.test("get_size") == len(reference)


def test_fifo_timeouts_raise(backend):
    test = fifo(backend, capacity=4, timeout=0.05)
    begin = time.perf_counter()
    with pytest.raises(RLGraphRuntimeError, match="timed out after 0.05 s waiting for 1 records"):
        test.test(("get_records", [1]))
    assert time.perf_counter() - begin >= 0.045
    test.test(("insert_records", [records(0, 3)]))
    with pytest.raises(RLGraphRuntimeError, match="timed out.*room for 2 records"):
        test.test(("insert_records", [records(3, 2)]))
    with pytest.raises(RLGraphRuntimeError, match="never fits"):
        test.test(("insert_records", [records(3, 5)]))
    with pytest.raises(RLGraphRuntimeError, match="capacity"):
        test.test(("get_records", [5]))
    np.testing.assert_array_equal(test.test(("get_records", [3]))["actions"], [0, 1, 2])  # Nothing was lost.


def test_fifo_threads_put_while_learner_gets(backend):
    producers, batches, batch_size = 4, 20, 3
    test = fifo(backend, capacity=7, timeout=10.0)  # Small capacity: producers block on a full queue often.

    errors = []

    def produce(p):
        try:
            for b in range(batches):
                ids = 1000 * p + b * batch_size + np.arange(batch_size)
                test.executor.execute("insert_records", {"states": np.stack([ids, -ids], 1).astype(np.float32),
                                                         "actions": ids.astype(np.int32)})
        except Exception as e:  # Reported below; a dead producer would otherwise only stall the consumer.
            errors.append(e)

    threads = [threading.Thread(target=produce, args=(p,)) for p in range(producers)]
    for t in threads:
        t.start()
    received = []
    for _ in range(producers * batches * batch_size // 4):
        received.extend(test.executor.execute("get_records", 4)["actions"].tolist())
    for t in threads:
        t.join(timeout=10.0)
    assert not errors
    assert sorted(received) == sorted(1000 * p + i for p in range(producers) for i in range(batches * batch_size))
    for p in range(producers):  # Each producer's records arrive in the order they were put.
        mine = [r for r in received if r // 1000 == p]
        assert mine == sorted(mine)
    assert test.test("get_size") == 0


# ------------------------------------------------------------------------------------------- SequenceReplay

STEP_SPACE = dict(obs=FloatBox(shape=(2,)), terminals=BoolBox(),
                  internal_states=(FloatBox(shape=(3,)), FloatBox(shape=(1,))))


def reference_sequences(episodes, L, S):
    """The sequences of the documented rule, from whole step-id lists: [(ids, length), ...]."""
    out = []
    for steps, finished in episodes:
        E = len(steps)
        k = 0
        while k * S + L <= E:
            out.append((steps[k * S:k * S + L], L))
            k += 1
        last_end = (k - 1) * S + L if k else 0
        if finished and E > last_end:
            out.append((steps[k * S:], E - k * S))
    return out


def step_records(ids, terminals):
    """Per-step records whose values encode the step id."""
    ids = np.asarray(ids, np.float32)
    return {"obs": np.stack([ids, ids + 0.5], -1), "terminals": np.asarray(terminals, bool),
            "internal_states": (np.stack([ids, 2 * ids, 3 * ids], -1), -ids[..., None])}


def sequence_test(backend, layout, L=5, overlap=2, capacity=200, alpha=0.0):
    space = Dict(STEP_SPACE, add_batch_rank=True, add_time_rank=layout != "single", time_major=layout == "time-major")
    return ComponentTest(SequenceReplay(capacity, burn_in_length=2, train_length=L - 2, overlap=overlap, alpha=alpha,
                                        seed=1),
                         input_spaces=dict(records=space, num_records=int, indices=INDICES, priorities=PRIORITIES),
                         backend=backend)


def check_all_sequences(test, expected, L):
    size = int(test.test("get_size"))
    assert size == len(expected)
    sequences, states, indices, weights = test.test(("get_records", [size]))  # alpha 0: each exactly once.
    assert sorted(indices.tolist()) == list(range(size))
    assert sequences["obs"].shape == (size, L, 2) and sequences["mask"].shape == (size, L)
    assert "internal_states" not in sequences and states[0].shape == (size, 3) and states[1].shape == (size, 1)
    got = []
    for i in range(size):
        n = int(sequences["mask"][i].sum())
        assert sequences["mask"][i].tolist() == [True] * n + [False] * (L - n)
        ids = sequences["obs"][i, :n, 0]
        np.testing.assert_array_equal(sequences["obs"][i, :n, 1], ids + 0.5)
        np.testing.assert_array_equal(sequences["obs"][i, n:], 0.0)  # Zero padding.
        np.testing.assert_array_equal(states[0][i], [ids[0], 2 * ids[0], 3 * ids[0]])  # State at the first step.
        np.testing.assert_array_equal(states[1][i], [-ids[0]])
        got.append((tuple(ids.astype(int).tolist()), n))
    assert sorted(got) == sorted((tuple(ids), n) for ids, n in expected)
    np.testing.assert_array_equal(weights, 1.0)


def test_sequence_cutting_single_stream(backend):
    L, overlap = 5, 2
    test = sequence_test(backend, "single", L, overlap)
    rng = np.random.default_rng(3)
    lengths = [1, 3, 5, 6, 8, 11, 14, 4]  # Shorter than, equal to and longer than L.
    terminals = np.concatenate([np.eye(n, dtype=bool)[-1] for n in lengths] + [np.zeros(9, bool)])  # + unfinished.
    ids = np.arange(terminals.size)
    cuts = np.sort(rng.choice(np.arange(1, ids.size), size=6, replace=False))
    for chunk_ids in np.split(ids, cuts):  # Episodes span several inserts.
        test.test(("insert_records", [step_records(chunk_ids, terminals[chunk_ids])]))
    bounds = np.cumsum([0] + lengths)
    episodes = [(list(range(a, b)), True) for a, b in zip(bounds[:-1], bounds[1:])]
    episodes.append((list(range(bounds[-1], ids.size)), False))
    check_all_sequences(test, reference_sequences(episodes, L, L - overlap), L)


@pytest.mark.parametrize("layout", ["batch-major", "time-major"])
def test_sequence_cutting_parallel_streams(backend, layout):
    L, overlap, B, T = 4, 1, 3, 7
    test = sequence_test(backend, layout, L, overlap)
    rng = np.random.default_rng(5)
    terminals = rng.random((B, 3 * T)) < 0.2
    ids = 1000 * np.arange(B)[:, None] + np.arange(3 * T)[None, :]
    for c in range(3):
        chunk = step_records(ids[:, c * T:(c + 1) * T], terminals[:, c * T:(c + 1) * T])
        if layout == "time-major":
            chunk = {"obs": chunk["obs"].swapaxes(0, 1), "terminals": chunk["terminals"].T,
                     "internal_states": tuple(s.swapaxes(0, 1) for s in chunk["internal_states"])}
        test.test(("insert_records", [chunk]))
    episodes = []
    for b in range(B):
        ends = np.flatnonzero(terminals[b])
        starts = np.concatenate([[0], ends + 1])
        for s, e in zip(starts[:-1], ends):
            episodes.append((ids[b, s:e + 1].tolist(), True))
        episodes.append((ids[b, starts[-1]:].tolist(), False))
    check_all_sequences(test, reference_sequences(episodes, L, L - overlap), L)
    with pytest.raises(RLGraphRuntimeError, match="streams"):
        bad = step_records(ids[:2, :T], terminals[:2, :T])
        if layout == "time-major":
            bad = {"obs": bad["obs"].swapaxes(0, 1), "terminals": bad["terminals"].T,
                   "internal_states": tuple(s.swapaxes(0, 1) for s in bad["internal_states"])}
        test.test(("insert_records", [bad]))


def test_sequence_priorities_and_errors(backend):
    test = sequence_test(backend, "single", L=4, overlap=0, alpha=1.0)
    test.test(("insert_records", [step_records(np.arange(12), np.zeros(12, bool))]))  # 3 sequences.
    test.test(("update_records", [np.arange(3, dtype=np.int64), np.array([0.0, 1.0, 0.0], np.float32)]))
    sequences, _, indices, _ = test.test(("get_records", [3]))
    np.testing.assert_array_equal(indices, 1)  # Zero priority: never sampled.
    np.testing.assert_array_equal(sequences["obs"][:, :, 0], np.tile(np.arange(4, 8), (3, 1)))
    with pytest.raises(RLGraphRuntimeError, match="priorities"):
        test.test(("update_records", [np.arange(1, dtype=np.int64), np.array([-1.0], np.float32)]))
    with pytest.raises(RLGraphRuntimeError, match="4 records"):
        test.test(("get_records", [4]))


def test_sequence_backends_agree():
    space = Dict(STEP_SPACE, add_batch_rank=True)
    terminals = np.zeros(30, bool)
    terminals[[6, 17]] = True
    calls = [("insert_records", [step_records(np.arange(30), terminals)]), ("get_size", []),
             ("update_records", [np.arange(4, dtype=np.int64), np.array([0.5, 1.0, 2.0, 3.0], np.float32)]),
             ("get_records", [6])]
    run_on_backends(lambda: SequenceReplay(20, burn_in_length=2, train_length=4, overlap=3, seed=2),
                    dict(records=space, num_records=int, indices=INDICES, priorities=PRIORITIES), calls)


def test_sequence_replay_rejects_bad_specs_and_spaces():
    for kwargs in (dict(overlap=6), dict(train_length=0), dict(burn_in_length=-1), dict(mask_key="terminals")):
        with pytest.raises(RLGraphSpecError):
            SequenceReplay(10, **{"burn_in_length": 2, "train_length": 4, **kwargs})
    spaces = dict(num_records=int, indices=INDICES, priorities=PRIORITIES)
    for records_space, match in ((Dict(obs=FloatBox(), terminals=BoolBox(), add_batch_rank=True), "internal_states"),
                                 (Dict(obs=FloatBox(), terminals=FloatBox(), internal_states=FloatBox(),
                                       add_batch_rank=True), "BoolBox"),
                                 (Dict(mask=FloatBox(), terminals=BoolBox(), internal_states=FloatBox(),
                                       add_batch_rank=True), "mask")):
        with pytest.raises(RLGraphSpaceError, match=match):
            ComponentTest(SequenceReplay(10), input_spaces=dict(records=records_space, **spaces), backend="pytorch")
