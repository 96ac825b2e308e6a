"""Graph executors on both backends: numerics, variables, models, tracing, bad input."""
import numpy as np
import pytest

from rlgraph import graph_fn, rlgraph_api
from rlgraph.components import Component, DenseLayer, NeuralNetwork, ReplayMemory
from rlgraph.executors import GraphExecutor
from rlgraph.spaces import Dict, FloatBox, IntBox
from rlgraph.tests import ComponentTest, run_on_backends
from rlgraph.utils.errors import RLGraphAPIError, RLGraphError, RLGraphRuntimeError, RLGraphSpaceError

#: Component/foundation tests: their ``backend`` parametrization includes JAX (rlgraph.tests.pytest_plugin).
pytestmark = pytest.mark.all_backends

STATES = FloatBox(shape=(4,), add_batch_rank=True)
LAYERS = [{"type": "dense", "units": 8, "activation": "tanh"}, {"type": "dense", "units": 3}]


def numpy_mlp(weights, x, scope="neural-network"):
    """Independent reference: tanh(x W0 + b0) W1 + b1."""
    h = np.tanh(x @ weights[f"{scope}/dense/kernel"] + weights[f"{scope}/dense/bias"])
    return h @ weights[f"{scope}/dense-1/kernel"] + weights[f"{scope}/dense-1/bias"]


def test_network_matches_numpy_reference(backend):
    test = ComponentTest(NeuralNetwork(layers=LAYERS), dict(inputs=STATES), backend=backend)
    x = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    weights = test.executor.get_weights()
    assert list(weights) == ["neural-network/dense/kernel", "neural-network/dense/bias",
                             "neural-network/dense-1/kernel", "neural-network/dense-1/bias"]
    test.test(("call", [x]), expected_outputs=numpy_mlp(weights, x), decimals=5)


def test_backends_agree_on_the_same_seed():
    x = np.random.default_rng(1).normal(size=(6, 4)).astype(np.float32)
    results = run_on_backends(lambda: NeuralNetwork(layers=LAYERS), dict(inputs=STATES),
                              [("call", [x]), ("call", [x[:1]]), ("variables", [])])
    assert results["tf"][0].shape == (6, 3)


def test_seed_determines_initial_weights(backend):
    def weights(seed):
        return ComponentTest(NeuralNetwork(layers=LAYERS), dict(inputs=STATES), backend=backend,
                             seed=seed).executor.get_weights()
    a, b, c = weights(3), weights(3), weights(4)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    assert not np.allclose(a["neural-network/dense/kernel"], c["neural-network/dense/kernel"])


def test_no_retracing_for_new_batch_sizes():
    test = ComponentTest(NeuralNetwork(layers=LAYERS), dict(inputs=STATES), backend="tf")
    for batch in (1, 2, 17, 256, 3):
        test.test(("call", [np.ones((batch, 4), np.float32)]))
    assert test.executor.trace_counts["call"] == 1


def test_store_and_load_round_trip(backend, tmp_path):
    test = ComponentTest(NeuralNetwork(layers=LAYERS), dict(inputs=STATES), backend=backend)
    x = np.random.default_rng(2).normal(size=(3, 4)).astype(np.float32)
    before = test.test(("call", [x]))
    test.executor.store_model(str(tmp_path / "model"))
    test.executor.set_weights({k: np.zeros_like(v) for k, v in test.executor.get_weights().items()})
    np.testing.assert_array_equal(test.test(("call", [x])), np.zeros((3, 3), np.float32))
    test.executor.load_model(str(tmp_path / "model"))
    np.testing.assert_array_equal(test.test(("call", [x])), before)


