"""Policies and dueling policies against numpy forward passes, on both backends; containers, recurrence, errors."""
import json

import numpy as np
import pytest

from rlgraph.components.action_adapters import ActionAdapter
from rlgraph.components.policies import DuelingPolicy, Policy
from rlgraph.spaces import BoolBox, Dict, FloatBox, IntBox, Tuple
from rlgraph.tests import ComponentTest, run_on_backends
from rlgraph.utils.errors import RLGraphAPIError, RLGraphSpaceError, RLGraphSpecError

#: Component/foundation tests: their ``backend`` parametrization includes JAX (rlgraph.tests.pytest_plugin).
pytestmark = pytest.mark.all_backends

NET = [{"type": "dense", "units": 8, "activation": "tanh"}]
STATES = FloatBox(shape=(5,), add_batch_rank=True)


# --- independent numpy references -------------------------------------------------------------------------
def np_log_softmax(logits):
    z = logits - logits.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def np_categorical_log_prob(logits, values):
    return np.take_along_axis(np_log_softmax(logits), values[..., None].astype(np.int64), axis=-1)[..., 0]


def np_categorical_entropy(logits):
    log_p = np_log_softmax(logits)
    return -(np.exp(log_p) * log_p).sum(-1)


def np_normal_log_density(x, mean, log_std):
    return -0.5 * ((x - mean) / np.exp(log_std)) ** 2 - log_std - 0.5 * np.log(2.0 * np.pi)


def np_normal_entropy(log_std):
    return 0.5 * np.log(2.0 * np.pi * np.e) + log_std


def randomize_weights(test, seed=0):
    """Sets every variable to random values (biases included) and returns {name relative to root: value}."""
    rng = np.random.default_rng(seed)
    weights = {k: (rng.normal(size=v.shape) * 0.7).astype(v.dtype) for k, v in test.executor.get_weights().items()}
    test.executor.set_weights(weights)
    root = test.component.global_scope + "/"
    return {k[len(root):]: v for k, v in weights.items()}


def dense(x, w, prefix, activation=None):
    out = x @ w[prefix + "/kernel"] + w[prefix + "/bias"]
    return np.tanh(out) if activation == "tanh" else np.maximum(out, 0) if activation == "relu" else out


def _states(n=6, seed=1):
    return np.random.default_rng(seed).normal(size=(n, 5)).astype(np.float32)


# --- Policy: primitive action spaces --------------------------------------------------------------------------
def test_policy_discrete_matches_numpy(backend):
    space = IntBox(3)
    test = ComponentTest(Policy(NET, space), dict(nn_inputs=STATES, actions=space.with_batch_rank()), backend=backend)
    w = randomize_weights(test)
    x = _states()
    hidden = dense(x, w, "neural-network/dense", "tanh")
    logits = dense(hidden, w, "action-adapter")
    out = test.test(("get_adapter_outputs", [x]))
    np.testing.assert_allclose(out["nn_outputs"], hidden, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["adapter_outputs"], logits, rtol=1e-5, atol=1e-5)
    greedy = test.test(("get_deterministic_action", [x]))
    np.testing.assert_array_equal(greedy["action"], logits.argmax(-1))
    np.testing.assert_allclose(greedy["log_likelihood"], np_categorical_log_prob(logits, logits.argmax(-1)), atol=1e-5)
    actions = np.array([0, 1, 2, 2, 1, 0], np.int32)
    out = test.test(("get_log_likelihood", [x, actions]))
    np.testing.assert_allclose(out["log_likelihood"], np_categorical_log_prob(logits, actions), atol=1e-5)
    np.testing.assert_allclose(out["log_prob"], np_categorical_log_prob(logits, actions), atol=1e-5)
    np.testing.assert_allclose(test.test(("get_entropy", [x]))["entropy"], np_categorical_entropy(logits), atol=1e-5)


