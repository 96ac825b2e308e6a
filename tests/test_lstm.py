"""LSTMLayer against a numpy unroll: initial states, resets in the middle of a sequence, both layouts."""
import numpy as np
import pytest

from rlgraph.components.layers import Layer, LSTMLayer
from rlgraph.spaces import BoolBox, FloatBox, Tuple
from rlgraph.tests import ComponentTest, run_on_backends
from rlgraph.utils.errors import RLGraphSpaceError, RLGraphSpecError

#: Component/foundation tests: their ``backend`` parametrization includes JAX (rlgraph.tests.pytest_plugin).
pytestmark = pytest.mark.all_backends

UNITS, IN, T, B = 3, 2, 6, 4
RNG = np.random.default_rng(5)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def lstm_reference(x, kernel, recurrent_kernel, bias, h, c, resets=None, forget_bias=1.0):
    """Time-major numpy unroll: gates i, f, g, o; the state is zeroed before step t where resets[t]."""
    outputs = []
    for t in range(x.shape[0]):
        if resets is not None:
            keep = ~resets[t][:, None]
            h, c = h * keep, c * keep
        z = x[t] @ kernel + h @ recurrent_kernel + bias
        i, f, g, o = np.split(z, 4, axis=-1)
        c = sigmoid(f + forget_bias) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        outputs.append(h)
    return np.stack(outputs), h, c


def spaces(time_major, with_state=True, with_resets=True):
    out = dict(inputs=FloatBox(shape=(IN,), add_batch_rank=True, add_time_rank=True, time_major=time_major))
    if with_state:
        out["initial_state"] = Tuple(FloatBox(shape=(UNITS,)), FloatBox(shape=(UNITS,)), add_batch_rank=True)
    if with_resets:
        out["resets"] = BoolBox(add_batch_rank=True, add_time_rank=True, time_major=time_major)
    return out


def sample_inputs(resets_at="many steps"):
    """x, h0, c0 and resets: at "many steps" (PyTorch: the hand-written scan; TF: the ``tf.scan`` unroll), at
    "one step" (some rows of step 3 only; PyTorch: the native LSTM before and after it; TF: ``tf.scan``) or at the
    "first step" only (some rows of step 0: both backends' fused LSTM from the masked initial state)."""
    x = RNG.standard_normal((T, B, IN)).astype(np.float32)
    h0 = RNG.standard_normal((B, UNITS)).astype(np.float32)
    c0 = RNG.standard_normal((B, UNITS)).astype(np.float32)
    resets = np.zeros((T, B), bool)
    if resets_at == "one step":
        resets[3, 1] = resets[3, 3] = True
    elif resets_at == "first step":
        resets[0, 1] = resets[0, 3] = True
    else:
        resets[3, 1] = resets[2, 3] = resets[5, 3] = True  # New episodes in the middle of the unroll ...
        resets[0, 2] = True                                # ... and at the start (drops the initial state).
    return x, h0, c0, resets


RESET_PATTERNS = ["many steps", "one step", "first step"]


def weights(test):
    return test.read_variable_values("lstm/kernel", "lstm/recurrent-kernel", "lstm/bias")


@pytest.mark.parametrize("resets_at", RESET_PATTERNS)
@pytest.mark.parametrize("time_major", [True, False])
def test_lstm_with_initial_state_and_resets(backend, time_major, resets_at):
    test = ComponentTest(LSTMLayer(UNITS, bias_initializer="normal"), spaces(time_major), backend=backend)
    kernel, recurrent_kernel, bias = weights(test)
    assert kernel.shape == (IN, 4 * UNITS) and recurrent_kernel.shape == (UNITS, 4 * UNITS)
    x, h0, c0, resets = sample_inputs(resets_at)
    outputs, h, c = lstm_reference(x, kernel, recurrent_kernel, bias, h0, c0, resets)
    if not time_major:
        x, resets, outputs = x.transpose(1, 0, 2), resets.T, outputs.transpose(1, 0, 2)
    test.test(("call", [x, (h0, c0), resets]), expected_outputs=(outputs, (h, c)), decimals=5)


