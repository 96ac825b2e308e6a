"""The backend operations table (``rlgraph.backends.ops``): every operation on every backend against numpy, in
eager mode and (TensorFlow) traced in a ``tf.function``, (JAX) compiled by ``jax.jit``; and the three backends
against each other on composite expressions."""
import inspect

import numpy as np
import pytest

from rlgraph.backends import get_backend
from rlgraph.backends.ops import BackendOps, area_weights, same_padding
from rlgraph.utils.backend import backend_available

#: Component/foundation tests: their ``backend`` parametrization includes JAX (rlgraph.tests.pytest_plugin).
pytestmark = pytest.mark.all_backends

#: The JAX-only tests below (the ``backend``-parametrized ones run on JAX where the plugin selects it):
requires_jax = pytest.mark.skipif(not backend_available("jax"),
                                  reason="JAX is not installed: pip install 'rlgraph[jax]'")

RNG = np.random.default_rng(3)
X = RNG.normal(size=(3, 4)).astype(np.float32)
Y = RNG.normal(size=(3, 4)).astype(np.float32)
P = np.abs(X) + 0.1
I = np.array([[0, 3, 1, 2], [2, 2, 0, 1], [3, 0, 0, 1]], dtype=np.int32)
C = X > 0


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


#: name -> (function of the ops table, numpy inputs, numpy reference).
CASES = {
    "constant": (lambda o: o.constant([1.5, 2.0], "float32"), np.array([1.5, 2.0], np.float32)),
    "cast": (lambda o, x: o.cast(x, "int32"), (X * 3,), (X * 3).astype(np.int32)),
    "reshape": (lambda o, x: o.reshape(x, (-1, 2)), (X,), X.reshape(-1, 2)),
    "reshape_dynamic": (lambda o, x: o.reshape(x, (o.shape(x)[0] * 2, -1)), (X,), X.reshape(6, 2)),
    "transpose": (lambda o, x: o.transpose(x, (1, 0)), (X,), X.T),
    "expand_dims": (lambda o, x: o.expand_dims(x, 1), (X,), X[:, None]),
    "squeeze": (lambda o, x: o.squeeze(o.expand_dims(x, -1), -1), (X,), X),
    "concat": (lambda o, x, y: o.concat([x, y], -1), (X, Y), np.concatenate([X, Y], -1)),
    "stack": (lambda o, x, y: o.stack([x, y], 1), (X, Y), np.stack([X, Y], 1)),
    "unstack": (lambda o, x: o.unstack(x, 1)[2], (X,), X[:, 2]),
    "broadcast_to": (lambda o, x: o.broadcast_to(x[0], (2, 4)), (X,), np.broadcast_to(X[0], (2, 4))),
    "reverse": (lambda o, x: o.reverse(x, 0), (X,), X[::-1]),
    "zeros_like": (lambda o, x: o.zeros_like(x, "int32"), (X,), np.zeros_like(X, np.int32)),
    "ones_like": (lambda o, x: o.ones_like(x), (X,), np.ones_like(X)),
    "full_like": (lambda o, x: o.full_like(x, 2.5), (X,), np.full_like(X, 2.5)),
    "zeros": (lambda o, x: o.zeros((2, 3), "float32", like=x), (X,), np.zeros((2, 3), np.float32)),
    "arange": (lambda o, x: o.arange(5, "int64", like=x), (X,), np.arange(5, dtype=np.int64)),
    "exp": (lambda o, x: o.exp(x), (X,), np.exp(X)),
    "expm1": (lambda o, x: o.expm1(x * 1e-4), (X,), np.expm1(X.astype(np.float64) * 1e-4)),
    "log": (lambda o, x: o.log(x), (P,), np.log(P)),
    "sqrt": (lambda o, x: o.sqrt(x), (P,), np.sqrt(P)),
    "square": (lambda o, x: o.square(x), (X,), X * X),
    "abs": (lambda o, x: o.abs(x), (X,), np.abs(X)),
    "sign": (lambda o, x: o.sign(x), (X,), np.sign(X)),
    "tanh": (lambda o, x: o.tanh(x), (X,), np.tanh(X)),
    "sigmoid": (lambda o, x: o.sigmoid(x), (X,), 1 / (1 + np.exp(-X))),
    "softplus": (lambda o, x: o.softplus(x), (X,), np.log1p(np.exp(X))),
    "relu": (lambda o, x: o.relu(x), (X,), np.maximum(X, 0)),
    "minimum": (lambda o, x, y: o.minimum(x, y), (X, Y), np.minimum(X, Y)),
    "minimum_number": (lambda o, x: o.minimum(x, 0.5) + o.minimum(0.2, x), (X,), np.minimum(X, .5) + np.minimum(.2, X)),
    "maximum": (lambda o, x, y: o.maximum(x, y), (X, Y), np.maximum(X, Y)),
    "maximum_number": (lambda o, x: o.maximum(x, 0.5) + o.maximum(0.2, x), (X,), np.maximum(X, .5) + np.maximum(.2, X)),
    "clip": (lambda o, x: o.clip(x, -0.5, 0.5), (X,), np.clip(X, -0.5, 0.5)),
    "clip_low": (lambda o, x: o.clip(x, low=0.1), (X,), np.maximum(X, 0.1)),
    "clip_high": (lambda o, x: o.clip(x, high=0.1), (X,), np.minimum(X, 0.1)),
    "where": (lambda o, c, x, y: o.where(c, x, y), (C, X, Y), np.where(C, X, Y)),
    "where_number": (lambda o, c, x: o.where(c, x, 0.0), (C, X), np.where(C, X, 0.0)),
    "equal": (lambda o, i: o.equal(i, 2), (I,), I == 2),
    "logical": (lambda o, c: o.logical_or(o.logical_and(c, o.logical_not(c)), c), (C,), C),
    "sum": (lambda o, x: o.sum(x), (X,), X.sum()),
    "sum_axis": (lambda o, x: o.sum(x, axis=1, keepdims=True), (X,), X.sum(1, keepdims=True)),
    "sum_axes": (lambda o, x: o.sum(x, axis=(0, 1)), (X,), X.sum((0, 1))),
    "mean": (lambda o, x: o.mean(x, axis=0), (X,), X.mean(0)),
    "max": (lambda o, x: o.max(x, axis=-1), (X,), X.max(-1)),
    "min": (lambda o, x: o.min(x), (X,), X.min()),
    "all": (lambda o, c: o.all(c, axis=1), (C,), C.all(1)),
    "any": (lambda o, c: o.any(c), (C,), C.any()),
    "argmax": (lambda o, x: o.argmax(x, axis=-1), (X,), X.argmax(-1)),
    "cumsum": (lambda o, x: o.cumsum(x, axis=0), (X,), np.cumsum(X, 0)),
    "cumsum_reverse": (lambda o, x: o.cumsum(x, axis=1, reverse=True), (X,), np.cumsum(X[:, ::-1], 1)[:, ::-1]),
    "softmax": (lambda o, x: o.softmax(x), (X,), _softmax(X)),
    "log_softmax": (lambda o, x: o.log_softmax(x, axis=0), (X,), np.log(_softmax(X, 0))),
    "logsumexp": (lambda o, x: o.logsumexp(x, axis=-1), (X,), np.log(np.exp(X).sum(-1))),
    "matmul": (lambda o, x, y: o.matmul(x, o.transpose(y, (1, 0))), (X, Y), X @ Y.T),
    "one_hot": (lambda o, i: o.one_hot(i, 4), (I,), np.eye(4, dtype=np.float32)[I]),
    "take_along_last": (lambda o, x, i: o.take_along_last(x, i[:, 0]), (X, I), X[np.arange(3), I[:, 0]]),
    "gather": (lambda o, x, i: o.gather(x, i[0], axis=1), (X, I), np.take(X, I[0], axis=1)),
    "stop_gradient": (lambda o, x: o.stop_gradient(x), (X,), X),
    "random_uniform": (lambda o, x: o.random_uniform((1000,), 2.0, 3.0, like=x), (X,), None),
    "random_normal": (lambda o, x: o.random_normal((4000,), 1.0, 2.0, like=x), (X,), None),
    "random_integers": (lambda o, x: o.random_integers((4000,), 2, 7, like=x), (X,), None),
    "asarray": (lambda o, x: o.asarray(x, "float64"), (X,), X.astype(np.float64)),
    "asarray_number": (lambda o, x: o.asarray(0.5, "float32", like=x) * x, (X,), 0.5 * X),
    "ndim": (lambda o, x: o.zeros((o.ndim(x), 1), "float32", like=x), (X,), np.zeros((2, 1), np.float32)),
    "huber": (lambda o, x: o.huber(2.0 * x, 1.5), (X,),
              np.where(np.abs(2 * X) <= 1.5, 0.5 * (2 * X) ** 2, 1.5 * (np.abs(2 * X) - 0.75))),
    "std": (lambda o, x: o.std(x), (X,), X.std()),
    "std_axis": (lambda o, x: o.std(x, axis=0, keepdims=True), (X,), X.std(0, keepdims=True)),
}


