"""Tests of the optimizers against numpy implementations of the same update rules, on both backends."""
import numpy as np
import pytest

from rlgraph import graph_fn, rlgraph_api
from rlgraph.components import Component, NeuralNetwork
from rlgraph.components.optimizers import AdamOptimizer, Optimizer, RMSPropOptimizer, SGDOptimizer
from rlgraph.spaces import FloatBox
from rlgraph.tests import ComponentTest, run_on_backends
from rlgraph.utils.backend import jax, tf, torch
from rlgraph.utils.errors import RLGraphSpaceError, RLGraphSpecError

#: Component/foundation tests: their ``backend`` parametrization includes JAX (rlgraph.tests.pytest_plugin).
pytestmark = pytest.mark.all_backends

KERNEL, BIAS = "regression/neural-network/dense/kernel", "regression/neural-network/dense/bias"


class Regression(Component):
    """Least squares: a network, an MSE loss and an optimizer, wired as an agent would wire them."""

    def __init__(self, optimizer, layers=({"type": "dense", "units": 1},)):
        super().__init__(scope="regression")
        self.network = NeuralNetwork(*layers)
        self.optimizer = optimizer
        self.add_components(self.network, self.optimizer)

    @rlgraph_api
    def update(self, x, y, time_percentage):
        loss = self._graph_fn_loss(self.network.call(x), y)
        return self.optimizer.step(self.network.variables(), loss, time_percentage)

    @rlgraph_api
    def gradients(self, x, y):
        loss = self._graph_fn_loss(self.network.call(x), y)
        return self.optimizer.calculate_gradients(self.network.variables(), loss)

    @rlgraph_api
    def apply(self, x, y, time_percentage):
        variables = self.network.variables()
        gradients = self.optimizer.calculate_gradients(variables, self._graph_fn_loss(self.network.call(x), y))
        return self.optimizer.apply_gradients(variables, gradients, time_percentage)

    @graph_fn(backend="tf")
    def _graph_fn_loss(self, predictions, y):
        return tf.reduce_mean(tf.square(predictions[:, 0] - y))

    @graph_fn(backend="pytorch")
    def _graph_fn_loss(self, predictions, y):
        return torch.mean(torch.square(predictions[:, 0] - y))

    @graph_fn(backend="jax")
    def _graph_fn_loss(self, predictions, y):
        return jax.numpy.mean(jax.numpy.square(predictions[:, 0] - y))


SPACES = dict(x=FloatBox(shape=(3,), add_batch_rank=True), y=FloatBox(add_batch_rank=True), time_percentage=float)
RNG = np.random.default_rng(0)
X = RNG.normal(size=(16, 3)).astype(np.float32)
Y = (X @ np.array([1.0, -2.0, 0.5]) + 0.3).astype(np.float32)


def numpy_gradients(w, b, x=X, y=Y):
    """Loss and gradients of mean((x w + b - y)^2), by hand."""
    residual = (x.astype(np.float64) @ w + b)[:, 0] - y
    return np.mean(residual ** 2), 2.0 * x.T @ residual[:, None] / len(y), np.array([2.0 * residual.mean()])


# Reference update rules, written from the papers / framework docs (not from the components' code).
def sgd_reference(momentum=0.0, nesterov=False):
    def update(w, g, lr, state, t):
        if momentum == 0.0:
            return w - lr * g
        state["v"] = momentum * state.get("v", 0.0) - lr * g
        return w + (momentum * state["v"] - lr * g if nesterov else state["v"])
    return update


def adam_reference(beta_1=0.9, beta_2=0.999, epsilon=1e-8):
    def update(w, g, lr, state, t):  # Kingma & Ba 2015, Algorithm 1.
        state["m"] = beta_1 * state.get("m", 0.0) + (1 - beta_1) * g
        state["v"] = beta_2 * state.get("v", 0.0) + (1 - beta_2) * g ** 2
        m_hat, v_hat = state["m"] / (1 - beta_1 ** t), state["v"] / (1 - beta_2 ** t)
        return w - lr * m_hat / (np.sqrt(v_hat) + epsilon)
    return update


