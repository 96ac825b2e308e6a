"""JAX backend helpers: variables as boxes of immutable arrays, a saveable stream of random keys, and the
functional form a traced program takes (``rlgraph.executors.jax_executor`` runs graphs with them).

JAX arrays are immutable and a ``jax.jit`` program is a pure function, so the state the other backends keep in
place (variables, the random generator) is threaded through it:

- ``JaxVariable`` is a named box holding the variable's current value (a ``jax.Array``). ``JaxOps.assign`` and
  ``scatter_update`` compute the new value, put it into the box and return it; ``read_value`` returns the box's
  value (later assignments rebind the box, never change that array).
- ``JaxGenerator`` holds a random key; every draw splits it.
- ``functional(fn, variables)`` turns ``fn`` (which may read and assign ``variables`` and draw random numbers)
  into a pure function of ``(key, values, *args) -> (outputs, key, values)`` that ``jax.jit`` compiles; while it
  is traced the boxes and the current generator hold tracers, afterwards the caller stores the new key and values
  (``run_functional`` does both). The JAX graph executor (``JaxExecutor``) runs each API method this way.

The backend turns on JAX's 64-bit types (``jax_enable_x64``, for the whole process) so that dtypes follow numpy as
on the other backends: int64 indices, float64 where asked for; float32 inputs and weakly typed Python numbers
still compute in float32.
"""
import threading

import numpy as np

from rlgraph.backends.backend import Backend
from rlgraph.backends.op_generator import current_op_generator, op_generator
from rlgraph.utils.backend import jax
from rlgraph.utils.errors import RLGraphBackendError


