"""Component tree: scopes, sub-components, copies, trainable flags; a user's own component end to end."""
import numpy as np
import pytest

from rlgraph import graph_fn, rlgraph_api
from rlgraph.components import Component, DenseLayer, NeuralNetwork
from rlgraph.spaces import FloatBox
from rlgraph.tests import ComponentTest, run_on_backends
from rlgraph.utils.backend import tf, torch
from rlgraph.utils.errors import RLGraphError, RLGraphSpaceError

#: Component/foundation tests: their ``backend`` parametrization includes JAX (rlgraph.tests.pytest_plugin).
pytestmark = pytest.mark.all_backends


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

    @graph_fn(backend="jax")
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
    elif backend == "jax":
        from rlgraph.backends.jax_backend import JaxVariable
        assert isinstance(kernel, JaxVariable) and kernel.trainable
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


# --- graph functions overridden for one backend only ---------------------------------------------------------
class Shift(Component):
    """Its two backend implementations differ on purpose, so a test sees which one ran."""

    @rlgraph_api
    def apply(self, x):
        return self._graph_fn_apply(x)

    @graph_fn(backend="tf")
    def _graph_fn_apply(self, x):
        return x + 1.0

    @graph_fn(backend="pytorch")
    def _graph_fn_apply(self, x):
        return x + 2.0

    @graph_fn(backend="jax")
    def _graph_fn_apply(self, x):
        return x + 3.0


class ShiftTfOverridden(Shift):
    @graph_fn(backend="tf")
    def _graph_fn_apply(self, x):
        return x * 10.0


class ShiftTorchOverridden(Shift):
    @graph_fn(backend="pytorch")
    def _graph_fn_apply(self, x):
        return x * 20.0


class ShiftBackendFree(Shift):
    @graph_fn
    def _graph_fn_apply(self, x):
        return x * 30.0


class ShiftBothOverriddenInTwoSteps(ShiftTfOverridden):
    @graph_fn(backend="pytorch")
    def _graph_fn_apply(self, x):
        return x * 40.0


class ShiftTfOverBackendFree(ShiftBackendFree):
    @graph_fn(backend="tf")
    def _graph_fn_apply(self, x):
        return x * 50.0


@pytest.mark.parametrize("cls, expected", [
    (Shift, {"tf": lambda x: x + 1, "pytorch": lambda x: x + 2, "jax": lambda x: x + 3}),
    # Only tf overridden: PyTorch and JAX keep the parent's implementations (and vice versa).
    (ShiftTfOverridden, {"tf": lambda x: x * 10, "pytorch": lambda x: x + 2, "jax": lambda x: x + 3}),
    (ShiftTorchOverridden, {"tf": lambda x: x + 1, "pytorch": lambda x: x * 20, "jax": lambda x: x + 3}),
    # A backend-free override replaces all.
    (ShiftBackendFree, {"tf": lambda x: x * 30, "pytorch": lambda x: x * 30, "jax": lambda x: x * 30}),
    # Along a longer chain, each backend comes from the nearest class defining it (or a backend-free one).
    (ShiftBothOverriddenInTwoSteps, {"tf": lambda x: x * 10, "pytorch": lambda x: x * 40, "jax": lambda x: x + 3}),
    (ShiftTfOverBackendFree, {"tf": lambda x: x * 50, "pytorch": lambda x: x * 30, "jax": lambda x: x * 30}),
], ids=lambda v: v.__name__ if isinstance(v, type) else None)
def test_graph_fn_overridden_for_one_backend_keeps_the_inherited_other(backend, cls, expected):
    test = ComponentTest(cls(scope="shift"), dict(x=FloatBox(shape=(2,), add_batch_rank=True)), backend=backend)
    x = np.array([[1.0, -2.0], [0.5, 3.0]], np.float32)
    test.test(("apply", [x]), expected_outputs=expected[backend](x))


