"""Loss functions (DQN, IMPALA, APPO, R2D2) against hand-computed values and numpy references on both backends.

The references are written here from the papers' formulas. Gradients are checked by calling the built
components' API methods eagerly (TF GradientTape / torch.autograd) to make sure targets are constants.
"""
import numpy as np
import pytest

from rlgraph import graph_fn, rlgraph_api
from rlgraph.components import Component
from rlgraph.components.loss_functions import (APPOLossFunction, DQNLossFunction, IMPALALossFunction, LossFunction,
                                               R2D2LossFunction)
from rlgraph.spaces import BoolBox, FloatBox, IntBox
from rlgraph.tests import ComponentTest, run_on_backends
from rlgraph.utils.backend import jax, tf, torch
from rlgraph.utils.errors import RLGraphAPIError, RLGraphBuildError, RLGraphRuntimeError, RLGraphSpaceError, \
    RLGraphSpecError

#: Component/foundation tests: their ``backend`` parametrization includes JAX (rlgraph.tests.pytest_plugin).
pytestmark = pytest.mark.all_backends

A = 3
BATCH = FloatBox(add_batch_rank=True)


def eager_gradient(backend, component, api, args, wrt):
    """d(first output of ``api``)/d(args[wrt]) by running the built component's API method eagerly."""
    if backend == "tf":
        tensors = [None if a is None else tf.constant(a) for a in args]
        with tf.GradientTape() as tape:
            tape.watch(tensors[wrt])
            out = getattr(component, api)(*tensors)
            out = out[0] if isinstance(out, tuple) else out
        grad = tape.gradient(out, tensors[wrt])
        return np.zeros(args[wrt].shape) if grad is None else grad.numpy()
    if backend == "jax":  # The API method as a function of args[wrt], differentiated by jax.grad.
        def first_output(x):
            tensors = [None if a is None else jax.numpy.asarray(a) for a in args]
            tensors[wrt] = x
            out = getattr(component, api)(*tensors)
            return out[0] if isinstance(out, tuple) else out
        return np.asarray(jax.grad(first_output)(jax.numpy.asarray(args[wrt])))
    tensors = [None if a is None else torch.from_numpy(np.array(a)) for a in args]
    tensors[wrt].requires_grad_(True)
    out = getattr(component, api)(*tensors)
    out = out[0] if isinstance(out, tuple) else out
    if not out.requires_grad:  # Nothing in the output depends on anything that requires a gradient.
        return np.zeros(args[wrt].shape)
    grad, = torch.autograd.grad(out, tensors[wrt], allow_unused=True)
    return np.zeros(args[wrt].shape) if grad is None else grad.numpy()


def np_huber(x, delta):
    return np.where(np.abs(x) <= delta, 0.5 * x ** 2, delta * (np.abs(x) - 0.5 * delta))


# --- DQN ------------------------------------------------------------------------------------------------
Q_SPACE = FloatBox(shape=(2,), add_batch_rank=True)
DQN_SPACES = dict(q_values_s=Q_SPACE, actions=IntBox(2, add_batch_rank=True), rewards=BATCH,
                  terminals=BoolBox(add_batch_rank=True), qt_values_sp=Q_SPACE, q_values_sp=Q_SPACE,
                  importance_weights=BATCH)
# Two transitions, worked out by hand below.
HAND = [np.array([[1.0, 2.0], [0.5, -1.0]], np.float32), np.array([1, 0], np.int32), np.array([1.0, -1.0], np.float32),
        np.array([False, True]), np.array([[3.0, 0.0], [2.0, 2.0]], np.float32),
        np.array([[0.0, 1.0], [5.0, 0.0]], np.float32), np.array([1.0, 0.5], np.float32)]


