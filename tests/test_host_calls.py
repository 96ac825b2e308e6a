"""Root API methods that are one host graph function (``graph_fn(backend=HOST)``) run without the backend.

A numpy memory's insert is such a function: the executor calls it directly on the checked numpy arguments
(on TF: no ``tf.function`` call and ``tf.numpy_function`` round trip). These tests check that the host path is
taken exactly where the method is a pure pass-through, that it stores what the backend path stores, and that
errors stay the same.
"""
import numpy as np
import pytest

from rlgraph import graph_fn, rlgraph_api
from rlgraph.components import Component
from rlgraph.components.memories import PrioritizedReplay
from rlgraph.components.memories.sequence_replay import SequenceReplay
from rlgraph.executors import GraphExecutor
from rlgraph.spaces import Dict, FloatBox, IntBox
from rlgraph.tests import ComponentTest
from rlgraph.utils.decorators import HOST, GraphFunction
from rlgraph.utils.errors import RLGraphBackendError, RLGraphRuntimeError, RLGraphSpaceError

RECORDS = Dict(states=FloatBox(shape=(2,)), actions=IntBox(10 ** 6), add_batch_rank=True)
SPACES = dict(records=RECORDS, num_records=int, priorities=FloatBox(add_batch_rank=True),
              indices=IntBox(shape=(), dtype="int64", add_batch_rank=True))


def records(start, n):
    ids = np.arange(start, start + n)
    return {"states": np.stack([ids, -ids], axis=1).astype(np.float32), "actions": ids.astype(np.int32)}


@pytest.fixture
def host_calls(monkeypatch):
    """Counts the calls of the replay memories' host implementations, by name (sequence replay's sample as
    ``SequenceReplay._graph_fn_get_records``)."""
    counts = {}
    for cls, name in ((PrioritizedReplay, "_graph_fn_insert_records"),
                      (PrioritizedReplay, "_graph_fn_insert_records_with_priorities"),
                      (PrioritizedReplay, "_graph_fn_get_records"), (SequenceReplay, "_graph_fn_get_records")):
        gf = cls.__dict__[name]
        original = gf.impls[HOST]
        key = name if cls is PrioritizedReplay else f"{cls.__name__}.{name}"

        def counted(*args, _key=key, _fn=original, **kwargs):
            counts[_key] = counts.get(_key, 0) + 1
            return _fn(*args, **kwargs)
        monkeypatch.setitem(gf.impls, HOST, counted)
        monkeypatch.setattr(gf, "_num_outputs", gf._num_outputs)  # Restored after the test.
    return counts


