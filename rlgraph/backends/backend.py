"""The interface through which the framework (never an algorithm) touches a deep-learning backend."""
import contextlib

import numpy as np

from rlgraph.utils.errors import RLGraphBackendError


class Backend:
    """Variable creation, conversion and devices for one backend. Subclasses: TF, PyTorch and JAX (whose graph
    executor is ``rlgraph.executors.jax_executor``)."""

    name = None
    #: Whether the build runs graph functions on real values (then variables are restored afterwards) or
    #: only traces them symbolically.
    build_runs_eagerly = True

    _ops = None

    @property
    def ops(self):
        """The table of backend operations graph functions write their maths with (``rlgraph.backends.ops``)."""
        if self._ops is None:
            self._ops = self._make_ops()
        return self._ops

    def _make_ops(self):
        raise NotImplementedError

    def create_variable(self, name, value, trainable, device=None):
        """Creates a variable named ``name`` holding the numpy array ``value``."""
        raise NotImplementedError

    def is_trainable(self, var):
        raise NotImplementedError

    def read_variable(self, var):
        """The variable's value as a numpy array (a copy)."""
        raise NotImplementedError

    def assign_variable(self, var, value):
        """Sets the variable to the numpy array ``value``."""
        raise NotImplementedError

    def to_backend(self, value):
        """Converts a numpy value (nested dicts/tuples/lists allowed; lists come back as tuples) into backend
        tensors."""
        return _map_nested(value, self._leaf_to_backend)

    def to_numpy(self, value):
        """Converts backend tensors (nested dicts/tuples/lists allowed; lists come back as tuples) to numpy."""
        return _map_nested(value, self._leaf_to_numpy)

    def _leaf_to_backend(self, value):
        """One numpy array or Python value as a backend tensor."""
        raise NotImplementedError

    def _leaf_to_numpy(self, value):
        """One backend tensor or variable as numpy; anything else unchanged."""
        raise NotImplementedError

    def shape_and_dtype(self, value):
        """``(shape tuple, numpy dtype)`` of a tensor, array or Python scalar."""
        if isinstance(value, np.ndarray) or np.isscalar(value):
            arr = np.asarray(value)
            return tuple(arr.shape), arr.dtype
        raise RLGraphBackendError(f"Cannot read the shape of {type(value).__name__} values on backend {self.name}.")

    def python_scalar_input(self, value, py_type):
        """How a Python scalar argument (``int``/``float``/``bool`` space) is passed to a graph function."""
        return py_type(value)

    def run_build(self, fn):
        """Runs the build's space propagation ``fn()`` in the context the backend needs."""
        return fn()

    def variable_scope(self, device):
        """A context manager for ``create_variables``: variables end up on ``device``, outside any trace."""
        return self.device_scope(device)

    def device_scope(self, device):
        """A context manager placing newly created variables (and, on TF, ops) on ``device``."""
        return contextlib.nullcontext()

    def wrap_graph_fn_device(self, fn, device):
        """Wraps a bound graph function so that it runs on ``device``."""
        return fn

    def set_seed(self, seed):
        """Seeds the backend's random number generators."""

    def no_gradient_recording(self):
        """A context in which computations record nothing for a backward pass (their results are constants to
        the loss): ``torch.no_grad()`` on PyTorch; nothing on TF, where the tape only follows what the loss
        uses and losses stop the gradients of their targets themselves."""
        return contextlib.nullcontext()

    # --- training: gradients and an optimizer's update ------------------------------------------------------
    def gradients(self, loss, variables, owner):
        """The gradients of the scalar ``loss`` w.r.t. the dict ``variables``, keyed alike (zeros for variables
        the loss does not reach), inside a graph function. ``owner``: the asking component's scope, for errors."""
        raise NotImplementedError

    def apply_gradients(self, optimizer, variables, gradients, learning_rate):
        """Clips ``gradients`` to the ``optimizer``'s global norm and applies its ``update_rule`` variable by
        variable, in the ops table's arithmetic (a backend with a faster kernel overrides this); returns the global
        norm before clipping. ``gradients`` has the keys of ``variables`` (``Optimizer.checked_keys``)."""
        ops = self.ops
        keys = optimizer.checked_keys(variables, gradients)
        dtypes = [self.shape_and_dtype(variables[k])[1] for k in keys]
        grads = [ops.cast(gradients[k], d) for k, d in zip(keys, dtypes)]
        norm = ops.sqrt(sum(ops.sum(ops.square(ops.cast(g, "float32"))) for g in grads)) if grads \
            else ops.zeros((), "float32")
        if optimizer.clip_grad_norm is not None:
            scale = optimizer.clip_grad_norm / ops.maximum(norm, optimizer.clip_grad_norm)
            grads = [g * ops.cast(scale, d) for g, d in zip(grads, dtypes)]
        ops.assign(optimizer.steps, ops.read_value(optimizer.steps) + 1)
        step = ops.read_value(optimizer.steps)
        for k, g, dtype in zip(keys, grads, dtypes):
            var = variables[k]
            slots = optimizer.slots_for(k, var)
            delta, new_slots = optimizer.update_rule(g, {name: ops.read_value(s) for name, s in slots.items()},
                                                     ops.cast(learning_rate, dtype), ops.cast(step, dtype))
            for name, value in new_slots.items():
                ops.assign(slots[name], value)
            ops.assign(var, ops.read_value(var) - delta)
        return norm

    def set_math_threads(self, threads):
        """Sets the threads this process's backend uses inside one op (its intra-op or OpenMP pool); returns the
        count to restore afterwards (None: the backend cannot go back)."""
        raise NotImplementedError

    def normalize_device(self, device):
        return device


def _map_nested(value, leaf):
    """``leaf`` applied to every value inside nested dicts, tuples and lists (lists come back as tuples)."""
    if isinstance(value, dict):
        return {k: _map_nested(v, leaf) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return tuple(_map_nested(v, leaf) for v in value)
    return leaf(value)