# --- layers, variables, checks and host calls ----------------------------------------------------------------
def _conv2d_ref(images, kernel, bias, strides, padding):
    (sh, sw), (kh, kw) = strides, kernel.shape[:2]
    if padding == "same":
        _, top, bottom = same_padding(images.shape[1], kh, sh)
        _, left, right = same_padding(images.shape[2], kw, sw)
        images = np.pad(images, ((0, 0), (top, bottom), (left, right), (0, 0)))
    out_h, out_w = (images.shape[1] - kh) // sh + 1, (images.shape[2] - kw) // sw + 1
    out = np.zeros((images.shape[0], out_h, out_w, kernel.shape[3]), np.float32)
    for i in range(out_h):
        for j in range(out_w):
            patch = images[:, i * sh:i * sh + kh, j * sw:j * sw + kw, :]
            out[:, i, j, :] = np.einsum("nhwc,hwcf->nf", patch, kernel)
    return out + bias


def _bilinear_weights(size_in, size_out):
    """Half-pixel-center bilinear interpolation along one axis, ``[size_out, size_in]``."""
    src = np.maximum((np.arange(size_out) + 0.5) * size_in / size_out - 0.5, 0.0)
    low = np.floor(src).astype(int)
    high = np.minimum(low + 1, size_in - 1)
    weights = np.zeros((size_out, size_in))
    np.add.at(weights, (np.arange(size_out), low), 1.0 - (src - low))
    np.add.at(weights, (np.arange(size_out), high), src - low)
    return weights