class JaxBackend(Backend):
    """JAX: variables are ``JaxVariable`` boxes; the executor (``JaxExecutor``) traces each API method into one
    ``jax.jit`` program. Creating it loads JAX (``RLGraphBackendError`` naming ``pip install 'rlgraph[jax]'`` where
    it is missing) and enables its 64-bit types.

    The build evaluates graph functions abstractly (``jax.eval_shape``: output shapes and dtypes, nothing compiled
    or run; eager JAX would compile every operation for every shape, seconds per build): their values in the build
    are ``jax.ShapeDtypeStruct``; array arguments are abstract, the others (Python numbers, strings) concrete; random
    draws take a traced key; the variables keep their values. A graph function that needs concrete values (shapes
    from values, a host call of unknown output size) runs eagerly instead, on zeros where its inputs are abstract
    (with the table's generator). Variables get their initial values back after the build.

    Attributes:
        abstract_build: Evaluate graph functions abstractly in the build (default True; False: all eagerly).
    """

    name = "jax"
    build_runs_eagerly = False
    abstract_build = True

    def __init__(self):
        jax.config.update("jax_enable_x64", True)  # Loads JAX: raises the install hint here where it is missing.
        # Per thread (a build in one thread leaves programs traced in another alone): ``variables``, during a build,
        # [(variable, initial value)]; ``depth``: graph functions called inside a graph function run as they are.
        self._build = threading.local()

    def _building(self):
        return getattr(self._build, "variables", None)

    def _make_ops(self):
        from rlgraph.backends.jax_ops import JaxOps
        return JaxOps()

    def run_build(self, fn):
        build = self._build
        outer, build.variables, build.depth = self._building(), [], 0
        try:
            return fn()
        finally:
            for var, value in build.variables:
                var.value = value
            build.variables = outer

    def wrap_graph_fn_device(self, fn, device):
        def graph_fn(*args, **kwargs):
            if self._building() is None or self._build.depth or not self.abstract_build:
                return fn(*args, **kwargs)
            return self._evaluate_abstractly(fn, args, kwargs)
        return graph_fn

    def _evaluate_abstractly(self, fn, args, kwargs):
        """``fn(*args, **kwargs)`` in the build: abstract outputs, or concrete ones where it needs concrete values."""
        from rlgraph.backends.op_generator import op_generator
        leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
        traced = [i for i, x in enumerate(leaves) if _abstract_leaf(x)]
        variables = [(var, var.value) for var, _ in self._build.variables]

        returned_variables = {}  # Output leaf index -> a variable returned as it is (``variables()``).

        def abstract(key, *values):
            merged = list(leaves)
            for i, v in zip(traced, values):
                merged[i] = v
            a, k = jax.tree_util.tree_unflatten(tree, merged)
            with op_generator(JaxGenerator(key=key)):
                out = fn(*a, **k)
            out_leaves, out_tree = jax.tree_util.tree_flatten(out)
            for i, x in enumerate(out_leaves):
                if isinstance(x, JaxVariable):
                    returned_variables[i], out_leaves[i] = x, x.value
            return jax.tree_util.tree_unflatten(out_tree, out_leaves)

        self._build.depth += 1
        try:
            out = jax.eval_shape(abstract, jax.random.key(0), *[leaves[i] for i in traced])
            if not returned_variables:
                return out
            out_leaves, out_tree = jax.tree_util.tree_flatten(out)
            for i, var in returned_variables.items():
                out_leaves[i] = var
            return jax.tree_util.tree_unflatten(out_tree, out_leaves)
        except untraceable_errors():
            concrete = [jax.numpy.zeros(x.shape, x.dtype) if isinstance(x, jax.ShapeDtypeStruct) else x
                        for x in leaves]
            a, k = jax.tree_util.tree_unflatten(tree, concrete)
            return fn(*a, **k)
        finally:
            self._build.depth -= 1
            for var, value in variables:
                var.value = value

    def create_variable(self, name, value, trainable, device=None):
        var = JaxVariable(name, _to_device(np.asarray(value)), trainable)
        building = self._building()
        if building is not None:
            building.append((var, var.value))
        return var

    def is_trainable(self, var):
        return var.trainable

    def read_variable(self, var):
        return np.array(var.value, copy=True)

    def assign_variable(self, var, value):
        var.value = _to_device(np.asarray(value, dtype=var.dtype))

    def _leaf_to_backend(self, value):
        if isinstance(value, np.ndarray):
            return value if value.dtype.kind in "USO" else _to_device(value)
        return jax.numpy.asarray(value)

    def _leaf_to_numpy(self, value):
        if isinstance(value, JaxVariable):
            return np.array(value.value, copy=True)
        if isinstance(value, jax.Array):
            return np.asarray(value)
        return value

    def shape_and_dtype(self, value):
        if isinstance(value, (jax.Array, JaxVariable, jax.ShapeDtypeStruct)):
            return tuple(value.shape), np.dtype(value.dtype)
        return super().shape_and_dtype(value)

    def gradients(self, loss, variables, owner):
        """A traced loss cannot be differentiated after the fact: the JAX executor runs an API method that reaches
        an optimizer as ``differentiating`` (a loss pass under ``jax.value_and_grad`` up to this call, then the
        whole method with the gradients it computed); this returns that tape's gradients."""
        tape = current_tape()
        if tape is None:
            raise RLGraphBackendError(
                f"Optimizer '{owner}': on JAX gradients are computed inside the JAX executor's API calls "
                f"(rlgraph.backends.jax_backend.differentiating), not in a bare graph function call.")
        return tape.gradients(variables, loss, owner)

    def set_seed(self, seed):
        """Restarts the ops table's own generator (used outside an executor's calls) from ``seed``."""
        self.ops.generator = JaxGenerator(seed)


def _abstract_leaf(x):
    """Whether a graph function's argument leaf is abstract in the build: arrays (not strings), not Python values."""
    if isinstance(x, (jax.Array, jax.ShapeDtypeStruct)):
        return True
    return isinstance(x, np.ndarray) and x.dtype.kind not in "USO"


def untraceable_errors():
    """The errors of a trace that needs concrete values: shapes or Python control flow from an array's values,
    numpy on a tracer, a host call of unknown output size."""
    e = jax.errors
    return (e.ConcretizationTypeError, e.TracerArrayConversionError, e.TracerIntegerConversionError,
            e.NonConcreteBooleanIndexError, JaxUntraceableError)


