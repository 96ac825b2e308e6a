"""Epsilon-greedy exploration and the Ape-X epsilons against numpy references, on both backends."""
import numpy as np
import pytest

from rlgraph.components.explorations import EpsilonExploration, Exploration, apex_epsilon
from rlgraph.spaces import Dict, FloatBox, IntBox
from rlgraph.tests import ComponentTest, run_on_backends
from rlgraph.utils.errors import RLGraphSpaceError, RLGraphSpecError

#: Component/foundation tests: their ``backend`` parametrization includes JAX (rlgraph.tests.pytest_plugin).
pytestmark = pytest.mark.all_backends

N = 5
ACTIONS = IntBox(N, add_batch_rank=True)
SPACES = dict(actions=ACTIONS, time_percentage=float, epsilon=FloatBox(add_batch_rank=True))


def np_linear(t, start, end):
    return start + (end - start) * np.clip(t, 0.0, 1.0)


def test_apex_epsilon_formula():
    n = 8
    expected = [0.4 ** (1 + 7 * i / (n - 1)) for i in range(n)]
    np.testing.assert_allclose([apex_epsilon(i, n) for i in range(n)], expected)
    np.testing.assert_allclose(apex_epsilon(np.arange(n), n), expected)
    assert apex_epsilon(0, 1) == pytest.approx(0.4)
    assert apex_epsilon(3, 4, base=0.5, alpha=2.0) == pytest.approx(0.5 ** 3)
    for bad in [(-1, 4), (4, 4), (1.5, 4)]:
        with pytest.raises(RLGraphSpecError, match="actor index"):
            apex_epsilon(*bad)
    with pytest.raises(RLGraphSpecError, match="num_actors"):
        apex_epsilon(0, 0)


def test_exploration_follows_schedule(backend):
    test = ComponentTest(Exploration(["linear", 1.0, 0.2]), SPACES, backend=backend, seed=3)
    greedy = np.full(8000, 2, np.int32)
    for t in (0.0, 0.5, 1.0, 1.5):
        eps = np_linear(t, 1.0, 0.2)
        test.test(("get_epsilon", [t]), expected_outputs=eps, decimals=6)
        out = test.test(("get_action", [greedy, t]))
        # A uniform random action hits the greedy one with probability 1/N.
        np.testing.assert_allclose((out != 2).mean(), eps * (N - 1) / N, atol=0.025)
        freq = np.bincount(out[out != 2], minlength=N) / max((out != 2).sum(), 1)
        np.testing.assert_allclose(np.delete(freq, 2), np.full(N - 1, 1.0 / (N - 1)), atol=0.03)


def test_exploration_with_per_item_epsilon(backend):
    test = ComponentTest(Exploration(0.0), SPACES, backend=backend, seed=4)
    greedy = np.arange(8000, dtype=np.int32) % N
    eps = np.where(np.arange(8000) < 4000, 0.0, 1.0).astype(np.float32)
    out = test.test(("get_action_with_epsilon", [greedy, eps]))
    np.testing.assert_array_equal(out[:4000], greedy[:4000])  # epsilon 0: exactly the greedy actions.
    np.testing.assert_allclose((out[4000:] != greedy[4000:]).mean(), (N - 1) / N, atol=0.03)
    # A constant epsilon of 0 never explores, whatever the time.
    np.testing.assert_array_equal(test.test(("get_action", [greedy, 0.7])), greedy)


def test_exploration_of_container_and_shaped_actions(backend):
    space = Dict(a=IntBox(3), b=IntBox(low=2, high=6, shape=(2,)))
    spaces = dict(actions=space.with_batch_rank(), time_percentage=float, epsilon=float)
    test = ComponentTest(Exploration(1.0, action_space=space), spaces, backend=backend, seed=5)
    greedy = {"a": np.zeros(6000, np.int32), "b": np.full((6000, 2), 2, np.int32)}
    out = test.test(("get_action_with_epsilon", [greedy, 1.0]))
    assert space.with_batch_rank().contains(out)
    np.testing.assert_allclose(np.bincount(out["a"], minlength=3) / 6000, np.full(3, 1 / 3), atol=0.025)
    np.testing.assert_allclose(np.bincount(out["b"].ravel(), minlength=6)[2:] / 12000, np.full(4, 0.25), atol=0.025)
    no_explore = test.test(("get_action_with_epsilon", [greedy, 0.0]))
    np.testing.assert_array_equal(no_explore["a"], greedy["a"])
    np.testing.assert_array_equal(no_explore["b"], greedy["b"])
    # Epsilon 0.5: an exploring item gets random values in every component (never only in some of them).
    out = test.test(("get_action_with_epsilon", [greedy, 0.5]))
    both_changed = (out["a"] != 0) & (out["b"] != 2).any(-1)
    np.testing.assert_allclose(both_changed.mean(), 0.5 * (2 / 3) * (15 / 16), atol=0.03)  # Independent: 0.16.
    untouched = (out["a"] == 0) & (out["b"] == 2).all(-1)
    np.testing.assert_allclose(untouched.mean(), 0.5 + 0.5 * (1 / 3) * (1 / 16), atol=0.03)