def test_dqn_loss_hand_computed(backend):
    # Double Q: a* = argmax Q(s') = [1, 0] -> Q_target(s', a*) = [0, 2]; y = [1 + 0.5 * 0, -1 (terminal)];
    # Q(s, a) = [2, 0.5]; delta = [-1, -1.5]; Huber(1) = [0.5, 1.0]; weighted mean (0.5 * 1 + 1.0 * 0.5) / 2.
    test = ComponentTest(DQNLossFunction(discount=0.5, importance_weights=True), DQN_SPACES, backend=backend)
    test.test(("loss", HAND), expected_outputs=(0.5, np.array([-1.0, -1.5])))
    test.test(("loss_per_item", HAND[:6]), expected_outputs=np.array([0.5, 1.0]))
    # Plain DQN: a* = argmax Q_target(s') = [0, 0] -> [3, 2]; y = [1 + 0.5 * 3, -1]; delta = [0.5, -1.5];
    # squared: 0.5 delta^2 = [0.125, 1.125]; no importance weights: mean 0.625. n_step=2: gamma^2 = 0.25.
    test = ComponentTest(DQNLossFunction(double_q=False, huber_loss=False, discount=0.5), DQN_SPACES, backend=backend)
    test.test(("loss", HAND), expected_outputs=(0.625, np.array([0.5, -1.5])))
    test = ComponentTest(DQNLossFunction(double_q=False, huber_loss=False, discount=0.5 ** 0.5, n_step=2),
                         DQN_SPACES, backend=backend)
    test.test(("loss", HAND), expected_outputs=(0.625, np.array([0.5, -1.5])), decimals=5)


def np_dqn(q_s, actions, rewards, terminals, qt_sp, q_sp, weights, double_q, huber, delta, gamma_n):
    rows = np.arange(len(actions))
    best = np.argmax(q_sp if double_q else qt_sp, axis=1)
    td = rewards + gamma_n * (1.0 - terminals) * qt_sp[rows, best] - q_s[rows, actions]
    per_item = np_huber(td, delta) if huber else 0.5 * td ** 2
    return np.mean(weights * per_item), td, per_item


DQN_SPACES_A = dict(DQN_SPACES, q_values_s=FloatBox(shape=(A,), add_batch_rank=True),
                    qt_values_sp=FloatBox(shape=(A,), add_batch_rank=True),
                    q_values_sp=FloatBox(shape=(A,), add_batch_rank=True), actions=IntBox(A, add_batch_rank=True))


def dqn_batch(seed, batch=6):
    rng = np.random.default_rng(seed)
    f = lambda *s: (rng.normal(size=s) * 2).astype(np.float32)  # noqa: E731
    return [f(batch, A), rng.integers(0, A, batch).astype(np.int32), f(batch), rng.random(batch) < 0.3,
            f(batch, A), f(batch, A), rng.uniform(0.1, 1.0, batch).astype(np.float32)]


@pytest.mark.parametrize("double_q,huber,weighted", [(True, True, True), (False, True, False), (True, False, False)])
def test_dqn_loss_matches_numpy(backend, double_q, huber, weighted):
    loss_fn = DQNLossFunction(double_q=double_q, huber_loss=huber, huber_delta=1.5, n_step=3, discount=0.9,
                              importance_weights=weighted)
    test = ComponentTest(loss_fn, DQN_SPACES_A, backend=backend)
    args = dqn_batch(1)
    weights = args[6] if weighted else np.ones(6)
    loss, td, per_item = np_dqn(*args[:6], weights, double_q, huber, 1.5, 0.9 ** 3)
    test.test(("loss", args), expected_outputs=(loss, td), decimals=5)
    test.test(("loss_per_item", args[:6]), expected_outputs=per_item, decimals=5)
    # Gradients reach only Q(s, a): d loss / d Q(s, a) = -w huber'(delta) / B; none reach the targets.
    grad = eager_gradient(backend, test.component, "loss", args, 0)
    slope = np.clip(td, -1.5, 1.5) if huber else td
    expected = np.zeros((6, A))
    expected[np.arange(6), args[1]] = -weights * slope / 6
    np.testing.assert_allclose(grad, expected, atol=1e-5)
    for target_arg in (4, 5):
        np.testing.assert_array_equal(eager_gradient(backend, test.component, "loss", args, target_arg), 0.0)


