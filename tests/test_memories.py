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

#: Component/foundation tests: their ``backend`` parametrization includes JAX (rlgraph.tests.pytest_plugin).
pytestmark = pytest.mark.all_backends

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
# The memory stores whole sequences as rlgraph.trajectories.SequenceBuilder emits them (the cutting rule is
# tested in tests/test_trajectories.py).

SEQ_L = 5  # burn_in_length 2 + train_length 3.


def sequence_space(L=SEQ_L):
    return Dict(obs=FloatBox(shape=(L, 2)), terminals=BoolBox(shape=(L,)), mask=BoolBox(shape=(L,)),
                internal_states=(FloatBox(shape=(3,)), FloatBox(shape=(1,))), add_batch_rank=True)


SEQUENCE_SPACES = dict(num_records=int, indices=INDICES, priorities=PRIORITIES)


def sequence_batch(first_ids, lengths, L=SEQ_L):
    """Sequences whose rows encode their step ids ``first_id, first_id + 1, ...``, zero-padded after ``length``."""
    first_ids, lengths = np.asarray(first_ids, np.float32), np.asarray(lengths)
    mask = np.arange(L)[None, :] < lengths[:, None]
    ids = np.where(mask, first_ids[:, None] + np.arange(L)[None, :], 0.0).astype(np.float32)
    return {"obs": np.stack([ids, ids + 0.5 * mask], -1), "terminals": (ids % 3 == 1) & mask, "mask": mask,
            "internal_states": (first_ids[:, None] * np.array([1.0, 2.0, 3.0], np.float32), -first_ids[:, None])}


def sequence_test(backend, capacity=200, alpha=0.0, L=SEQ_L):
    return ComponentTest(SequenceReplay(capacity, burn_in_length=2, train_length=L - 2, overlap=2, alpha=alpha, seed=1),
                         input_spaces=dict(records=sequence_space(L), **SEQUENCE_SPACES), backend=backend)


def test_sequence_replay_stores_and_samples_whole_sequences(backend):
    test = sequence_test(backend)
    memory = test.component
    assert (memory.sequence_length, memory.stride, memory.burn_in_length, memory.train_length) == (5, 3, 2, 3)
    batches = [sequence_batch([10, 20, 30], [5, 2, 5]), sequence_batch([40], [1]), sequence_batch([50, 60], [3, 5])]
    for batch in batches:
        test.test(("insert_records", [batch]))
    size = int(test.test("get_size"))
    assert size == 6
    sequences, states, indices, weights = test.test(("get_records", [size]))  # alpha 0: each exactly once.
    assert sorted(indices.tolist()) == list(range(size))
    assert set(sequences) == {"obs", "terminals", "mask"} and "internal_states" not in sequences
    assert sequences["obs"].shape == (size, SEQ_L, 2) and sequences["mask"].shape == (size, SEQ_L)
    assert states[0].shape == (size, 3) and states[1].shape == (size, 1)
    inserted = {k: np.concatenate([b[k] for b in batches]) for k in ("obs", "terminals", "mask")}
    inserted_states = [np.concatenate([b["internal_states"][i] for b in batches]) for i in range(2)]
    for row, index in enumerate(indices):  # Index i: the i-th inserted sequence, returned as it went in.
        for key in ("obs", "terminals", "mask"):
            np.testing.assert_array_equal(sequences[key][row], inserted[key][index])
        for i in range(2):
            np.testing.assert_array_equal(states[i][row], inserted_states[i][index])
    np.testing.assert_array_equal(weights, 1.0)


def test_sequence_replay_is_a_ring_of_sequences(backend):
    test = sequence_test(backend, capacity=4)
    test.test(("insert_records", [sequence_batch([10, 20, 30], [5, 5, 5])]))
    test.test(("insert_records", [sequence_batch([40, 50], [2, 5])]))  # Overwrites the oldest (10).
    assert test.test("get_size") == 4
    sequences, states, _, _ = test.test(("get_records", [4]))
    assert sorted(sequences["obs"][:, 0, 0].tolist()) == [20.0, 30.0, 40.0, 50.0]
    assert sorted(states[0][:, 0].tolist()) == [20.0, 30.0, 40.0, 50.0]