def test_epsilon_exploration_masks_batch_and_time(backend):
    sample = FloatBox(shape=(3,), add_batch_rank=True, add_time_rank=True)
    spaces = dict(sample=sample, time_percentage=float, epsilon=FloatBox(add_batch_rank=True))
    test = ComponentTest(EpsilonExploration(["linear", 0.0, 1.0]), spaces, backend=backend, seed=6)
    x = np.zeros((4000, 2, 3), np.float32)  # [B, T, 3]
    mask = test.test(("do_explore", [x, 0.25]))
    assert mask.shape == (4000, 2) and mask.dtype == bool
    np.testing.assert_allclose(mask.mean(), 0.25, atol=0.025)
    per_item = test.test(("explore_mask", [x, np.where(np.arange(4000) < 2000, 0.0, 1.0).astype(np.float32)]))
    assert not per_item[:2000].any() and per_item[2000:].all()
    test.test(("get_epsilon", [0.3]), expected_outputs=0.3, decimals=6)


def test_exploration_action_space_sources(backend):
    unbounded = dict(actions=IntBox(add_batch_rank=True), epsilon=float)  # time_percentage left at None.
    with pytest.raises(RLGraphSpaceError, match="no bounds"):
        ComponentTest(Exploration(1.0), unbounded, backend=backend)
    test = ComponentTest(Exploration(1.0), unbounded, action_space=IntBox(3), backend=backend)
    out = test.test(("get_action", [np.zeros(3000, np.int32)]))
    assert out.min() == 0 and out.max() == 2


def test_exploration_errors():
    with pytest.raises(RLGraphSpaceError, match="discrete"):
        ComponentTest(Exploration(0.1), dict(actions=FloatBox(add_batch_rank=True), time_percentage=float,
                                             epsilon=float), backend="pytorch")
    with pytest.raises(RLGraphSpaceError, match="discrete"):
        Exploration(0.1, action_space=FloatBox(shape=(2,)))
    with pytest.raises(RLGraphSpaceError, match="'actions'"):
        ComponentTest(Exploration(0.1, action_space=IntBox(3)), dict(actions=IntBox(3, shape=(2,), add_batch_rank=True),
                                                                     time_percentage=float, epsilon=float),
                      backend="pytorch")
    with pytest.raises(RLGraphSpaceError, match="batch rank"):
        ComponentTest(EpsilonExploration(0.1), dict(sample=FloatBox(shape=(2,)), time_percentage=float, epsilon=float),
                      backend="pytorch")
    with pytest.raises(RLGraphSpaceError, match="'epsilon'"):
        ComponentTest(EpsilonExploration(0.1), dict(sample=ACTIONS, time_percentage=float,
                                                    epsilon=FloatBox(shape=(2,), add_batch_rank=True)),
                      backend="pytorch")
    with pytest.raises(RLGraphSpecError):
        Exploration(["no-such-schedule", 1.0])


def test_exploration_from_spec():
    exploration = Exploration.from_spec({"type": "exploration", "epsilon_spec": ["linear", 1.0, 0.05],
                                         "action_space": {"type": "int-box", "high": 4}})
    assert exploration.action_space == IntBox(4)
    assert type(EpsilonExploration.from_spec({"epsilon_spec": apex_epsilon(2, 8)})) is EpsilonExploration


def test_exploration_backends_agree():
    greedy = np.arange(12, dtype=np.int32) % N
    run_on_backends(lambda: Exploration(["polynomial", 1.0, 0.1, 2.0]), SPACES,
                    [("get_epsilon", [0.3]), ("get_action_with_epsilon", [greedy, np.zeros(12, np.float32)])])


def test_scheduled_epsilon_draws_the_same_mask_as_a_given_one():
    # A schedule's epsilon (a scalar float32 tensor on PyTorch) is compared as is; a given per-item epsilon is
    # converted first: the same uniform draws and the same compare, so the same mask.
    sample = FloatBox(shape=(3,), add_batch_rank=True)
    spaces = dict(sample=sample, time_percentage=float, epsilon=FloatBox(add_batch_rank=True))
    test = ComponentTest(EpsilonExploration(["linear", 0.0, 1.0]), spaces, backend="pytorch", seed=9)
    x = np.zeros((4000, 3), np.float32)
    for t in (0.25, 0.7):
        state = test.executor.get_rng_state()
        mask = test.test(("do_explore", [x, t]))
        test.executor.set_rng_state(state)
        np.testing.assert_array_equal(mask, test.test(("explore_mask", [x, np.full(4000, t, np.float32)])))
        np.testing.assert_allclose(mask.mean(), t, atol=0.03)