class JaxUntraceableError(RLGraphBackendError):
    """An operation cannot be part of a ``jax.jit`` program (a host call with an unknown output size); the JAX
    executor runs such an API method eagerly instead."""


class JaxVariable:
    """A variable on JAX: a named box whose ``value`` (a ``jax.Array``, or a tracer while a ``functional``
    program is traced) the variable ops rebind. ``shape`` and ``dtype`` are the value's."""

    __slots__ = ("name", "value", "trainable")

    def __init__(self, name, value, trainable=False):
        self.name, self.value, self.trainable = name, value, bool(trainable)

    @property
    def shape(self):
        return tuple(self.value.shape)

    @property
    def dtype(self):
        return np.dtype(self.value.dtype)

    @property
    def ndim(self):
        return len(self.value.shape)

    @property
    def T(self):  # noqa: N802 (numpy's name)
        return self.value.T

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.value, dtype=dtype)

    def __getitem__(self, index):
        return self.value[index]

    def __len__(self):
        return len(self.value)

    def __repr__(self):
        return f"JaxVariable({self.name!r}, shape={self.shape}, dtype={self.dtype.name})"


def _operator(name):
    def op(self, *others):
        return getattr(self.value, name)(*[o.value if isinstance(o, JaxVariable) else o for o in others])
    op.__name__ = name
    return op


# Graph functions use variables as arrays (``x @ self.kernel + self.bias``, as tensors on TF and PyTorch): the
# arithmetic of a box is its value's (JAX's own operators give way to these for boxes); the ops table unwraps
# boxes passed to it (``JaxOps``).
for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul"):
    for _form in ("__{}__", "__r{}__"):
        setattr(JaxVariable, _form.format(_name), _operator(_form.format(_name)))
for _name in ("__neg__", "__pos__", "__abs__", "__lt__", "__le__", "__gt__", "__ge__", "astype", "reshape"):
    setattr(JaxVariable, _name, _operator(_name))


class JaxGenerator:
    """A stream of JAX random keys (threefry) whose state a run can save: the counterpart of the other backends'
    ``tf.random.Generator`` / ``torch.Generator`` (``rlgraph.backends.op_generator``).

    Each draw splits the key into the draw's key and the generator's next key. Under ``jax.jit`` the key must be
    threaded: the traced function makes ``JaxGenerator(key=traced_key)`` current and returns its ``key``
    (``functional``); a generator holding a concrete key refuses to draw inside a trace (the new key would be a
    tracer outliving it).

    Args:
        seed: The seed of a fresh stream.
        key: A key to continue from (a typed key array, e.g. a tracer); overrides ``seed``.
    """

    def __init__(self, seed=0, key=None):
        self.key = jax.random.key(int(seed)) if key is None else key

    def next_key(self):
        """A fresh key for one draw; advances the stream."""
        new_key, draw = jax.random.split(self.key)
        if isinstance(new_key, jax.core.Tracer) and not isinstance(self.key, jax.core.Tracer):
            raise RLGraphBackendError(
                "A random draw under jax.jit needs its key threaded through the traced function: run it through "
                "rlgraph.backends.jax_backend.functional (or make JaxGenerator(key=<traced key>) current with "
                "op_generator and return its key).")
        self.key = new_key
        return draw

    def get_state(self):
        """The stream's state: the raw key data (a uint32 numpy array)."""
        return np.array(jax.random.key_data(self.key), copy=True)

    def set_state(self, state):
        """Continues the stream from ``get_state()``'s ``state``."""
        self.key = jax.random.wrap_key_data(_to_device(np.asarray(state, dtype=np.uint32)))


