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


class BackendOps:
    """The operations graph functions call, one spelling for every backend.

    Subclasses implement every method for one backend (``TFOps``, ``PyTorchOps``); ``tests/test_backend_ops.py``
    checks each of them against numpy on every backend.
    """

    #: The backend's canonical name ("tf", "pytorch").
    name = None

    # --- conversion and types ----------------------------------------------------------------------------
    def constant(self, value, dtype=None, like=None):
        """A tensor holding ``value`` (on ``like``'s device where a backend places tensors)."""
        raise NotImplementedError

    def cast(self, x, dtype):
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

    def __repr__(self):
        return f"{type(self).__name__}()"