_VARIABLES = {}


def _variable(o, value):
    """A variable holding ``value``: created once per backend and shape (TF traces a ``tf.function`` twice when
    it creates variables, the second time without creating any), set to ``value`` with ``assign``."""
    value = np.asarray(value)
    key = (o.name, value.shape, value.dtype.name)
    if key not in _VARIABLES:
        _VARIABLES[key] = get_backend(o.name).create_variable(f"test-variable-{len(_VARIABLES)}", value,
                                                             trainable=False)
    o.assign(_VARIABLES[key], o.constant(value))
    return _VARIABLES[key]


def _assigned(o, x, value):
    var = _variable(o, np.zeros((3, 4), np.float32))
    o.assign(var, value(x))
    return o.read_value(var)


def _read_before_assign(o, x):
    var = _variable(o, X)
    before = o.read_value(var)
    o.assign(var, x * 0.0)
    return before + o.read_value(var)


def _scattered(o, x):
    var = _variable(o, np.zeros((5, 4), np.float32))
    o.scatter_update(var, o.asarray([3, 0], "int64", like=x), x[:2])
    return o.read_value(var)


def _scattered_many(o, x, y):
    var = _variable(o, np.zeros((7, 4), np.float32))
    o.scatter_update(var, o.asarray([6, 0, 4, 2, 5], "int64", like=x), o.concat([x, y[:2]], 0))
    return o.read_value(var)