def functional(fn, variables=()):
    """``fn(*args)`` as a pure function for ``jax.jit``: ``pure(key, values, *args) -> (outputs, key, values)``.

    While ``pure`` runs, the boxes of ``variables`` hold ``values`` (their dtypes kept) and a ``JaxGenerator`` on
    ``key`` is current; it returns ``fn``'s outputs, the generator's next key and the variables' new values, None
    for each variable ``fn`` left alone (so that a program returns, and copies, only what it changed: a replay
    memory's storage read by acting stays where it is). The boxes get their previous contents back afterwards (no
    tracer outlives a trace); ``run_functional`` stores the new state.
    """
    variables = tuple(variables)

    def pure(key, values, *args):
        saved = [var.value for var in variables]
        try:
            for var, value in zip(variables, values):
                var.value = value
            generator = JaxGenerator(key=key)
            with op_generator(generator):
                outputs = fn(*args)
            # A variable returned as it is (``variables()``) is returned as its value.
            outputs = jax.tree_util.tree_map(lambda x: x.value if isinstance(x, JaxVariable) else x, outputs)
            return outputs, generator.key, [None if var.value is value else var.value
                                            for var, value in zip(variables, values)]
        finally:
            for var, value in zip(variables, saved):
                var.value = value
    return pure


def run_functional(compiled, variables, generator, *args):
    """Calls ``compiled`` (e.g. ``jax.jit(functional(fn, variables))``) on ``generator``'s key and the variables'
    values, then stores the new key and values (those that changed); returns the outputs. A failing call changes
    nothing."""
    outputs, key, values = compiled(generator.key, [var.value for var in variables], *args)
    generator.key = key
    store_values(variables, values)
    return outputs


def store_values(variables, values):
    """Puts a ``functional`` program's new ``values`` into the boxes of ``variables`` (None: unchanged)."""
    for var, value in zip(variables, values):
        if value is not None:
            var.value = value


def current_generator(default):
    """The ``JaxGenerator`` current in this thread (``op_generator``), else ``default``."""
    generator = current_op_generator()
    return generator if isinstance(generator, JaxGenerator) else default


# --- gradients --------------------------------------------------------------------------------------------------
# A traced value cannot be differentiated after the fact: JAX differentiates functions. ``differentiating`` makes
# the loss an optimizer receives a function of the variables by running the API method again: a loss pass runs it
# under ``jax.value_and_grad`` with the variables' boxes bound to the differentiated arguments, up to the
# optimizer's call, whose loss it returns; the final pass runs it whole, the optimizer taking the gradients the loss
# pass computed. Both passes start from the same random key, and the final pass replays the host calls' outputs of
# the loss pass (a replay memory's sample is drawn once), so that both see the same values; XLA merges the
# duplicated forward computation.
_tapes = threading.local()


class _LossReached(Exception):
    """Ends a loss pass at the optimizer call whose loss it computes."""

    def __init__(self, loss):
        super().__init__("loss pass reached its optimizer call")
        self.loss = loss


class GradientTape:
    """The state of one ``differentiating`` call: the gradients of the optimizer calls so far and the host calls'
    outputs to replay. Optimizer JAX bodies call ``gradients``; ``JaxOps.host_call`` goes through ``host_call``."""

    def __init__(self, variables, traced):
        self.variables = variables  # The boxes that loss passes differentiate (all float variables).
        self.traced = traced  # Whether the API method is traced by jax.jit (else it runs eagerly).
        self.gradients_of = []  # Per optimizer call: id(box) -> gradient.
        self.host_outputs = []  # Host calls' outputs, in call order, to replay.
        self.loss_call = None  # In a loss pass: the index of the optimizer call whose loss it computes.
        self._calls = self._host_calls = 0

    def _start_pass(self, loss_call):
        self.loss_call, self._calls, self._host_calls = loss_call, 0, 0

    def gradients(self, variables, loss, owner):
        """The gradients of ``loss`` w.r.t. ``variables`` (dict of ``JaxVariable``) at this optimizer call."""
        index = self._calls
        self._calls += 1
        if index == self.loss_call:
            if getattr(loss, "shape", ()) != ():
                raise RLGraphBackendError(f"Optimizer '{owner}': the loss must be a scalar, got shape {loss.shape}.")
            raise _LossReached(loss)
        if index >= len(self.gradients_of):
            raise _MoreGradients()
        grads = self.gradients_of[index]
        out = {}
        for key, var in variables.items():
            if not isinstance(var, JaxVariable) or id(var) not in grads:
                raise RLGraphBackendError(
                    f"Optimizer '{owner}': on JAX the optimized variables must be float variables of the graph (as "
                    f"returned by a component's variables()); '{key}' is {type(var).__name__}.")
            out[key] = grads[id(var)]
        return out

    def host_call(self, call):
        """``call()``'s outputs, or the outputs the same host call had in the loss pass (replayed)."""
        index = self._host_calls
        self._host_calls += 1
        if index < len(self.host_outputs):
            return self.host_outputs[index]
        outputs = call()
        self.host_outputs.append(outputs)
        return outputs


