"""The build: space inference, input-completeness, and precise errors."""
import numpy as np
import pytest

from rlgraph import graph_fn, rlgraph_api
from rlgraph.components import Component, ContainerMerger, ContainerSplitter, DenseLayer, NeuralNetwork
from rlgraph.spaces import BoolBox, Dict, FloatBox, IntBox, Tuple
from rlgraph.tests import ComponentTest
from rlgraph.utils.backend import tf, torch
from rlgraph.utils.errors import RLGraphBuildError, RLGraphInputIncompleteError, RLGraphSpaceError

#: Component/foundation tests: their ``backend`` parametrization includes JAX (rlgraph.tests.pytest_plugin).
pytestmark = pytest.mark.all_backends


class Root(Component):
    def __init__(self, *subs):
        super().__init__(*subs, scope="root")
        self.net = subs[0]

    @rlgraph_api
    def act(self, states):
        return self.net.call(states)


def test_wrong_input_space_names_component_api_argument_and_spaces(backend):
    net = NeuralNetwork(DenseLayer(4), DenseLayer(2))
    with pytest.raises(RLGraphSpaceError) as info:
        ComponentTest(Root(net), dict(states=IntBox(3, shape=(2,), add_batch_rank=True)), backend=backend)
    msg = str(info.value)
    assert "'root/neural-network/dense'" in msg and "API method 'call'" in msg and "argument 'inputs'" in msg
    assert "expected a FloatBox" in msg and "IntBox(" in msg


class Cyclic(Component):
    """``feedback``'s argument is computed by this component's own graph function: a cycle."""

    def __init__(self, opt_out=False):
        super().__init__(scope="cyclic")
        self.opt_out = opt_out

    def create_variables(self, input_spaces, action_space=None):
        self.w = self.get_variable("w", shape=(), initializer=2.0)

    @rlgraph_api
    def run(self, x):
        return self.feedback(self._graph_fn_scale(x))

    @rlgraph_api
    def feedback(self, y):
        return self._graph_fn_scale(y)

    @graph_fn
    def _graph_fn_scale(self, x):
        return x * self.w


class CyclicOptOut(Cyclic):
    @rlgraph_api(must_be_complete=False)
    def feedback(self, y):
        return self._graph_fn_scale(y)


class Outer(Component):
    def __init__(self, inner):
        super().__init__(inner, scope="outer")
        self.inner = inner

    @rlgraph_api
    def run(self, x):
        return self.inner.run(x)


def test_input_incomplete_cycle_is_reported_and_opt_out_works(backend):
    with pytest.raises(RLGraphInputIncompleteError) as info:
        ComponentTest(Outer(Cyclic()), dict(x=FloatBox(add_batch_rank=True)), backend=backend)
    msg = str(info.value)
    assert "'outer/cyclic'" in msg and "['y']" in msg and "must_be_complete=False" in msg
    test = ComponentTest(Outer(CyclicOptOut()), dict(x=FloatBox(add_batch_rank=True)), backend=backend)
    test.test(("run", [np.array([1.0, -2.0], np.float32)]), expected_outputs=np.array([4.0, -8.0]))


class Twice(Component):
    def __init__(self):
        self.dense = DenseLayer(2)
        super().__init__(self.dense, scope="twice")

    @rlgraph_api
    def run(self, a, b):
        return self.dense.call(a), self.dense.call(b)


def test_one_component_receiving_two_different_spaces_is_an_error(backend):
    with pytest.raises(RLGraphBuildError, match="argument 'inputs': received .*earlier call passed"):
        ComponentTest(Twice(), dict(a=FloatBox(shape=(3,), add_batch_rank=True),
                                    b=FloatBox(shape=(4,), add_batch_rank=True)), backend=backend)
    # Ranks alone may differ between calls.
    ComponentTest(Twice(), dict(a=FloatBox(shape=(3,), add_batch_rank=True),
                                b=FloatBox(shape=(3,), add_batch_rank=True, add_time_rank=True)), backend=backend)