IMAGES = np.concatenate([X, Y], -1).reshape(1, 3, 4, 2)
KERNEL = Y.reshape(2, 1, 2, 3)
KERNEL_WHOLE = np.concatenate([X, Y, Y, X], -1).reshape(3, 4, 2, 2)  # Covers the whole 3x4 image.
_scatter_ref = np.zeros((5, 4), np.float32)
_scatter_ref[[3, 0]] = X[:2]
_scatter_many_ref = np.zeros((7, 4), np.float32)
_scatter_many_ref[[6, 0, 4, 2, 5]] = np.concatenate([X, Y[:2]])

CASES.update({
    "tensordot": (lambda o, x, y: o.tensordot(x, y[0], 1), (X, Y), X @ Y[0]),
    "tensordot_matrix": (lambda o, x, y: o.tensordot(x, o.transpose(y, (1, 0)), 1), (X, Y), X @ Y.T),
    "tensordot_axes": (lambda o, x, y: o.tensordot(x, y, 2), (X, Y), np.tensordot(X, Y, 2)),
    "linear": (lambda o, x, y: o.linear(x, o.transpose(y, (1, 0)), y[0, :3]), (X, Y), X @ Y.T + Y[0, :3]),
    "linear_3d": (lambda o, x, y: o.linear(o.stack([x, y], 1), o.transpose(y, (1, 0)), y[1, :3]), (X, Y),
                  np.stack([X, Y], 1) @ Y.T + Y[1, :3]),
    "linear_no_bias": (lambda o, x, y: o.linear(x, o.transpose(y, (1, 0))), (X, Y), X @ Y.T),
    "conv2d": (lambda o, x, y: o.conv2d(o.reshape(o.concat([x, y], -1), (1, 3, 4, 2)), o.reshape(y, (2, 1, 2, 3)),
                                        y[0, :3]), (X, Y), _conv2d_ref(IMAGES, KERNEL, Y[0, :3], (1, 1), "valid")),
    "conv2d_same": (lambda o, x, y: o.conv2d(o.reshape(o.concat([x, y], -1), (1, 3, 4, 2)),
                                             o.reshape(y, (2, 1, 2, 3)), strides=(2, 2), padding="same"), (X, Y),
                    _conv2d_ref(IMAGES, KERNEL, 0.0, (2, 2), "same")),
    "conv2d_whole_image": (lambda o, x, y: o.conv2d(o.reshape(o.concat([x, y], -1), (1, 3, 4, 2)),
                                                    o.reshape(o.concat([x, y, y, x], -1), (3, 4, 2, 2)), y[0, :2],
                                                    strides=(2, 2)), (X, Y),
                           _conv2d_ref(IMAGES, KERNEL_WHOLE, Y[0, :2], (2, 2), "valid")),
    "resize_images": (lambda o, x: o.resize_images(o.reshape(x, (1, 3, 4, 1)), (5, 6)), (X,),
                      np.einsum("ih,nhwc,jw->nijc", _bilinear_weights(3, 5), X.reshape(1, 3, 4, 1),
                                _bilinear_weights(4, 6)).astype(np.float32)),
    "resize_images_area": (lambda o, x: o.resize_images(o.reshape(x, (1, 3, 4, 1)), (2, 3), "area"), (X,),
                           np.einsum("ih,nhwc,jw->nijc", area_weights(3, 2), X.reshape(1, 3, 4, 1),
                                     area_weights(4, 3))),
    "ascontiguousarray": (lambda o, x: o.ascontiguousarray(o.transpose(x, (1, 0))), (X,), X.T),
    "multiply": (lambda o, i: o.multiply(i, 0.5, "float32"), (I,), I * np.float32(0.5)),
    "multiply_float": (lambda o, x, y: o.multiply(x, y), (X, Y), X * Y),
    "divide": (lambda o, i: o.divide(i, 3.0, "float32"), (I,), I.astype(np.float32) / np.float32(3.0)),
    "divide_float": (lambda o, x, y: o.divide(x, y, "float32"), (X, Y), X / Y),
    "assign": (lambda o, x: _assigned(o, x, lambda v: v * 2.0), (X,), 2 * X),
    "assign_number": (lambda o, x: _assigned(o, x, lambda v: 1.5), (X,), np.full((3, 4), 1.5, np.float32)),
    "read_value": (_read_before_assign, (X,), X),
    "scatter_update": (_scattered, (X,), _scatter_ref),
    "scatter_update_many": (_scattered_many, (X, Y), _scatter_many_ref),
    "check": (lambda o, x: o.check(True, "never", o.check(o.all(o.equal(x, x)), "never fails", (x,))[0]), (X,), X),
    "host_call": (lambda o, x: o.host_call(lambda a, k: [a * k + 1.0], [x, 2.0], [(np.float32, (None, 4))])[0],
                  (X,), 2 * X + 1),
    "host_call_sized": (lambda o, x: o.host_call(lambda a: [a.sum(0), a.shape[0]], [x],
                                                 [(np.float32, (4,)), (np.int64, ())])[0], (X,), X.sum(0)),
})

