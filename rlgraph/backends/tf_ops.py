"""The backend operations table on TensorFlow (see ``rlgraph.backends.ops``)."""
import numpy as np

from rlgraph.backends.ops import BackendOps, numpy_dtype
from rlgraph.backends.tf_backend import tf_random
from rlgraph.utils.backend import tf


def _tf_dtype(dtype):
    return tf.as_dtype(numpy_dtype(dtype))


def _axis(axis):
    return list(axis) if isinstance(axis, tuple) else axis


class TFOps(BackendOps):
    """``BackendOps`` on TensorFlow 2 (eager or traced in a ``tf.function``)."""

    name = "tf"

    def constant(self, value, dtype=None, like=None):
        return tf.constant(value, dtype=None if dtype is None else _tf_dtype(dtype))

    def cast(self, x, dtype):
        return tf.cast(x, _tf_dtype(dtype))

    def dtype(self, x):
        return np.dtype(tf.as_dtype(x.dtype).as_numpy_dtype)

    def shape(self, x):
        static = x.shape.as_list()
        if all(s is not None for s in static):
            return tuple(static)
        dynamic = tf.shape(x)
        return tuple(dynamic[i] if s is None else s for i, s in enumerate(static))

    def reshape(self, x, shape):
        return tf.reshape(x, shape)

    def transpose(self, x, perm):
        return tf.transpose(x, perm)

    def expand_dims(self, x, axis):
        return tf.expand_dims(x, axis)

    def squeeze(self, x, axis):
        return tf.squeeze(x, axis)

    def concat(self, xs, axis):
        return tf.concat(list(xs), axis)

    def stack(self, xs, axis=0):
        return tf.stack(list(xs), axis)

    def unstack(self, x, axis=0):
        return tf.unstack(x, axis=axis)

    def broadcast_to(self, x, shape):
        return tf.broadcast_to(x, shape)

    def reverse(self, x, axis):
        return tf.reverse(x, [axis])

    def zeros_like(self, x, dtype=None):
        return tf.zeros_like(x, dtype=None if dtype is None else _tf_dtype(dtype))

    def ones_like(self, x, dtype=None):
        return tf.ones_like(x, dtype=None if dtype is None else _tf_dtype(dtype))

    def full_like(self, x, value, dtype=None):
        return tf.fill(tf.shape(x), tf.constant(value, dtype=x.dtype if dtype is None else _tf_dtype(dtype)))

    def zeros(self, shape, dtype="float32", like=None):
        return tf.zeros(shape, _tf_dtype(dtype))

    def arange(self, n, dtype="int32", like=None):
        return tf.range(n, dtype=_tf_dtype(dtype))

    def exp(self, x):
        return tf.exp(x)

    def log(self, x):
        return tf.math.log(x)

    def sqrt(self, x):
        return tf.sqrt(x)

    def square(self, x):
        return tf.square(x)

    def abs(self, x):
        return tf.abs(x)

    def sign(self, x):
        return tf.sign(x)

    def tanh(self, x):
        return tf.tanh(x)

    def sigmoid(self, x):
        return tf.sigmoid(x)

    def softplus(self, x):
        return tf.nn.softplus(x)

    def relu(self, x):
        return tf.nn.relu(x)

    def minimum(self, a, b):
        return tf.minimum(a, b)

    def maximum(self, a, b):
        return tf.maximum(a, b)

    def clip(self, x, low=None, high=None):
        if low is not None:
            x = tf.maximum(x, tf.cast(low, x.dtype))
        if high is not None:
            x = tf.minimum(x, tf.cast(high, x.dtype))
        return x

    def where(self, condition, a, b):
        return tf.where(condition, a, b)

    def equal(self, a, b):
        return tf.equal(a, b)

    def logical_and(self, a, b):
        return tf.logical_and(a, b)

    def logical_or(self, a, b):
        return tf.logical_or(a, b)

    def logical_not(self, x):
        return tf.logical_not(x)

    def sum(self, x, axis=None, keepdims=False):
        return tf.reduce_sum(x, axis=_axis(axis), keepdims=keepdims)

    def mean(self, x, axis=None, keepdims=False):
        return tf.reduce_mean(x, axis=_axis(axis), keepdims=keepdims)

    def max(self, x, axis=None, keepdims=False):
        return tf.reduce_max(x, axis=_axis(axis), keepdims=keepdims)

    def min(self, x, axis=None, keepdims=False):
        return tf.reduce_min(x, axis=_axis(axis), keepdims=keepdims)

    def all(self, x, axis=None):
        return tf.reduce_all(x, axis=_axis(axis))

    def any(self, x, axis=None):
        return tf.reduce_any(x, axis=_axis(axis))

    def argmax(self, x, axis=-1):
        return tf.argmax(x, axis=axis, output_type=tf.int64)

    def cumsum(self, x, axis=0, reverse=False):
        return tf.cumsum(x, axis=axis, reverse=reverse)

    def softmax(self, x, axis=-1):
        return tf.nn.softmax(x, axis=axis)

    def log_softmax(self, x, axis=-1):
        return tf.nn.log_softmax(x, axis=axis)

    def logsumexp(self, x, axis=-1, keepdims=False):
        return tf.reduce_logsumexp(x, axis=_axis(axis), keepdims=keepdims)

    def matmul(self, a, b):
        return tf.matmul(a, b)

    def one_hot(self, indices, depth, dtype="float32"):
        return tf.one_hot(tf.cast(indices, tf.int32), depth, dtype=_tf_dtype(dtype))

    def take_along_last(self, x, indices):
        indices = tf.cast(indices, tf.int32)
        return tf.gather(x, indices, axis=-1, batch_dims=indices.shape.rank)

    def gather(self, x, indices, axis=0):
        return tf.gather(x, indices, axis=axis)

    def stop_gradient(self, x):
        return tf.stop_gradient(x)

    def random_uniform(self, shape, low=0.0, high=1.0, dtype="float32", like=None):
        return tf_random.uniform(shape, minval=low, maxval=high, dtype=_tf_dtype(dtype))

    def random_normal(self, shape, mean=0.0, stddev=1.0, dtype="float32", like=None):
        return tf_random.normal(shape, mean=mean, stddev=stddev, dtype=_tf_dtype(dtype))