def test_lstm_defaults_to_zero_state_and_no_resets(backend):
    layer = LSTMLayer(UNITS, forget_bias=0.0, bias_initializer="normal")
    test = ComponentTest(layer, spaces(True, with_state=False, with_resets=False), backend=backend)
    x = sample_inputs()[0]
    zeros = np.zeros((B, UNITS), np.float32)
    outputs, h, c = lstm_reference(x, *weights(test), zeros, zeros, forget_bias=0.0)
    test.test(("call", [x]), expected_outputs=(outputs, (h, c)), decimals=5)
    # Output spaces: time-ranked outputs, batch-ranked state.
    out_spaces = [r.space for r in test.meta_graph.api["call"].outputs]
    assert out_spaces[0] == FloatBox(shape=(UNITS,), add_batch_rank=True, add_time_rank=True, time_major=True)
    assert out_spaces[1] == Tuple(FloatBox(shape=(UNITS,)), FloatBox(shape=(UNITS,)), add_batch_rank=True)


@pytest.mark.parametrize("time_major", [True, False])
def test_lstm_with_initial_state_and_no_resets(backend, time_major):
    """Without resets (PyTorch: the native ``torch.lstm`` path), from a given state, in both layouts."""
    test = ComponentTest(LSTMLayer(UNITS, bias_initializer="normal"), spaces(time_major, with_resets=False),
                         backend=backend)
    x, h0, c0, _ = sample_inputs()
    outputs, h, c = lstm_reference(x, *weights(test), h0, c0)
    if not time_major:
        x, outputs = x.transpose(1, 0, 2), outputs.transpose(1, 0, 2)
    test.test(("call", [x, (h0, c0)]), expected_outputs=(outputs, (h, c)), decimals=5)


@pytest.mark.parametrize("with_resets", [False, True])
@pytest.mark.parametrize("time_major", [True, False])
def test_lstm_one_step(backend, time_major, with_resets):
    """A sequence of one step (acting; PyTorch: the single-step kernel, not ``torch.lstm``), from a given state,
    with some rows starting a new episode at it."""
    test = ComponentTest(LSTMLayer(UNITS, bias_initializer="normal"), spaces(time_major, with_resets=with_resets),
                         backend=backend)
    x, h0, c0, _ = sample_inputs()
    x = x[:1]
    resets = np.array([[False, True, False, True]]) if with_resets else None
    outputs, h, c = lstm_reference(x, *weights(test), h0, c0, resets)
    if with_resets:  # The reset matters.
        assert not np.allclose(h[1], lstm_reference(x, *weights(test), h0, c0)[1][1])
    if not time_major:
        x, outputs = x.transpose(1, 0, 2), outputs.transpose(1, 0, 2)
        resets = None if resets is None else resets.T
    args = [x, (h0, c0)] + ([resets] if with_resets else [])
    test.test(("call", args), expected_outputs=(outputs, (h, c)), decimals=5)


def test_lstm_reset_equals_fresh_start(backend):
    """A reset at step t gives the same outputs from t on as a new unroll from zeros on x[t:]."""
    test = ComponentTest(LSTMLayer(UNITS), spaces(True), backend=backend)
    x, h0, c0, _ = sample_inputs()
    resets = np.zeros((T, B), bool)
    resets[2] = True
    full, _ = test.test(("call", [x, (h0, c0), resets]))
    zeros = np.zeros((B, UNITS), np.float32)
    tail, _ = test.test(("call", [x[2:], (zeros, zeros), np.zeros((T - 2, B), bool)]))
    np.testing.assert_allclose(full[2:], tail, atol=1e-6)


def test_lstm_backends_agree():
    x, h0, c0, resets = sample_inputs()
    run_on_backends(lambda: Layer.from_spec({"type": "lstm", "units": UNITS, "bias_initializer": "normal"}),
                    spaces(False), [("call", [x.transpose(1, 0, 2), (h0, c0), resets.T])])


def test_lstm_gradients_flow_on_tf():
    """The tf.scan unroll is differentiable inside a graph function (the executor traces with autograph off)."""
    import tensorflow as tf

    test = ComponentTest(LSTMLayer(UNITS), spaces(True, with_state=False, with_resets=False), backend="tf")
    layer = test.component
    x = tf.constant(sample_inputs()[0])
    with tf.GradientTape() as tape:
        outputs, _ = layer._graph_fn_call(x, None, None)
        loss = tf.reduce_sum(outputs)
    grads = tape.gradient(loss, [layer.kernel, layer.recurrent_kernel, layer.bias])
    assert all(g is not None and np.abs(g.numpy()).sum() > 0 for g in grads)