class Shapes(Component):
    """Graph functions whose output ranks the builder has to infer."""

    @rlgraph_api
    def identity(self, x):
        return self._graph_fn_identity(x)

    @rlgraph_api
    def fold(self, x):
        return self._graph_fn_fold(x)

    @rlgraph_api
    def reduce(self, x):
        return self._graph_fn_reduce(x)

    @graph_fn
    def _graph_fn_identity(self, x):
        return x

    @graph_fn(backend="tf")
    def _graph_fn_fold(self, x):
        return tf.reshape(x, [-1, 3])

    @graph_fn(backend="pytorch")
    def _graph_fn_fold(self, x):
        return x.reshape(-1, 3)

    @graph_fn(backend="jax")
    def _graph_fn_fold(self, x):
        return x.reshape(-1, 3)

    @graph_fn(backend="tf")
    def _graph_fn_reduce(self, x):
        return tf.reduce_sum(x)

    @graph_fn(backend="pytorch")
    def _graph_fn_reduce(self, x):
        return x.sum()

    @graph_fn(backend="jax")
    def _graph_fn_reduce(self, x):
        return x.sum()


@pytest.mark.parametrize("time_major", [True, False])
def test_output_spaces_keep_batch_and_time_ranks(backend, time_major):
    space = FloatBox(shape=(3,), add_batch_rank=True, add_time_rank=True, time_major=time_major)
    test = ComponentTest(Shapes(), dict(x=space), backend=backend)
    outputs = {call.info.name: call.outputs for call in test.meta_graph.api.values()}
    assert outputs["identity"].space == space
    assert outputs["fold"].space == FloatBox(shape=(3,), add_batch_rank=True)
    assert outputs["reduce"].space == FloatBox()
    x = np.arange(2 * 4 * 3, dtype=np.float32).reshape((2, 4, 3))
    test.test(("fold", [x]), expected_outputs=x.reshape(8, 3))
    test.test(("reduce", [x]), expected_outputs=x.sum(), decimals=4)


class SplitAdd(Component):
    @rlgraph_api
    def add(self, x, y):
        return self._graph_fn_add(x, y)

    @rlgraph_api
    def keys(self, x):
        return self._graph_fn_keys(x)

    @graph_fn(split_ops=True)
    def _graph_fn_add(self, x, y):
        return x + y, x - y

    @graph_fn(split_ops=True, add_auto_key_as_first_param=True)
    def _graph_fn_keys(self, key, x):
        return x * (len(key) + 1)


def test_split_ops_calls_per_leaf_and_merges_back(backend):
    space = Dict(a=FloatBox(shape=(2,)), b=Tuple(FloatBox(), FloatBox(shape=(3,))), add_batch_rank=True)
    test = ComponentTest(SplitAdd(), dict(x=space, y=float), backend=backend)
    x = space.sample(4)
    plus, minus = test.test(("add", [x, 1.5]))
    np.testing.assert_allclose(plus["a"], x["a"] + 1.5, rtol=1e-6)
    np.testing.assert_allclose(minus["b"][1], x["b"][1] - 1.5, rtol=1e-6)
    out = test.test(("keys", [x]))
    # Flat keys: "a" (len 1), "b/0" and "b/1" (len 3).
    np.testing.assert_allclose(out["a"], x["a"] * 2, rtol=1e-6)
    np.testing.assert_allclose(out["b"][0], x["b"][0] * 4, rtol=1e-6)
    assert test.meta_graph.api["add"].outputs[0].space == space


class SplitMerge(Component):
    def __init__(self):
        self.splitter = ContainerSplitter("obs", "prev/reward")
        self.merger = ContainerMerger("o", "r")
        self.dense = DenseLayer(2)
        super().__init__(self.splitter, self.merger, self.dense, scope="split-merge")

    @rlgraph_api
    def run(self, inputs):
        obs, reward = self.splitter.split(inputs)
        return self.merger.merge(self.dense.call(obs), reward)

    @rlgraph_api
    def index(self, inputs):
        return inputs["prev"]["action"]


