"""RL maths helpers (returns, n-step returns, GAE, V-trace, value rescaling, sequence helper).

Each component is checked against an independent numpy reference written here from the paper's formula
(direct sums, not the recursions the components use), on both backends, and the backends against each
other. Unrolls have terminals inside them.
"""
import numpy as np
import pytest

from rlgraph.components.helpers import (DiscountedReturns, GeneralizedAdvantageEstimation, NStepReturns, SequenceHelper,
                                        VTraceFunction, ValueFunctionRescaling)
from rlgraph.spaces import BoolBox, FloatBox
from rlgraph.tests import ComponentTest, run_on_backends
from rlgraph.utils.errors import RLGraphSpaceError, RLGraphSpecError

#: Component/foundation tests: their ``backend`` parametrization includes JAX (rlgraph.tests.pytest_plugin).
pytestmark = pytest.mark.all_backends

T, B = 7, 4
SEQ = FloatBox(add_batch_rank=True, add_time_rank=True, time_major=True)
FLAGS = BoolBox(add_batch_rank=True, add_time_rank=True, time_major=True)
SEQ_BM = FloatBox(add_batch_rank=True, add_time_rank=True)
FLAGS_BM = BoolBox(add_batch_rank=True, add_time_rank=True)
BATCH = FloatBox(add_batch_rank=True)


def make_unroll(seed=0, p_terminal=0.25):
    """Random time-major rewards, terminals (some inside the unroll, one column without), values, bootstrap."""
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=(T, B)).astype(np.float32)
    terminals = rng.random((T, B)) < p_terminal
    terminals[2, 0] = True
    terminals[:, 1] = False
    values = rng.normal(size=(T, B)).astype(np.float32)
    bootstrap = rng.normal(size=(B,)).astype(np.float32)
    return rewards, terminals, values, bootstrap


# --- numpy references (direct sums over the future of each step) --------------------------------------------
def np_discounted_returns(rewards, terminals, bootstrap, gamma):
    out = np.zeros_like(rewards, dtype=np.float64)
    for b in range(rewards.shape[1]):
        for t in range(rewards.shape[0]):
            total, scale, ended = 0.0, 1.0, False
            for k in range(t, rewards.shape[0]):
                total += scale * rewards[k, b]
                if terminals[k, b]:
                    ended = True
                    break
                scale *= gamma
            out[t, b] = total if ended else total + scale * bootstrap[b]
    return out


def np_n_step_returns(rewards, terminals, values, bootstrap, n, gamma):
    length = rewards.shape[0]
    out = np.zeros_like(rewards, dtype=np.float64)
    for b in range(rewards.shape[1]):
        for t in range(length):
            m = min(n, length - t)
            total, ended = 0.0, False
            for k in range(m):
                total += gamma ** k * rewards[t + k, b]
                if terminals[t + k, b]:
                    ended = True
                    break
            if not ended:
                total += gamma ** m * (values[t + m, b] if t + m < length else bootstrap[b])
            out[t, b] = total
    return out


def np_gae(rewards, terminals, values, bootstrap, gamma, lam):
    """Schulman et al. 2016, eq. 16: A_t = sum_l (gamma lambda)^l delta_{t+l}, cut at episode ends."""
    length = rewards.shape[0]
    next_values = np.concatenate([values[1:], bootstrap[None]], 0)
    deltas = rewards + gamma * (1.0 - terminals) * next_values - values
    adv = np.zeros_like(rewards, dtype=np.float64)
    for b in range(rewards.shape[1]):
        for t in range(length):
            for k in range(t, length):
                adv[t, b] += (gamma * lam) ** (k - t) * deltas[k, b]
                if terminals[k, b]:
                    break
    return adv, adv + values


