"""The backend operations table on TensorFlow (see ``rlgraph.backends.ops``)."""
import numpy as np

from rlgraph.backends.ops import BackendOps, numpy_dtype
from rlgraph.backends.tf_backend import tf_random
from rlgraph.utils.backend import tf
from rlgraph.utils.errors import RLGraphError, RLGraphRuntimeError


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

    def asarray(self, x, dtype=None, like=None):
        return tf.convert_to_tensor(x) if dtype is None else tf.cast(x, _tf_dtype(dtype))

    def dtype(self, x):
        return np.dtype(tf.as_dtype(x.dtype).as_numpy_dtype)

    def ndim(self, x):
        return x.shape.rank

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

    def expm1(self, x):
        return tf.math.expm1(x)

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

    def huber(self, x, delta=1.0):
        abs_x = tf.abs(x)
        return tf.where(abs_x <= delta, 0.5 * tf.square(x), delta * (abs_x - 0.5 * delta))

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

    def std(self, x, axis=None, keepdims=False):
        return tf.math.reduce_std(x, axis=_axis(axis), keepdims=keepdims)

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

    def random_integers(self, shape, low, high, dtype="int64", like=None):
        return tf_random.uniform(shape, minval=low, maxval=high, dtype=_tf_dtype(dtype))

    def tensordot(self, a, b, axes=2):
        return tf.tensordot(a, b, axes=axes)

    def linear(self, x, weights, bias=None):
        out = tf.matmul(x, weights) if x.shape.rank == 2 else tf.tensordot(x, weights, axes=1)
        return out if bias is None else tf.nn.bias_add(out, bias)

    def conv2d(self, images, kernel, bias=None, strides=(1, 1), padding="valid"):
        out = tf.nn.conv2d(images, kernel, strides=(1,) + tuple(strides) + (1,), padding=padding.upper())
        return out if bias is None else tf.nn.bias_add(out, bias)

    def resize_images(self, images, size, method="bilinear"):
        return tf.image.resize(tf.cast(images, tf.float32), tuple(size), method=method.lower(), antialias=False)

    def ascontiguousarray(self, x):
        return x

    def read_value(self, variable):
        return variable.read_value()

    def assign(self, variable, value):
        value = tf.cast(value, variable.dtype)
        if value.shape.rank != variable.shape.rank:
            value = tf.broadcast_to(value, tf.shape(variable))
        variable.assign(value)

    def scatter_update(self, variable, indices, updates):
        variable.scatter_nd_update(tf.expand_dims(indices, -1), tf.cast(updates, variable.dtype))

    def check(self, condition, message, value=None):
        if isinstance(condition, (bool, np.bool_)):
            if not condition:
                raise RLGraphRuntimeError(message)
            return value
        assertion = tf.debugging.Assert(tf.reduce_all(condition), [message])
        if value is None:
            return None
        with tf.control_dependencies([assertion]):
            return tf.nest.map_structure(tf.identity, value)

    def host_call(self, fn, inputs, output_specs, device=None, name=None):
        specs = [(numpy_dtype(d), tuple(s)) for d, s in output_specs]

        def run(*arrays):  # fn's RLGraphError travels out as a string output, raised by the assertion below.
            try:
                outs, error = list(fn(*arrays)), b""
            except RLGraphError as e:
                outs = [np.zeros(tuple(0 if d is None else d for d in shape), dtype) for dtype, shape in specs]
                error = str(e).encode("utf-8", "replace")
            return [np.asarray(o, dtype) for o, (dtype, _) in zip(outs, specs)] + [np.asarray(error, dtype=object)]

        *outs, error = tf.numpy_function(run, list(inputs), [tf.as_dtype(d) for d, _ in specs] + [tf.string],
                                         stateful=True, name=name)
        error.set_shape([])
        check = tf.debugging.Assert(tf.equal(tf.strings.length(error), 0), [error])
        with tf.control_dependencies([check]):
            return [tf.ensure_shape(tf.identity(o), shape) for o, (_, shape) in zip(outs, specs)]

    def multiply(self, a, b, dtype=None):
        return a * b if dtype is None else tf.cast(a, _tf_dtype(dtype)) * b

    def divide(self, a, b, dtype=None):
        return a / b if dtype is None else tf.cast(a, _tf_dtype(dtype)) / b