def current_tape():
    """The ``GradientTape`` of the ``differentiating`` call running in this thread, else None."""
    return getattr(_tapes, "tape", None)


def differentiating(fn, all_variables, reduce_gradients=None):
    """``fn`` (an API method reaching optimizers) with the gradients its optimizers ask for (see above).

    ``all_variables()`` returns all the graph's variables (boxes): loss passes differentiate w.r.t. the float ones and
    restore all values afterwards. Works traced (inside ``functional``) and eagerly. ``reduce_gradients``: applied to
    each loss pass's gradients (a list) before the optimizer gets them, e.g. the mean over distributed learners
    (``lax.pmean`` inside a program over their mesh: ``rlgraph.executors.distributed_sync``).
    """
    def call(*args, **kwargs):
        variables = tuple(all_variables())
        floats = tuple(v for v in variables if jax.numpy.issubdtype(v.dtype, jax.numpy.inexact))
        generator = current_op_generator()
        key = generator.key
        saved = [var.value for var in variables]
        tape = GradientTape(floats, traced=isinstance(key, jax.core.Tracer))
        outer, _tapes.tape = current_tape(), tape
        try:
            while True:
                tape.gradients_of.append(_loss_pass(fn, args, kwargs, tape, len(tape.gradients_of), variables, key,
                                                    reduce_gradients))
                tape._start_pass(None)
                generator.key = key
                try:
                    return fn(*args, **kwargs)
                except _MoreGradients:  # A further optimizer call: its loss pass, then the final pass again.
                    for var, value in zip(variables, saved):
                        var.value = value
        finally:
            _tapes.tape = outer
    return call


class _MoreGradients(Exception):
    """The final pass reached an optimizer call without a loss pass yet."""


def _loss_pass(fn, args, kwargs, tape, loss_call, variables, key, reduce_gradients=None):
    """Runs ``fn`` up to optimizer call ``loss_call`` under ``jax.value_and_grad``: id(box) -> gradient (reduced by
    ``reduce_gradients`` where given); the host calls' outputs of the pass become the tape's to replay."""
    floats = tape.variables
    saved = [var.value for var in variables]
    known = list(tape.host_outputs)

    def loss_fn(values):
        try:
            for var, value in zip(floats, values):
                var.value = value
            tape._start_pass(loss_call)
            tape.host_outputs = list(known)
            with op_generator(JaxGenerator(key=key)):
                try:
                    fn(*args, **kwargs)
                except _LossReached as e:
                    return e.loss, list(tape.host_outputs)
            raise RLGraphBackendError("A loss pass of a JAX API method reached no optimizer call; the method's "
                                      "control flow differs between passes.")
        finally:
            for var, value in zip(variables, saved):
                var.value = value

    (_, recorded), grads = jax.value_and_grad(loss_fn, has_aux=True)([var.value for var in floats])
    tape.host_outputs = recorded
    if reduce_gradients is not None:
        grads = reduce_gradients(list(grads))
    return {id(var): g for var, g in zip(floats, grads)}


def _to_device(array):
    """A copy of a numpy array as a JAX array on the default device: ``jax.device_put`` of a private copy (the same
    dtypes as ``jnp.asarray``), where ``jnp.asarray`` of a numpy array compiles a small program per shape and dtype
    (~40 ms each; a build's variables made ~20 of them). The copy: on a CPU ``device_put`` may share the array's
    memory or read it after returning (even with ``may_alias=False``), so a caller's later write to its array would
    change the JAX array."""
    return jax.device_put(np.array(array, copy=True))