def np_v_trace(log_target, log_behaviour, discounts, rewards, values, bootstrap, rho_bar=1.0, rho_bar_pg=1.0,
               c_bar=1.0, lam=1.0):
    """Espeholt et al. 2018, eq. 1: v_s = V(x_s) + sum_{t>=s} (prod_{i=s}^{t-1} gamma_i c_i) delta_t."""
    rhos = np.exp(log_target.astype(np.float64) - log_behaviour)
    clip = lambda x, bar: x if bar is None else np.minimum(bar, x)  # noqa: E731
    values_ext = np.concatenate([values, bootstrap[None]], 0).astype(np.float64)
    length = rewards.shape[0]
    deltas = clip(rhos, rho_bar) * (rewards + discounts * values_ext[1:] - values_ext[:-1])
    cs = lam * clip(rhos, c_bar)
    vs = np.array(values_ext[:-1])
    for s in range(length):
        for t in range(s, length):
            vs[s] += np.prod(discounts[s:t] * cs[s:t], axis=0) * deltas[t]
    vs_ext = np.concatenate([vs, bootstrap[None]], 0)
    pg_advantages = clip(rhos, rho_bar_pg) * (rewards + discounts * vs_ext[1:] - values_ext[:-1])
    return vs, pg_advantages


def np_rescale(x, eps):
    return np.sign(x) * (np.sqrt(np.abs(x) + 1.0) - 1.0) + eps * x


def np_inverse_rescale(x, eps):
    """Pohlen et al. 2018, Proposition A.2 (closed form)."""
    return np.sign(x) * (((np.sqrt(1.0 + 4.0 * eps * (np.abs(x) + 1.0 + eps)) - 1.0) / (2.0 * eps)) ** 2 - 1.0)


# --- discounted returns -----------------------------------------------------------------------------------
def test_discounted_returns_match_numpy(backend):
    rewards, terminals, _, bootstrap = make_unroll(1)
    test = ComponentTest(DiscountedReturns(discount=0.9), dict(rewards=SEQ, terminals=FLAGS, bootstrap_values=BATCH),
                         backend=backend)
    expected = np_discounted_returns(rewards, terminals, bootstrap, 0.9)
    test.test(("calc_discounted_returns", [rewards, terminals, bootstrap]), expected_outputs=expected, decimals=5)


def test_discounted_returns_batch_major(backend):
    rewards, terminals, _, bootstrap = make_unroll(2)
    test = ComponentTest(DiscountedReturns(discount=0.95, time_major=False),
                         dict(rewards=SEQ_BM, terminals=FLAGS_BM, bootstrap_values=BATCH), backend=backend)
    expected = np_discounted_returns(rewards, terminals, bootstrap, 0.95).T
    test.test(("calc_discounted_returns", [rewards.T.copy(), terminals.T.copy(), bootstrap]),
              expected_outputs=expected, decimals=5)


def test_discounted_returns_reject_a_batch_only_input(backend):
    with pytest.raises(RLGraphSpaceError, match="rewards"):
        ComponentTest(DiscountedReturns(), dict(rewards=BATCH, terminals=FLAGS, bootstrap_values=BATCH),
                      backend=backend)


# --- n-step returns -------------------------------------------------------------------------------------
@pytest.mark.parametrize("n_step", [1, 3])
def test_n_step_returns_match_numpy(backend, n_step):
    rewards, terminals, values, bootstrap = make_unroll(3)
    test = ComponentTest(NStepReturns(n_step=n_step, discount=0.8),
                         dict(rewards=SEQ, terminals=FLAGS, values=SEQ, bootstrap_values=BATCH), backend=backend)
    expected = np_n_step_returns(rewards, terminals, values, bootstrap, n_step, 0.8)
    test.test(("calc_n_step_returns", [rewards, terminals, values, bootstrap]), expected_outputs=expected, decimals=5)


def test_n_step_returns_without_bootstrap_batch_major(backend):
    rewards, terminals, values, _ = make_unroll(4)
    test = ComponentTest(NStepReturns(n_step=2, discount=0.9, time_major=False),
                         dict(rewards=SEQ_BM, terminals=FLAGS_BM, values=SEQ_BM), backend=backend)
    expected = np_n_step_returns(rewards, terminals, values, np.zeros(B), 2, 0.9).T
    test.test(("calc_n_step_returns", [rewards.T.copy(), terminals.T.copy(), values.T.copy()]),
              expected_outputs=expected, decimals=5)


def test_n_step_returns_reject_bad_n():
    with pytest.raises(RLGraphSpecError, match="n_step"):
        NStepReturns(n_step=0)


# --- GAE ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("lam", [0.0, 0.95, 1.0])
def test_gae_matches_numpy(backend, lam):
    rewards, terminals, values, bootstrap = make_unroll(5)
    test = ComponentTest(GeneralizedAdvantageEstimation(discount=0.97, gae_lambda=lam),
                         dict(rewards=SEQ, terminals=FLAGS, values=SEQ, bootstrap_values=BATCH), backend=backend)
    expected = np_gae(rewards, terminals, values, bootstrap, 0.97, lam)
    test.test(("calc_advantages", [rewards, terminals, values, bootstrap]), expected_outputs=expected, decimals=5)