def test_sequence_replay_takes_sequence_builder_output(backend):
    from rlgraph.trajectories import SequenceBuilder
    test = sequence_test(backend)
    memory = test.component
    builder = SequenceBuilder(memory.sequence_length, memory.stride, start_padding=memory.burn_in_length)
    rng = np.random.default_rng(0)
    emitted = []
    for t in range(30):
        ids = np.arange(4)
        uid = (100 * ids + t + 1).astype(np.float32)
        step = {"obs": np.stack([uid, uid + 0.5], -1), "terminals": rng.random(4) < 0.2,
                "internal_states": (uid[:, None] * np.array([1.0, 2.0, 3.0], np.float32), -uid[:, None])}
        out = builder.add(ids, dict(step, dones=step["terminals"]))
        if out is not None:
            out.pop("env_ids")
            test.test(("insert_records", [out]))
            emitted += [tuple(row) for row in out["obs"][:, :, 0].tolist()]
    size = int(test.test("get_size"))
    assert size == len(emitted) > 5
    sequences, states, _, _ = test.test(("get_records", [size]))
    assert sorted(tuple(row) for row in sequences["obs"][:, :, 0].tolist()) == sorted(emitted)
    np.testing.assert_array_equal(states[0][:, 0], sequences["obs"][:, 0, 0])  # The state of the first row.


def test_sequence_priorities_and_errors(backend):
    test = sequence_test(backend, alpha=1.0)
    test.test(("insert_records", [sequence_batch([0, 10, 20], [5, 5, 3])]))
    test.test(("update_records", [np.arange(3, dtype=np.int64), np.array([0.0, 1.0, 0.0], np.float32)]))
    sequences, states, indices, _ = test.test(("get_records", [3]))
    np.testing.assert_array_equal(indices, 1)  # Zero priority: never sampled.
    np.testing.assert_array_equal(sequences["obs"][:, :, 0], np.tile(np.arange(10, 15), (3, 1)))
    np.testing.assert_array_equal(states[1][:, 0], -10.0)
    with pytest.raises(RLGraphRuntimeError, match="priorities"):
        test.test(("update_records", [np.arange(1, dtype=np.int64), np.array([-1.0], np.float32)]))
    with pytest.raises(RLGraphRuntimeError, match="4 records"):
        test.test(("get_records", [4]))


def test_sequence_backends_agree():
    calls = [("insert_records", [sequence_batch([0, 10, 20, 30, 40], [5, 1, 5, 4, 5])]), ("get_size", []),
             ("update_records", [np.arange(4, dtype=np.int64), np.array([0.5, 1.0, 2.0, 3.0], np.float32)]),
             ("get_records", [4])]
    run_on_backends(lambda: SequenceReplay(20, burn_in_length=2, train_length=3, overlap=1, seed=2),
                    dict(records=sequence_space(), **SEQUENCE_SPACES), calls)


def test_sequence_replay_rejects_bad_specs_and_spaces():
    for kwargs in (dict(overlap=6), dict(train_length=0), dict(burn_in_length=-1), dict(mask_key="internal_states"),
                   dict(terminal_key="terminals")):
        with pytest.raises(RLGraphSpecError):
            SequenceReplay(10, **{"burn_in_length": 2, "train_length": 4, **kwargs})
    state = (FloatBox(shape=(3,)), FloatBox(shape=(1,)))
    L = SEQ_L
    for records_space, match in (
            (Dict(obs=FloatBox(shape=(L,)), mask=BoolBox(shape=(L,)), add_batch_rank=True), "internal_states"),
            (Dict(obs=FloatBox(shape=(L,)), internal_states=state, add_batch_rank=True), "'mask'"),
            (Dict(obs=FloatBox(shape=(L,)), mask=FloatBox(shape=(L,)), internal_states=state, add_batch_rank=True),
             "'mask' must be a BoolBox of shape \\(5,\\)"),
            (Dict(obs=FloatBox(shape=(L,)), mask=BoolBox(shape=(L + 1,)), internal_states=state, add_batch_rank=True),
             "'mask' must be a BoolBox of shape \\(5,\\)"),
            (Dict(obs=FloatBox(shape=(L + 1, 2)), mask=BoolBox(shape=(L,)), internal_states=state,
                  add_batch_rank=True), "'obs' must have shape \\(5, ...\\).*got shape \\(6, 2\\)"),
            (Dict(obs=FloatBox(), mask=BoolBox(shape=(L,)), internal_states=state, add_batch_rank=True),
             "'obs' must have shape \\(5, ...\\)"),
            (Dict(obs=FloatBox(shape=(2,)), mask=BoolBox(), internal_states=state, add_batch_rank=True,
                  add_time_rank=True), "time rank"),
            (Dict(mask=BoolBox(shape=(L,)), internal_states=state, add_batch_rank=True), "per-step keys")):
        with pytest.raises(RLGraphSpaceError, match=match):
            ComponentTest(sequence_replay_for_space_checks(), input_spaces=dict(records=records_space,
                                                                                **SEQUENCE_SPACES),
                          backend="pytorch")


def sequence_replay_for_space_checks():
    return SequenceReplay(10, burn_in_length=2, train_length=SEQ_L - 2)