def rmsprop_reference(decay=0.9, momentum=0.0, epsilon=1e-10, centered=False, inside=True):
    def update(w, g, lr, state, t):
        state["ms"] = decay * state.get("ms", 0.0) + (1 - decay) * g ** 2
        denominator = state["ms"]
        if centered:
            state["mg"] = decay * state.get("mg", 0.0) + (1 - decay) * g
            denominator = denominator - state["mg"] ** 2
        denominator = np.sqrt(denominator + epsilon) if inside else np.sqrt(denominator) + epsilon
        step = lr * g / denominator
        if momentum:
            state["mom"] = momentum * state.get("mom", 0.0) + step
            step = state["mom"]
        return w - step
    return update


CASES = {
    "sgd": (lambda: SGDOptimizer(0.1), sgd_reference(), 0.1),
    "sgd-momentum": (lambda: SGDOptimizer(0.05, momentum=0.9), sgd_reference(0.9), 0.05),
    "sgd-nesterov": (lambda: SGDOptimizer(0.05, momentum=0.9, nesterov=True), sgd_reference(0.9, True), 0.05),
    "adam": (lambda: AdamOptimizer(0.05), adam_reference(), 0.05),
    "adam-betas": (lambda: AdamOptimizer(0.02, beta_1=0.5, beta_2=0.9, epsilon=1e-3),
                   adam_reference(0.5, 0.9, 1e-3), 0.02),
    "rmsprop": (lambda: RMSPropOptimizer(0.01), rmsprop_reference(), 0.01),
    "rmsprop-centered-momentum-eps-outside": (
        lambda: RMSPropOptimizer(0.01, decay=0.8, momentum=0.5, epsilon=1e-3, centered=True, epsilon_inside_sqrt=False),
        rmsprop_reference(0.8, 0.5, 1e-3, centered=True, inside=False), 0.01),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_update_rules_match_numpy(backend, case):
    make, reference, lr = CASES[case]
    test = ComponentTest(Regression(make()), input_spaces=SPACES, backend=backend)
    weights = test.executor.get_weights()
    w, b = weights[KERNEL].astype(np.float64), weights[BIAS].astype(np.float64)
    state_w, state_b = {}, {}
    for t in range(1, 7):
        loss, g_w, g_b = numpy_gradients(w, b)
        out_loss, out_norm = test.test(("update", [X, Y, 0.0]))
        np.testing.assert_allclose(out_loss, loss, rtol=1e-5)
        np.testing.assert_allclose(out_norm, np.sqrt((g_w ** 2).sum() + (g_b ** 2).sum()), rtol=1e-5)
        w, b = reference(w, g_w, lr, state_w, t), reference(b, g_b, lr, state_b, t)
        weights = test.executor.get_weights()
        np.testing.assert_allclose(weights[KERNEL], w, rtol=2e-5, atol=1e-6, err_msg=f"kernel after step {t}")
        np.testing.assert_allclose(weights[BIAS], b, rtol=2e-5, atol=1e-6, err_msg=f"bias after step {t}")
    steps = test.read_variable_values(f"regression/{test.component.optimizer.scope}/steps")
    assert steps == 6


def test_gradient_clipping_by_global_norm(backend):
    clip, lr = 0.05, 0.1
    test = ComponentTest(Regression(SGDOptimizer(lr, clip_grad_norm=clip)), input_spaces=SPACES, backend=backend)
    weights = test.executor.get_weights()
    w, b = weights[KERNEL].astype(np.float64), weights[BIAS].astype(np.float64)
    for _ in range(3):
        _, g_w, g_b = numpy_gradients(w, b)
        norm = np.sqrt((g_w ** 2).sum() + (g_b ** 2).sum())
        assert norm > clip  # The clip is active.
        _, out_norm = test.test(("update", [X, Y, 0.0]))
        np.testing.assert_allclose(out_norm, norm, rtol=1e-5)  # The norm before clipping.
        scale = clip / max(norm, clip)
        new_w, new_b = w - lr * scale * g_w, b - lr * scale * g_b
        weights = test.executor.get_weights()
        np.testing.assert_allclose(weights[KERNEL], new_w, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(weights[BIAS], new_b, rtol=1e-5, atol=1e-7)
        # The clipped step has norm lr * clip.
        step = np.sqrt(((weights[KERNEL] - w) ** 2).sum() + ((weights[BIAS] - b) ** 2).sum())
        np.testing.assert_allclose(step, lr * clip, rtol=1e-4)
        w, b = new_w, new_b


def test_learning_rate_schedule_follows_time_percentage(backend):
    test = ComponentTest(Regression(SGDOptimizer(["linear", 0.1, 0.01])), input_spaces=SPACES, backend=backend)
    weights = test.executor.get_weights()
    w, b = weights[KERNEL].astype(np.float64), weights[BIAS].astype(np.float64)
    for t in (0.0, 0.25, 0.8, 1.0, 1.7):
        _, g_w, g_b = numpy_gradients(w, b)
        lr = 0.1 + (0.01 - 0.1) * min(t, 1.0)
        test.test(("update", [X, Y, t]))
        w, b = w - lr * g_w, b - lr * g_b
        weights = test.executor.get_weights()
        np.testing.assert_allclose(weights[KERNEL], w, rtol=1e-5, atol=1e-7, err_msg=f"t={t}")
        np.testing.assert_allclose(weights[BIAS], b, rtol=1e-5, atol=1e-7, err_msg=f"t={t}")


def test_calculate_and_apply_gradients(backend):
    test = ComponentTest(Regression(AdamOptimizer(0.05, clip_grad_norm=1.0)), input_spaces=SPACES, backend=backend)
    weights = test.executor.get_weights()
    w, b = weights[KERNEL].astype(np.float64), weights[BIAS].astype(np.float64)
    grads = test.test(("gradients", [X, Y]))
    _, g_w, g_b = numpy_gradients(w, b)
    assert set(grads) == {"dense.kernel", "dense.bias"}
    np.testing.assert_allclose(grads["dense.kernel"], g_w, rtol=1e-5)
    np.testing.assert_allclose(grads["dense.bias"], g_b, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(test.executor.get_weights()[KERNEL], weights[KERNEL])  # Nothing applied.
    norm = test.test(("apply", [X, Y, 0.0]))
    np.testing.assert_allclose(norm, np.sqrt((g_w ** 2).sum() + (g_b ** 2).sum()), rtol=1e-5)
    scale = 1.0 / max(norm, 1.0)
    reference = adam_reference()
    np.testing.assert_allclose(test.executor.get_weights()[KERNEL], reference(w, scale * g_w, 0.05, {}, 1), rtol=1e-5)


def test_backends_agree():
    calls = [("update", [X, Y, t]) for t in (0.0, 0.3, 0.6)] + [("gradients", [X, Y]), ("apply", [X, Y, 1.0])]
    for make in (lambda: AdamOptimizer(["polynomial", 0.05, 0.001, 2.0], clip_grad_norm=2.0),
                 lambda: RMSPropOptimizer(0.01, centered=True, momentum=0.9),
                 lambda: SGDOptimizer(0.05, momentum=0.5, nesterov=True, clip_grad_norm=0.5)):
        run_on_backends(lambda: Regression(make()), SPACES, calls, decimals=5)


def test_mlp_learns_to_near_zero_loss(backend):
    layers = ({"type": "dense", "units": 16, "activation": "tanh"}, {"type": "dense", "units": 7, "activation": "tanh"},
              {"type": "dense", "units": 1})
    test = ComponentTest(Regression(AdamOptimizer(0.02), layers=layers), input_spaces=SPACES, backend=backend)
    x = np.random.default_rng(1).uniform(-1.0, 1.0, size=(64, 3)).astype(np.float32)
    y = (np.sin(2.0 * x[:, 0]) + 0.5 * x[:, 1] * x[:, 2]).astype(np.float32)
    losses = [float(test.test(("update", [x, y, 0.0]))[0]) for _ in range(400)]
    assert losses[-1] < 0.01 * losses[0], (losses[0], losses[-1])
    assert losses[-1] < 5e-3
    # Every trainable variable got its slots (the build sees the variables dict of a 3-layer network piecemeal).
    names = list(test.executor.get_weights(trainable_only=False))
    for layer in ("dense", "dense-1", "dense-2"):
        for var in ("kernel", "bias"):
            for slot in ("m", "v"):
                assert f"regression/adam-optimizer/{layer}.{var}/{slot}" in names


def test_specs_and_bad_arguments():
    assert isinstance(Optimizer.from_spec({"type": "adam", "learning_rate": 0.1}), AdamOptimizer)
    assert isinstance(Optimizer.from_spec({"type": "rmsprop", "centered": True}), RMSPropOptimizer)
    assert isinstance(Optimizer.from_spec({"type": "sgd", "momentum": 0.9}), SGDOptimizer)
    for bad in (lambda: SGDOptimizer(momentum=1.0), lambda: SGDOptimizer(nesterov=True),
                lambda: AdamOptimizer(beta_1=1.0), lambda: AdamOptimizer(epsilon=0.0),
                lambda: RMSPropOptimizer(decay=-0.1), lambda: SGDOptimizer(clip_grad_norm=0.0),
                lambda: AdamOptimizer(learning_rate=["no-such-schedule", 1.0])):
        with pytest.raises(RLGraphSpecError):
            bad()


class PerItemLoss(Regression):
    @rlgraph_api
    def update(self, x, y, time_percentage):
        return self.optimizer.step(self.network.variables(), self._graph_fn_per_item(self.network.call(x), y))

    @graph_fn(backend="tf")
    def _graph_fn_per_item(self, predictions, y):
        return tf.square(predictions[:, 0] - y)

    @graph_fn(backend="pytorch")
    def _graph_fn_per_item(self, predictions, y):
        return torch.square(predictions[:, 0] - y)

    @graph_fn(backend="jax")
    def _graph_fn_per_item(self, predictions, y):
        return jax.numpy.square(predictions[:, 0] - y)


def test_non_scalar_loss_is_rejected():
    with pytest.raises(RLGraphSpaceError, match="scalar float loss"):
        ComponentTest(PerItemLoss(SGDOptimizer()), input_spaces=SPACES, backend="pytorch")


class Params(Component):
    """Test-only: a float32 and a float64 variable (the PyTorch optimizer updates them as two flat groups) and
    the loss s * sum(w32^2) + sum(w64^2) for a scale s fed in."""

    def __init__(self):
        super().__init__(scope="params")

    def create_variables(self, input_spaces, action_space=None):
        self.w32 = self.get_variable("w32", shape=(3,), dtype="float32", initializer=[0.5, -1.0, 2.0], trainable=True)
        self.w64 = self.get_variable("w64", shape=(2, 2), dtype="float64", initializer=[[1.0, -0.5], [0.25, 3.0]],
                                     trainable=True)

    @rlgraph_api
    def loss(self, scale):
        return self._graph_fn_loss(scale)

    @graph_fn(backend="tf")
    def _graph_fn_loss(self, scale):
        return scale * tf.reduce_sum(tf.square(self.w32)) + tf.cast(tf.reduce_sum(tf.square(self.w64)), tf.float32)

    @graph_fn(backend="pytorch")
    def _graph_fn_loss(self, scale):
        return scale * torch.sum(self.w32 ** 2) + torch.sum(self.w64 ** 2).float()

    @graph_fn(backend="jax")
    def _graph_fn_loss(self, scale):
        jnp = jax.numpy
        return scale * jnp.sum(jnp.square(self.w32.value)) + jnp.sum(jnp.square(self.w64.value)).astype(jnp.float32)


class TwoDtypes(Component):
    def __init__(self, optimizer):
        self.params, self.optimizer = Params(), optimizer
        super().__init__(self.params, self.optimizer, scope="two-dtypes")

    @rlgraph_api
    def update(self, scale):
        return self.optimizer.step(self.params.variables(), self.params.loss(scale))


def test_variables_of_two_dtypes(backend):
    test = ComponentTest(TwoDtypes(AdamOptimizer(0.1, clip_grad_norm=3.0)), input_spaces=dict(scale=float),
                         backend=backend)
    w32, w64 = np.array([0.5, -1.0, 2.0]), np.array([[1.0, -0.5], [0.25, 3.0]])
    reference, state32, state64 = adam_reference(), {}, {}
    for t in range(1, 5):
        g32, g64 = 2.0 * 1.5 * w32, 2.0 * w64
        norm = np.sqrt((g32 ** 2).sum() + (g64 ** 2).sum())
        _, out_norm = test.test(("update", [1.5]))
        np.testing.assert_allclose(out_norm, norm, rtol=1e-5)
        scale = 3.0 / max(norm, 3.0)
        w32, w64 = reference(w32, scale * g32, 0.1, state32, t), reference(w64, scale * g64, 0.1, state64, t)
        values = test.executor.get_weights(trainable_only=False)
        assert values["two-dtypes/params/w32"].dtype == np.float32
        assert values["two-dtypes/params/w64"].dtype == np.float64
        # float32 Adam: 1 - beta_2^t in float32 is good to ~1e-4 relative (the reference is float64).
        np.testing.assert_allclose(values["two-dtypes/params/w32"], w32, rtol=2e-5, atol=1e-5)
        np.testing.assert_allclose(values["two-dtypes/params/w64"], w64, rtol=2e-5, atol=1e-5)
        # The slots keep their names, shapes and dtypes, and hold the moments.
        for name, state in (("w32", state32), ("w64", state64)):
            for slot in ("m", "v"):
                value = values[f"two-dtypes/adam-optimizer/{name}/{slot}"]
                assert value.dtype == values[f"two-dtypes/params/{name}"].dtype
                np.testing.assert_allclose(value, state[slot], rtol=1e-4, atol=1e-6, err_msg=f"{name}/{slot} step {t}")


def test_slots_survive_store_and_load(backend, tmp_path):
    # Continuing from a stored model equals continuing without the round trip (the moments are restored into the
    # slots the update reads, also in an executor that already stepped).
    def make():
        return ComponentTest(Regression(AdamOptimizer(0.05)), input_spaces=SPACES, backend=backend)
    first = make()
    for _ in range(3):
        first.test(("update", [X, Y, 0.0]))
    path = first.executor.store_model(str(tmp_path / "model"))
    stepped = make()
    stepped.test(("update", [X, Y, 0.0]))  # Its slots are in use before the load.
    fresh = make()
    for test in (stepped, fresh):
        test.executor.load_model(path)
    for _ in range(3):
        outs = [t.test(("update", [X, Y, 0.0])) for t in (first, stepped, fresh)]
        for out in outs[1:]:
            np.testing.assert_allclose(out, outs[0], rtol=1e-6)
    reference = first.executor.get_weights(trainable_only=False)
    for test in (stepped, fresh):
        values = test.executor.get_weights(trainable_only=False)
        assert list(values) == list(reference)
        for k in reference:
            np.testing.assert_allclose(values[k], reference[k], rtol=1e-6, atol=1e-7, err_msg=k)


def test_fused_pytorch_adam_equals_the_update_rule(monkeypatch):
    """PyTorch's Adam runs as ATen's fused multi-tensor kernel; it must give ``update_rule``'s updates (a 3-layer
    network with clipping, 4 steps, to float rounding), also where a variable is not contiguous (the kernel is
    then skipped: it walks memory in order, so a transposed layout once turned updates around)."""
    layers = ({"type": "dense", "units": 16, "activation": "tanh"}, {"type": "dense", "units": 7, "activation": "tanh"},
              {"type": "dense", "units": 1})
    x = np.random.default_rng(2).uniform(-1.0, 1.0, size=(32, 3)).astype(np.float32)
    y = np.sin(x[:, 0]).astype(np.float32)
    called = []
    fused = torch._fused_adam_

    def counting(*args, **kwargs):
        called.append(1)
        return fused(*args, **kwargs)

    def run(use_fused, transposed=False):
        monkeypatch.setattr(torch, "_fused_adam_", counting if use_fused else None, raising=False)
        test = ComponentTest(Regression(AdamOptimizer(0.02, clip_grad_norm=0.5), layers=layers), input_spaces=SPACES,
                             backend="pytorch")
        if transposed:
            kernel = test.executor.variables()["regression/neural-network/dense-1/kernel"]
            with torch.no_grad():  # Same values, transposed memory layout.
                kernel.set_(kernel.detach().t().contiguous().t())
            assert not kernel.is_contiguous()
        variables = list(test.executor.variables(trainable_only=True).values())
        versions = [v._version for v in variables]
        losses = [float(test.test(("update", [x, y, 0.0]))[0]) for _ in range(4)]
        # Every in-place update shows in the version counters (weight replicas refresh by them).
        assert all(v._version > before for v, before in zip(variables, versions))
        return losses, test.executor.get_weights(trainable_only=False)

    reference = run(False)
    assert not called
    for transposed in (False, True):
        called.clear()
        losses, weights = run(True, transposed)
        assert bool(called) != transposed  # The kernel ran, except with a non-contiguous variable.
        np.testing.assert_allclose(losses, reference[0], rtol=1e-4, atol=1e-5)
        for key, value in reference[1].items():
            np.testing.assert_allclose(weights[key], value, rtol=1e-4, atol=1e-5, err_msg=key)  # lr 0.02: a wrong update is off by ~0.02


def test_pytorch_variables_are_contiguous():
    """Initializers may give Fortran-ordered arrays (orthogonal's QR); variables are made C-contiguous."""
    from rlgraph.backends import get_backend
    value = np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    var = get_backend("pytorch").create_variable("v", value, trainable=True)
    assert var.is_contiguous()
    np.testing.assert_array_equal(var.detach().numpy(), value)


def test_adam_bias_corrections_are_exact(backend):
    """Adam's bias corrections 1 - beta ** t lose 1.3e-5 of 1 - beta_2 when beta is rounded to float32 first; with
    gradients of the size of epsilon that is a 3e-6 error in every early step, enough to move a run of 16 Adam steps
    on one backend off another's. The first two steps must equal Algorithm 1 in float64 to 1e-6."""
    lr = 1.0  # Steps of about 0.5 on weights below 2: float32 resolves them to 2.4e-7 of a step.
    test = ComponentTest(Regression(AdamOptimizer(lr, epsilon=1.0)), input_spaces=SPACES, backend=backend)
    weights = test.executor.get_weights()
    w, b = weights[KERNEL].astype(np.float64), weights[BIAS].astype(np.float64)
    reference, state_w, state_b = adam_reference(epsilon=1.0), {}, {}
    for t in (1, 2):
        _, g_w, g_b = numpy_gradients(w, b)
        assert 0.1 < np.abs(np.concatenate([g_w.ravel(), g_b])).min()  # Gradients of epsilon's size.
        test.test(("update", [X, Y, 0.0]))
        new_w, new_b = reference(w, g_w, lr, state_w, t), reference(b, g_b, lr, state_b, t)
        weights = test.executor.get_weights()
        np.testing.assert_allclose(weights[KERNEL] - w, new_w - w, rtol=1e-6, atol=2e-7, err_msg=f"kernel step {t}")
        np.testing.assert_allclose(weights[BIAS] - b, new_b - b, rtol=1e-6, atol=2e-7, err_msg=f"bias step {t}")
        w, b = weights[KERNEL].astype(np.float64), weights[BIAS].astype(np.float64)


class LinearLoss(Component):
    """Test-only: the loss sum(w * c) of a variable w of n entries, whose gradient is c exactly."""

    def __init__(self, n):
        self.n = n
        super().__init__(scope="linear-loss")

    def create_variables(self, input_spaces, action_space=None):
        self.w = self.get_variable("w", shape=(self.n,), dtype="float32", initializer=0.0, trainable=True)

    @rlgraph_api
    def loss(self, c):
        return self._graph_fn_loss(c)

    @graph_fn
    def _graph_fn_loss(self, c):
        return self.ops.sum(self.w * c)


class LinearStep(Component):
    def __init__(self, n, optimizer):
        self.linear, self.optimizer = LinearLoss(n), optimizer
        super().__init__(self.linear, self.optimizer, scope="linear-step")

    @rlgraph_api
    def update(self, c):
        return self.optimizer.step(self.linear.variables(), self.linear.loss(c))


def test_global_norm_of_a_large_gradient_is_exact(backend):
    """The clipping norm of 1.5M gradient entries of very different sizes (the Pong CNN's size) equals numpy's
    float64 norm to 1e-6: a float32 norm accumulated serially (torch.linalg.vector_norm on the CPU) is 8e-5 off
    there, and so was every clipped step."""
    n = 1_500_000
    rng = np.random.default_rng(4)
    c = (rng.normal(size=n) * rng.exponential(size=n) ** 3).astype(np.float32)
    norm = np.sqrt(np.sum(c.astype(np.float64) ** 2))
    test = ComponentTest(LinearStep(n, SGDOptimizer(1.0, clip_grad_norm=1.0)),
                         input_spaces=dict(c=FloatBox(shape=(n,))), backend=backend)
    _, out_norm = test.test(("update", [c]))
    np.testing.assert_allclose(out_norm, norm, rtol=1e-6)
    step = -test.executor.get_weights()["linear-step/linear-loss/w"].astype(np.float64)
    np.testing.assert_allclose(step, c / norm, rtol=1e-5, atol=1e-12)  # The clipped step: c / |c|.
