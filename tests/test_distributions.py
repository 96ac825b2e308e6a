"""Distributions (Categorical, diagonal Normal) against closed-form numpy references, on both backends."""
import numpy as np
import pytest

from rlgraph.components.distributions import Categorical, Distribution, Normal
from rlgraph.spaces import BoolBox, FloatBox, IntBox, Tuple
from rlgraph.tests import ComponentTest, run_on_backends
from rlgraph.utils.errors import RLGraphSpaceError, RLGraphSpecError

#: Component/foundation tests: their ``backend`` parametrization includes JAX (rlgraph.tests.pytest_plugin).
pytestmark = pytest.mark.all_backends


# --- independent numpy references -------------------------------------------------------------------------
def np_log_softmax(logits):
    z = logits - logits.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def np_categorical_log_prob(logits, values):
    return np.take_along_axis(np_log_softmax(logits), values[..., None].astype(np.int64), axis=-1)[..., 0]


def np_categorical_entropy(logits):
    log_p = np_log_softmax(logits)
    return -(np.exp(log_p) * log_p).sum(-1)


def np_categorical_kl(logits_p, logits_q):
    log_p, log_q = np_log_softmax(logits_p), np_log_softmax(logits_q)
    return (np.exp(log_p) * (log_p - log_q)).sum(-1)


def np_normal_log_density(x, mean, log_std):
    std = np.exp(log_std)
    return -0.5 * ((x - mean) / std) ** 2 - np.log(std * np.sqrt(2.0 * np.pi))


def np_normal_entropy(log_std):
    return 0.5 * np.log(2.0 * np.pi * np.e * np.exp(log_std) ** 2)


def np_normal_kl(mean_p, log_std_p, mean_q, log_std_q):
    var_p, var_q = np.exp(2 * log_std_p), np.exp(2 * log_std_q)
    return 0.5 * (var_p / var_q + (mean_q - mean_p) ** 2 / var_q - 1.0 + np.log(var_q / var_p))


# --- spaces -----------------------------------------------------------------------------------------------
LOGITS = FloatBox(shape=(2, 4), add_batch_rank=True)
CATEGORICAL_SPACES = dict(parameters=LOGITS, other_parameters=LOGITS, values=IntBox(4, shape=(2,), add_batch_rank=True),
                          deterministic=BoolBox(add_batch_rank=True))
GAUSS = Tuple(FloatBox(shape=(3,)), FloatBox(shape=(3,)), add_batch_rank=True)
NORMAL_SPACES = dict(parameters=GAUSS, other_parameters=GAUSS, values=FloatBox(shape=(3,), add_batch_rank=True),
                     deterministic=bool)
SPLIT = FloatBox(shape=(6,), add_batch_rank=True)
NORMAL_SPLIT_SPACES = dict(parameters=SPLIT, other_parameters=SPLIT, values=FloatBox(shape=(3,), add_batch_rank=True),
                           deterministic=bool)


def _rng():
    return np.random.default_rng(3)


# --- Categorical --------------------------------------------------------------------------------------------
def test_categorical_closed_forms(backend):
    rng = _rng()
    logits, other = rng.normal(size=(5, 2, 4)).astype(np.float32) * 2, rng.normal(size=(5, 2, 4)).astype(np.float32)
    values = rng.integers(0, 4, size=(5, 2)).astype(np.int32)
    test = ComponentTest(Categorical(), CATEGORICAL_SPACES, backend=backend)
    test.test(("log_prob", [logits, values]), expected_outputs=np_categorical_log_prob(logits, values), decimals=5)
    test.test(("entropy", [logits]), expected_outputs=np_categorical_entropy(logits), decimals=5)
    test.test(("kl_divergence", [logits, other]), expected_outputs=np_categorical_kl(logits, other), decimals=5)
    test.test(("kl_divergence", [logits, logits]), expected_outputs=np.zeros((5, 2)), decimals=5)
    test.test(("sample_deterministic", [logits]), expected_outputs=logits.argmax(-1))
    # Per-item deterministic flags: flagged items are the mode, the others are valid categories.
    flags = np.array([True, False, True, False, True])
    drawn = test.test(("draw", [logits, flags]))
    np.testing.assert_array_equal(drawn[flags], logits.argmax(-1)[flags])
    assert drawn.dtype == np.int32 and drawn.min() >= 0 and drawn.max() < 4
    # Drawn values and their log-probabilities in one call.
    values, log_prob = test.test(("draw_with_log_prob", [logits, np.ones(5, bool)]))
    np.testing.assert_array_equal(values, logits.argmax(-1))
    np.testing.assert_allclose(log_prob, np_categorical_log_prob(logits, values), rtol=1e-5, atol=1e-6)


