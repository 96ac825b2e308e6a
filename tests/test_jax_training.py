"""Training on JAX: optimizer steps and agent updates equal PyTorch's from the same weights."""
import numpy as np
import pytest

from rlgraph.components.optimizers import AdamOptimizer, RMSPropOptimizer, SGDOptimizer
from rlgraph.spaces import FloatBox
from rlgraph.tests import ComponentTest
from small_components import Regression

pytest.importorskip("jax")
pytest.importorskip("torch")

SPACES = dict(x=FloatBox(shape=(3,), add_batch_rank=True), y=FloatBox(add_batch_rank=True), time_percentage=float)
RNG = np.random.default_rng(0)
X = RNG.normal(size=(32, 3)).astype(np.float32)
Y = (np.sin(X[:, 0]) + X[:, 1] * X[:, 2]).astype(np.float32)


OPTIMIZERS = {
    "adam-clipped": lambda: AdamOptimizer(["linear", 0.05, 0.01], clip_grad_norm=0.5),
    "sgd-nesterov-clipped": lambda: SGDOptimizer(0.05, momentum=0.9, nesterov=True, clip_grad_norm=0.5),
    "rmsprop-centered-clipped": lambda: RMSPropOptimizer(0.01, centered=True, momentum=0.5, clip_grad_norm=0.5),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_steps_equal_pytorch(name):
    tests = {b: ComponentTest(Regression(OPTIMIZERS[name]()), input_spaces=SPACES, backend=b)
             for b in ("pytorch", "jax")}
    weights = tests["pytorch"].executor.get_weights()
    tests["jax"].executor.set_weights(weights)
    for t, call in enumerate(["update", "update", "apply"]):
        outs = {b: test.test((call, [X, Y, 0.3 * t])) for b, test in tests.items()}
        np.testing.assert_allclose(outs["jax"], outs["pytorch"], rtol=1e-5, atol=1e-6, err_msg=f"{call} {t}")
        after = {b: test.executor.get_weights(trainable_only=False) for b, test in tests.items()}
        assert set(after["jax"]) == set(after["pytorch"])
        for k, v in after["pytorch"].items():
            np.testing.assert_allclose(after["jax"][k], v, rtol=1e-5, atol=1e-6, err_msg=f"{k} after {call} {t}")
    # Clipping was active: the first step's global norm exceeded the clip.
    assert float(tests["jax"].test(("update", [X, Y, 0.0]))[1]) > 0.5
    assert tests["jax"].executor.trace_counts["update"] == 1


DQN_SPEC = {
    "type": "dqn", "network_spec": [{"type": "dense", "units": 16, "activation": "relu"}], "dueling": True,
    "double_q": True, "n_step": 3, "discount": 0.99,
    "memory_spec": {"type": "prioritized-replay", "capacity": 1000, "alpha": 0.6, "beta": 0.4},
    "optimizer_spec": {"type": "adam", "learning_rate": 0.01, "clip_grad_norm": 1.0},
    "update_spec": {"batch_size": 32, "update_interval": 4, "steps_before_update": 32, "sync_interval": 100},
}


def _dqn_batch(n=32, seed=3):
    rng = np.random.default_rng(seed)
    states = rng.uniform(-0.2, 0.2, size=(n, 4)).astype(np.float32)
    return dict(states=states, actions=rng.integers(0, 2, n), rewards=rng.normal(size=n).astype(np.float32),
                terminals=rng.random(n) < 0.2, next_states=(states + 0.01).astype(np.float32))


def test_dqn_update_from_batch_equals_pytorch():
    import gymnasium as gym

    from rlgraph.agents import Agent
    env = gym.make("CartPole-v1")
    agents = {b: Agent.from_spec(dict(DQN_SPEC), state_space=env.observation_space, action_space=env.action_space,
                                 backend=b) for b in ("pytorch", "jax")}
    agents["jax"].set_weights(agents["pytorch"].get_weights())
    weights = np.linspace(0.5, 1.0, 32).astype(np.float32)
    for i in range(3):
        batch = _dqn_batch(seed=i)
        outs = {b: a.executor.execute("update_from_batch", batch, weights, 0.1 * i) for b, a in agents.items()}
        np.testing.assert_allclose(outs["jax"][0], outs["pytorch"][0], rtol=1e-5, err_msg=f"loss, update {i}")
        np.testing.assert_allclose(outs["jax"][1], outs["pytorch"][1], rtol=1e-5, atol=1e-6, err_msg=f"TD, update {i}")
    after = {b: a.executor.get_weights(trainable_only=False) for b, a in agents.items()}
    for k, v in after["pytorch"].items():
        np.testing.assert_allclose(after["jax"][k], v, rtol=1e-5, atol=1e-5, err_msg=k)
    assert agents["jax"].executor.trace_counts["update_from_batch"] == 1
    assert "update_from_batch" not in agents["jax"].executor.eager_methods


def _pair(name):
    tests = {b: ComponentTest(Regression(OPTIMIZERS[name]()), input_spaces=SPACES, backend=b)
             for b in ("pytorch", "jax")}
    tests["jax"].executor.set_weights(tests["pytorch"].executor.get_weights())
    return tests


def _assert_same_weights(tests):
    after = {b: test.executor.get_weights(trainable_only=False) for b, test in tests.items()}
    for k, v in after["pytorch"].items():
        np.testing.assert_allclose(after["jax"][k], v, rtol=1e-5, atol=1e-5, err_msg=k)


def test_execute_steps_is_one_scan_program_equal_to_pytorch():
    tests = _pair("adam-clipped")
    rows = np.random.default_rng(0).integers(0, 32, size=(5, 8))
    outs = {b: t.executor.execute_steps("update", rows, X, Y, 0.2) for b, t in tests.items()}
    for j in range(2):  # (losses, global norms), one per step
        assert outs["jax"][j].shape == (5,)
        np.testing.assert_allclose(outs["jax"][j], outs["pytorch"][j], rtol=1e-5, atol=1e-5)
    _assert_same_weights(tests)
    assert tests["jax"].executor.trace_counts["update"] == 1
    assert int(tests["jax"].read_variable_values("regression/adam-optimizer/steps")) == 5


def test_an_eager_update_equals_pytorch():
    # The eager fallback (an API method that cannot be traced) differentiates the same way, op by op.
    tests = _pair("sgd-nesterov-clipped")
    tests["jax"].executor.eager_methods.add("update")
    for t in range(2):
        outs = {b: test.test(("update", [X, Y, 0.0])) for b, test in tests.items()}
        np.testing.assert_allclose(outs["jax"], outs["pytorch"], rtol=1e-5)
    _assert_same_weights(tests)
    assert tests["jax"].executor.trace_counts["update"] == 0


def test_gradients_outside_an_executor_call_name_the_optimizer():
    from rlgraph.utils.errors import RLGraphBackendError
    test = ComponentTest(Regression(OPTIMIZERS["adam-clipped"]()), input_spaces=SPACES, backend="jax")
    optimizer = test.component.optimizer
    with pytest.raises(RLGraphBackendError, match="'regression/adam-optimizer'.*JAX executor's API calls"):
        optimizer.backend.gradients(0.0, test.component.network.variables(), optimizer.global_scope)