def test_dqn_loss_backends_agree():
    run_on_backends(lambda: DQNLossFunction(n_step=2), DQN_SPACES_A,
                    [("loss", dqn_batch(2)), ("loss_per_item", dqn_batch(3)[:6])])


def test_dqn_loss_errors(backend):
    spaces = {k: v for k, v in DQN_SPACES.items() if k != "q_values_sp"}
    with pytest.raises(RLGraphSpaceError, match="q_values_sp"):
        ComponentTest(DQNLossFunction(double_q=True), spaces, backend=backend)
    with pytest.raises(RLGraphSpaceError, match="actions"):
        ComponentTest(DQNLossFunction(), dict(DQN_SPACES, actions=BATCH), backend=backend)
    spaces = {k: v for k, v in DQN_SPACES.items() if k != "importance_weights"}
    with pytest.raises(RLGraphAPIError, match="importance_weights"):
        ComponentTest(DQNLossFunction(importance_weights=True), spaces, backend=backend)
    with pytest.raises(RLGraphSpecError, match="discount"):
        DQNLossFunction(discount=1.5)
    assert isinstance(LossFunction.from_spec({"type": "dqn-loss", "n_step": 3}), DQNLossFunction)


# --- IMPALA / APPO ------------------------------------------------------------------------------------------
T, B = 6, 4
SEQ = FloatBox(add_batch_rank=True, add_time_rank=True, time_major=True)
FLAGS = BoolBox(add_batch_rank=True, add_time_rank=True, time_major=True)
IMPALA_SPACES = dict(log_probs=SEQ, behaviour_log_probs=SEQ, entropies=SEQ, values=SEQ, bootstrap_values=BATCH,
                     rewards=SEQ, terminals=FLAGS)


def unroll(seed):
    """[log_probs, behaviour_log_probs, entropies, values, bootstrap_values, rewards, terminals, behaviour_values]."""
    rng = np.random.default_rng(seed)
    f = lambda *s: rng.normal(size=s).astype(np.float32)  # noqa: E731
    behaviour = -np.abs(f(T, B)) - 0.2
    log_probs = (behaviour + rng.uniform(-1.2, 1.2, (T, B))).astype(np.float32)
    terminals = rng.random((T, B)) < 0.25
    terminals[3, 0] = True
    values = f(T, B)
    return [log_probs, behaviour, np.abs(f(T, B)), values, f(B), f(T, B) * 2, terminals,
            (values + 0.3 * f(T, B)).astype(np.float32)]


def np_v_trace(log_rhos, discounts, rewards, values, bootstrap, rho_bar=1.0, rho_bar_pg=1.0, c_bar=1.0):
    """Espeholt et al. 2018, eq. 1, as a direct sum: v_s = V_s + sum_t (prod_{i<t} gamma_i c_i) delta_t."""
    rhos = np.exp(log_rhos.astype(np.float64))
    values_ext = np.concatenate([values, bootstrap[None]], 0).astype(np.float64)
    deltas = np.minimum(rho_bar, rhos) * (rewards + discounts * values_ext[1:] - values_ext[:-1])
    cs = np.minimum(c_bar, rhos)
    vs = np.array(values_ext[:-1])
    for s in range(len(rewards)):
        for t in range(s, len(rewards)):
            vs[s] += np.prod(discounts[s:t] * cs[s:t], axis=0) * deltas[t]
    vs_next = np.concatenate([vs[1:], bootstrap[None]], 0)
    return vs, np.minimum(rho_bar_pg, rhos) * (rewards + discounts * vs_next - values_ext[:-1])


def np_clip_rewards(rewards, mode):
    if mode == "clamp_one":
        return np.clip(rewards, -1.0, 1.0)
    if mode == "soft_asymmetric":
        squeezed = np.tanh(rewards / 5.0) * 5.0
        return np.where(rewards < 0.0, 0.3 * squeezed, squeezed)
    return rewards


