"""Tests of Synchronizable (target networks): hard and soft syncs against numpy, on both backends."""
import numpy as np
import pytest

from rlgraph import rlgraph_api
from rlgraph.components import Component, NeuralNetwork
from rlgraph.components.common.synchronizable import Synchronizable
from rlgraph.spaces import FloatBox
from rlgraph.tests import ComponentTest, run_on_backends
from rlgraph.utils.errors import RLGraphBuildError, RLGraphRuntimeError, RLGraphSpaceError

#: Component/foundation tests: their ``backend`` parametrization includes JAX (rlgraph.tests.pytest_plugin).
pytestmark = pytest.mark.all_backends

LAYERS = ({"type": "dense", "units": 7, "activation": "tanh"}, {"type": "dense", "units": 2})
SOURCE, TARGET = "root/policy", "root/target-sync/target"
VARIABLES = ("dense/kernel", "dense/bias", "dense-1/kernel", "dense-1/bias")


class Root(Component):
    """A network and its target network, synced from the parent as in DQN."""

    def __init__(self, target_layers=LAYERS, trainable=None):
        super().__init__(scope="root")
        self.policy = NeuralNetwork(*LAYERS, scope="policy")
        target = self.policy.copy(scope="target", trainable=trainable) if target_layers is LAYERS else \
            NeuralNetwork(*target_layers, scope="target")
        self.target = Synchronizable(target)
        self.add_components(self.policy, self.target)

    @rlgraph_api
    def q(self, x):
        return self.policy.call(x)

    @rlgraph_api
    def q_target(self, x):
        return self.target.call(x)

    @rlgraph_api
    def soft_sync(self, tau):
        return self.target.sync(self.policy.variables(), tau)

    @rlgraph_api
    def hard_sync(self):
        return self.target.sync(self.policy.variables())

    @rlgraph_api
    def target_variables(self):
        return self.target.variables()


SPACES = dict(x=FloatBox(shape=(3,), add_batch_rank=True), tau=float)
X = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)


def weights(test, prefix):
    all_weights = test.executor.get_weights(trainable_only=False)
    return {v: all_weights[f"{prefix}/{v}"].astype(np.float64) for v in VARIABLES}


def test_hard_sync_copies_every_variable(backend):
    test = ComponentTest(Root(), input_spaces=SPACES, backend=backend)
    source, target = weights(test, SOURCE), weights(test, TARGET)
    assert not np.allclose(source["dense/kernel"], target["dense/kernel"])  # Different initial values.
    assert test.test("hard_sync") is None
    synced = weights(test, TARGET)
    for v in VARIABLES:
        np.testing.assert_array_equal(synced[v], source[v])
    np.testing.assert_array_equal(test.test(("q_target", X)), test.test(("q", X)))
    np.testing.assert_array_equal(weights(test, SOURCE)["dense/kernel"], source["dense/kernel"])  # Source untouched.


@pytest.mark.parametrize("trainable", [None, False])
def test_soft_sync_is_polyak_averaging(backend, trainable):
    test = ComponentTest(Root(trainable=trainable), input_spaces=SPACES, backend=backend)
    source, target = weights(test, SOURCE), weights(test, TARGET)
    for tau in (0.3, 0.05, 1.0):
        test.test(("soft_sync", [tau]))
        target = {v: tau * source[v] + (1.0 - tau) * target[v] for v in VARIABLES}
        synced = weights(test, TARGET)
        for v in VARIABLES:
            np.testing.assert_allclose(synced[v], target[v], rtol=1e-6, atol=1e-7, err_msg=f"{v}, tau={tau}")
    # The forwarded call(): the target now computes what the policy computes.
    h = np.tanh(X @ source["dense/kernel"] + source["dense/bias"])
    np.testing.assert_allclose(test.test(("q_target", X)), h @ source["dense-1/kernel"] + source["dense-1/bias"],
                               rtol=1e-5, atol=1e-6)


def test_wrapper_forwards_api_and_keeps_relative_keys(backend):
    test = ComponentTest(Root(), input_spaces=SPACES, backend=backend)
    keys = set(test.test("target_variables"))
    assert keys == {"dense.kernel", "dense.bias", "dense-1.kernel", "dense-1.bias"}
    wrapper = test.component.target
    assert {"call", "variables", "sync"} <= set(wrapper.api_methods)


@pytest.mark.parametrize("tau", [0.0, 1.5, -0.1])
def test_bad_tau_is_rejected(backend, tau):
    test = ComponentTest(Root(), input_spaces=SPACES, backend=backend)
    before = weights(test, TARGET)
    with pytest.raises(RLGraphRuntimeError, match="tau"):
        test.test(("soft_sync", [tau]))
    np.testing.assert_array_equal(weights(test, TARGET)["dense/kernel"], before["dense/kernel"])


class ConstantTau(Root):
    @rlgraph_api
    def soft_sync(self, tau):
        return self.target.sync(self.policy.variables(), 2.0)


def test_bad_constant_tau_fails_at_assembly():
    with pytest.raises(RLGraphSpaceError, match="tau"):
        ComponentTest(ConstantTau(), input_spaces=SPACES, backend="pytorch")


def test_mismatched_networks_are_rejected(backend):
    other = ({"type": "dense", "units": 5, "activation": "tanh"}, {"type": "dense", "units": 2})
    with pytest.raises((RLGraphSpaceError, RLGraphBuildError), match="has shape"):  # Found during the build.
        ComponentTest(Root(target_layers=other), input_spaces=SPACES, backend=backend)
    fewer = ({"type": "dense", "units": 7, "activation": "tanh"},)
    # Missing keys are found once the variable dicts are complete: when TF traces sync, when PyTorch runs it.
    with pytest.raises(RLGraphSpaceError, match=r"missing: \[\], unexpected: \['dense-1.bias', 'dense-1.kernel'\]"):
        test = ComponentTest(Root(target_layers=fewer), input_spaces=SPACES, backend=backend)
        test.test("hard_sync")


def test_backends_agree():
    run_on_backends(Root, SPACES, [("q_target", [X]), ("soft_sync", [0.25]), ("q_target", [X]),
                                   ("hard_sync", []), ("q_target", [X]), ("target_variables", [])])