def test_gae_with_lambda_one_is_returns_minus_values():
    rewards, terminals, values, bootstrap = make_unroll(6)
    test = ComponentTest(GeneralizedAdvantageEstimation(discount=0.9, gae_lambda=1.0),
                         dict(rewards=SEQ, terminals=FLAGS, values=SEQ, bootstrap_values=BATCH), backend="pytorch")
    advantages, targets = test.test(("calc_advantages", [rewards, terminals, values, bootstrap]))
    np.testing.assert_allclose(targets, np_discounted_returns(rewards, terminals, bootstrap, 0.9), atol=1e-5)


# --- V-trace -------------------------------------------------------------------------------------------
V_TRACE_SPACES = dict(log_probs_target=SEQ, log_probs_behaviour=SEQ, discounts=SEQ, rewards=SEQ, values=SEQ,
                      bootstrap_values=BATCH)


def v_trace_inputs(seed=7, gamma=0.9):
    rewards, terminals, values, bootstrap = make_unroll(seed)
    rng = np.random.default_rng(seed + 100)
    # Log-ratios spread over [-1.5, 1.5]: many rhos above 1 (clipped) and below.
    log_behaviour = rng.normal(size=(T, B)).astype(np.float32)
    log_target = (log_behaviour + rng.uniform(-1.5, 1.5, size=(T, B))).astype(np.float32)
    discounts = (gamma * (1.0 - terminals)).astype(np.float32)
    return [log_target, log_behaviour, discounts, rewards, values, bootstrap]


@pytest.mark.parametrize("params", [dict(), dict(rho_bar=1.5, rho_bar_pg=0.8, c_bar=0.7, lambda_=0.9),
                                    dict(rho_bar=None, rho_bar_pg=None, c_bar=None)])
def test_v_trace_matches_eq_1(backend, params):
    args = v_trace_inputs()
    rhos = np.exp(args[0] - args[1])
    assert (rhos > 1.0).mean() > 0.2 and (rhos < 1.0).mean() > 0.2, "clipping must be active in this test"
    test = ComponentTest(VTraceFunction(**params), V_TRACE_SPACES, backend=backend)
    ref_params = {{"lambda_": "lam"}.get(k, k): v for k, v in params.items()}
    expected = np_v_trace(*args, **ref_params)
    test.test(("calc_v_trace_values", args), expected_outputs=expected, decimals=4)


def test_v_trace_on_policy_equals_n_step_bellman_targets():
    """Paper, Remark 1: with pi = mu (and c_bar >= 1), vs are the discounted returns bootstrapped by V(x_T)."""
    args = v_trace_inputs(8)
    args[1] = args[0].copy()
    rewards, discounts, bootstrap = args[3], args[2], args[5]
    test = ComponentTest(VTraceFunction(), V_TRACE_SPACES, backend="tf")
    vs, _ = test.test(("calc_v_trace_values", args))
    np.testing.assert_allclose(vs, np_discounted_returns(rewards, discounts == 0.0, bootstrap, 0.9), atol=1e-5)


def test_v_trace_batch_major(backend):
    args = v_trace_inputs(9)
    spaces = {k: (SEQ_BM if v is SEQ else v) for k, v in V_TRACE_SPACES.items()}
    test = ComponentTest(VTraceFunction(c_bar=0.8, time_major=False), spaces, backend=backend)
    expected = [x.T for x in np_v_trace(*args, c_bar=0.8)]
    test.test(("calc_v_trace_values", [a.T.copy() if a.ndim == 2 else a for a in args]), expected_outputs=expected,
              decimals=4)


def test_v_trace_backends_agree():
    run_on_backends(lambda: VTraceFunction(rho_bar=1.2, c_bar=0.9), V_TRACE_SPACES,
                    [("calc_v_trace_values", v_trace_inputs(10)), ("calc_v_trace_values", v_trace_inputs(11))])


def test_v_trace_rejects_bad_threshold():
    with pytest.raises(RLGraphSpecError, match="rho_bar"):
        VTraceFunction(rho_bar=-1.0)


