"""Variable initializers (rlgraph.utils.initializers): closed forms, keyword specs, clear errors, one set of
initial weights on every backend, and the actor-critic policy's initializers from a config (``policy_spec``)."""
import json
import os

import numpy as np
import pytest

from rlgraph.components.layers import DenseLayer
from rlgraph.spaces import FloatBox
from rlgraph.tests import ComponentTest
from rlgraph.utils.errors import RLGraphSpecError
from rlgraph.utils.initializers import initial_value

CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")

pytestmark = pytest.mark.all_backends


def _init(spec, shape, seed=0):
    return initial_value(spec, shape, "float64", np.random.default_rng(seed))


@pytest.mark.parametrize("shape", [(256, 6), (6, 256), (4, 4, 16, 32)])
@pytest.mark.parametrize("gain", [1.0, 0.01, np.sqrt(2.0)])
def test_orthogonal_with_gain_is_gain_times_a_semi_orthogonal_matrix(shape, gain):
    w = _init({"type": "orthogonal", "gain": gain}, shape).reshape(-1, shape[-1])
    rows, cols = w.shape
    gram = w.T @ w if rows >= cols else w @ w.T
    np.testing.assert_allclose(gram, gain ** 2 * np.eye(min(rows, cols)), atol=1e-10)


def test_a_name_and_a_dict_without_keywords_are_the_same_initializer():
    np.testing.assert_array_equal(_init("orthogonal", (8, 3)), _init({"type": "orthogonal"}, (8, 3)))
    np.testing.assert_array_equal(_init({"type": "glorot_uniform", "gain": 2.0}, (8, 3)),
                                  2.0 * _init("glorot_uniform", (8, 3)))


def test_scaled_initializers_match_their_closed_forms():
    fan_in, fan_out = 400, 300
    w = _init({"type": "glorot_uniform", "gain": 0.5}, (fan_in, fan_out))
    limit = 0.5 * np.sqrt(6.0 / (fan_in + fan_out))
    assert np.abs(w).max() <= limit and np.abs(w).max() > 0.99 * limit
    np.testing.assert_allclose(w.std(), limit / np.sqrt(3.0), rtol=0.02)
    w = _init({"type": "normal", "mean": 1.0, "stddev": 0.1}, (400, 300))
    np.testing.assert_allclose([w.mean(), w.std()], [1.0, 0.1], rtol=0.01)
    w = _init({"type": "truncated_normal", "stddev": 0.1}, (400, 300))
    assert np.abs(w).max() <= 0.2 + 1e-12


@pytest.mark.parametrize("spec, words", [
    ({"type": "orthogonl", "gain": 1.0}, "Unknown initializer 'orthogonl'"),
    ({"gain": 1.0}, "needs a 'type'"),
    ({"type": "orthogonal", "gian": 1.0}, "takes no 'gian' (it takes 'gain')"),
    ({"type": "zeros", "gain": 1.0}, "takes no 'gain' (it takes no keywords)"),
    ({"type": "orthogonal", "gain": "big"}, "'gain' must be a finite number"),
    ({"type": "orthogonal", "gain": float("nan")}, "'gain' must be a finite number"),
])
def test_bad_initializer_specs_are_refused_in_one_line(spec, words):
    with pytest.raises(RLGraphSpecError) as e:
        _init(spec, (4, 4))
    assert words in str(e.value) and "\n" not in str(e.value)


def test_the_same_initial_weights_on_every_backend(backend):
    layer = DenseLayer(5, kernel_initializer={"type": "orthogonal", "gain": 0.01},
                       bias_initializer={"type": "normal", "stddev": 0.5}, scope="dense")
    test = ComponentTest(layer, input_spaces=dict(inputs=FloatBox(shape=(7,), add_batch_rank=True)),
                         backend=backend, seed=3)
    weights = test.executor.get_weights()
    reference = ComponentTest(DenseLayer(5, kernel_initializer={"type": "orthogonal", "gain": 0.01},
                                         bias_initializer={"type": "normal", "stddev": 0.5}, scope="dense"),
                              input_spaces=dict(inputs=FloatBox(shape=(7,), add_batch_rank=True)),
                              backend="pytorch", seed=3).executor.get_weights()
    assert set(weights) == set(reference)
    for name, value in reference.items():
        np.testing.assert_allclose(weights[name], value, rtol=1e-6, err_msg=name)
    kernel = next(v for k, v in weights.items() if k.endswith("kernel"))
    np.testing.assert_allclose(kernel.T @ kernel, 1e-4 * np.eye(5), atol=1e-9)


def _appo(policy_spec, backend="pytorch"):
    import gymnasium as gym

    from rlgraph.agents import Agent
    env = gym.make("CartPole-v1")
    spec = dict(type="appo", network_spec=[{"type": "dense", "units": 32, "activation": "tanh"}],
                optimizer_spec={"type": "adam", "learning_rate": 1e-3}, unroll_length=8, policy_spec=policy_spec)
    return Agent.from_spec(spec, state_space=env.observation_space, action_space=env.action_space, backend=backend)


def test_policy_spec_sets_the_policy_and_value_heads_initializers():
    """PPO's initialization (Andrychowicz et al. 2021): a policy head 100x smaller than the hidden layers, so
    the first policy is near uniform."""
    weights = _appo({"action_adapter_spec": {"kernel_initializer": {"type": "orthogonal", "gain": 0.01}},
                     "value_kernel_initializer": {"type": "orthogonal", "gain": 1.0}}).get_weights()
    head = next(v for k, v in weights.items() if "action-adapter" in k and k.endswith("kernel"))
    value = next(v for k, v in weights.items() if "value-head" in k and k.endswith("kernel"))
    np.testing.assert_allclose(head.T @ head, 1e-4 * np.eye(head.shape[1]), atol=1e-9)
    np.testing.assert_allclose(value.T @ value, [[1.0]], rtol=1e-5)
    default = next(v for k, v in _appo(None).get_weights().items() if "action-adapter" in k and k.endswith("kernel"))
    assert np.abs(default).max() > 20 * np.abs(head).max()


@pytest.mark.parametrize("policy_spec", [{"value_network": []}, {"value_kernel_initializer": [1, 2]}, "orthogonal"])
def test_a_bad_policy_spec_is_refused_naming_the_key(policy_spec):
    with pytest.raises(RLGraphSpecError, match="policy_spec"):
        _appo(policy_spec)


@pytest.mark.parametrize("config", ["appo_pong_42", "impala_pong_42"])
def test_the_shipped_pong_configs_start_from_a_uniform_policy(config):
    """What made APPO lag the single-file PPO on Pong: Glorot-initialized heads gave a first
    policy far from uniform that differed at random between states. The shipped Pong configs carry PPO's
    initialization; their first policy must be near uniform over Pong's 6 actions on any frames."""
    import gymnasium as gym

    from rlgraph.agents import Agent
    with open(os.path.join(CONFIGS, f"{config}.json")) as f:
        spec = json.load(f)
    spec = {k: v for k, v in spec.items() if k not in ("environment_spec", "execution_spec", "train_spec",
                                                        "description")}
    state_space = gym.spaces.Box(0, 255, (4, 42, 42), np.uint8)
    agent = Agent.from_spec(spec, state_space=state_space, action_space=gym.spaces.Discrete(6), backend="pytorch")
    frames = np.random.default_rng(0).integers(0, 256, (16, 4, 42, 42), dtype=np.uint8)
    _, extras = agent.get_actions(frames, return_extras=True)
    np.testing.assert_allclose(extras["log_probs"], -np.log(6.0), atol=0.02)