def assert_same_structure_and_values(a, b, where="outputs"):
    """Same containers (dict keys, tuple lengths), and arrays of the same dtype, shape and values."""
    assert type(a) is type(b), (where, type(a), type(b))
    if isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            assert_same_structure_and_values(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_structure_and_values(x, y, f"{where}[{i}]")
    else:
        assert a.dtype == b.dtype and a.shape == b.shape, (where, a.dtype, b.dtype, a.shape, b.shape)
        np.testing.assert_array_equal(a, b, err_msg=where)


class ScalingInserter(Component):
    """Scales the states before inserting them: its insert is not a pass-through to the memory."""

    def __init__(self):
        super().__init__(scope="scaling-inserter")
        self.memory = PrioritizedReplay(16, seed=1)
        self.add_components(self.memory)

    @rlgraph_api
    def insert_records(self, records):
        return self.memory.insert_records(self._graph_fn_scale(records))

    @rlgraph_api
    def get_records(self, num_records):
        return self.memory.get_records(num_records)

    @graph_fn
    def _graph_fn_scale(self, records):
        return dict(states=records["states"] * 10.0, actions=records["actions"])


@pytest.mark.all_backends  # A component-level test: on JAX too (rlgraph.tests.pytest_plugin).
def test_memory_inserts_run_on_the_host_and_store_what_the_backend_would(backend, host_calls):
    test = ComponentTest(PrioritizedReplay(16, seed=1), input_spaces=SPACES, backend=backend)
    test.test(("insert_records", records(0, 5)))
    test.test(("insert_records_with_priorities", [records(5, 3), np.array([1.0, 2.0, 3.0], np.float32)]))
    assert host_calls == {"_graph_fn_insert_records": 1, "_graph_fn_insert_records_with_priorities": 1}
    if backend == "tf":  # The backend never saw the inserts.
        assert test.executor.trace_counts["insert_records"] == 0
    assert test.test("get_size") == 8
    sampled, indices, _ = test.test(("get_records", 8))
    np.testing.assert_array_equal(sampled["actions"], indices)  # Record i holds id i: stored as given.
    np.testing.assert_array_equal(sampled["states"][:, 0], indices)
    np.testing.assert_array_equal(sampled["states"][:, 1], -indices)


def sample_after_inserts(backend):
    test = ComponentTest(PrioritizedReplay(16, seed=1), input_spaces=SPACES, backend=backend)
    test.test(("insert_records", records(0, 10)))
    test.test(("update_records", [np.arange(10), np.linspace(0.5, 5.0, 10).astype(np.float32)]))
    return test, [test.executor.execute("get_records", n) for n in (8, 3)]


@pytest.mark.all_backends  # A component-level test: on JAX too (rlgraph.tests.pytest_plugin).
def test_memory_samples_run_on_the_host_and_return_what_the_backend_path_returns(backend, host_calls):
    test, host = sample_after_inserts(backend)
    assert host_calls["_graph_fn_get_records"] == 2
    if backend == "tf":  # The backend never saw the samples.
        assert test.executor.trace_counts["get_records"] == 0
    records_, indices, weights = host[0]
    assert isinstance(records_, dict) and indices.dtype == np.int64 and weights.dtype == np.float32
    np.testing.assert_array_equal(records_["actions"], indices)


@pytest.mark.all_backends  # A component-level test: on JAX too (rlgraph.tests.pytest_plugin).
def test_memory_sample_parity_of_the_host_and_backend_paths(backend, monkeypatch):
    _, host = sample_after_inserts(backend)
    monkeypatch.setattr(GraphExecutor, "_host_call", lambda self, *args: None)
    test, reference = sample_after_inserts(backend)
    if backend == "tf":
        assert test.executor.trace_counts["get_records"] == 1
    # The same seed samples the same rows: same structure, dtypes and values on both paths.
    assert_same_structure_and_values(host, reference)


@pytest.mark.all_backends  # A component-level test: on JAX too (rlgraph.tests.pytest_plugin).
def test_a_root_method_doing_more_than_the_insert_keeps_the_backend_path(backend, host_calls):
    test = ComponentTest(ScalingInserter(), input_spaces=dict(records=RECORDS, num_records=int), backend=backend)
    test.test(("insert_records", records(0, 4)))
    assert host_calls == {}
    sampled, indices, _ = test.test(("get_records", 4))
    np.testing.assert_array_equal(sampled["states"][:, 0], 10.0 * indices)


@pytest.mark.all_backends  # A component-level test: on JAX too (rlgraph.tests.pytest_plugin).
def test_host_inserts_keep_the_checks_and_errors_of_the_backend_path(backend):
    test = ComponentTest(PrioritizedReplay(16, seed=1), input_spaces=SPACES, backend=backend)
    bad = records(0, 2)
    bad["states"] = np.zeros((2, 3), np.float32)
    with pytest.raises(RLGraphSpaceError, match=r"insert_records.*records.*states"):
        test.test(("insert_records", bad))
    with pytest.raises(RLGraphRuntimeError, match=r"PrioritizedReplay prioritized-replay, API method "
                                                  r"insert_records_with_priorities: .*priorities"):
        test.test(("insert_records_with_priorities", [records(0, 2), np.array([1.0, -1.0], np.float32)]))
    assert test.test("get_size") == 0  # Nothing half-inserted.
    # Keyword arguments bind as on the backend path.
    test.executor.execute("insert_records", records=records(0, 3))
    assert test.test("get_size") == 3


def test_host_is_a_pseudo_backend_of_graph_functions_only():
    def fn(self, x):
        return x

    gf = graph_fn(fn, backend=HOST)
    assert isinstance(gf, GraphFunction) and set(gf.impls) == {HOST}
    with pytest.raises(RLGraphBackendError, match=r"no implementation for backend 'tf' \(it has: \)"):
        gf.impl_for("tf")
    with pytest.raises(RLGraphBackendError, match="Unknown backend 'hots'"):
        graph_fn(fn, backend="hots")


@pytest.mark.parametrize("agent_type", ["dqn", "r2d2"])
def test_replay_agents_insert_on_the_host_and_learn_from_what_they_inserted(backend, agent_type, host_calls):
    """DQN's and R2D2's inserts (root methods that are only the memory's insert) take the host path, and the
    updates sample what they stored (a prioritized replay refuses to sample more records than it holds)."""
    from rlgraph.agents import Agent
    from rlgraph.environments import VectorEnv
    from rlgraph.workers import VectorWorker

    spec = dict(type=agent_type, network_spec=[{"type": "dense", "units": 8, "activation": "relu"}] + (
        [{"type": "lstm", "units": 8}] if agent_type == "r2d2" else []),
        update_spec={"batch_size": 4, "steps_before_update": 40, "update_interval": 8, "sync_interval": 20})
    if agent_type == "r2d2":
        spec.update(n_step=2, memory_spec={"capacity": 64, "burn_in_length": 2, "train_length": 4, "overlap": 2})
    else:
        spec["memory_spec"] = {"type": "prioritized-replay", "capacity": 500}
    agent = Agent.from_spec(spec, state_space=FloatBox(shape=(4,)), action_space=IntBox(2), backend=backend)
    worker = VectorWorker(agent, VectorEnv("CartPole-v1", num_envs=4, seed=0))
    results = worker.run(120)["results"]
    assert host_calls.get("_graph_fn_insert_records", 0) > 0 and results  # Inserted on the host, then learned.
    if backend == "tf":
        assert agent.executor.trace_counts["insert_records"] == 0
    if agent_type == "r2d2":  # Sampled on the host too (DQN samples inside its update).
        assert host_calls.get("SequenceReplay._graph_fn_get_records", 0) == agent.updates > 0
        if backend == "tf":
            assert agent.executor.trace_counts["get_sequences"] == 0


def r2d2_sequences(backend):
    """An R2D2 agent's sampled sequences (with their stored recurrent states) after 120 CartPole steps."""
    from rlgraph.agents import Agent
    from rlgraph.environments import VectorEnv
    from rlgraph.workers import VectorWorker
    spec = dict(type="r2d2", network_spec=[{"type": "dense", "units": 8}, {"type": "lstm", "units": 8}], n_step=2,
                memory_spec={"capacity": 64, "burn_in_length": 2, "train_length": 4, "overlap": 2},
                update_spec={"batch_size": 4, "steps_before_update": 10 ** 6})
    agent = Agent.from_spec(spec, state_space=FloatBox(shape=(4,)), action_space=IntBox(2), backend=backend, seed=3)
    VectorWorker(agent, VectorEnv("CartPole-v1", num_envs=4, seed=0)).run(120)
    return agent.executor.execute("get_sequences", 6)


def test_sequence_samples_on_the_host_match_the_backend_path(backend, monkeypatch):
    host = r2d2_sequences(backend)
    monkeypatch.setattr(GraphExecutor, "_host_call", lambda self, *args: None)
    reference = r2d2_sequences(backend)
    sequences, states, indices, weights = host
    assert set(sequences) >= {"states", "actions", "rewards", "mask"} and len(states) == 2
    assert sequences["states"].shape == (6, 6, 4) and states[0].shape == (6, 8)
    assert_same_structure_and_values(host, reference)


class HostEcho(Component):
    """Test-only: a root method that is one graph function with a host implementation returning its argument and
    a view of it."""

    def __init__(self):
        super().__init__(scope="host-echo")

    @rlgraph_api
    def echo(self, x):
        return self._graph_fn_echo(x)

    @graph_fn(returns=2)
    def _graph_fn_echo(self, x):
        return x, x[:1]

    @graph_fn(backend=HOST, returns=2)
    def _graph_fn_echo(self, x):  # noqa: F811 - the host implementation of the same graph function.
        return x, x[:1]


@pytest.mark.all_backends  # A component-level test: on JAX too (rlgraph.tests.pytest_plugin).
def test_host_call_results_never_share_memory_with_the_callers_arrays(backend, monkeypatch):
    calls = []
    gf = HostEcho.__dict__["_graph_fn_echo"]
    original = gf.impls[HOST]
    monkeypatch.setitem(gf.impls, HOST, lambda *args: calls.append(1) or original(*args))
    test = ComponentTest(HostEcho(), dict(x=FloatBox(shape=(2,), add_batch_rank=True)), backend=backend)
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    expected = x.copy()
    whole, first = test.executor.execute("echo", x)
    assert calls == [1]  # The host path.
    x[:] = -1.0
    np.testing.assert_array_equal(whole, expected)
    np.testing.assert_array_equal(first, expected[:1])
