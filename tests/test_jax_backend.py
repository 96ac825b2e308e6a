"""The JAX backend's foundation: its registration and lazy import, the ways of choosing it, and the
functional state it threads through ``jax.jit`` (variables, random keys, checks and host calls). The operations
are checked in ``tests/test_backend_ops.py``, the executor in ``tests/test_jax_executor.py``."""
import importlib

import numpy as np
import pytest

import rlgraph.backends
from rlgraph.backends import get_backend
from rlgraph.utils import backend as backend_utils
from rlgraph.utils.backend import backend_available
from rlgraph.utils.errors import RLGraphBackendError, RLGraphRuntimeError

requires_jax = pytest.mark.skipif(not backend_available("jax"),
                                  reason="JAX is not installed: pip install 'rlgraph[jax]'")


def test_missing_jax_names_the_extra(monkeypatch):
    """Without JAX, choosing backend "jax" raises one line naming ``pip install 'rlgraph[jax]'``."""
    real_import = importlib.import_module

    def import_module(name, *args, **kwargs):
        if name == "jax" or name.startswith("jax."):
            raise ImportError(f"No module named '{name}'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(backend_utils.importlib, "import_module", import_module)
    lazy = backend_utils.LazyModule("jax", backend_utils.jax._lazy_install_hint)
    import rlgraph.backends.jax_backend as jax_backend
    monkeypatch.setattr(jax_backend, "jax", lazy)
    monkeypatch.setattr(rlgraph.backends, "_instances", {})
    with pytest.raises(RLGraphBackendError) as info:
        get_backend("JAX")
    message = str(info.value)
    assert "pip install 'rlgraph[jax]'" in message and "'jax' is not installed" in message and "\n" not in message


@requires_jax
@pytest.mark.parametrize("how", ["executor", "component_test", "config", "environment", "graph_fn", "build"])
def test_every_way_of_choosing_jax_reaches_it(how, monkeypatch):
    """Every way of choosing a backend for component graphs takes "jax" (``JaxExecutor``);
    it is never the default unless asked for."""
    from rlgraph.components import Component
    from rlgraph.executors.graph_executor import GraphExecutor
    from rlgraph.executors.jax_executor import JaxExecutor
    from rlgraph.engines.run_config import resolve_backend
    from rlgraph.tests import ComponentTest
    from rlgraph.utils.backend import get_default_backend
    from rlgraph.utils.decorators import graph_fn

    checks = {
        "executor": lambda: type(GraphExecutor.create(backend="jax", root_component=Component(scope="root")))
        is JaxExecutor,
        "component_test": lambda: ComponentTest(Component(scope="root"), backend="JAX").backend == "jax",
        "config": lambda: resolve_backend({"backend": "jax"}) == "jax",
        "environment": lambda: (monkeypatch.setenv("RLGRAPH_BACKEND", "jax"), get_default_backend())[1] == "jax",
        "graph_fn": lambda: "jax" in graph_fn(lambda self: None, backend="jax").impls,
        "build": lambda: get_backend("jax").run_build(lambda: 5) == 5,
    }
    assert checks[how]()
    monkeypatch.delenv("RLGRAPH_BACKEND", raising=False)
    assert get_default_backend() != "jax"


@requires_jax
def test_jax_backend_is_registered():
    from rlgraph.backends.jax_ops import JaxOps
    backend = get_backend("jax")
    assert backend.name == "jax" and type(backend.ops) is JaxOps and backend.ops.name == "jax"
    assert get_backend("Jax") is backend
    assert backend.ops.argmax(backend.ops.constant([[0.0, 2.0, 1.0]])).dtype == np.int64  # numpy's dtypes (x64).
    converted = backend.to_numpy(backend.to_backend({"a": (np.float32(1.5), np.arange(3))}))
    assert converted["a"][0].dtype == np.float32 and converted["a"][1].dtype == np.int64
    np.testing.assert_array_equal(converted["a"][1], [0, 1, 2])


@requires_jax
def test_variables_are_functional():
    """``assign``/``scatter_update`` return the new value and rebind the box; earlier reads keep their arrays."""
    backend = get_backend("jax")
    ops = backend.ops
    var = backend.create_variable("v", np.zeros((3, 2), np.float32), trainable=True)
    assert backend.is_trainable(var) and backend.shape_and_dtype(var) == ((3, 2), np.float32)
    before = ops.read_value(var)
    new = ops.assign(var, 2)
    assert new.dtype == np.float32 and new.shape == (3, 2)
    np.testing.assert_array_equal(np.asarray(before), 0.0)
    np.testing.assert_array_equal(backend.read_variable(var), 2.0)
    scattered = ops.scatter_update(var, ops.asarray([2, 0]), ops.constant([[1.0, 1.5], [3.0, 3.5]]))
    np.testing.assert_array_equal(np.asarray(scattered), [[3.0, 3.5], [2.0, 2.0], [1.0, 1.5]])
    np.testing.assert_array_equal(np.asarray(ops.read_value(var)), np.asarray(scattered))
    # A plain array stands for a variable: only the new value comes back.
    plain = ops.constant(np.zeros(3, np.int32))
    np.testing.assert_array_equal(np.asarray(ops.assign(plain, 7.9)), [7, 7, 7])
    np.testing.assert_array_equal(np.asarray(plain), 0)
    backend.assign_variable(var, np.ones((3, 2)))
    assert backend.read_variable(var).dtype == np.float32 and backend.read_variable(var).sum() == 6.0


@requires_jax
def test_variables_serve_as_arrays_in_graph_functions():
    """Graph functions use variables as tensors (``x @ self.kernel + self.bias``, ``ops.linear(x, self.kernel)``):
    a box's arithmetic and indexing are its value's, the ops table unwraps boxes, eagerly and under jit."""
    import jax
    backend = get_backend("jax")
    ops = backend.ops
    kernel = backend.create_variable("k", np.arange(6, dtype=np.float32).reshape(3, 2), trainable=True)
    bias = backend.create_variable("b", np.array([1.0, -1.0], np.float32), trainable=True)
    x = np.ones((4, 3), np.float32)
    expected = x @ np.arange(6, dtype=np.float32).reshape(3, 2) + np.array([1.0, -1.0], np.float32)

    def forward(x):
        return x @ kernel + bias, ops.linear(x, kernel, bias), 2.0 * bias[:1] - bias[1:], ops.concat([bias, bias], 0)
    for run in (forward, jax.jit(forward)):
        a, b, c, d = (np.asarray(v) for v in run(ops.constant(x)))
        np.testing.assert_allclose(a, expected)
        np.testing.assert_allclose(b, expected)
        np.testing.assert_allclose(c, [3.0])
        np.testing.assert_allclose(d, [1.0, -1.0, 1.0, -1.0])
    assert np.asarray(bias).dtype == np.float32 and len(bias) == 2 and kernel.ndim == 2


@requires_jax
def test_random_keys_are_threaded_and_saveable():
    """A jitted program draws what the same calls draw eagerly; the generator's state restores its stream; a draw
    under jit without a threaded key is refused."""
    import jax

    from rlgraph.backends.jax_backend import JaxGenerator, functional, run_functional
    from rlgraph.backends.op_generator import op_generator
    ops = get_backend("jax").ops

    def draw():
        return ops.random_uniform((3,)), ops.random_integers((2,), 0, 100)

    eager_gen = JaxGenerator(5)
    with op_generator(eager_gen):
        eager = [draw() for _ in range(2)]
    jit_gen = JaxGenerator(5)
    compiled = jax.jit(functional(draw))
    jitted = [run_functional(compiled, [], jit_gen) for _ in range(2)]
    for (u, i), (ju, ji) in zip(eager, jitted):
        np.testing.assert_array_equal(np.asarray(u), np.asarray(ju))
        np.testing.assert_array_equal(np.asarray(i), np.asarray(ji))
    assert not np.array_equal(np.asarray(eager[0][0]), np.asarray(eager[1][0]))
    np.testing.assert_array_equal(eager_gen.get_state(), jit_gen.get_state())

    state = jit_gen.get_state()
    again = JaxGenerator(0)
    again.set_state(state)
    np.testing.assert_array_equal(np.asarray(run_functional(compiled, [], again)[0]),
                                  np.asarray(run_functional(compiled, [], jit_gen)[0]))

    get_backend("jax").set_seed(3)
    first = np.asarray(ops.random_normal((4,)))
    get_backend("jax").set_seed(3)
    np.testing.assert_array_equal(np.asarray(ops.random_normal((4,))), first)
    saved = ops.generator.get_state()
    with pytest.raises(RLGraphBackendError, match="random draw under jax.jit needs its key threaded"):
        jax.jit(lambda x: x + ops.random_uniform((2,)))(np.zeros(2, np.float32))
    np.testing.assert_array_equal(ops.generator.get_state(), saved)  # The refused draw left no tracer behind.
    ops.random_uniform((2,))


@requires_jax
def test_checks_and_host_calls_stay_in_jitted_programs():
    """Under jit a check whose result is unused still fails the call, and a host call whose outputs are unused
    still runs, once per call, in program order."""
    import jax
    ops = get_backend("jax").ops
    seen = []

    def record(a):
        seen.append(float(a.sum()))
        return [np.zeros((), np.int64)]

    def program(x):
        ops.check(ops.all(x > 0.0), "x must be positive")
        ops.host_call(record, [x], [(np.int64, ())])
        ops.host_call(record, [x * 2.0], [(np.int64, ())])
        return x + 1.0

    compiled = jax.jit(program)
    for _ in range(2):
        np.testing.assert_array_equal(np.asarray(compiled(np.ones(3, np.float32))), 2.0)
    assert seen == [3.0, 6.0, 3.0, 6.0]
    with pytest.raises((RLGraphRuntimeError, jax.errors.JaxRuntimeError), match="x must be positive"):
        np.asarray(compiled(-np.ones(3, np.float32)))
    with pytest.raises(RLGraphRuntimeError, match="x must be positive"):
        program(ops.constant(-np.ones(3, np.float32)))


@requires_jax
def test_trace_detection_without_jax_internals(monkeypatch):
    """``_tracing`` uses JAX's private trace-state test where it exists; the public fallback answers the same."""
    import jax

    import rlgraph.backends.jax_ops as jax_ops
    for private in (jax_ops._trace_state_clean, None):
        monkeypatch.setattr(jax_ops, "_trace_state_clean", private)
        seen = []
        jax.jit(lambda x: (seen.append(jax_ops._tracing()), x)[1])(np.float32(1.0))
        assert seen == [True] and jax_ops._tracing() is False


@requires_jax
@pytest.mark.parametrize("strides", [(1, 1), (2, 3)])
def test_a_conv_over_the_whole_image_is_the_same_convolution(strides):
    """A "valid" convolution whose kernel covers the whole image (one output pixel) runs as a matmul over the
    flattened image, because XLA:CPU computes such a convolution's input gradient as a transposed convolution
    over a zero-padded image (kernel-size times the work). Its values and both gradients equal the general
    convolution's (``lax.conv_general_dilated``) and numpy's."""
    import jax
    from jax import lax

    ops = get_backend("jax").ops
    rng = np.random.default_rng(0)
    images = rng.normal(size=(5, 6, 4, 3)).astype(np.float32)
    kernel = rng.normal(size=(6, 4, 3, 7)).astype(np.float32)
    bias = rng.normal(size=7).astype(np.float32)
    weights = rng.normal(size=(5, 1, 1, 7)).astype(np.float32)

    def ours(x, k):
        return (ops.conv2d(x, k, bias, strides=strides, padding="valid") * weights).sum()

    def general(x, k):
        out = lax.conv_general_dilated(x, k, strides, "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                       precision=lax.Precision.HIGHEST)
        return ((out + bias) * weights).sum()

    out = np.asarray(ops.conv2d(images, kernel, bias, strides=strides, padding="valid"))
    expected = np.einsum("nhwc,hwcf->nf", images.astype(np.float64), kernel)[:, None, None, :] + bias
    assert out.shape == (5, 1, 1, 7)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    for got, want in zip(jax.grad(ours, (0, 1))(images, kernel), jax.grad(general, (0, 1))(images, kernel)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    # Numpy's gradients of sum(conv * weights): d/dx = weights . kernel^T, d/dkernel = x^T . weights.
    grad_x, grad_k = jax.grad(ours, (0, 1))(images, kernel)
    np.testing.assert_allclose(np.asarray(grad_x), np.einsum("nf,hwcf->nhwc", weights[:, 0, 0], kernel),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(grad_k), np.einsum("nhwc,nf->hwcf", images, weights[:, 0, 0]),
                               rtol=1e-5, atol=1e-5)