# --- value rescaling ------------------------------------------------------------------------------------
WIDE = np.concatenate([-np.logspace(-6, 6, 60), [0.0], np.logspace(-6, 6, 60)]).astype(np.float32)


@pytest.mark.parametrize("epsilon", [1e-3, 1e-2, 0.0])
def test_value_rescaling_matches_formula_and_inverts(backend, epsilon):
    test = ComponentTest(ValueFunctionRescaling(epsilon=epsilon), dict(x=FloatBox(add_batch_rank=True)),
                         backend=backend)
    x = WIDE
    h = test.test(("rescale", [x]))
    np.testing.assert_allclose(h, np_rescale(x.astype(np.float64), epsilon), rtol=1e-5, atol=1e-7)
    back = test.test(("inverse_rescale", [h]))
    np.testing.assert_allclose(back, x, rtol=1e-4, atol=1e-6)
    if epsilon > 0:
        # The inverse against the paper's closed form, on values h(x) computed in float64.
        hx = np_rescale(x.astype(np.float64), epsilon)
        inv = test.test(("inverse_rescale", [hx.astype(np.float32)]))
        np.testing.assert_allclose(inv, np_inverse_rescale(hx.astype(np.float32).astype(np.float64), epsilon),
                                   rtol=1e-4, atol=1e-5)


def test_value_rescaling_backends_agree():
    spaces = dict(x=FloatBox(shape=(3,), add_batch_rank=True, add_time_rank=True))
    x = WIDE[:120].reshape(8, 5, 3)
    run_on_backends(lambda: ValueFunctionRescaling(), spaces, [("rescale", [x]), ("inverse_rescale", [x / 1e3])],
                    decimals=3)


# --- sequence helper ------------------------------------------------------------------------------------
HELPER_SPACES = dict(terminals=FLAGS, values=SEQ, discounts=SEQ, bootstrap_values=BATCH)


def test_sequence_helper(backend):
    rewards, terminals, values, bootstrap = make_unroll(12)
    test = ComponentTest(SequenceHelper(), HELPER_SPACES, backend=backend)
    segment_ids = np.zeros((T, B), np.int64)
    for b in range(B):
        episode = 0
        for t in range(T):
            segment_ids[t, b] = episode
            episode += int(terminals[t, b])
    test.test(("calc_segment_ids", [terminals]), expected_outputs=segment_ids)
    test.test(("calc_discounts", [terminals, 0.9]), expected_outputs=0.9 * (1.0 - terminals))
    test.test(("calc_next_values", [values, bootstrap]),
              expected_outputs=np.concatenate([values[1:], bootstrap[None]], 0))
    discounts = (0.9 * (1.0 - terminals)).astype(np.float32)
    test.test(("reverse_discounted_cumsum", [rewards, discounts, bootstrap]),
              expected_outputs=np_discounted_returns(rewards, terminals, bootstrap, 0.9), decimals=5)


def test_sequence_helper_batch_major(backend):
    rewards, terminals, values, bootstrap = make_unroll(13)
    spaces = dict(terminals=FLAGS_BM, values=SEQ_BM, discounts=SEQ_BM, bootstrap_values=BATCH)
    test = ComponentTest(SequenceHelper(time_major=False), spaces, backend=backend)
    ids = test.test(("calc_segment_ids", [terminals.T.copy()]))
    np.testing.assert_array_equal(ids.T, np.cumsum(terminals, axis=0) - terminals)
    test.test(("calc_next_values", [values.T.copy(), bootstrap]),
              expected_outputs=np.concatenate([values[1:], bootstrap[None]], 0).T)
    discounts = (0.8 * (1.0 - terminals)).astype(np.float32)
    test.test(("reverse_discounted_cumsum", [rewards.T.copy(), discounts.T.copy(), bootstrap]),
              expected_outputs=np_discounted_returns(rewards, terminals, bootstrap, 0.8).T, decimals=5)


def test_returns_backends_agree():
    rewards, terminals, values, bootstrap = make_unroll(14)
    run_on_backends(lambda: DiscountedReturns(0.99), dict(rewards=SEQ, terminals=FLAGS, bootstrap_values=BATCH),
                    [("calc_discounted_returns", [rewards, terminals, bootstrap])])
    spaces = dict(rewards=SEQ, terminals=FLAGS, values=SEQ, bootstrap_values=BATCH)
    run_on_backends(lambda: NStepReturns(4, 0.99), spaces, [("calc_n_step_returns", [rewards, terminals, values,
                                                                                       bootstrap])])
    run_on_backends(lambda: GeneralizedAdvantageEstimation(0.99, 0.9), spaces,
                    [("calc_advantages", [rewards, terminals, values, bootstrap])])