def test_splitter_merger_and_indexing_records(backend):
    space = Dict(obs=FloatBox(shape=(3,)), prev=Dict(reward=FloatBox(), action=IntBox(4)), add_batch_rank=True)
    test = ComponentTest(SplitMerge(), dict(inputs=space), backend=backend)
    x = space.sample(5)
    out = test.test(("run", [x]))
    w = test.read_variable_values("dense/kernel")
    b = test.read_variable_values("dense/bias")
    np.testing.assert_allclose(out["o"], x["obs"] @ w + b, rtol=1e-5)
    np.testing.assert_array_equal(out["r"], x["prev"]["reward"])
    run_space = test.meta_graph.api["run"].outputs
    test.test(("index", [x]), expected_outputs=x["prev"]["action"])
    assert isinstance(run_space, dict)
    # An output indexed from a structure gets its space (multi-device towers merge outputs by their spaces).
    assert test.meta_graph.api["index"].outputs.space == IntBox(4, add_batch_rank=True)


class IndexedStats(Component):
    """An API method that returns entries of its graph function's dict, as an algorithm's update does."""

    @rlgraph_api
    def stats(self, x):
        out = self._graph_fn_stats(x)
        return dict(mean=out["mean"], column_means=out["column_means"])

    @graph_fn
    def _graph_fn_stats(self, x):
        return dict(mean=self.ops.mean(x), column_means=self.ops.mean(x, axis=0), unused=x)


def test_outputs_indexed_from_a_graph_fn_dict_get_their_spaces(backend):
    space = FloatBox(shape=(3,), add_batch_rank=True)
    test = ComponentTest(IndexedStats(), dict(x=space), backend=backend)
    outputs = test.meta_graph.api["stats"].outputs
    assert outputs["mean"].space == FloatBox() and outputs["column_means"].space == FloatBox(shape=(3,))
    x = space.sample(4)
    test.test(("stats", [x]), expected_outputs=dict(mean=x.mean(), column_means=x.mean(0)), decimals=5)


class Miscounted(Component):
    @rlgraph_api
    def run(self, x):
        return self._graph_fn_run(x)

    @graph_fn(returns=2)
    def _graph_fn_run(self, x):
        return x


def test_graph_fn_output_count_mismatch_is_reported(backend):
    with pytest.raises(RLGraphBuildError, match=r"returned 1 value\(s\), but its callers expect 2"):
        ComponentTest(Miscounted(), dict(x=FloatBox(add_batch_rank=True)), backend=backend)


class Failing(Component):
    @rlgraph_api
    def run(self, x):
        return self._graph_fn_run(x)

    @graph_fn
    def _graph_fn_run(self, x):
        raise ValueError("boom")


def test_graph_fn_failure_names_component_api_and_input_spaces(backend):
    with pytest.raises(RLGraphBuildError) as info:
        ComponentTest(Failing(), dict(x=BoolBox(add_batch_rank=True)), backend=backend)
    msg = str(info.value)
    assert "'_graph_fn_run' of component 'failing'" in msg and "API method 'run'" in msg
    assert "BoolBox" in msg and "boom" in msg


def test_unknown_input_space_name_is_rejected(backend):
    with pytest.raises(RLGraphBuildError, match="no API method of 'dense' takes such an argument"):
        ComponentTest(DenseLayer(2), dict(inputs=FloatBox(shape=(2,), add_batch_rank=True),
                                         state=FloatBox()), backend=backend)


def test_failed_build_leaves_the_component_rebuildable(backend):
    net = NeuralNetwork(DenseLayer(2))
    with pytest.raises(RLGraphSpaceError):
        ComponentTest(net, dict(inputs=IntBox(2, add_batch_rank=True)), backend=backend)
    test = ComponentTest(net, dict(inputs=FloatBox(shape=(2,), add_batch_rank=True)), backend=backend)
    assert test.test(("call", [np.ones((1, 2), np.float32)])).shape == (1, 2)


def test_pytorch_build_run_leaves_no_trace_in_variables():
    from rlgraph.components import ReplayMemory
    test = ComponentTest(ReplayMemory(8), dict(records=FloatBox(shape=(2,), add_batch_rank=True), num_records=int),
                         backend="pytorch")
    # The build ran insert_records on 7 sample records; the memory must still be empty.
    assert int(test.test("get_size")) == 0
    assert float(np.abs(test.read_variable_values("storage")).sum()) == 0.0
    assert isinstance(test.read_variable_values("index"), np.ndarray)
    assert torch.is_tensor(test.variables()["replay-memory/size"])