def _layer_gradients(backend, time_major, inputs, weights_out):
    """d(sum(w_out * outputs) + sum(w_h * h_T) + sum(w_c * c_T)) / d(kernel, recurrent kernel, bias, h0, c0),
    computed by the backend's autograd through the layer's graph function (resets in the middle)."""
    test = ComponentTest(LSTMLayer(UNITS, bias_initializer="normal"), spaces(time_major), backend=backend)
    layer = test.component
    x, h0, c0, resets = inputs
    if not time_major:
        x, resets = x.transpose(1, 0, 2), resets.T
    w_out, w_h, w_c = weights_out
    if not time_major:
        w_out = w_out.transpose(1, 0, 2)
    weights_out.append(weights(test))
    if backend == "tf":
        import tensorflow as tf

        h0v, c0v = tf.Variable(h0), tf.Variable(c0)
        with tf.GradientTape() as tape:
            outputs, (h, c) = layer._graph_fn_call(tf.constant(x), (h0v, c0v), tf.constant(resets))
            loss = tf.reduce_sum(outputs * w_out) + tf.reduce_sum(h * w_h) + tf.reduce_sum(c * w_c)
        grads = tape.gradient(loss, [layer.kernel, layer.recurrent_kernel, layer.bias, h0v, c0v])
        return [g.numpy() for g in grads]
    import torch

    h0t, c0t = torch.tensor(h0, requires_grad=True), torch.tensor(c0, requires_grad=True)
    outputs, (h, c) = layer._graph_fn_call(torch.tensor(x), (h0t, c0t), torch.tensor(resets))
    loss = (outputs * torch.tensor(w_out)).sum() + (h * torch.tensor(w_h)).sum() + (c * torch.tensor(w_c)).sum()
    loss.backward()
    return [t.grad.numpy() for t in (layer.kernel, layer.recurrent_kernel, layer.bias, h0t, c0t)]