def test_models_load_on_other_backends_but_not_into_other_graphs(tmp_path):
    tf_test = ComponentTest(NeuralNetwork(layers=LAYERS), dict(inputs=STATES), backend="tf")
    tf_test.executor.set_weights({k: np.random.default_rng(3).normal(size=v.shape).astype(v.dtype)
                                  for k, v in tf_test.executor.get_weights().items()})
    tf_test.executor.store_model(str(tmp_path / "tf"))
    torch_test = ComponentTest(NeuralNetwork(layers=LAYERS), dict(inputs=STATES), backend="pytorch")
    torch_test.executor.load_model(str(tmp_path / "tf"))  # Backend-neutral: the same values by name.
    for k, v in tf_test.executor.get_weights(trainable_only=False).items():
        np.testing.assert_array_equal(torch_test.executor.get_weights(trainable_only=False)[k], v, err_msg=k)
    other = ComponentTest(NeuralNetwork(layers=[{"type": "dense", "units": 5}]), dict(inputs=STATES), backend="tf")
    before = other.executor.get_weights()
    with pytest.raises(RLGraphError, match="does not fit this graph"):
        other.executor.load_model(str(tmp_path / "tf"))
    for k, v in other.executor.get_weights().items():
        np.testing.assert_array_equal(v, before[k])
    with pytest.raises(RLGraphError, match="holds no rlgraph model"):
        other.executor.load_model(str(tmp_path))


def test_set_weights_checks_names_and_shapes(backend):
    test = ComponentTest(DenseLayer(2), dict(inputs=STATES), backend=backend)
    with pytest.raises(RLGraphError, match="unknown variable"):
        test.executor.set_weights({"dense/kernal": np.zeros((4, 2))})
    with pytest.raises(RLGraphError, match=r"has shape \(4, 2\), got \(2, 4\)"):
        test.executor.set_weights({"dense/kernel": np.zeros((2, 4))})


def test_weights_are_copies_cast_and_settable_in_part(backend):
    """``get_weights``/``set_weights`` (one graph call for all variables on TensorFlow): values are copies that
    later changes leave alone, a subset of the variables can be set, other dtypes are cast to the variable's,
    and the network computes with exactly what was set (numpy reference)."""
    test = ComponentTest(NeuralNetwork(layers=LAYERS), dict(inputs=STATES), backend=backend)
    x = np.random.default_rng(4).normal(size=(5, 4)).astype(np.float32)
    first = test.executor.get_weights()
    kept = {k: v.copy() for k, v in first.items()}
    first["neural-network/dense/bias"][:] = 7.0  # Changing a returned array changes no variable.
    np.testing.assert_array_equal(test.executor.get_weights()["neural-network/dense/bias"],
                                  kept["neural-network/dense/bias"])
    before_set = test.executor.get_weights()
    rng = np.random.default_rng(5)
    new = {"neural-network/dense/kernel": rng.normal(size=(4, 8)),  # float64: cast to float32
           "neural-network/dense-1/bias": [0.5, -1.0, 2.0]}  # a list
    test.executor.set_weights(new)
    after = test.executor.get_weights()
    assert all(v.dtype == np.float32 for v in after.values())
    np.testing.assert_array_equal(after["neural-network/dense/kernel"], new["neural-network/dense/kernel"].astype(
        np.float32))
    np.testing.assert_array_equal(after["neural-network/dense-1/bias"], np.float32([0.5, -1.0, 2.0]))
    for k in ("neural-network/dense/bias", "neural-network/dense-1/kernel"):  # Not set: unchanged.
        np.testing.assert_array_equal(after[k], kept[k])
    test.test(("call", [x]), expected_outputs=numpy_mlp(after, x), decimals=5)
    # Arrays got before a change keep the old values.
    np.testing.assert_array_equal(before_set["neural-network/dense-1/bias"], kept["neural-network/dense-1/bias"])
    np.testing.assert_array_equal(before_set["neural-network/dense/kernel"], kept["neural-network/dense/kernel"])