def np_impala(args, gamma=0.99, clipping="clamp_one", w_pg=1.0, w_v=0.5, w_ent=0.01, rho_bar=1.0, c_bar=1.0,
              normalize=False):
    log_probs, behaviour, entropies, values, bootstrap, rewards, terminals = args[:7]
    rewards = np_clip_rewards(rewards, clipping)
    discounts = gamma * (1.0 - terminals)
    vs, adv = np_v_trace(log_probs - behaviour, discounts, rewards, values, bootstrap, rho_bar=rho_bar, c_bar=c_bar)
    if normalize:  # Standardize r + gamma v_{s+1} - V, then weigh by min(1, pi/mu).
        td = rewards + discounts * np.concatenate([vs[1:], bootstrap[None]]) - values
        adv = np.minimum(1.0, np.exp(log_probs.astype(np.float64) - behaviour)) * (td - td.mean()) / (td.std() + 1e-8)
    per_step = -w_pg * log_probs * adv + w_v * 0.5 * (vs - values) ** 2 - w_ent * entropies
    per_item = per_step.sum(axis=0)
    return per_item.mean(), per_item, vs, adv


@pytest.mark.parametrize("clipping", ["clamp_one", "soft_asymmetric", None])
def test_impala_loss_matches_numpy(backend, clipping):
    args = unroll(1)
    loss_fn = IMPALALossFunction(discount=0.9, reward_clipping=clipping, weight_entropy=0.05, rho_bar=1.2, c_bar=0.9)
    test = ComponentTest(loss_fn, IMPALA_SPACES, backend=backend)
    loss, per_item, vs, adv = np_impala(args, 0.9, clipping, w_ent=0.05, rho_bar=1.2, c_bar=0.9)
    test.test(("loss", args[:7]), expected_outputs=loss, decimals=4)
    test.test(("loss_per_item", args[:7]), expected_outputs=per_item, decimals=4)
    # V-trace targets and advantages are constants: d/dV = w_v (V - vs) / B, d/dlog pi = -w_pg adv / B.
    np.testing.assert_allclose(eager_gradient(backend, test.component, "loss", args[:7], 3), 0.5 * (args[3] - vs) / B,
                               atol=1e-5)
    np.testing.assert_allclose(eager_gradient(backend, test.component, "loss", args[:7], 0), -adv / B, atol=1e-5)
    np.testing.assert_allclose(eager_gradient(backend, test.component, "loss", args[:7], 2), -0.05 / B, atol=1e-6)


class ValueShiftGradient(Component):
    """Test-only: d loss / d w inside a built graph (TF: tf.gradients in the trace), where values = V + w."""

    differentiates = True  # PyTorch: autograd stays on for its API methods (torch.autograd.grad in a graph_fn).

    def __init__(self, loss_fn):
        super().__init__(loss_fn, scope="value-shift-gradient")
        self.loss_fn = loss_fn

    def create_variables(self, input_spaces, action_space=None):
        self.w = self.get_variable("w", shape=(), initializer=0.0)

    @rlgraph_api
    def gradient(self, log_probs, behaviour_log_probs, entropies, values, bootstrap_values, rewards, terminals):
        loss = self.loss_fn.loss(log_probs, behaviour_log_probs, entropies, self._graph_fn_shift(values),
                                 bootstrap_values, rewards, terminals)
        return self._graph_fn_gradient(loss)

    @graph_fn
    def _graph_fn_shift(self, values):
        return values + self.w

    @graph_fn(backend="tf")
    def _graph_fn_gradient(self, loss):
        return tf.gradients(loss, self.w)[0]

    @graph_fn(backend="pytorch")
    def _graph_fn_gradient(self, loss):
        return torch.autograd.grad(loss, self.w)[0]

    @graph_fn(backend="jax")
    def _graph_fn_gradient(self, loss):
        # JAX differentiates functions: the executor runs this method as jax_backend.differentiating, whose tape
        # gives d loss / d w from a loss pass up to this call (as for an optimizer).
        if self.in_build_run:
            return jax.numpy.zeros((), self.w.dtype)
        from rlgraph.backends.jax_backend import current_tape
        return current_tape().gradients(dict(w=self.w), loss, self.global_scope)["w"]


