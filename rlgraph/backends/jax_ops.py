"""The backend operations table on JAX (see ``rlgraph.backends.ops``), eager or traced by ``jax.jit``.

Where JAX differs from the other backends, the contract is:

- Variables (``JaxVariable``, ``rlgraph.backends.jax_backend``) are functional: ``assign`` and ``scatter_update``
  compute the new value, rebind the variable's box to it and return it; ``read_value`` returns the box's current
  array (immutable: later assignments never change it). A plain array may stand for a variable: then the new
  value is only returned.
- Random draws take their keys from the current ``JaxGenerator`` (the executor's, threaded through traced
  programs by ``jax_backend.functional``), else from this table's own ``generator`` (seeded by
  ``JaxBackend.set_seed``), which only draws eagerly.
- ``check``: a Python bool or a concrete array is checked at once (``RLGraphRuntimeError``); under ``jax.jit`` an
  unordered ``io_callback`` raises when the program runs, so the whole call fails (``jax.errors.JaxRuntimeError``
  carrying the message, which an executor turns into ``RLGraphRuntimeError``) and no new state is returned.
- ``host_call``: eagerly ``fn`` runs at once; under ``jax.jit`` through an ordered ``io_callback`` (run in program
  order, never dropped when its outputs are unused, as the other backends' stateful host calls), which needs every
  output size known: ``None`` in an output shape raises ``JaxUntraceableError`` (an ``RLGraphBackendError``)
  there, and the executor runs that API method eagerly. An ``RLGraphError`` of ``fn`` surfaces as ``check``'s
  failures do.
- ``gather``/``take_along_last`` cannot raise for indices out of range under ``jax.jit``; JAX fills such entries.
- Under ``jax.jit``, ``constant``/``asarray``/``cast``/``minimum``/``maximum`` of values known when the program is
  made (Python numbers, numpy values) give numpy values (static sizes stay static; see ``_static``).
"""
import numpy as np

from rlgraph.backends.jax_backend import (JaxGenerator, JaxUntraceableError, JaxVariable, current_generator,
                                          current_tape)
from rlgraph.backends.ops import BackendOps, area_weights, numpy_dtype, same_padding
from rlgraph.utils.backend import jax
from rlgraph.utils.errors import RLGraphError, RLGraphRuntimeError

# This module is imported only when the JAX table is made (``JaxBackend._make_ops``): JAX is loaded by then.
jnp = jax.numpy
lax = jax.lax
_Tracer = jax.core.Tracer
from jax.experimental import io_callback  # noqa: E402


def _dtype(dtype):
    return None if dtype is None else numpy_dtype(dtype)


def _axis(axis):
    return tuple(axis) if isinstance(axis, list) else axis


try:  # JAX's own test whether a trace is active: ~0.3 us, where creating an array to see if it is a tracer costs ~60.
    from jax._src.core import trace_state_clean as _trace_state_clean  # noqa: E402 (private; checked below)
except ImportError:  # pragma: no cover - a JAX that moved it: the public (slower) test.
    _trace_state_clean = None


def _tracing(values=()):
    """Whether this runs inside a JAX trace (``jax.jit``): an input is a tracer, or a new array would be one."""
    if any(isinstance(v, _Tracer) for v in values):
        return True
    if _trace_state_clean is not None:
        return not _trace_state_clean()
    return isinstance(jnp.zeros((), bool), _Tracer)


def _static(*values):
    """Whether, under ``jax.jit``, ``values`` are all known when the program is made (Python numbers, numpy values):
    conversions and ``minimum``/``maximum`` of such values stay numpy there (as TensorFlow folds constants), so that
    sizes computed from static shapes (``n = ops.asarray(shape[0])``, ``ops.arange(ops.minimum(n, capacity))``)
    remain static instead of becoming tracers. Eagerly the operations return JAX arrays as always."""
    return all(isinstance(v, (int, float, bool, np.ndarray, np.generic)) for v in values) and _tracing()