@pytest.mark.parametrize("value, words", [
    (np.zeros((2, 5), np.float32), "expected shape"),
    (np.zeros((4,), np.float32), "rank"),
    (np.zeros((2, 4), np.complex64), "dtype"),
    ("text", "expected shape"),
    (np.full((2, 4), "x"), "dtype"),
])
def test_bad_input_names_api_method_argument_and_space(backend, value, words):
    test = ComponentTest(DenseLayer(2), dict(inputs=STATES), backend=backend)
    with pytest.raises(RLGraphSpaceError) as info:
        test.test(("call", [value]))
    msg = str(info.value)
    assert "API method 'call'" in msg and "argument 'inputs'" in msg and "FloatBox(shape=(4,)" in msg
    assert words in msg


class DictUser(Component):
    @rlgraph_api
    def run(self, obs):
        return self._graph_fn_run(obs)

    @graph_fn
    def _graph_fn_run(self, obs):
        return obs["a"]


def test_bad_container_input_names_the_key(backend):
    space = Dict(a=FloatBox(shape=(2,)), b=IntBox(3), add_batch_rank=True)
    test = ComponentTest(DictUser(), dict(obs=space), backend=backend)
    good = space.sample(2)
    test.test(("run", [good]), expected_outputs=good["a"])
    with pytest.raises(RLGraphSpaceError, match="'b'"):
        test.test(("run", [{"a": good["a"]}]))
    with pytest.raises(RLGraphSpaceError, match="outside"):
        test.test(("run", [{"a": good["a"], "b": np.array([0, 7])}]))


def test_inputs_of_another_float_dtype_are_cast(backend):
    test = ComponentTest(DenseLayer(2), dict(inputs=STATES), backend=backend)
    x = np.ones((2, 4))
    np.testing.assert_allclose(test.test(("call", [x])), test.test(("call", [x.astype(np.float32)])))
    np.testing.assert_allclose(test.test(("call", [x.tolist()])), test.test(("call", [x.astype(np.float32)])))


def test_unknown_api_method_and_wrong_arguments(backend):
    test = ComponentTest(DenseLayer(2), dict(inputs=STATES), backend=backend)
    with pytest.raises(RLGraphAPIError, match="no API method 'cal'; available: call, variables"):
        test.test(("cal", [np.ones((1, 4), np.float32)]))
    with pytest.raises(RLGraphAPIError, match="takes 1 argument"):
        test.executor.execute("call", np.ones((1, 4), np.float32), 3)
    with pytest.raises(RLGraphAPIError, match="no argument 'x'"):
        test.executor.execute("call", x=np.ones((1, 4), np.float32))
    out = test.executor.execute("call", inputs=np.ones((1, 4), np.float32))
    assert out.shape == (1, 2)


class Wrapper(Component):
    def __init__(self):
        self.dense = DenseLayer(3)
        super().__init__(self.dense, scope="wrapper")

    @rlgraph_api
    def act(self, x):
        return self.dense.call(x)


def test_pass_through_api_calls_are_contracted(backend):
    root = Wrapper()
    test = ComponentTest(root, dict(x=STATES), backend=backend)
    assert root.act.__self__ is root.dense
    x = np.ones((2, 4), np.float32)
    w = test.executor.get_weights()
    test.test(("act", [x]), expected_outputs=x @ w["wrapper/dense/kernel"] + w["wrapper/dense/bias"], decimals=5)


def reference_ring_buffer(capacity, batches):
    """Independent reference of ring-buffer contents after inserting ``batches`` in order."""
    slots, index = [None] * capacity, 0
    for batch in batches:
        for row in batch:
            slots[index] = row
            index = (index + 1) % capacity
    return [s for s in slots if s is not None], index


