"""TensorFlow 2 backend helpers."""
import logging

import numpy as np

from rlgraph.backends.backend import Backend
from rlgraph.backends.op_generator import current_op_generator
from rlgraph.utils.backend import tf

logger = logging.getLogger(__name__)


class TFBackend(Backend):
    """TensorFlow: the build traces graph functions symbolically (inside one ``tf.function`` trace that is
    never run), so build-time runs have no side effects and ``tf.gradients`` works in graph functions."""

    name = "tf"

    def _make_ops(self):
        from rlgraph.backends.tf_ops import TFOps
        return TFOps()
    build_runs_eagerly = False

    def run_build(self, fn):
        result = []

        def trace():
            result.append(fn())
            return tf.constant(0)
        tf.function(trace, autograph=False).get_concrete_function()
        return result[0]

    def variable_scope(self, device):
        import contextlib
        stack = contextlib.ExitStack()
        stack.enter_context(tf.init_scope())
        stack.enter_context(self.device_scope(device))
        return stack

    def normalize_device(self, device):
        if device is None:
            return None
        d = str(device).lower()
        if d.startswith("/"):
            return device
        if d.startswith("cuda"):
            d = "gpu" + d[4:]
        kind, _, idx = d.partition(":")
        return f"/device:{kind.upper()}:{idx or 0}"

    def device_scope(self, device):
        import contextlib
        return tf.device(self.normalize_device(device)) if device else contextlib.nullcontext()

    def wrap_graph_fn_device(self, fn, device):
        if not device:
            return fn
        dev = self.normalize_device(device)

        def on_device(*args, **kwargs):
            with tf.device(dev):
                return fn(*args, **kwargs)
        return on_device

    def create_variable(self, name, value, trainable, device=None):
        with tf.init_scope(), self.device_scope(device):
            return tf.Variable(value, trainable=trainable, name=name.replace("/", "."))

    def is_trainable(self, var):
        return var.trainable

    def read_variable(self, var):
        with tf.init_scope():
            return var.numpy().copy()

    def assign_variable(self, var, value):
        var.assign(np.asarray(value, dtype=var.dtype.as_numpy_dtype))

    def _leaf_to_backend(self, value):
        return tf.convert_to_tensor(value)

    def python_scalar_input(self, value, py_type):
        return tf.convert_to_tensor(np.asarray(value, dtype=_PY_DTYPES[py_type]))

    def _leaf_to_numpy(self, value):
        if isinstance(value, (tf.Tensor, tf.Variable)):
            return value.numpy()
        return value

    def shape_and_dtype(self, value):
        if isinstance(value, (tf.Tensor, tf.Variable)):
            return tuple(value.shape), np.dtype(value.dtype.as_numpy_dtype)
        return super().shape_and_dtype(value)

    def set_seed(self, seed):
        tf.random.set_seed(seed)

    def gradients(self, loss, variables, owner):
        keys = list(variables)
        grads = tf.gradients(loss, [variables[k] for k in keys])
        # Unconnected variables get zeros; IndexedSlices (from gathers) become dense.
        return {k: tf.zeros_like(variables[k]) if g is None else tf.convert_to_tensor(g) for k, g in zip(keys, grads)}

    def set_math_threads(self, threads):
        """TensorFlow fixes its pools when it first runs anything: after that a different count cannot be set,
        and the run goes on with the pools it has (logged as a warning). Never restored (returns None)."""
        if tf.config.threading.get_intra_op_parallelism_threads() == int(threads):
            return None
        try:
            tf.config.threading.set_intra_op_parallelism_threads(int(threads))
        except RuntimeError:
            logger.warning("math_threads %s not applied: TensorFlow has already started in this process (set the "
                           "math threads before anything runs on TensorFlow, e.g. in a fresh process).", threads)
        return None


_PY_DTYPES = {int: np.int32, float: np.float32, bool: np.bool_}


# --- random ops with a saveable state -----------------------------------------------------------------------
class _TFRandom:
    """``tf.random.uniform``/``normal`` drawn from the tracing executor's generator (a ``tf.random.Generator``,
    ``rlgraph.backends.op_generator``), or TF's stateful ops outside an executor's traces (their state stays
    inside the kernels, where nothing can read or set it). Graph functions use ``tf_random.uniform(...)`` like
    ``tf.random.uniform(...)``."""

    @staticmethod
    def uniform(shape, minval=0, maxval=None, dtype=None):
        dtype = tf.float32 if dtype is None else tf.as_dtype(dtype)
        generator = current_op_generator()
        if generator is None:
            return tf.random.uniform(shape, minval, maxval, dtype=dtype)
        if maxval is None and dtype.is_floating:
            maxval = 1.0
        return generator.uniform(shape, minval=minval, maxval=maxval, dtype=dtype)

    @staticmethod
    def normal(shape, mean=0.0, stddev=1.0, dtype=None):
        dtype = tf.float32 if dtype is None else tf.as_dtype(dtype)
        generator = current_op_generator()
        if generator is None:
            return tf.random.normal(shape, mean, stddev, dtype=dtype)
        return generator.normal(shape, mean=mean, stddev=stddev, dtype=dtype)


#: Random ops for TF graph functions whose state a run can save (see ``op_generator``).
tf_random = _TFRandom()