def test_impala_loss_with_normalized_advantages_matches_numpy(backend):
    """``normalize_advantages``: the policy term weighs the advantages standardized over the whole [T, B] batch."""
    args = unroll(6)
    loss, per_item, _, adv = np_impala(args, normalize=True)
    plain_loss = np_impala(args)[0]
    assert abs(loss - plain_loss) > 1e-2, "normalizing must change this test's loss"
    test = ComponentTest(IMPALALossFunction(normalize_advantages=True), IMPALA_SPACES, backend=backend)
    test.test(("loss", args[:7]), expected_outputs=loss, decimals=4)
    test.test(("loss_per_item", args[:7]), expected_outputs=per_item, decimals=4)
    np.testing.assert_allclose(eager_gradient(backend, test.component, "loss", args[:7], 0), -adv / B, atol=1e-5)
    with pytest.raises(RLGraphSpecError, match="normalize_advantages"):
        IMPALALossFunction(normalize_advantages="yes")


def test_normalized_advantages_leave_samples_of_zero_importance_weight_without_policy_gradient(backend):
    """Samples the learner's policy no longer takes (pi/mu ~ 0, as replayed ones can be) add no policy gradient
    with normalized advantages either: the importance weight multiplies the standardized advantage. (Standardizing
    the weighted advantage instead gave them -mean/std, and IMPALA with replay collapsed to one action on Pong.)"""
    args = unroll(7)
    args[0] = args[0].copy()
    args[0][:, 1] = args[1][:, 1] - 40.0  # pi/mu = e^-40 in column 1
    test = ComponentTest(IMPALALossFunction(normalize_advantages=True), IMPALA_SPACES, backend=backend)
    grad = eager_gradient(backend, test.component, "loss", args[:7], 0)
    np.testing.assert_allclose(grad[:, 1], 0.0, atol=1e-9)
    assert np.abs(grad[:, [0, 2]]).min() > 1e-4  # the others do get one
    np.testing.assert_allclose(grad, -np_impala(args, normalize=True)[3] / B, atol=1e-5)


def test_impala_loss_gradient_in_graph(backend):
    """Targets stay constants in the built graph too: d loss / d w = sum_t,b w_v (V - vs) / B."""
    args = unroll(8)
    test = ComponentTest(ValueShiftGradient(IMPALALossFunction()), IMPALA_SPACES, backend=backend)
    _, _, vs, _ = np_impala(args)
    test.test(("gradient", args[:7]), expected_outputs=np.sum(0.5 * (args[3] - vs)) / B, decimals=4)


def test_impala_loss_batch_major_and_mean_over_time(backend):
    args = unroll(2)
    spaces = {k: (v.with_time_rank(time_major=False) if v.has_time_rank else v) for k, v in IMPALA_SPACES.items()}
    test = ComponentTest(IMPALALossFunction(time_major=False, time_reduction="mean"), spaces, backend=backend)
    _, per_item, _, _ = np_impala(args)
    test.test(("loss_per_item", [a.T.copy() if a.ndim == 2 else a for a in args[:7]]),
              expected_outputs=per_item / T, decimals=4)


def test_impala_loss_backends_agree():
    run_on_backends(lambda: IMPALALossFunction(reward_clipping="soft_asymmetric"), IMPALA_SPACES,
                    [("loss", unroll(3)[:7]), ("loss_per_item", unroll(4)[:7])], decimals=4)


def test_impala_loss_errors(backend):
    with pytest.raises(RLGraphSpecError, match="reward_clipping"):
        IMPALALossFunction(reward_clipping="clip")
    with pytest.raises(RLGraphSpaceError, match="values"):
        ComponentTest(IMPALALossFunction(), dict(IMPALA_SPACES, values=SEQ.with_time_rank(time_major=False)),
                      backend=backend)