def test_replay_memory_ring_buffer(backend):
    space = Dict(s=FloatBox(shape=(2,)), a=IntBox(3), add_batch_rank=True)
    test = ComponentTest(ReplayMemory(capacity=5), dict(records=space, num_records=int), backend=backend)
    rng = np.random.default_rng(3)
    batches = [space.sample(n, rng=rng) for n in (3, 4, 9)]
    assert int(test.test("get_size")) == 0
    for b in batches:
        test.test(("insert_records", [b]))
    held, index = reference_ring_buffer(5, [b["s"] for b in batches])
    assert int(test.test("get_size")) == 5
    storage = test.read_variable_values("storage/s")
    assert int(test.read_variable_values("index")) == index
    np.testing.assert_allclose(storage, np.stack(held))
    sample = test.test(("get_records", [5]))
    for _ in range(10):
        more = test.test(("get_records", [5]))
        sample = {k: np.concatenate([sample[k], more[k]]) for k in sample}
    assert sample["s"].shape == (55, 2) and sample["a"].shape == (55,)
    # Every sampled record is one of the held ones, with its own action.
    last = batches[-1]
    for s, a in zip(sample["s"], sample["a"]):
        j = int(np.argmin(np.abs(last["s"] - s).sum(axis=1)))
        np.testing.assert_allclose(last["s"][j], s)
        assert last["a"][j] == a


def test_replay_memory_refuses_to_sample_more_than_it_holds(backend):
    test = ComponentTest(ReplayMemory(capacity=10), dict(records=STATES, num_records=int), backend=backend)
    test.test(("insert_records", [np.ones((3, 4), np.float32)]))
    with pytest.raises(RLGraphRuntimeError, match="more records than the memory holds|asked for 4 records"):
        test.test(("get_records", [4]))
    assert test.test(("get_records", [3])).shape == (3, 4)


def test_component_device_setting(backend):
    test = ComponentTest(NeuralNetwork(layers=LAYERS, device="cpu"), dict(inputs=STATES), backend=backend)
    assert test.test(("call", [np.ones((2, 4), np.float32)])).shape == (2, 3)


def test_executor_create_picks_backend_and_rejects_unknown():
    from rlgraph.utils.errors import RLGraphBackendError
    ex = GraphExecutor.create(backend="torch", root_component=DenseLayer(2), input_spaces=dict(inputs=STATES))
    assert ex.backend.name == "pytorch"
    with pytest.raises(RLGraphBackendError, match="Unknown backend 'mxnet'"):
        GraphExecutor.create(backend="mxnet", root_component=DenseLayer(2), input_spaces=dict(inputs=STATES))
    pytest.importorskip("jax")
    ex = GraphExecutor.create(backend="jax", root_component=DenseLayer(2), input_spaces=dict(inputs=STATES))
    assert type(ex).__name__ == "JaxExecutor"


class GradProbe(Component):
    """Test-only: reports whether autograd is on in its graph function (PyTorch), next to an optimizer step."""

    def __init__(self):
        from rlgraph.components.optimizers import SGDOptimizer
        self.network = NeuralNetwork(layers=LAYERS)
        self.optimizer = SGDOptimizer(0.1)
        super().__init__(self.network, self.optimizer, scope="grad-probe")

    @rlgraph_api
    def act(self, states):
        return self._graph_fn_grad_enabled(self.network.call(states))

    @rlgraph_api
    def update(self, states):
        out = self.network.call(states)
        step_loss, _ = self.optimizer.step(self.network.variables(), self._graph_fn_loss(out))
        return step_loss, self._graph_fn_grad_enabled(out)

    @graph_fn(backend="pytorch")
    def _graph_fn_grad_enabled(self, out):
        import torch
        return torch.tensor(torch.is_grad_enabled() and out.requires_grad)

    @graph_fn(backend="pytorch")
    def _graph_fn_loss(self, out):
        return (out ** 2).mean()


def test_pytorch_acts_without_autograd_and_learns_with_it():
    # API methods that reach no optimizer record no autograd graph; those that step one keep autograd on.
    test = ComponentTest(GradProbe(), dict(states=STATES), backend="pytorch")
    x = np.random.default_rng(3).normal(size=(5, 4)).astype(np.float32)
    assert not test.test(("act", [x]))
    before = test.executor.get_weights()
    loss, enabled = test.test(("update", [x]))
    assert enabled and loss > 0.0
    after = test.executor.get_weights()
    assert not np.allclose(before["grad-probe/neural-network/dense/kernel"],
                           after["grad-probe/neural-network/dense/kernel"])
    import torch
    assert torch.is_grad_enabled()  # Restored after the calls.