def test_categorical_sampling_frequencies(backend):
    logits = np.array([[1.0, 0.0, -1.0, 2.0], [0.0, 0.0, 0.0, -20.0]], np.float32)
    batch = np.broadcast_to(logits, (6000, 2, 4)).copy()
    test = ComponentTest(Categorical(), CATEGORICAL_SPACES, backend=backend, seed=4)
    samples = test.test(("sample_stochastic", [batch]))
    probs = np.exp(np_log_softmax(logits))
    for j in range(2):
        freq = np.bincount(samples[:, j], minlength=4) / len(samples)
        np.testing.assert_allclose(freq, probs[j], atol=0.025)
    # draw with per-item flags: False samples, True gives the mode.
    assert (test.test(("draw", [batch, np.zeros(6000, bool)])) != logits.argmax(-1)).any()
    np.testing.assert_array_equal(test.test(("draw", [batch[:3], np.ones(3, bool)])),
                                  np.tile(logits.argmax(-1), (3, 1)))


def test_categorical_sample_dtype_follows_action_space(backend):
    logits = FloatBox(shape=(3,), add_batch_rank=True)
    spaces = dict(parameters=logits, other_parameters=logits, values=IntBox(3, add_batch_rank=True))
    test = ComponentTest(Categorical(action_space=IntBox(3, dtype="int64")), spaces, backend=backend)
    out = test.test(("sample_stochastic", [np.zeros((4, 3), np.float32)]))
    assert out.dtype == np.int64


def test_categorical_backends_agree():
    rng = _rng()
    logits, other = rng.normal(size=(6, 2, 4)).astype(np.float32), rng.normal(size=(6, 2, 4)).astype(np.float32)
    values = rng.integers(0, 4, size=(6, 2)).astype(np.int32)
    run_on_backends(Categorical, CATEGORICAL_SPACES,
                    [("log_prob", [logits, values]), ("entropy", [logits]), ("kl_divergence", [logits, other]),
                     ("sample_deterministic", [logits]), ("draw", [logits, np.ones(6, bool)])])


# --- Normal -------------------------------------------------------------------------------------------------
def _gauss_params(rng, n=5):
    mean = rng.normal(size=(n, 3)).astype(np.float32)
    log_std = rng.uniform(-1.0, 0.5, size=(n, 3)).astype(np.float32)
    return mean, log_std


@pytest.mark.parametrize("layout", ["tuple", "split"])
def test_normal_closed_forms(backend, layout):
    rng = _rng()
    (m, s), (m2, s2) = _gauss_params(rng), _gauss_params(rng)
    x = rng.normal(size=(5, 3)).astype(np.float32)
    if layout == "tuple":
        spaces, params, other = NORMAL_SPACES, (m, s), (m2, s2)
    else:
        spaces, params, other = NORMAL_SPLIT_SPACES, np.concatenate([m, s], -1), np.concatenate([m2, s2], -1)
    test = ComponentTest(Normal(), spaces, backend=backend)
    test.test(("log_prob", [params, x]), expected_outputs=np_normal_log_density(x, m, s), decimals=5)
    test.test(("entropy", [params]), expected_outputs=np_normal_entropy(s), decimals=5)
    test.test(("kl_divergence", [params, other]), expected_outputs=np_normal_kl(m, s, m2, s2), decimals=4)
    test.test(("kl_divergence", [params, params]), expected_outputs=np.zeros((5, 3)), decimals=5)
    test.test(("sample_deterministic", [params]), expected_outputs=m)
    test.test(("draw", [params, True]), expected_outputs=m)