class JaxOps(BackendOps):
    """``BackendOps`` on JAX (``jax.numpy``, ``jax.lax``, ``jax.nn``); every operation also works under ``jax.jit``.

    Attributes:
        generator: The ``JaxGenerator`` random draws use where no other is current (eager draws only).
    """

    name = "jax"

    def __init__(self, seed=0):
        self.generator = JaxGenerator(seed)

    # --- conversion and types ----------------------------------------------------------------------------
    def constant(self, value, dtype=None, like=None):
        if _static(value):
            return np.asarray(value, dtype=_dtype(dtype))
        return jnp.asarray(value, dtype=_dtype(dtype))

    def cast(self, x, dtype):
        if _static(x):
            return np.asarray(x).astype(numpy_dtype(dtype))
        return jnp.asarray(x).astype(numpy_dtype(dtype))

    def asarray(self, x, dtype=None, like=None):
        if _static(x):
            return np.asarray(x, dtype=_dtype(dtype))
        return jnp.asarray(x, dtype=_dtype(dtype))

    def dtype(self, x):
        return np.dtype(x.dtype)

    # --- shapes ------------------------------------------------------------------------------------------
    def shape(self, x):
        return tuple(x.shape)

    def ndim(self, x):
        return x.ndim

    def reshape(self, x, shape):
        return jnp.reshape(x, tuple(int(s) for s in shape))

    def transpose(self, x, perm):
        return jnp.transpose(x, perm)

    def expand_dims(self, x, axis):
        return jnp.expand_dims(x, axis)

    def squeeze(self, x, axis):
        return jnp.squeeze(x, axis)

    def concat(self, xs, axis):
        return jnp.concatenate(list(xs), axis)

    def stack(self, xs, axis=0):
        return jnp.stack(list(xs), axis)

    def unstack(self, x, axis=0):
        return list(jnp.unstack(x, axis=axis))

    def broadcast_to(self, x, shape):
        return jnp.broadcast_to(x, tuple(int(s) for s in shape))

    def reverse(self, x, axis):
        return jnp.flip(x, axis)

    # --- creation ----------------------------------------------------------------------------------------
    def zeros_like(self, x, dtype=None):
        return jnp.zeros_like(x, dtype=_dtype(dtype))

    def ones_like(self, x, dtype=None):
        return jnp.ones_like(x, dtype=_dtype(dtype))

    def full_like(self, x, value, dtype=None):
        return jnp.full_like(x, value, dtype=_dtype(dtype))

    def zeros(self, shape, dtype="float32", like=None):
        return jnp.zeros(tuple(int(s) for s in shape), numpy_dtype(dtype))

    def arange(self, n, dtype="int32", like=None):
        return jnp.arange(int(n), dtype=numpy_dtype(dtype))

    # --- elementwise -------------------------------------------------------------------------------------
    def exp(self, x):
        return jnp.exp(x)

    def log(self, x):
        return jnp.log(x)

    def expm1(self, x):
        return jnp.expm1(x)

    def sqrt(self, x):
        return jnp.sqrt(x)

    def square(self, x):
        return jnp.square(x)

    def abs(self, x):
        return jnp.abs(x)

    def sign(self, x):
        return jnp.sign(x)

    def tanh(self, x):
        return jnp.tanh(x)

    def sigmoid(self, x):
        return jax.nn.sigmoid(x)

    def softplus(self, x):
        return jax.nn.softplus(x)

    def relu(self, x):
        return jax.nn.relu(x)

    def huber(self, x, delta=1.0):
        abs_x = jnp.abs(x)
        return jnp.where(abs_x <= delta, 0.5 * jnp.square(x), delta * (abs_x - 0.5 * delta))

    def minimum(self, a, b):
        return np.minimum(a, b) if _static(a, b) else jnp.minimum(a, b)

    def maximum(self, a, b):
        return np.maximum(a, b) if _static(a, b) else jnp.maximum(a, b)

    def clip(self, x, low=None, high=None):
        if low is not None:
            x = jnp.maximum(x, low)
        if high is not None:
            x = jnp.minimum(x, high)
        return x

    def where(self, condition, a, b):
        return jnp.where(condition, a, b)

    def equal(self, a, b):
        return jnp.equal(a, b)

    def logical_and(self, a, b):
        return jnp.logical_and(a, b)

    def logical_or(self, a, b):
        return jnp.logical_or(a, b)

    def logical_not(self, x):
        return jnp.logical_not(x)

    # --- reductions and scans ----------------------------------------------------------------------------
    def sum(self, x, axis=None, keepdims=False):
        return jnp.sum(x, axis=_axis(axis), keepdims=keepdims)

    def mean(self, x, axis=None, keepdims=False):
        return jnp.mean(x, axis=_axis(axis), keepdims=keepdims)

    def max(self, x, axis=None, keepdims=False):
        return jnp.max(x, axis=_axis(axis), keepdims=keepdims)

    def min(self, x, axis=None, keepdims=False):
        return jnp.min(x, axis=_axis(axis), keepdims=keepdims)

    def std(self, x, axis=None, keepdims=False):
        return jnp.std(x, axis=_axis(axis), keepdims=keepdims)

    def all(self, x, axis=None):
        return jnp.all(x, axis=_axis(axis))

    def any(self, x, axis=None):
        return jnp.any(x, axis=_axis(axis))

    def argmax(self, x, axis=-1):
        return jnp.argmax(x, axis=axis).astype(np.int64)

    def cumsum(self, x, axis=0, reverse=False):
        return lax.cumsum(x, axis=axis % x.ndim, reverse=reverse)

    def softmax(self, x, axis=-1):
        return jax.nn.softmax(x, axis=axis)

    def log_softmax(self, x, axis=-1):
        return jax.nn.log_softmax(x, axis=axis)

    def logsumexp(self, x, axis=-1, keepdims=False):
        return jax.nn.logsumexp(x, axis=_axis(axis), keepdims=keepdims)

    def matmul(self, a, b):
        return jnp.matmul(a, b)

    # --- indexing ----------------------------------------------------------------------------------------
    def one_hot(self, indices, depth, dtype="float32"):
        return jax.nn.one_hot(indices, int(depth), dtype=numpy_dtype(dtype))

    def take_along_last(self, x, indices):
        return jnp.take_along_axis(x, jnp.expand_dims(jnp.asarray(indices), -1), axis=-1)[..., 0]

    def gather(self, x, indices, axis=0):
        return jnp.take(x, jnp.asarray(indices), axis=axis)

    # --- gradients ---------------------------------------------------------------------------------------
    def stop_gradient(self, x):
        return lax.stop_gradient(x)

    # --- random ------------------------------------------------------------------------------------------
    def _key(self):
        return current_generator(self.generator).next_key()

    def random_uniform(self, shape, low=0.0, high=1.0, dtype="float32", like=None):
        return jax.random.uniform(self._key(), tuple(int(s) for s in shape), numpy_dtype(dtype), low, high)

    def random_normal(self, shape, mean=0.0, stddev=1.0, dtype="float32", like=None):
        dtype = numpy_dtype(dtype)
        n = jax.random.normal(self._key(), tuple(int(s) for s in shape), dtype)
        return n if (mean, stddev) == (0.0, 1.0) else (mean + stddev * n).astype(dtype)

    def random_integers(self, shape, low, high, dtype="int64", like=None):
        return jax.random.randint(self._key(), tuple(int(s) for s in shape), low, high, numpy_dtype(dtype))

    # --- arithmetic in a dtype -----------------------------------------------------------------------------
    def multiply(self, a, b, dtype=None):
        return a * b if dtype is None else jnp.asarray(a, numpy_dtype(dtype)) * b

    def divide(self, a, b, dtype=None):
        return a / b if dtype is None else jnp.asarray(a, numpy_dtype(dtype)) / b

    # --- layers ------------------------------------------------------------------------------------------
    def tensordot(self, a, b, axes=2):
        return jnp.tensordot(a, b, axes=axes)

    def linear(self, x, weights, bias=None):
        out = jnp.matmul(x, weights)
        return out if bias is None else out + bias

    def conv2d(self, images, kernel, bias=None, strides=(1, 1), padding="valid"):
        (kh, kw), (sh, sw) = kernel.shape[:2], tuple(strides)
        if padding.lower() == "valid" and tuple(images.shape[1:3]) == (kh, kw):
            # The kernel covers the whole image (one output pixel, as the last conv of RLlib's small Atari CNN):
            # a dense layer over the flattened image. XLA:CPU computes such a convolution's input gradient as a
            # transposed convolution over (2 kh - 1) x (2 kw - 1) zero-padded pixels, kh * kw times the work of
            # the matmul (200 ms against 2 ms for an 11x11x32 -> 256 kernel at batch 128).
            n, filters = images.shape[0], kernel.shape[-1]
            out = jnp.matmul(jnp.reshape(images, (n, -1)), jnp.reshape(kernel, (-1, filters)),
                             precision=lax.Precision.HIGHEST)
            out = jnp.reshape(out, (n, 1, 1, filters))
            return out if bias is None else out + bias
        if padding.lower() == "same":
            _, top, bottom = same_padding(images.shape[1], kh, sh)
            _, left, right = same_padding(images.shape[2], kw, sw)
            pads = ((top, bottom), (left, right))
        else:
            pads = ((0, 0), (0, 0))
        out = lax.conv_general_dilated(images, kernel, (sh, sw), pads, dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                       precision=lax.Precision.HIGHEST)
        return out if bias is None else out + bias

    def resize_images(self, images, size, method="bilinear"):
        images = jnp.asarray(images, np.float32)
        (n, h, w, c), (height, width) = images.shape, size
        if method.lower() == "bilinear":
            return jax.image.resize(images, (n, int(height), int(width), c), "bilinear", antialias=False)
        return jnp.einsum("ih,nhwc,jw->nijc", area_weights(h, int(height)), images, area_weights(w, int(width)),
                          precision=lax.Precision.HIGHEST)

    def ascontiguousarray(self, x):
        return x  # JAX arrays expose no memory layout.

    # --- variables (functional: see the module docstring) ----------------------------------------------------
    def read_value(self, variable):
        """The variable's current value (an immutable array)."""
        return variable.value if isinstance(variable, JaxVariable) else jnp.asarray(variable)

    def assign(self, variable, value):
        """Rebinds the variable to ``value`` (cast to its dtype, broadcast to its shape, no gradient) and returns
        the new value."""
        new = jnp.broadcast_to(lax.stop_gradient(jnp.asarray(value, variable.dtype)), variable.shape)
        return self._store(variable, new)

    def scatter_update(self, variable, indices, updates):
        """Rebinds the variable to its value with rows ``indices`` set to ``updates`` and returns the new value."""
        updates = lax.stop_gradient(jnp.asarray(updates, variable.dtype))
        new = self.read_value(variable).at[jnp.asarray(indices)].set(updates)
        return self._store(variable, new)

    @staticmethod
    def _store(variable, new):
        if isinstance(variable, JaxVariable):
            variable.value = new
        return new

    # --- checks and host calls -----------------------------------------------------------------------------
    def check(self, condition, message, value=None):
        if isinstance(condition, (bool, np.bool_)) or not _tracing((condition,)):
            if not bool(np.all(np.asarray(condition))):
                raise RLGraphRuntimeError(message)
            return value

        def verify(holds):
            if not holds:
                raise RLGraphRuntimeError(message)
        io_callback(verify, None, jnp.all(condition), ordered=False)
        return value

    def host_call(self, fn, inputs, output_specs, device=None, name=None):
        tape = current_tape()
        if tape is not None:  # Inside an API method with gradients: one draw for its loss and final passes.
            # Run eagerly, its loss pass (under jax.value_and_grad) calls the host directly, on the inputs' values.
            eager = not tape.traced
            return tape.host_call(lambda: self._host_call(fn, inputs, output_specs, name, eager))
        return self._host_call(fn, inputs, output_specs, name)

    def _host_call(self, fn, inputs, output_specs, name, eager=False):
        specs = [(numpy_dtype(d), tuple(s)) for d, s in output_specs]
        if eager:
            inputs = [lax.stop_gradient(x) if isinstance(x, _Tracer) else x for x in inputs]
        if eager or not _tracing(inputs):
            try:
                outs = fn(*[np.asarray(x) for x in inputs])
            except RLGraphError as e:
                raise RLGraphRuntimeError(str(e)) from None
            return [jnp.asarray(np.asarray(o, d)) for o, (d, _) in zip(outs, specs)]
        unknown = [i for i, (_, shape) in enumerate(specs) if any(s is None for s in shape)]
        if unknown:
            raise JaxUntraceableError(
                f"host_call{'' if name is None else ' ' + repr(name)} under jax.jit needs every output size known, "
                f"but output(s) {unknown} have shapes {[specs[i][1] for i in unknown]} (jit programs have static "
                "shapes).")

        def run(*arrays):
            try:
                outs = fn(*arrays)
            except RLGraphError as e:
                raise RLGraphRuntimeError(str(e)) from None
            return [np.asarray(o, d).reshape(shape) for o, (d, shape) in zip(outs, specs)]
        result = [jax.ShapeDtypeStruct(shape, d) for d, shape in specs]
        return list(io_callback(run, result, *[jnp.asarray(x) for x in inputs], ordered=True))


def _unwrapped(x):
    if isinstance(x, JaxVariable):
        return x.value
    if isinstance(x, (list, tuple)) and any(isinstance(v, JaxVariable) for v in x):
        return type(x)(v.value if isinstance(v, JaxVariable) else v for v in x)
    return x


def _taking_variables_as_arrays(fn):
    """``fn`` with ``JaxVariable`` arguments (and those in list arguments, e.g. ``concat``'s) replaced by their
    values: graph functions pass variables where the other backends take them as tensors (``self.kernel``)."""
    def op(self, *args, **kwargs):
        return fn(self, *[_unwrapped(a) for a in args], **{k: _unwrapped(v) for k, v in kwargs.items()})
    op.__name__, op.__qualname__, op.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    return op


# Every operation but those that take the variable itself (to rebind its box).
for _name, _fn in list(vars(JaxOps).items()):
    if callable(_fn) and not _name.startswith("_") and _name not in ("read_value", "assign", "scatter_update"):
        setattr(JaxOps, _name, _taking_variables_as_arrays(_fn))
