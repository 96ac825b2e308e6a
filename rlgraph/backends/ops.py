"""The table of backend operations that lets a graph function be written once for every backend.

A graph function whose backends differ only in spelling (``tf.clip_by_value`` / ``torch.clamp``,
``reduce_sum(axis=)`` / ``sum(dim=)``, ``stop_gradient`` / ``detach``) is written once against
``self.ops``, the table of the backend its component is built on::

    @graph_fn
    def _graph_fn_td_errors(self, q, targets):
        ops = self.ops
        return ops.stop_gradient(targets) - ops.sum(q, axis=-1)

Names and arguments follow numpy (``axis``, ``keepdims``, dtypes as numpy dtypes or their names). Python
numbers mix with tensors wherever numpy would accept them. Per-backend bodies stay only where the backends
truly differ (recurrent scans, optimizer kernels, variable storage, device placement, queues).

Random draws come from the executor's saveable generator (``rlgraph.backends.op_generator``), so that exact
resume holds for one-body graph functions as for per-backend ones.
"""
import numpy as np


def numpy_dtype(dtype):
    """The numpy dtype of ``dtype`` (a numpy dtype, its name, a Python type, or a backend dtype)."""
    if isinstance(dtype, np.dtype):
        return dtype
    if isinstance(dtype, str) or isinstance(dtype, type):
        return np.dtype(dtype)
    name = getattr(dtype, "name", None) or str(dtype).replace("torch.", "")
    return np.dtype(name)


def area_weights(size_in, size_out):
    """The ``[size_out, size_in]`` matrix of exact area (box-filter) interpolation along one axis.

    Output pixel i covers the input interval ``[i * s, (i + 1) * s)`` with ``s = size_in / size_out``; each
    input pixel is weighted by the length of its overlap with that interval, divided by ``s``.
    """
    scale = size_in / size_out
    lows = np.arange(size_out)[:, None] * scale
    pixels = np.arange(size_in)[None, :]
    overlap = np.minimum(lows + scale, pixels + 1) - np.maximum(lows, pixels)
    return (np.maximum(overlap, 0.0) / scale).astype(np.float32)