class Nested(Component):
    """Test-only: nested dict and tuple arguments, a Python float and a default (the TF executor's flat call)."""

    @rlgraph_api
    def combine(self, records, pair, scale, offset=1.0):
        return self._graph_fn_combine(records, pair, scale, offset)

    @graph_fn
    def _graph_fn_combine(self, records, pair, scale, offset):
        return dict(a=records["b"] * scale + pair[0], b=records["a"] - pair[1] + offset, n=records["n"] + 1)


def test_nested_arguments_reach_the_right_places(backend):
    from rlgraph.spaces import Tuple
    spaces = dict(records=Dict(b=FloatBox(shape=(2,)), a=FloatBox(shape=(2,)), n=IntBox(10), add_batch_rank=True),
                  pair=Tuple(FloatBox(shape=(2,)), FloatBox(shape=(2,)), add_batch_rank=True), scale=float)
    test = ComponentTest(Nested(), spaces, backend=backend)
    rng = np.random.default_rng(4)
    a, b, p0, p1 = (rng.normal(size=(3, 2)).astype(np.float32) for _ in range(4))
    n = np.array([1, 2, 3], np.int32)
    for offset in (None, 5.0):
        args = [dict(a=a, b=b, n=n), (p0, p1), 2.0] + ([] if offset is None else [offset])
        out = test.test(("combine", args))
        np.testing.assert_allclose(out["a"], b * 2.0 + p0, rtol=1e-6)
        np.testing.assert_allclose(out["b"], a - p1 + (1.0 if offset is None else offset), rtol=1e-6)
        np.testing.assert_array_equal(out["n"], n + 1)


def test_container_inputs_fast_path_matches_the_general_path():
    from rlgraph.executors.input_checker import make_input_checker
    from rlgraph.spaces import Tuple
    space = Dict(b=FloatBox(shape=(2,)), a=Tuple(IntBox(3), FloatBox(low=0.0, high=1.0)), add_batch_rank=True)
    check = make_input_checker(space, "run", "obs", "root")
    b, i, f = np.ones((3, 2), np.float32), np.array([0, 2, 1], np.int32), np.array([0.0, 0.5, 1.0], np.float32)
    out = check(dict(b=b, a=(i, f)))
    # Leaves pass as they are; the structure comes back as the general path rebuilds it (space key order).
    assert list(out) == ["a", "b"]
    assert out["b"] is b and out["a"][0] is i and out["a"][1] is f and type(out["a"]) is tuple
    # Values the fast path does not take as they are: converted by the general path.
    cast = check(dict(a=[i.astype(np.int64), f.astype(np.float64)], b=b.tolist()))
    assert cast["b"].dtype == np.float32 and cast["a"][0].dtype == np.int32 and type(cast["a"]) is tuple
    np.testing.assert_array_equal(cast["b"], b)
    # Bad values: the general path's errors, naming the key.
    for bad, words in [(dict(a=(i, f)), "missing key 'b'"), (dict(a=(i, f), b=b, c=b), "unexpected key 'c'"),
                       (dict(a=(np.array([0, 5, 1], np.int32), f), b=b), "a/0"),
                       (dict(a=(i, np.array([0.0, 2.0, 1.0], np.float32)), b=b), "a/1"),
                       (dict(a=(i, f), b=np.ones((3, 3), np.float32)), "expected shape")]:
        with pytest.raises(RLGraphSpaceError) as info:
            check(bad)
        assert "API method 'run'" in str(info.value) and "argument 'obs'" in str(info.value)
        assert words in str(info.value) and space.describe_mismatch(bad) in str(info.value)