#: Cases JAX cannot compile, with the error they raise under ``jax.jit`` instead.
JAX_JIT_REFUSED = {"host_call": "needs every output size known"}


def test_failing_check_and_host_call_raise_runtime_errors(backend):
    """A failed ``check`` and an ``RLGraphError`` in a ``host_call``'s function: ``RLGraphRuntimeError`` with the
    message (TensorFlow: an assertion failing at run time; the executor turns it into ``RLGraphRuntimeError``)."""
    from rlgraph.utils.errors import RLGraphError, RLGraphRuntimeError

    def fail(a):
        raise RLGraphError("the host side failed")

    expected, shape = RLGraphRuntimeError, (None, 4)
    if backend == "tf":
        import tensorflow as tf
        expected = (RLGraphRuntimeError, tf.errors.InvalidArgumentError)
    elif backend == "jax":  # A callback's error inside a program (the JAX executor turns it into RLGraphRuntimeError).
        import jax
        expected, shape = (RLGraphRuntimeError, jax.errors.JaxRuntimeError), X.shape  # jit: static output sizes.
    with pytest.raises(expected, match="x must be positive"):
        _run(backend, lambda o, x: o.check(o.all(x > 0.0), "x must be positive", x), (X,), traced=True)
    with pytest.raises(RLGraphRuntimeError, match="x is empty"):
        _run(backend, lambda o, x: (o.check(False, "x is empty"), x)[1], (X,), traced=False)
    with pytest.raises(expected, match="the host side failed"):
        _run(backend, lambda o, x: o.host_call(fail, [x], [(np.float32, shape)])[0], (X,), traced=True)


def _case(name):
    case = CASES[name]
    return (case[0], (), case[1]) if len(case) == 2 else case


def _run(backend, fn, inputs, traced):
    b = get_backend(backend)
    ops = b.ops
    if backend == "tf" and traced:
        import tensorflow as tf
        specs = [tf.TensorSpec([None] + list(np.shape(x)[1:]), tf.as_dtype(np.asarray(x).dtype)) for x in inputs]
        out = tf.function(lambda *a: fn(ops, *a), input_signature=specs)(*[b.to_backend(x) for x in inputs])
    elif backend == "jax" and traced:
        out = _run_jitted(b, fn, inputs)
    else:
        out = fn(ops, *[b.to_backend(x) for x in inputs])
    return b.to_numpy(out)