@pytest.mark.parametrize("resets_at", RESET_PATTERNS)
@pytest.mark.parametrize("time_major", [True, False])
def test_lstm_gradients_agree_across_backends(time_major, resets_at):
    """PyTorch's hand-written backpropagation through time gives TF's autodiff gradients of tf.scan, with
    resets inside the sequence and gradients flowing from the outputs, the last h and the last c."""
    rng = np.random.default_rng(11)
    out_weights = [rng.standard_normal((T, B, UNITS)).astype(np.float32),
                   rng.standard_normal((B, UNITS)).astype(np.float32),
                   rng.standard_normal((B, UNITS)).astype(np.float32)]
    tf_side, torch_side = list(out_weights), list(out_weights)
    inputs = sample_inputs(resets_at)
    tf_grads = _layer_gradients("tf", time_major, inputs, tf_side)
    torch_grads = _layer_gradients("pytorch", time_major, inputs, torch_side)
    for a, b in zip(tf_side[3], torch_side[3]):  # Same seed, same initial weights on both backends.
        np.testing.assert_array_equal(a, b)
    for name, g_tf, g_torch in zip(["kernel", "recurrent kernel", "bias", "h0", "c0"], tf_grads, torch_grads):
        assert np.abs(g_tf).max() > 1e-3, name
        np.testing.assert_allclose(g_torch, g_tf, rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("resets_at", ["many steps", "one step", None])
def test_lstm_scan_pytorch_passes_gradcheck(resets_at):
    """The PyTorch scan's gradients (hand-written with resets at many steps, native ``torch.lstm`` around resets at
    one step or without resets) against finite differences in float64, for every input: x, kernels, bias and
    the initial state."""
    import torch

    from unittest import mock

    from rlgraph.components.layers import lstm_scan_pytorch
    from rlgraph.components.layers.lstm_scan_pytorch import lstm_scan

    gen = torch.Generator().manual_seed(3)

    def rand(*shape):
        return (torch.randn(*shape, generator=gen, dtype=torch.float64) * 0.5).requires_grad_()

    steps, batch, units, size = 5, 3, 2, 3
    args = (rand(steps, batch, size), rand(size, 4 * units), rand(units, 4 * units), rand(4 * units),
            rand(batch, units), rand(batch, units))
    keep = None
    if resets_at == "many steps":
        keep = torch.ones(steps, batch, 1, dtype=torch.float64)
        keep[2, 0] = keep[0, 1] = keep[4, 2] = 0.0
    elif resets_at == "one step":
        keep = torch.ones(steps, batch, 1, dtype=torch.float64)
        keep[2, 0] = keep[2, 2] = 0.0
    with mock.patch.object(lstm_scan_pytorch, "_native", wraps=lstm_scan_pytorch._native) as native:
        assert torch.autograd.gradcheck(lambda *a: lstm_scan(*a, keep), args, eps=1e-6, atol=1e-6)
    assert native.called == (resets_at != "many steps")  # The path this case is meant to check.
    # One step (the single-step kernel), with and without a reset of some rows' state at it.
    one_step = (args[0][:1].detach().requires_grad_(),) + args[1:]
    with mock.patch.object(lstm_scan_pytorch, "_native", wraps=lstm_scan_pytorch._native) as native:
        assert torch.autograd.gradcheck(lambda *a: lstm_scan(*a, None if keep is None else keep[2:3]), one_step,
                                        eps=1e-6, atol=1e-6)
    assert not native.called


def test_lstm_rejects_bad_spaces():
    with pytest.raises(RLGraphSpaceError, match="'inputs': expected a FloatBox of shape \\[in\\] with batch and time"):
        ComponentTest(LSTMLayer(UNITS), dict(inputs=FloatBox(shape=(IN,), add_batch_rank=True)), backend="pytorch")
    bad_state = spaces(True)
    bad_state["initial_state"] = Tuple(FloatBox(shape=(UNITS + 1,)), FloatBox(shape=(UNITS,)), add_batch_rank=True)
    with pytest.raises(RLGraphSpaceError, match="'initial_state': expected a Tuple \\(h, c\\)"):
        ComponentTest(LSTMLayer(UNITS), bad_state, backend="pytorch")
    bad_resets = spaces(True)
    bad_resets["resets"] = BoolBox(add_batch_rank=True, add_time_rank=True, time_major=False)
    with pytest.raises(RLGraphSpaceError, match="'resets'.*\\[T, B\\] \\(time-major\\)"):
        ComponentTest(LSTMLayer(UNITS), bad_resets, backend="pytorch")
    with pytest.raises(RLGraphSpecError, match="units"):
        LSTMLayer(0)


@pytest.mark.parametrize("resets_at", ["many steps", "one step", "first step", None])
def test_lstm_scan_tf_takes_the_fused_op_without_inner_resets(resets_at):
    """TF runs ``BlockLSTMV2`` (one op) where no state is zeroed after the first step, else the masking
    ``tf.scan``; both give the numpy unroll's outputs (also inside a ``tf.function``, where the choice is a
    ``tf.cond``)."""
    import tensorflow as tf

    from unittest import mock

    from rlgraph.components.layers import lstm_scan_tf

    rng = np.random.default_rng(2)
    x, h0, c0, resets = sample_inputs(resets_at or "many steps")
    kernel, recurrent_kernel = (rng.standard_normal((IN, 4 * UNITS)).astype(np.float32),
                                rng.standard_normal((UNITS, 4 * UNITS)).astype(np.float32))
    bias = rng.standard_normal(4 * UNITS).astype(np.float32)
    keep = None if resets_at is None else (~resets).astype(np.float32)[:, :, None]
    expected, _, c_expected = lstm_reference(x, kernel, recurrent_kernel, bias, h0, c0,
                                             None if resets_at is None else resets, forget_bias=0.0)
    with mock.patch.object(lstm_scan_tf, "_forward_scan", wraps=lstm_scan_tf._forward_scan) as scan, \
            mock.patch.object(lstm_scan_tf, "_forward_fused", wraps=lstm_scan_tf._forward_fused) as fused:
        hs, c = lstm_scan_tf.lstm_scan(tf.constant(x), kernel, recurrent_kernel, bias, tf.constant(h0),
                                       tf.constant(c0), None if keep is None else tf.constant(keep))
    assert scan.called == (resets_at in ("many steps", "one step")) and fused.called == (not scan.called)
    np.testing.assert_allclose(hs.numpy(), expected, atol=1e-5)
    np.testing.assert_allclose(c.numpy(), c_expected, atol=1e-5)
    in_graph = tf.function(lambda *a: lstm_scan_tf.lstm_scan(*a))
    hs, c = in_graph(tf.constant(x), kernel, recurrent_kernel, bias, tf.constant(h0), tf.constant(c0),
                     None if keep is None else tf.constant(keep))
    np.testing.assert_allclose(hs.numpy(), expected, atol=1e-5)
    np.testing.assert_allclose(c.numpy(), c_expected, atol=1e-5)


def _tf_case(resets_at, seed=4):
    """Inputs (x, kernel, recurrent kernel, bias, h0, c0), keep and output weights for the TF kernel's tests."""
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    steps, batch, units, size = 7, 5, 4, 3
    args = [tf.constant(rng.standard_normal(shape).astype(np.float32) * 0.7) for shape in
            [(steps, batch, size), (size, 4 * units), (units, 4 * units), (4 * units,), (batch, units),
             (batch, units)]]
    keep = None
    if resets_at is not None:
        keep = np.ones((steps, batch, 1), np.float32)
        keep[0, 1] = keep[0, 4] = 0.0
        if resets_at == "many steps":
            keep[3, 0] = keep[5, 2] = keep[6, 0] = 0.0
        keep = tf.constant(keep)
    w_out = tf.constant(rng.standard_normal((steps, batch, units)).astype(np.float32))
    w_c = tf.constant(rng.standard_normal((batch, units)).astype(np.float32))
    return args, keep, w_out, w_c


@pytest.mark.parametrize("resets_at", ["many steps", "first step", None])
@pytest.mark.parametrize("in_function", [False, True])
def test_lstm_scan_tf_gradients_equal_autodiff_of_the_unroll(in_function, resets_at):
    """The hand-written backward pass (after the fused op, or after the masking scan where states are zeroed
    inside) gives TF's autodiff gradients of the plain ``tf.scan`` unroll for every input (x, kernels, bias,
    initial state), with gradients from the outputs and the last c, and with only the outputs used (the last
    c's gradient then comes in as None); eager and inside a ``tf.function`` with autograph on."""
    import tensorflow as tf

    from rlgraph.components.layers import lstm_scan_tf

    args, keep, w_out, w_c = _tf_case(resets_at)

    def gradients(fn, use_c):
        with tf.GradientTape() as tape:
            tape.watch(args)
            hs, c = fn(*args, keep)
            loss = tf.reduce_sum(hs * w_out) + (tf.reduce_sum(c * w_c) if use_c else 0.0)
        return tape.gradient(loss, args)

    for use_c in (True, False):
        run = (lambda f: tf.function(lambda: gradients(f, use_c))()) if in_function else \
            (lambda f: gradients(f, use_c))
        for name, g_ours, g_unroll in zip(["x", "kernel", "recurrent kernel", "bias", "h0", "c0"],
                                          run(lstm_scan_tf.lstm_scan), run(lstm_scan_tf._scan_autodiff)):
            assert np.abs(g_unroll.numpy()).max() > 1e-2, name
            np.testing.assert_allclose(g_ours.numpy(), g_unroll.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)


def test_lstm_scan_tf_differentiates_twice_in_one_graph():
    """``tf.gradients`` inside a graph and a ``GradientTape`` around it (as an agent's loss-and-gradients method
    under a user's tape) both differentiate the LSTM with states zeroed at the first step: the path choice is
    no differentiated ``tf.cond``, whose lazily built gradient would fail the second time."""
    import tensorflow as tf

    from rlgraph.components.layers import lstm_scan_tf

    args, keep, w_out, _ = _tf_case("first step")

    @tf.function(autograph=False)
    def twice():
        with tf.GradientTape() as tape:
            tape.watch(args[4])
            hs, _ = lstm_scan_tf.lstm_scan(*args, keep)
            loss = tf.reduce_sum(hs * w_out)
            inner = tf.gradients(loss, args[2])[0]
            total = loss + tf.reduce_sum(tf.stop_gradient(inner))
        return tape.gradient(total, args[4]), inner

    d_h0, inner = twice()
    with tf.GradientTape() as tape:
        tape.watch(args)
        loss = tf.reduce_sum(lstm_scan_tf._scan_autodiff(*args, keep)[0] * w_out)
    reference = tape.gradient(loss, args)
    np.testing.assert_allclose(inner.numpy(), reference[2].numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(d_h0.numpy(), reference[4].numpy(), rtol=1e-4, atol=1e-5)
    assert np.all(d_h0.numpy()[[1, 4]] == 0.0)  # Rows whose state the first step zeroes get no gradient.