def np_appo(args, clip_ratio, value_clipping, normalize, gamma=0.99, w_v=0.5, w_ent=0.01):
    log_probs, behaviour, entropies, values, bootstrap, rewards, terminals, old_values = args
    discounts = gamma * (1.0 - terminals)
    vs, adv = np_v_trace(log_probs - behaviour, discounts, np.clip(rewards, -1, 1), values, bootstrap)
    if normalize:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    ratio = np.exp(log_probs - behaviour)
    surrogate = np.minimum(ratio * adv, np.clip(ratio, 1 - clip_ratio, 1 + clip_ratio) * adv)
    value = (values - vs) ** 2
    if value_clipping is not None:
        clipped = old_values + np.clip(values - old_values, -value_clipping, value_clipping)
        value = np.maximum(value, (clipped - vs) ** 2)
    per_step = -surrogate + w_v * 0.5 * value - w_ent * entropies
    unclipped_is_min = ratio * adv <= np.clip(ratio, 1 - clip_ratio, 1 + clip_ratio) * adv
    grad_log_probs = -np.where(unclipped_is_min, ratio * adv, 0.0) / (T * B)
    return per_step.mean(), per_step.mean(axis=0), grad_log_probs


#: APPO's loss also takes given targets and advantages (``loss_from_targets``).
APPO_SPACES = dict(IMPALA_SPACES, behaviour_values=SEQ, vs=SEQ, advantages=SEQ, reference_log_probs=SEQ)


@pytest.mark.parametrize("value_clipping,normalize", [(None, False), (0.2, True)])
def test_appo_loss_matches_numpy(backend, value_clipping, normalize):
    args = unroll(5)
    ratio = np.exp(args[0] - args[1])
    assert ((ratio > 1.1) | (ratio < 0.9)).mean() > 0.3, "PPO clipping must be active in this test"
    loss_fn = APPOLossFunction(clip_ratio=0.1, value_clipping=value_clipping, normalize_advantages=normalize)
    test = ComponentTest(loss_fn, APPO_SPACES, backend=backend)
    loss, per_item, grad_log_probs = np_appo(args, 0.1, value_clipping, normalize)
    test.test(("loss", args), expected_outputs=loss, decimals=4)
    test.test(("loss_per_item", args), expected_outputs=per_item, decimals=4)
    # The same loss from V-trace's targets given (as minibatches of samples get them), and those targets.
    log_probs, behaviour, entropies, values, bootstrap, rewards, terminals, old_values = args
    vs, adv = np_v_trace(log_probs - behaviour, 0.99 * (1.0 - terminals), np.clip(rewards, -1, 1), values, bootstrap)
    test.test(("targets", [log_probs, behaviour, values, bootstrap, rewards, terminals]), expected_outputs=(vs, adv),
              decimals=4)
    test.test(("loss_from_targets", [log_probs, behaviour, entropies, values, vs.astype(np.float32),
                                     adv.astype(np.float32), old_values]), expected_outputs=loss, decimals=4)
    if not normalize:  # Gradients flow through the ratio only where the unclipped term is the minimum.
        np.testing.assert_allclose(eager_gradient(backend, test.component, "loss", args, 0), grad_log_probs, atol=1e-5)
        np.testing.assert_array_equal(eager_gradient(backend, test.component, "loss", args, 1), 0.0)


def test_appo_ratio_stats_match_numpy(backend):
    """How far an update moved the policy: KL's k3 estimator (Schulman 2020) and the clipped share."""
    log_probs, behaviour = unroll(8)[:2]
    ratio = np.exp(log_probs - behaviour)
    assert 0.2 < np.mean(np.abs(ratio - 1.0) > 0.5) < 0.8
    test = ComponentTest(APPOLossFunction(clip_ratio=0.5), APPO_SPACES, backend=backend)
    test.test(("ratio_stats", [log_probs, behaviour]),
              expected_outputs=dict(approx_kl=np.mean(ratio - 1.0 - np.log(ratio)),
                                    clip_fraction=np.mean(np.abs(ratio - 1.0) > 0.5)), decimals=5)


def test_appo_loss_backends_agree():
    run_on_backends(lambda: APPOLossFunction(value_clipping=0.5), APPO_SPACES,
                    [("loss", unroll(6)), ("loss_per_item", unroll(7))], decimals=4)