def _run_jitted(b, fn, inputs):
    """``fn`` compiled by ``jax.jit`` as the JAX executor is to run graph functions: the test variables' values and
    the ops table's random key threaded in and out (``jax_backend.functional``)."""
    import jax

    from rlgraph.backends.jax_backend import functional, run_functional
    variables = [var for key, var in _VARIABLES.items() if key[0] == "jax"]
    compiled = jax.jit(functional(lambda *a: fn(b.ops, *a), variables))
    return run_functional(compiled, variables, b.ops.generator, *[b.to_backend(x) for x in inputs])


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_matches_numpy(backend, name):
    """Eager, and on TensorFlow also traced with an unknown batch axis, as graph functions run; on JAX also
    compiled once by ``jax.jit`` (variables and random keys threaded through the program), where it compiles."""
    for traced in ([False, True] if backend in ("tf", "jax") else [False]):
        if backend == "jax" and traced and name in JAX_JIT_REFUSED:
            from rlgraph.utils.errors import RLGraphBackendError
            with pytest.raises(RLGraphBackendError, match=JAX_JIT_REFUSED[name]):
                _check(backend, name, traced)
        else:
            _check(backend, name, traced)


def _check(backend, name, traced):
    fn, inputs, expected = _case(name)
    out = np.asarray(_run(backend, fn, inputs, traced))
    if name == "random_uniform":
        assert out.min() >= 2.0 and out.max() < 3.0 and abs(out.mean() - 2.5) < 0.05
        return
    if name == "random_normal":
        assert abs(out.mean() - 1.0) < 0.15 and abs(out.std() - 2.0) < 0.15
        return
    if name == "random_integers":
        assert out.dtype == np.int64 and set(np.unique(out)) == {2, 3, 4, 5, 6}
        return
    assert out.shape == np.shape(expected), name
    assert out.dtype == np.asarray(expected).dtype or np.issubdtype(out.dtype, np.floating), (out.dtype, name)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6, err_msg=name)


@requires_jax
def test_failing_check_and_host_call_raise_on_jax():
    """Eagerly ``RLGraphRuntimeError`` at once; under ``jax.jit`` the compiled call fails when run, with the
    message, and leaves the variables and the random key as they were."""
    import jax

    from rlgraph.utils.errors import RLGraphError, RLGraphRuntimeError

    def fail(a):
        raise RLGraphError("the host side failed")

    def checked_update(o, x):
        var = _variable(o, np.zeros((3, 4), np.float32))
        o.random_uniform((2,))
        o.assign(var, o.check(o.all(x > 0.0), "x must be positive", x))
        return o.read_value(var)

    b = get_backend("jax")
    ops, var = b.ops, _variable(b.ops, np.zeros((3, 4), np.float32))
    for traced in (False, True):
        expected = (RLGraphRuntimeError, jax.errors.JaxRuntimeError) if traced else RLGraphRuntimeError
        b.assign_variable(var, np.ones((3, 4)))
        key = ops.generator.get_state()
        with pytest.raises(expected, match="x must be positive"):
            _run("jax", checked_update, (X,), traced=traced)
        if traced:  # The failed program returned no new state.
            np.testing.assert_array_equal(ops.generator.get_state(), key)
            np.testing.assert_array_equal(b.read_variable(var), 1.0)
        with pytest.raises(expected, match="the host side failed"):
            _run("jax", lambda o, x: o.host_call(fail, [x], [(np.float32, (3, 4))])[0], (X,), traced=traced)
    assert np.all(_run("jax", checked_update, (P,), traced=True) == P)
    with pytest.raises(RLGraphRuntimeError, match="x is empty"):
        _run("jax", lambda o, x: (o.check(False, "x is empty"), x)[1], (X,), traced=True)


def _assert_complete(ops):
    public = [n for n, _ in inspect.getmembers(BackendOps, inspect.isfunction) if not n.startswith("_")]
    missing = [n for n in public
               if getattr(type(ops), n) is getattr(BackendOps, n) and n not in ("square", "is_floating")]
    assert not missing, f"{type(ops).__name__} lacks {missing}"
    untested = [n for n in public if not any(c == n or c.startswith(n + "_") for c in CASES)
                and n not in ("dtype", "is_floating", "logical_and", "logical_or", "logical_not", "shape")]
    assert not untested, f"no test case for {untested}"