def test_normal_sampling_moments(backend):
    n = 20000
    mean = np.tile(np.array([[0.5, -2.0, 3.0]], np.float32), (n, 1))
    log_std = np.tile(np.log(np.array([[1.0, 0.1, 2.0]], np.float32)), (n, 1))
    test = ComponentTest(Normal(), NORMAL_SPACES, backend=backend, seed=5)
    samples = test.test(("sample_stochastic", [(mean, log_std)]))
    np.testing.assert_allclose(samples.mean(0), [0.5, -2.0, 3.0], atol=0.05)
    np.testing.assert_allclose(samples.std(0), [1.0, 0.1, 2.0], rtol=0.03)
    drawn = test.test(("draw", [(mean[:4], log_std[:4]), False]))
    assert not np.allclose(drawn, mean[:4])


def test_normal_backends_agree():
    rng = _rng()
    (m, s), (m2, s2) = _gauss_params(rng), _gauss_params(rng)
    x = rng.normal(size=(5, 3)).astype(np.float32)
    run_on_backends(Normal, NORMAL_SPACES,
                    [("log_prob", [(m, s), x]), ("entropy", [(m, s)]), ("kl_divergence", [(m, s), (m2, s2)]),
                     ("sample_deterministic", [(m, s)])])


# --- specs and errors -----------------------------------------------------------------------------------------
def test_distributions_from_spec():
    assert isinstance(Distribution.from_spec("categorical"), Categorical)
    assert isinstance(Distribution.from_spec({"type": "Gaussian"}), Normal)
    assert isinstance(Distribution.from_spec({"type": "normal", "action_space": {"type": "float-box", "shape": [2]}}),
                      Normal)
    assert isinstance(Distribution.for_space(IntBox(3)), Categorical)
    assert isinstance(Distribution.for_space(FloatBox(shape=(2,))), Normal)
    with pytest.raises(RLGraphSpecError, match="abstract"):
        Distribution.from_spec({})
    with pytest.raises(RLGraphSpaceError, match="No default distribution"):
        Distribution.for_space(BoolBox())
    with pytest.raises(RLGraphSpaceError, match="IntBox"):
        Categorical(action_space=FloatBox(shape=(2,)))


def test_bad_input_spaces_are_named(backend):
    with pytest.raises(RLGraphSpaceError, match="'parameters'.*logits"):
        ComponentTest(Categorical(), dict(CATEGORICAL_SPACES, parameters=IntBox(4, add_batch_rank=True)),
                      backend=backend)
    with pytest.raises(RLGraphSpaceError, match="'values'.*item shape"):
        ComponentTest(Categorical(), dict(CATEGORICAL_SPACES, values=IntBox(4, add_batch_rank=True)), backend=backend)
    with pytest.raises(RLGraphSpaceError, match="'parameters'.*even"):
        ComponentTest(Normal(), dict(NORMAL_SPLIT_SPACES, parameters=FloatBox(shape=(5,), add_batch_rank=True),
                                     other_parameters=FloatBox(shape=(5,), add_batch_rank=True)), backend=backend)
    with pytest.raises(RLGraphSpaceError, match="'other_parameters'"):
        ComponentTest(Normal(), dict(NORMAL_SPACES, other_parameters=SPLIT), backend=backend)
    with pytest.raises(RLGraphSpaceError, match="'deterministic'"):
        ComponentTest(Normal(), dict(NORMAL_SPACES, deterministic=FloatBox(add_batch_rank=True)), backend=backend)