def test_appo_value_clipping_needs_behaviour_values(backend):
    with pytest.raises(RLGraphSpaceError, match="behaviour_values"):
        ComponentTest(APPOLossFunction(value_clipping=0.2), dict(APPO_SPACES, behaviour_values=None),
                      backend=backend)


# --- R2D2 -----------------------------------------------------------------------------------------------
SB, ST, BURN_IN, N_STEP = 3, 9, 2, 2
R2D2_SPACES = dict(q_values=FloatBox(shape=(A,), add_batch_rank=True, add_time_rank=True),
                   target_q_values=FloatBox(shape=(A,), add_batch_rank=True, add_time_rank=True),
                   actions=IntBox(A, add_batch_rank=True, add_time_rank=True),
                   rewards=FloatBox(add_batch_rank=True, add_time_rank=True),
                   terminals=BoolBox(add_batch_rank=True, add_time_rank=True), importance_weights=BATCH)


def h(x, eps=1e-3):
    return np.sign(x) * (np.sqrt(np.abs(x) + 1.0) - 1.0) + eps * x


def h_inv(x, eps=1e-3):
    return np.sign(x) * (((np.sqrt(1.0 + 4.0 * eps * (np.abs(x) + 1.0 + eps)) - 1.0) / (2.0 * eps)) ** 2 - 1.0)


def np_r2d2(q, qt, actions, rewards, terminals, weights, burn_in, n, gamma=0.997, eta=0.9, rescale=True):
    """Kapturowski et al. 2019: y_t = h(sum_k gamma^k r_{t+k} + gamma^n h^-1(Q'(s_{t+n}, argmax Q(s_{t+n}))));
    ``rescale=False``: h is the identity."""
    hh, hh_inv = (h, h_inv) if rescale else ((lambda x: x), (lambda x: x))
    q, qt = q.astype(np.float64), qt.astype(np.float64)
    per_item, priorities, all_td = [], [], np.zeros(actions.shape)
    for b in range(q.shape[0]):
        tds = []
        for t in range(burn_in, q.shape[1] - n):
            ret, ended = 0.0, False
            for k in range(n):
                ret += gamma ** k * rewards[b, t + k]
                if terminals[b, t + k]:
                    ended = True
                    break
            if not ended:
                ret += gamma ** n * hh_inv(qt[b, t + n, np.argmax(q[b, t + n])])
            tds.append(hh(ret) - q[b, t, actions[b, t]])
            all_td[b, t] = tds[-1]
        tds = np.array(tds)
        per_item.append(np.mean(0.5 * tds ** 2))
        priorities.append(eta * np.max(np.abs(tds)) + (1 - eta) * np.mean(np.abs(tds)))
    per_item = np.array(per_item)
    return np.mean(weights * per_item), np.array(priorities), per_item, all_td


def sequences(seed):
    rng = np.random.default_rng(seed)
    terminals = rng.random((SB, ST)) < 0.2
    terminals[0, 4] = True
    q_values = (rng.normal(size=(SB, ST, A)) * 5).astype(np.float32)
    target_q_values = (rng.normal(size=(SB, ST, A)) * 5).astype(np.float32)
    actions = rng.integers(0, A, (SB, ST)).astype(np.int32)
    rewards = (rng.normal(size=(SB, ST)) * 3).astype(np.float32)
    return [q_values, target_q_values, actions, rewards, terminals, rng.uniform(0.2, 1.0, SB).astype(np.float32)]


def test_r2d2_loss_matches_numpy(backend):
    args = sequences(1)
    test = ComponentTest(R2D2LossFunction(burn_in=BURN_IN, n_step=N_STEP, importance_weights=True), R2D2_SPACES,
                         backend=backend)
    loss, priorities, per_item, td = np_r2d2(*args, BURN_IN, N_STEP)
    test.test(("loss", args), expected_outputs=(loss, priorities), decimals=4)
    test.test(("loss_per_item", args[:5]), expected_outputs=per_item, decimals=4)
    # Gradient: -w_b delta_t / (B * number of trained steps) on Q(s_t, a_t) of trained steps, nothing else.
    grad = eager_gradient(backend, test.component, "loss", args, 0)
    expected = np.zeros((SB, ST, A))
    rows, cols = np.meshgrid(np.arange(SB), np.arange(ST), indexing="ij")
    expected[rows, cols, args[2]] = -args[5][:, None] * td / (SB * (ST - BURN_IN - N_STEP))
    np.testing.assert_allclose(grad, expected, atol=1e-5)
    np.testing.assert_array_equal(eager_gradient(backend, test.component, "loss", args, 1), 0.0)