def np_reverse_cumsum(x, d, bootstrap):
    """``y_t = x_t + d_t y_{t+1}``, ``y_T = bootstrap``: the recursion itself, in float64."""
    out, acc = np.zeros(x.shape), np.asarray(bootstrap, np.float64)
    for t in range(x.shape[0] - 1, -1, -1):
        acc = out[t] = x[t] + d[t] * acc
    return out


@pytest.mark.parametrize("length", [1, 2, 5, 16, 17, 32, 33, 100])
def test_reverse_discounted_cumsum_any_length(backend, length):
    # Both the step-by-step path (short sequences on PyTorch) and the doubling scan, with episode ends, discounts
    # of varying size, with and without bootstrap values, time- and batch-major.
    rng = np.random.default_rng(length)
    x = rng.normal(size=(length, 5)).astype(np.float32)
    d = (rng.uniform(0.5, 1.0, size=(length, 5)) * (rng.random((length, 5)) > 0.1)).astype(np.float32)
    bootstrap = rng.normal(size=5).astype(np.float32)
    test = ComponentTest(SequenceHelper(), HELPER_SPACES, backend=backend)
    expected = np_reverse_cumsum(x, d, bootstrap)
    np.testing.assert_allclose(test.test(("reverse_discounted_cumsum", [x, d, bootstrap])), expected, rtol=1e-5,
                               atol=1e-5)
    test = ComponentTest(SequenceHelper(), dict(values=SEQ, discounts=SEQ), backend=backend,
                         api_methods=["reverse_discounted_cumsum"])
    np.testing.assert_allclose(test.test(("reverse_discounted_cumsum", [x, d])), np_reverse_cumsum(x, d, 0.0),
                               rtol=1e-5, atol=1e-5)
    spaces = dict(values=SEQ_BM, discounts=SEQ_BM, bootstrap_values=BATCH)
    test = ComponentTest(SequenceHelper(time_major=False), spaces, backend=backend,
                         api_methods=["reverse_discounted_cumsum"])
    out = test.test(("reverse_discounted_cumsum", [x.T.copy(), d.T.copy(), bootstrap]))
    np.testing.assert_allclose(out.T, expected, rtol=1e-5, atol=1e-5)


def test_reverse_discounted_cumsum_gradients(backend):
    # dy_t/dx_s = prod_{i=t}^{s-1} d_i (s >= t): the scan stays differentiable (GAE's users may backpropagate).
    from rlgraph.utils.backend import tf, torch
    rng = np.random.default_rng(3)
    length = 40
    x = rng.normal(size=(length, 2)).astype(np.float32)
    d = (rng.uniform(0.8, 1.0, size=(length, 2)) * (rng.random((length, 2)) > 0.1)).astype(np.float32)
    weights = rng.normal(size=(length, 2))
    expected = np.zeros((length, 2))
    for s in range(length):
        for t in range(s + 1):
            expected[s] += weights[t] * np.prod(d[t:s].astype(np.float64), axis=0)
    helper = ComponentTest(SequenceHelper(), HELPER_SPACES, backend=backend).component
    if backend == "tf":
        xt = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(xt)
            loss = tf.reduce_sum(helper.reverse_discounted_cumsum(xt, tf.constant(d)) * weights.astype(np.float32))
        grad = tape.gradient(loss, xt).numpy()
    elif backend == "jax":
        from rlgraph.utils.backend import jax

        def loss(xt):
            return (helper.reverse_discounted_cumsum(xt, jax.numpy.asarray(d)) * weights.astype(np.float32)).sum()
        grad = np.asarray(jax.grad(loss)(jax.numpy.asarray(x)))
    else:
        xt = torch.from_numpy(x).requires_grad_(True)
        loss = (helper.reverse_discounted_cumsum(xt, torch.from_numpy(d)) * torch.from_numpy(weights).float()).sum()
        grad, = torch.autograd.grad(loss, xt)
        grad = grad.numpy()
    np.testing.assert_allclose(grad, expected, rtol=1e-4, atol=1e-5)