def same_padding(size, kernel, stride):
    """TensorFlow's "same" padding along one axis: (output size, pad before, pad after)."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return out, total // 2, total - total // 2


class BackendOps:
    """The operations graph functions call, one spelling for every backend.

    Subclasses implement every method for one backend (``TFOps``, ``PyTorchOps``, ``JaxOps``);
    ``tests/test_backend_ops.py`` checks each of them against numpy on every backend (JAX also under ``jax.jit``).
    """

    #: The backend's canonical name ("tf", "pytorch", "jax").
    name = None

    # --- conversion and types ----------------------------------------------------------------------------
    def constant(self, value, dtype=None, like=None):
        """A tensor holding ``value`` (on ``like``'s device where a backend places tensors)."""
        raise NotImplementedError

    def cast(self, x, dtype):
        raise NotImplementedError

    def asarray(self, x, dtype=None, like=None):
        """``x`` (a tensor, a Python number or a numpy array) as a tensor of ``dtype`` (None: its own), as
        ``np.asarray``; a tensor that already is one is returned as it is."""
        raise NotImplementedError

    def dtype(self, x):
        """The numpy dtype of tensor ``x``."""
        raise NotImplementedError

    def is_floating(self, x):
        return np.issubdtype(self.dtype(x), np.floating)

    # --- shapes ------------------------------------------------------------------------------------------
    def shape(self, x):
        """The shape of ``x`` as a tuple of Python ints (None for an axis unknown while tracing)."""
        raise NotImplementedError

    def ndim(self, x):
        """The number of axes of ``x`` (a Python int, also while tracing)."""
        raise NotImplementedError

    def reshape(self, x, shape):
        raise NotImplementedError

    def transpose(self, x, perm):
        raise NotImplementedError

    def expand_dims(self, x, axis):
        raise NotImplementedError

    def squeeze(self, x, axis):
        raise NotImplementedError

    def concat(self, xs, axis):
        raise NotImplementedError

    def stack(self, xs, axis=0):
        raise NotImplementedError

    def unstack(self, x, axis=0):
        raise NotImplementedError

    def broadcast_to(self, x, shape):
        raise NotImplementedError

    def reverse(self, x, axis):
        """``x`` with its elements along ``axis`` in reverse order (numpy's ``flip``)."""
        raise NotImplementedError

    # --- creation ----------------------------------------------------------------------------------------
    def zeros_like(self, x, dtype=None):
        raise NotImplementedError

    def ones_like(self, x, dtype=None):
        raise NotImplementedError

    def full_like(self, x, value, dtype=None):
        raise NotImplementedError

    def zeros(self, shape, dtype="float32", like=None):
        raise NotImplementedError

    def arange(self, n, dtype="int32", like=None):
        raise NotImplementedError

    # --- elementwise -------------------------------------------------------------------------------------
    def exp(self, x):
        raise NotImplementedError

    def log(self, x):
        raise NotImplementedError

    def expm1(self, x):
        """exp(x) - 1, accurate near 0 (e.g. Adam's bias correction 1 - beta ** t = -expm1(t log beta))."""
        raise NotImplementedError

    def sqrt(self, x):
        raise NotImplementedError

    def square(self, x):
        return x * x

    def abs(self, x):
        raise NotImplementedError

    def sign(self, x):
        raise NotImplementedError

    def tanh(self, x):
        raise NotImplementedError

    def sigmoid(self, x):
        raise NotImplementedError

    def softplus(self, x):
        raise NotImplementedError

    def relu(self, x):
        raise NotImplementedError

    def huber(self, x, delta=1.0):
        """The Huber loss of ``x``, elementwise: ``0.5 x^2`` where ``|x| <= delta``, else
        ``delta (|x| - delta / 2)`` (Huber 1964)."""
        raise NotImplementedError

    def minimum(self, a, b):
        """Elementwise minimum; either argument may be a Python number."""
        raise NotImplementedError

    def maximum(self, a, b):
        raise NotImplementedError

    def clip(self, x, low=None, high=None):
        """``x`` clipped to ``[low, high]`` (either bound None: no bound), as ``np.clip``."""
        raise NotImplementedError

    def where(self, condition, a, b):
        """``a`` where ``condition`` holds, else ``b`` (broadcasting; Python numbers allowed)."""
        raise NotImplementedError

    def equal(self, a, b):
        raise NotImplementedError

    def logical_and(self, a, b):
        raise NotImplementedError

    def logical_or(self, a, b):
        raise NotImplementedError

    def logical_not(self, x):
        raise NotImplementedError

    # --- reductions and scans ----------------------------------------------------------------------------
    def sum(self, x, axis=None, keepdims=False):
        raise NotImplementedError

    def mean(self, x, axis=None, keepdims=False):
        raise NotImplementedError

    def max(self, x, axis=None, keepdims=False):
        raise NotImplementedError

    def min(self, x, axis=None, keepdims=False):
        raise NotImplementedError

    def std(self, x, axis=None, keepdims=False):
        """The standard deviation (``np.std``: divided by the count, ``ddof=0``)."""
        raise NotImplementedError

    def all(self, x, axis=None):
        raise NotImplementedError

    def any(self, x, axis=None):
        raise NotImplementedError

    def argmax(self, x, axis=-1):
        """Indices (int64) of the largest values along ``axis``."""
        raise NotImplementedError

    def cumsum(self, x, axis=0, reverse=False):
        """Cumulative sum along ``axis``; ``reverse``: from the last element backwards."""
        raise NotImplementedError

    def softmax(self, x, axis=-1):
        raise NotImplementedError

    def log_softmax(self, x, axis=-1):
        raise NotImplementedError

    def logsumexp(self, x, axis=-1, keepdims=False):
        raise NotImplementedError

    def matmul(self, a, b):
        raise NotImplementedError

    # --- indexing ----------------------------------------------------------------------------------------
    def one_hot(self, indices, depth, dtype="float32"):
        raise NotImplementedError

    def take_along_last(self, x, indices):
        """``x[..., indices[...]]``: one element of the last axis of ``x`` per index (``indices`` has ``x``'s
        shape without its last axis)."""
        raise NotImplementedError

    def gather(self, x, indices, axis=0):
        """``np.take(x, indices, axis)``."""
        raise NotImplementedError

    # --- gradients ---------------------------------------------------------------------------------------
    def stop_gradient(self, x):
        """``x`` as a constant for gradients (TF ``stop_gradient``, PyTorch ``detach``)."""
        raise NotImplementedError

    # --- random (the executor's saveable generator) ------------------------------------------------------
    def random_uniform(self, shape, low=0.0, high=1.0, dtype="float32", like=None):
        raise NotImplementedError

    def random_normal(self, shape, mean=0.0, stddev=1.0, dtype="float32", like=None):
        raise NotImplementedError

    def random_integers(self, shape, low, high, dtype="int64", like=None):
        """Integers uniform in ``[low, high)`` (``high`` excluded, as numpy's ``Generator.integers``)."""
        raise NotImplementedError

    # --- arithmetic in a dtype -----------------------------------------------------------------------------
    def multiply(self, a, b, dtype=None):
        """``a * b`` computed in ``dtype`` (None: as ``*`` would), as ``np.multiply(a, b, dtype=dtype)``; PyTorch
        converts ``a`` and multiplies the fresh copy in place (one allocation, not two)."""
        raise NotImplementedError

    def divide(self, a, b, dtype=None):
        """``a / b`` computed in ``dtype`` (None: as ``/`` would), as ``np.divide(a, b, dtype=dtype)``; PyTorch
        converts ``a`` and divides the fresh copy in place (one allocation, not two)."""
        raise NotImplementedError

    # --- layers (fused kernels where a backend has them) ---------------------------------------------------
    def tensordot(self, a, b, axes=2):
        """``np.tensordot``: sums the products over the last ``axes`` axes of ``a`` and the first of ``b``."""
        raise NotImplementedError

    def linear(self, x, weights, bias=None):
        """``x @ weights + bias`` over the last axis of ``x`` (any leading axes), ``weights [in, out]``; one
        fused kernel where the backend has it (PyTorch's ``addmm``)."""
        raise NotImplementedError

    def conv2d(self, images, kernel, bias=None, strides=(1, 1), padding="valid"):
        """A 2D convolution (cross-correlation) of channels-last images ``[N, H, W, C]`` with ``kernel [kh, kw,
        C, filters]`` (TensorFlow's layouts on every backend), plus ``bias [filters]``; returns ``[N, H', W',
        filters]``. ``padding``: "valid" or "same" (TensorFlow's: output size ``ceil(size / stride)``, an odd
        total padding puts the extra row/column after)."""
        raise NotImplementedError

    def resize_images(self, images, size, method="bilinear"):
        """Channels-last images ``[N, H, W, C]`` resized to ``size = (height, width)``, as float32. "bilinear":
        samples at pixel centers (half-pixel offsets, no anti-aliasing); "area": each output pixel the mean of
        its exact footprint (a box filter, ``area_weights`` along each axis)."""
        raise NotImplementedError

    def ascontiguousarray(self, x):
        """``x`` laid out densely in its axis order (``np.ascontiguousarray``): PyTorch copies a permuted view
        (so that later reshapes are views); TensorFlow's tensors always are."""
        raise NotImplementedError

    # --- variables (stateful: run in program order) --------------------------------------------------------
    # On JAX the variable ops are functional: ``assign`` and ``scatter_update`` rebind the variable's box
    # (``JaxVariable``) to a new array and also return it; a graph function written once (assign, then
    # ``read_value``) means the same on every backend.
    def read_value(self, variable):
        """A tensor holding ``variable``'s current value (later assignments do not change it)."""
        raise NotImplementedError

    def assign(self, variable, value):
        """``variable[...] = value`` in place (``value``: a tensor or Python number, cast to the variable's
        dtype and broadcast to its shape); returns nothing (JAX: the new value). No gradient flows through it."""
        raise NotImplementedError

    def scatter_update(self, variable, indices, updates):
        """``variable[indices] = updates`` in place along the first axis (``indices`` 1-D integers, ``updates``
        ``[len(indices), *variable.shape[1:]]``, cast to the variable's dtype); returns nothing (JAX: the new
        value). Duplicate indices must carry equal updates."""
        raise NotImplementedError

    # --- checks and host calls -----------------------------------------------------------------------------
    def check(self, condition, message, value=None):
        """Raises ``RLGraphRuntimeError(message)`` unless every element of ``condition`` (a bool tensor or a
        Python bool) holds; returns ``value`` (a tensor, a tuple/list of them, or None).

        On TensorFlow a tensor condition is an assertion, whose failure the executor raises as
        ``RLGraphRuntimeError``; only what is computed from the returned ``value`` waits for it (e.g. variable
        updates that must not happen after a failed check). On JAX under ``jax.jit`` a host callback fails the
        whole compiled call (``jax.errors.JaxRuntimeError`` with the message), which then returns no new state.
        Checks on the sample values of a build run are the caller's to skip (``Component.in_build_run``).
        """
        raise NotImplementedError

    def host_call(self, fn, inputs, output_specs, device=None, name=None):
        """Calls the Python function ``fn`` on the numpy values of ``inputs`` (tensors or Python numbers) inside a
        graph function (e.g. a memory kept in numpy).

        Args:
            fn: ``fn(*arrays) -> list`` of one array per entry of ``output_specs``. An ``RLGraphError`` it
                raises becomes an ``RLGraphRuntimeError`` with the same message (on TensorFlow at run time,
                raised by an assertion the executor turns into ``RLGraphRuntimeError``).
            inputs: The arguments of ``fn``.
            output_specs: ``(dtype, shape)`` per output, None in a shape for a size known only at run time.
            device: PyTorch: the device the outputs go to (None: the CPU; the outputs share memory with ``fn``'s
                arrays there). TensorFlow places ops by its device scopes.
            name: A name for the call in the graph (TensorFlow).

        Returns:
            The list of outputs (on TensorFlow through a stateful ``tf.numpy_function``, with the static
            shapes of ``output_specs``, run in program order; on JAX under ``jax.jit`` through an ordered
            ``io_callback``, which needs every output size known: no None in ``output_specs`` there).
        """
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}()"