def test_component_variables_follow_changes_to_the_tree():
    net = NeuralNetwork(DenseLayer(3))
    test = ComponentTest(net, dict(inputs=STATES), backend="pytorch")
    before = net._graph_fn_variables()
    assert sorted(before) == sorted(test.executor.execute("variables"))
    assert net._graph_fn_variables() == before
    extra = net.get_variable("extra", shape=(2,), dtype=np.float32)
    after = net._graph_fn_variables()
    assert after["extra"] is extra and set(after) - set(before) == {"extra"}
    net.variable_registry.pop(f"{net.global_scope}/extra")
    net.weight_names.discard(f"{net.global_scope}/extra")
    assert net._graph_fn_variables() == before


class Echo(Component):
    """Test-only: returns its input, or views of it, unchanged."""

    @rlgraph_api
    def echo(self, x):
        return self._graph_fn_echo(x)

    @graph_fn
    def _graph_fn_echo(self, x):
        return x

    @rlgraph_api
    def tail(self, x):
        return self._graph_fn_tail(x)

    @graph_fn
    def _graph_fn_tail(self, x):
        return dict(tail=x[:, 1:], pair=(x, x[:1]))

    @rlgraph_api
    def plus_one(self, x):
        return self._graph_fn_plus_one(x)

    @graph_fn
    def _graph_fn_plus_one(self, x):
        return x + 1.0


def aligned_array(rows, alignment=64):
    """A float32 ``[rows, 4]`` array whose data starts at a multiple of ``alignment`` bytes (TF would take such
    an array's memory as a tensor's buffer instead of copying it)."""
    raw = np.zeros(rows * 16 + alignment, np.uint8)
    offset = (-raw.ctypes.data) % alignment
    array = raw[offset:offset + rows * 16].view(np.float32).reshape(rows, 4)
    array[:] = np.arange(rows * 4, dtype=np.float32).reshape(rows, 4)
    return array


@pytest.mark.parametrize("rows", [1, 4096])
def test_results_never_share_memory_with_the_callers_arrays(backend, rows):
    test = ComponentTest(Echo(), dict(x=STATES), backend=backend)
    for x in (aligned_array(rows), aligned_array(rows + 1)[1:]):  # aligned, and (16 bytes on) not aligned
        expected = x.copy()
        out = test.executor.execute("echo", x)
        np.testing.assert_array_equal(out, expected)
        x[:] = -1.0
        np.testing.assert_array_equal(out, expected)  # The result is not the caller's memory...
        out[:] = -2.0
        x[:] = expected
        np.testing.assert_array_equal(test.executor.execute("echo", x), expected)  # ...nor is it kept.
        # A result computed from an input leaves the input as it was (no kernel writes into the caller's memory).
        np.testing.assert_array_equal(test.executor.execute("plus_one", x), expected + 1.0)
        np.testing.assert_array_equal(x, expected)
        # Views of an input, in containers.
        out = test.executor.execute("tail", x)
        x[:] = -1.0
        np.testing.assert_array_equal(out["tail"], expected[:, 1:])
        np.testing.assert_array_equal(out["pair"][0], expected)
        np.testing.assert_array_equal(out["pair"][1], expected[:1])


class Unsorted(Component):
    """Test-only: returns dicts whose keys are not in sorted order (``jax.jit`` itself sorts them)."""

    def __init__(self):
        super().__init__(scope="unsorted")

    @rlgraph_api
    def records(self, x):
        return self._graph_fn_records(x)

    @graph_fn
    def _graph_fn_records(self, x):
        return dict(states=x, actions=x * 2.0, inner=dict(z=x, a=x + 1.0)), (dict(b=x, a=x),)


def test_outputs_keep_the_key_order_of_their_dicts(backend):
    test = ComponentTest(Unsorted(), dict(x=FloatBox(shape=(2,), add_batch_rank=True)), backend=backend)
    x = np.array([[1.0, 2.0]], np.float32)
    for _ in range(2):  # The first call (tracing) and a later one.
        records, (pair,) = test.executor.execute("records", x)
        assert list(records) == ["states", "actions", "inner"] and list(records["inner"]) == ["z", "a"]
        assert list(pair) == ["b", "a"]
        np.testing.assert_array_equal(records["inner"]["a"], x + 1.0)
