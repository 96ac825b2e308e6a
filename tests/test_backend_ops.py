"""The backend operations table (``rlgraph.backends.ops``): every operation on every backend against numpy, in
eager mode and (TensorFlow) traced in a ``tf.function``."""
import inspect

import numpy as np
import pytest

from rlgraph.backends import get_backend
from rlgraph.backends.ops import BackendOps

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
}


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
    else:
        out = fn(ops, *[b.to_backend(x) for x in inputs])
    return b.to_numpy(out)


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_matches_numpy(backend, name):
    """Eager, and on TensorFlow also traced with an unknown batch axis, as graph functions run."""
    for traced in ([False, True] if backend == "tf" else [False]):
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
    assert out.shape == np.shape(expected), name
    assert out.dtype == np.asarray(expected).dtype or np.issubdtype(out.dtype, np.floating), (out.dtype, name)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6, err_msg=name)


def test_every_op_is_implemented_and_tested(backend):
    """Each backend implements every operation of the table, and this file checks each of them."""
    ops = get_backend(backend).ops
    public = [n for n, _ in inspect.getmembers(BackendOps, inspect.isfunction) if not n.startswith("_")]
    missing = [n for n in public if getattr(type(ops), n) is getattr(BackendOps, n) and n not in ("square", "is_floating")]
    assert not missing, f"{type(ops).__name__} lacks {missing}"
    untested = [n for n in public if not any(c == n or c.startswith(n + "_") for c in CASES)
                and n not in ("dtype", "is_floating", "logical_and", "logical_or", "logical_not", "shape")]
    assert not untested, f"no test case for {untested}"


def test_ops_of_a_component_need_its_backend():
    from rlgraph.components import Component
    from rlgraph.utils.errors import RLGraphError
    with pytest.raises(RLGraphError, match="built on a backend"):
        Component(scope="lonely").ops