def test_r2d2_burn_in_steps_contribute_nothing(backend):
    args = sequences(2)
    test = ComponentTest(R2D2LossFunction(burn_in=BURN_IN, n_step=N_STEP, importance_weights=True), R2D2_SPACES,
                         backend=backend)
    loss, priorities = test.test(("loss", args))
    changed = [a.copy() for a in args]
    rng = np.random.default_rng(3)
    changed[0][:, :BURN_IN] += rng.normal(size=(SB, BURN_IN, A)).astype(np.float32) * 100
    changed[1][:, :BURN_IN] += rng.normal(size=(SB, BURN_IN, A)).astype(np.float32) * 100
    changed[2][:, :BURN_IN] = (changed[2][:, :BURN_IN] + 1) % A
    changed[3][:, :BURN_IN] += 50.0
    changed[4][:, :BURN_IN] = ~changed[4][:, :BURN_IN]
    test.test(("loss", changed), expected_outputs=(loss, priorities), decimals=6)
    # No gradient reaches the burn-in steps (nor the bootstrap-only last n steps).
    grad = eager_gradient(backend, test.component, "loss", changed, 0)
    np.testing.assert_array_equal(grad[:, :BURN_IN], 0.0)
    np.testing.assert_array_equal(grad[:, ST - N_STEP:], 0.0)
    assert np.all(np.abs(grad[:, BURN_IN:ST - N_STEP]).sum(axis=-1) > 0)


def test_r2d2_loss_without_value_rescaling_matches_numpy(backend):
    """``value_rescaling=False``: plain n-step double-Q targets."""
    args = sequences(8)
    test = ComponentTest(R2D2LossFunction(burn_in=BURN_IN, n_step=3, importance_weights=True, value_rescaling=False),
                         R2D2_SPACES, backend=backend)
    loss, priorities, _, _ = np_r2d2(*args, BURN_IN, 3, rescale=False)
    test.test(("loss", args), expected_outputs=(loss, priorities), decimals=4)


def test_r2d2_time_major_equals_batch_major(backend):
    args = sequences(4)
    spaces = {k: (v.with_time_rank(time_major=True) if v.has_time_rank else v) for k, v in R2D2_SPACES.items()}
    test = ComponentTest(R2D2LossFunction(burn_in=1, n_step=3, time_major=True), spaces, backend=backend)
    loss, priorities, _, _ = np_r2d2(*args[:5], np.ones(SB), 1, 3)
    time_major = [np.swapaxes(a, 0, 1).copy() if a.ndim >= 2 else a for a in args]
    test.test(("loss", time_major), expected_outputs=(loss, priorities), decimals=4)


def test_r2d2_rejects_too_short_sequences(backend):
    args = sequences(5)
    test = ComponentTest(R2D2LossFunction(burn_in=6, n_step=3), R2D2_SPACES, backend=backend)
    with pytest.raises(RLGraphRuntimeError, match="burn_in"):
        test.test(("loss", args))


def test_r2d2_loss_backends_agree():
    run_on_backends(lambda: R2D2LossFunction(burn_in=3, n_step=3, huber_loss=True), R2D2_SPACES,
                    [("loss", sequences(6)), ("loss_per_item", sequences(7)[:5])], decimals=4)


def test_r2d2_rejects_batch_only_q_values(backend):
    with pytest.raises((RLGraphSpaceError, RLGraphBuildError), match="q_values"):
        ComponentTest(R2D2LossFunction(), dict(R2D2_SPACES, q_values=FloatBox(shape=(A,), add_batch_rank=True)),
                      backend=backend)