def test_policy_continuous_matches_numpy(backend):
    space = FloatBox(shape=(2,))
    test = ComponentTest(Policy(NET, space), dict(nn_inputs=STATES, actions=space.with_batch_rank()), backend=backend)
    w = randomize_weights(test)
    x = _states()
    flat = dense(dense(x, w, "neural-network/dense", "tanh"), w, "action-adapter")
    mean, log_std = flat[:, :2], flat[:, 2:]
    out = test.test(("get_deterministic_action", [x]))
    np.testing.assert_allclose(out["action"], mean, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["adapter_outputs"][0], mean, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["adapter_outputs"][1], log_std, rtol=1e-5, atol=1e-5)
    actions = np.random.default_rng(2).normal(size=(6, 2)).astype(np.float32)
    out = test.test(("get_log_likelihood", [x, actions]))
    np.testing.assert_allclose(out["log_prob"], np_normal_log_density(actions, mean, log_std), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out["log_likelihood"], np_normal_log_density(actions, mean, log_std).sum(-1),
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(test.test(("get_entropy", [x]))["entropy"], np_normal_entropy(log_std).sum(-1),
                               rtol=1e-5, atol=1e-5)
    # Stochastic actions are scattered around the mean with the policy's std; their log-likelihood is reported.
    out = test.test(("get_action", [np.repeat(x[:1], 4000, axis=0)]))
    np.testing.assert_allclose(out["action"].mean(0), mean[0], atol=4 * np.exp(log_std[0]).max() / np.sqrt(4000))
    np.testing.assert_allclose(out["action"].std(0), np.exp(log_std[0]), rtol=0.06)
    np.testing.assert_allclose(out["log_likelihood"][:5],
                               np_normal_log_density(out["action"][:5], mean[:1], log_std[:1]).sum(-1), atol=1e-4)


def test_policy_stochastic_action_frequencies(backend):
    space = IntBox(3)
    test = ComponentTest(Policy(NET, space), dict(nn_inputs=STATES, actions=space.with_batch_rank()), backend=backend,
                         seed=7)
    w = randomize_weights(test, seed=3)
    x = np.repeat(_states(1), 6000, axis=0)
    logits = dense(dense(x[:1], w, "neural-network/dense", "tanh"), w, "action-adapter")
    out = test.test(("get_action", [x]))
    freq = np.bincount(out["action"], minlength=3) / len(x)
    np.testing.assert_allclose(freq, np.exp(np_log_softmax(logits[0])), atol=0.025)
    np.testing.assert_allclose(out["log_prob"], np_categorical_log_prob(np.repeat(logits, 6000, 0), out["action"]),
                               atol=1e-5)
    # Same API, deterministic flag set: the greedy action for every item.
    out = test.executor.execute("get_action", x[:4], deterministic=True)
    np.testing.assert_array_equal(out["action"], np.full(4, logits.argmax()))


# --- Policy: container action spaces --------------------------------------------------------------------------
CONTAINER = Dict(a=IntBox(3), nested=Tuple(FloatBox(shape=(2,)), IntBox(4, shape=(2,))))


def test_policy_container_actions_match_numpy(backend):
    test = ComponentTest(Policy(NET, CONTAINER), dict(nn_inputs=STATES, actions=CONTAINER.with_batch_rank()),
                         backend=backend)
    w = randomize_weights(test)
    x = _states()
    hidden = dense(x, w, "neural-network/dense", "tanh")
    logits_a = dense(hidden, w, "action-adapter-a")
    gauss = dense(hidden, w, "action-adapter-nested-0")
    logits_c = dense(hidden, w, "action-adapter-nested-1").reshape(6, 2, 4)
    actions = CONTAINER.with_batch_rank().sample(6)
    out = test.test(("get_log_likelihood", [x, actions]))
    lp_a = np_categorical_log_prob(logits_a, actions["a"])
    lp_b = np_normal_log_density(actions["nested"][0], gauss[:, :2], gauss[:, 2:])
    lp_c = np_categorical_log_prob(logits_c, actions["nested"][1])
    np.testing.assert_allclose(out["log_prob"]["a"], lp_a, atol=1e-5)
    np.testing.assert_allclose(out["log_prob"]["nested"][0], lp_b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out["log_prob"]["nested"][1], lp_c, atol=1e-5)
    np.testing.assert_allclose(out["log_likelihood"], lp_a + lp_b.sum(-1) + lp_c.sum(-1), rtol=1e-4, atol=1e-4)
    entropy = np_categorical_entropy(logits_a) + np_normal_entropy(gauss[:, 2:]).sum(-1) + \
        np_categorical_entropy(logits_c).sum(-1)
    np.testing.assert_allclose(test.test(("get_entropy", [x]))["entropy"], entropy, rtol=1e-5, atol=1e-5)
    greedy = test.test(("get_deterministic_action", [x]))
    np.testing.assert_array_equal(greedy["action"]["a"], logits_a.argmax(-1))
    np.testing.assert_allclose(greedy["action"]["nested"][0], gauss[:, :2], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(greedy["action"]["nested"][1], logits_c.argmax(-1))
    # Sampled actions lie in the action space, and their reported log-likelihood is theirs.
    sampled = test.test(("get_action", [x]))
    assert CONTAINER.with_batch_rank().contains(sampled["action"])
    again = test.test(("get_log_likelihood", [x, sampled["action"]]))
    np.testing.assert_allclose(again["log_likelihood"], sampled["log_likelihood"], rtol=1e-5, atol=1e-5)


# --- Policy: action space from the build, specs -----------------------------------------------------------------
def test_policy_action_space_from_build(backend):
    test = ComponentTest(Policy(NET), dict(nn_inputs=STATES, actions=IntBox(4, add_batch_rank=True)),
                         action_space=IntBox(4), backend=backend)
    w = randomize_weights(test)
    x = _states()
    logits = dense(dense(x, w, "neural-network/dense", "tanh"), w, "action-adapter")
    np.testing.assert_array_equal(test.test(("get_deterministic_action", [x]))["action"], logits.argmax(-1))
    space = FloatBox(shape=(3,))
    test = ComponentTest(Policy(NET, distribution_spec="normal"),
                         dict(nn_inputs=STATES, actions=space.with_batch_rank()), action_space=space, backend=backend)
    assert test.test(("get_action", [x]))["action"].shape == (6, 3)


def test_policy_from_spec(tmp_path):
    policy = Policy.from_spec({"type": "policy", "network_spec": NET, "action_space": {"type": "int-box", "high": 3}})
    assert type(policy) is Policy and policy.action_space == IntBox(3)
    dueling = Policy.from_spec({"type": "Dueling_Policy", "network_spec": {"layers": NET}, "action_space": IntBox(2),
                                "units_state_value_stream": 4})
    assert isinstance(dueling, DuelingPolicy)
    path = tmp_path / "net.json"
    path.write_text(json.dumps(NET))
    policy = Policy(str(path), FloatBox(shape=(2,)), action_adapter_spec={"kernel_initializer": "zeros"})
    test = ComponentTest(policy, dict(nn_inputs=STATES, actions=FloatBox(shape=(2,), add_batch_rank=True)),
                         backend="pytorch")
    # Zero kernel and bias: mean 0, log_std 0 for every input.
    np.testing.assert_array_equal(test.test(("get_deterministic_action", [_states()]))["action"], np.zeros((6, 2)))
    assert isinstance(ActionAdapter.from_spec({"type": "action-adapter", "action_space": IntBox(3)}), ActionAdapter)


def test_policy_errors():
    spaces = dict(nn_inputs=STATES, actions=IntBox(3, add_batch_rank=True))
    with pytest.raises(RLGraphSpaceError, match="no action space"):
        ComponentTest(Policy(NET), spaces, backend="pytorch")
    with pytest.raises(RLGraphSpaceError, match="container action space"):
        ComponentTest(Policy(NET), dict(nn_inputs=STATES, actions=CONTAINER.with_batch_rank()),
                      action_space=CONTAINER, backend="pytorch")
    with pytest.raises(RLGraphSpaceError, match="distribution_spec"):
        ComponentTest(Policy(NET), dict(nn_inputs=STATES, actions=FloatBox(shape=(2,), add_batch_rank=True)),
                      action_space=FloatBox(shape=(2,)), backend="pytorch")
    with pytest.raises(RLGraphSpaceError, match="'actions'"):
        ComponentTest(Policy(NET, IntBox(3)), dict(nn_inputs=STATES, actions=FloatBox(add_batch_rank=True)),
                      backend="pytorch")
    with pytest.raises(RLGraphSpaceError, match="key 'b'"):
        Policy(NET, Dict(a=IntBox(2), b=BoolBox()))
    with pytest.raises(RLGraphSpaceError, match="start at 0"):
        Policy(NET, IntBox(1, 4))
    with pytest.raises(RLGraphSpecError, match="network_spec"):
        Policy(42, IntBox(3))
    with pytest.raises(RLGraphSpecError, match="distribution_spec"):
        Policy(NET, CONTAINER, distribution_spec="normal")
    with pytest.raises(RLGraphAPIError, match="not recurrent"):
        ComponentTest(Policy(NET, IntBox(3)), dict(spaces, internal_states=STATES), backend="pytorch")


def test_policies_backends_agree():
    x = _states()
    actions = CONTAINER.with_batch_rank().sample(6)
    run_on_backends(lambda: Policy(NET, CONTAINER), dict(nn_inputs=STATES, actions=CONTAINER.with_batch_rank()),
                    [("get_deterministic_action", [x]), ("get_log_likelihood", [x, actions]), ("get_entropy", [x]),
                     ("get_adapter_outputs", [x])])
    run_on_backends(lambda: DuelingPolicy(NET, IntBox(3), units_state_value_stream=4, units_advantage_stream=4),
                    dict(nn_inputs=STATES, actions=IntBox(3, add_batch_rank=True)),
                    [("get_q_values", [x]), ("get_action", [x]), ("get_state_values", [x])])


# --- DuelingPolicy ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(), (2,)])
def test_dueling_policy_matches_numpy(backend, shape):
    space = IntBox(3, shape=shape)
    policy = DuelingPolicy(NET, space, units_state_value_stream=4, units_advantage_stream=5)
    test = ComponentTest(policy, dict(nn_inputs=STATES, actions=space.with_batch_rank()), backend=backend)
    w = randomize_weights(test)
    x = _states()
    hidden = dense(x, w, "neural-network/dense", "tanh")
    v = dense(dense(hidden, w, "state-value-hidden", "relu"), w, "state-value")  # [B, 1]
    a = dense(dense(hidden, w, "advantage-hidden", "relu"), w, "action-adapter").reshape((6,) + shape + (3,))
    q = v.reshape((6,) + (1,) * (len(shape) + 1)) + a - a.mean(-1, keepdims=True)
    out = test.test(("get_q_values", [x]))
    np.testing.assert_allclose(out["q_values"], q, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["state_values"], v[:, 0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["advantages"], a, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(test.test(("get_state_values", [x]))["state_values"], v[:, 0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(test.test(("get_advantages", [x]))["advantages"], a, rtol=1e-5, atol=1e-5)
    greedy = test.test(("get_action", [x]))  # Greedy by default.
    np.testing.assert_array_equal(greedy["action"], q.argmax(-1))
    np.testing.assert_allclose(greedy["q_values"], q, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(greedy["log_prob"], np_categorical_log_prob(q, q.argmax(-1)), atol=1e-5)
    boltzmann = test.executor.execute("get_action", x, deterministic=False)
    assert space.with_batch_rank().contains(boltzmann["action"])


def test_dueling_policy_rejects_continuous_actions():
    with pytest.raises(RLGraphSpaceError, match="IntBox"):
        DuelingPolicy(NET, FloatBox(shape=(2,)))
    with pytest.raises(RLGraphSpecError, match="units_state_value_stream"):
        DuelingPolicy(NET, IntBox(2), units_state_value_stream=0)
    with pytest.raises(RLGraphSpaceError, match="IntBox"):
        ComponentTest(DuelingPolicy(NET), dict(nn_inputs=STATES, actions=FloatBox(shape=(2,), add_batch_rank=True)),
                      action_space=FloatBox(shape=(2,)), backend="pytorch")


# --- recurrent policies ----------------------------------------------------------------------------------------
RNN = [{"type": "dense", "units": 6, "activation": "tanh"}, {"type": "lstm", "units": 4}]
SEQUENCES = FloatBox(shape=(5,), add_batch_rank=True, add_time_rank=True)
LSTM_STATE = Tuple(FloatBox(shape=(4,)), FloatBox(shape=(4,)), add_batch_rank=True)


def test_recurrent_policy_carries_internal_states(backend):
    space = IntBox(3)
    spaces = dict(nn_inputs=SEQUENCES, actions=space.with_batch_rank().with_time_rank(), internal_states=LSTM_STATE)
    test = ComponentTest(Policy(RNN, space), spaces, backend=backend)
    x = np.random.default_rng(4).normal(size=(2, 3, 5)).astype(np.float32)  # [B, T, in]
    zeros = (np.zeros((2, 4), np.float32), np.zeros((2, 4), np.float32))
    whole = test.test(("get_adapter_outputs", [x, zeros]))
    assert whole["adapter_outputs"].shape == (2, 3, 3)
    # Step by step, passing the internal states on, gives the same outputs as the whole sequence.
    state = zeros
    for t in range(3):
        step = test.test(("get_adapter_outputs", [x[:, t:t + 1], state]))
        np.testing.assert_allclose(step["adapter_outputs"][:, 0], whole["adapter_outputs"][:, t], rtol=1e-5, atol=1e-5)
        state = step["internal_states"]
    np.testing.assert_allclose(state[0], whole["internal_states"][0], rtol=1e-5, atol=1e-5)
    acted = test.test(("get_deterministic_action", [x, zeros]))
    np.testing.assert_array_equal(acted["action"], whole["adapter_outputs"].argmax(-1))
    logits = whole["adapter_outputs"]
    out = test.test(("get_log_likelihood", [x, acted["action"], zeros]))
    np.testing.assert_allclose(out["log_likelihood"], np_categorical_log_prob(logits, acted["action"]), atol=1e-5)
    np.testing.assert_allclose(test.test(("get_entropy", [x, zeros]))["entropy"], np_categorical_entropy(logits),
                               atol=1e-5)


def test_recurrent_policy_starts_from_zero_state_and_backends_agree():
    spaces = dict(nn_inputs=SEQUENCES, actions=IntBox(3, add_batch_rank=True, add_time_rank=True))
    x = np.random.default_rng(5).normal(size=(2, 3, 5)).astype(np.float32)
    results = run_on_backends(lambda: DuelingPolicy(RNN, IntBox(3)), spaces,
                              [("get_q_values", [x]), ("get_action", [x])])
    with_state = ComponentTest(DuelingPolicy(RNN, IntBox(3)), dict(spaces, internal_states=LSTM_STATE),
                               backend="pytorch")
    zeros = (np.zeros((2, 4), np.float32), np.zeros((2, 4), np.float32))
    np.testing.assert_allclose(with_state.test(("get_q_values", [x, zeros]))["q_values"],
                               results["pytorch"][0]["q_values"], rtol=1e-5, atol=1e-6)
