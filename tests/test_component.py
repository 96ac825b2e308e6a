"""Component tree: scopes, sub-components, copies, trainable flags; a user's own component end to end."""
import numpy as np
import pytest

from rlgraph import graph_fn, rlgraph_api
from rlgraph.components import Component, DenseLayer, NeuralNetwork
from rlgraph.spaces import FloatBox
from rlgraph.tests import ComponentTest, run_on_backends
from rlgraph.utils.backend import tf, torch
from rlgraph.utils.errors import RLGraphError, RLGraphSpaceError


class Scale(Component):
    """A user's component: multiplies its input by a trainable scalar (see docs/writing_components.md)."""

    default_scope = "scale"

    def __init__(self, init=1.0, scope=None, **kwargs):
        super().__init__(scope=scope, **kwargs)
        self.init = init

    def check_input_spaces(self, input_spaces, action_space=None):
        if not isinstance(input_spaces["x"], FloatBox):
            raise RLGraphSpaceError(f"API method 'apply', argument 'x': expected a FloatBox, got {input_spaces['x']!r}.")

    def create_variables(self, input_spaces, action_space=None):
        self.factor = self.get_variable("factor", shape=(), initializer=self.init)

    @rlgraph_api
    def apply(self, x):
        return self._graph_fn_apply(x)

    @graph_fn(backend="tf")
    def _graph_fn_apply(self, x):
        return x * self.factor

    @graph_fn(backend="pytorch")
    def _graph_fn_apply(self, x):
        return x * self.factor


def test_user_component_on_both_backends(backend):
    test = ComponentTest(Scale(2.5), input_spaces=dict(x=FloatBox(shape=(3,), add_batch_rank=True)), backend=backend)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    test.test(("apply", [x]), expected_outputs=2.5 * x)
    assert test.read_variable_values("scale/factor") == pytest.approx(2.5)
    assert list(test.executor.get_weights()) == ["scale/factor"]


def test_user_component_backends_agree():
    run_on_backends(lambda: Scale(-0.5), dict(x=FloatBox(shape=(3,), add_batch_rank=True)),
                    [("apply", [np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)])])


def test_user_component_rejects_wrong_space(backend):
    from rlgraph.spaces import IntBox
    with pytest.raises(RLGraphSpaceError, match="Component 'scale': API method 'apply', argument 'x'"):
        ComponentTest(Scale(), dict(x=IntBox(3, add_batch_rank=True)), backend=backend)


def test_scopes_are_paths_and_defaults_are_numbered():
    a, b, c = DenseLayer(2), DenseLayer(2), DenseLayer(2, scope="head")
    net = NeuralNetwork(a, b, c, scope="policy")
    root = Component(net, scope="root")
    assert [x.global_scope for x in (a, b, c)] == ["root/policy/dense", "root/policy/dense-1", "root/policy/head"]
    assert root.get_sub_component_by_name("policy/dense-1") is b
    with pytest.raises(RLGraphError, match="no sub-component 'dense-7'"):
        root.get_sub_component_by_name("policy/dense-7")
    with pytest.raises(RLGraphError, match="already has a sub-component with scope 'head'"):
        net.add_components(DenseLayer(2, scope="head"))
    with pytest.raises(RLGraphError, match="already has a parent"):
        Component(a, scope="other")
    with pytest.raises(RLGraphError, match="must not contain '/'"):
        DenseLayer(2, scope="a/b")


class TwoNets(Component):
    def __init__(self):
        self.online = NeuralNetwork(DenseLayer(3), scope="online")
        self.target = self.online.copy(scope="target", trainable=False)
        super().__init__(self.online, self.target, scope="two")

    @rlgraph_api
    def both(self, x):
        return self.online.call(x), self.target.call(x)


def test_copy_makes_an_independent_non_trainable_target(backend):
    test = ComponentTest(TwoNets(), dict(x=FloatBox(shape=(2,), add_batch_rank=True)), backend=backend)
    names = list(test.variables())
    assert names == ["two/online/dense/kernel", "two/online/dense/bias",
                     "two/target/dense/kernel", "two/target/dense/bias"]
    assert list(test.executor.get_weights()) == names[:2]
    # Different names, so different initial values; same structure.
    values = test.executor.get_weights(trainable_only=False)
    assert values["two/online/dense/kernel"].shape == values["two/target/dense/kernel"].shape
    test.executor.set_weights({"two/target/dense/kernel": values["two/online/dense/kernel"]})
    online, target = test.test(("both", [np.ones((1, 2), np.float32)]))
    np.testing.assert_allclose(online, target, rtol=1e-6)


def test_copy_after_build_is_refused():
    dense = DenseLayer(2)
    ComponentTest(dense, dict(inputs=FloatBox(shape=(2,), add_batch_rank=True)), backend="pytorch")
    with pytest.raises(RLGraphError, match="before it is built"):
        dense.copy()


def test_backend_variables_are_native(backend):
    test = ComponentTest(DenseLayer(2), dict(inputs=FloatBox(shape=(2,), add_batch_rank=True)), backend=backend)
    kernel = test.variables()["dense/kernel"]
    if backend == "tf":
        assert isinstance(kernel, tf.Variable) and kernel.trainable
    else:
        assert isinstance(kernel, torch.nn.Parameter) and kernel.requires_grad


def test_variables_api_waits_for_all_sub_components(backend):
    """variables() of a network lists every layer's weights, also those built after the network itself."""
    net = NeuralNetwork(DenseLayer(3), DenseLayer(2), DenseLayer(1))
    test = ComponentTest(net, dict(inputs=FloatBox(shape=(4,), add_batch_rank=True)), backend=backend)
    out = test.test("variables")
    assert sorted(out) == sorted(f"{layer}.{v}" for layer in ("dense", "dense-1", "dense-2")
                                 for v in ("kernel", "bias"))
    assert out["dense-2.kernel"].shape == (2, 1)