def test_graph_fn_inheritance_leaves_the_parents_untouched():
    assert set(Shift._graph_fn_apply.impls) == {"tf", "pytorch", "jax"}
    assert Shift._graph_fn_apply.impls["tf"].__qualname__ == "Shift._graph_fn_apply"
    child = ShiftTfOverridden._graph_fn_apply
    assert child is not Shift._graph_fn_apply
    assert child.impls["tf"].__qualname__ == "ShiftTfOverridden._graph_fn_apply"
    assert child.impls["pytorch"] is Shift._graph_fn_apply.impls["pytorch"]
    assert set(ShiftBackendFree._graph_fn_apply.impls) == {None}
    # The instance's graph-function table (what the builder binds) holds the completed function.
    assert ShiftTorchOverridden(scope="s").graph_fns["_graph_fn_apply"] is ShiftTorchOverridden._graph_fn_apply


def test_graph_fn_inheritance_across_different_options_fails_at_class_creation():
    from rlgraph.utils.errors import RLGraphAPIError

    with pytest.raises(RLGraphAPIError, match=r"Class '.*SplitShift'.*graph function '_graph_fn_apply'.*"
                                              r"missing backend\(s\) \(jax, pytorch\)"):
        class SplitShift(Shift):
            @graph_fn(backend="tf", split_ops=True)
            def _graph_fn_apply(self, x):
                return x


# --- run-time checks -------------------------------------------------------------------------------------------
class Gate(Component):
    """Passes its input through if ``is_open``: a run-time check that the build's sample runs must skip."""

    def __init__(self, is_open, **kwargs):
        super().__init__(scope="gate", **kwargs)
        self.is_open = is_open
        self.build_runs = 0
        self.checks_in_build_runs = 0

    def _check(self):
        self.checks_in_build_runs += self.in_build_run
        return self.is_open

    @rlgraph_api
    def apply(self, x):
        return self._graph_fn_apply(x)

    @graph_fn
    def _graph_fn_apply(self, x):
        self.build_runs += self.in_build_run
        self.check_at_run_time(self._check, lambda: f"Gate '{self.global_scope}', API method 'apply': closed.")
        return x


def test_check_at_run_time_skips_the_build_runs_only(backend):
    from rlgraph.utils.errors import RLGraphRuntimeError

    x, space = np.ones((3, 2), np.float32), dict(x=FloatBox(shape=(2,), add_batch_rank=True))
    gate = Gate(is_open=True)
    test = ComponentTest(gate, space, backend=backend)
    test.test(("apply", [x]), expected_outputs=x)
    assert gate.build_runs >= 2 and gate.checks_in_build_runs == 0
    closed = Gate(is_open=False)
    # Raised on PyTorch by the call, on TensorFlow when the executor traces the function after the build (a
    # Python condition is evaluated at trace time there).
    with pytest.raises(RLGraphRuntimeError, match="Gate 'gate', API method 'apply': closed"):
        ComponentTest(closed, space, backend=backend).test(("apply", [x]))
    assert closed.build_runs >= 2 and closed.checks_in_build_runs == 0


class Limit(Component):
    @rlgraph_api
    def take(self, n):
        return self._graph_fn_take(n)

    @graph_fn
    def _graph_fn_take(self, n):
        self.check_at_run_time(n <= 3, "Limit: at most 3.")  # n is a symbolic tensor inside a TF graph.
        return n


def test_check_at_run_time_rejects_symbolic_tf_conditions():
    with pytest.raises(RLGraphError, match="check_at_run_time\\(\\) takes a Python condition.*tf.debugging"):
        ComponentTest(Limit(scope="limit"), dict(n=int), backend="tf").test(("take", [2]))
    test = ComponentTest(Limit(scope="limit"), dict(n=int), backend="pytorch")  # Build samples n = 7 and 11.
    assert test.test(("take", [2])) == 2
    from rlgraph.utils.errors import RLGraphRuntimeError
    with pytest.raises(RLGraphRuntimeError, match="Limit: at most 3."):
        test.test(("take", [4]))