@requires_jax
def test_every_op_is_implemented_and_tested_on_jax():
    _assert_complete(get_backend("jax").ops)


# --- the three backends against each other ---------------------------------------------------------------------
GAMMAS = (0.9 ** np.arange(4)).astype(np.float32)


def _f64(x):
    return np.asarray(x, np.float64)


def _huber(x, delta):
    return np.where(np.abs(x) <= delta, 0.5 * x * x, delta * (np.abs(x) - 0.5 * delta))


def _discounted_returns(rewards, gamma):
    out, running = np.zeros_like(rewards), 0.0
    for t in reversed(range(rewards.shape[1])):
        running = rewards[:, t] + gamma * running
        out[:, t] = running
    return out


_RATIO = np.exp(_f64(X) - _f64(Y))

#: name -> (function of the ops table, numpy inputs, float64 numpy reference): composite expressions as graph
#: functions write them (policy log-likelihoods, entropy, a TD loss, discounted returns, PPO's clipped objective).
COMPOSITES = {
    "action_log_probs": (lambda o, x, i: o.take_along_last(o.log_softmax(x), i[:, 0]), (X, I),
                         np.log(_softmax(_f64(X)))[np.arange(3), I[:, 0]]),
    "entropy": (lambda o, x: -o.sum(o.softmax(x) * o.log_softmax(x), axis=-1), (X,),
                -(_softmax(_f64(X)) * np.log(_softmax(_f64(X)))).sum(-1)),
    "huber_td_loss": (lambda o, x, y: o.mean(o.huber(x - o.stop_gradient(y), 1.0), axis=0), (X, Y),
                      _huber(_f64(X) - _f64(Y), 1.0).mean(0)),
    "discounted_returns": (lambda o, x, g: o.cumsum(x * g, axis=1, reverse=True) / g, (X, GAMMAS),
                           _discounted_returns(_f64(X), 0.9)),
    "ppo_clipped": (lambda o, x, y: o.minimum(o.exp(x - y) * y, o.clip(o.exp(x - y), 0.8, 1.2) * y), (X, Y),
                    np.minimum(_RATIO * Y, np.clip(_RATIO, 0.8, 1.2) * Y)),
    "normalized": (lambda o, x: (x - o.mean(x, axis=0)) / (o.std(x, axis=0) + 1e-8), (X,),
                   (_f64(X) - _f64(X).mean(0)) / (_f64(X).std(0) + 1e-8)),
}


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_backends_agree_on_composites(name):
    """TFOps, PyTorchOps and JaxOps (eager and jitted) agree to 1e-6 in float32, and each with numpy's float64
    value to float32's precision."""
    fn, inputs, reference = COMPOSITES[name]
    runs = [(b, False) for b in ("tf", "pytorch") if backend_available(b)]
    runs += [("jax", False), ("jax", True)] if backend_available("jax") else []
    if len(runs) < 2:
        pytest.skip("fewer than two backends installed")
    outs = {run: np.asarray(_run(run[0], fn, inputs, traced=run[1])) for run in runs}
    first = runs[0]
    for run in runs:
        assert outs[run].dtype == np.float32, (name, run, outs[run].dtype)
        np.testing.assert_allclose(outs[run], outs[first], rtol=1e-6, atol=1e-6, err_msg=f"{name}: {run} vs {first}")
        np.testing.assert_allclose(outs[run], reference, rtol=1e-5, atol=1e-6, err_msg=f"{name}: {run} vs numpy")


def test_every_op_is_implemented_and_tested(backend):
    """Each backend implements every operation of the table, and this file checks each of them."""
    _assert_complete(get_backend(backend).ops)


def test_ops_of_a_component_need_its_backend():
    from rlgraph.components import Component
    from rlgraph.utils.errors import RLGraphError
    with pytest.raises(RLGraphError, match="built on a backend"):
        Component(scope="lonely").ops
