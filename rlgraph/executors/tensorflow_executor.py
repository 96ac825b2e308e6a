"""TensorFlow executor: each API method runs as one ``tf.function`` with an input signature from the spaces."""
import threading
import zlib
from collections import defaultdict

import numpy as np

from rlgraph.backends.op_generator import op_generator
from rlgraph.executors.graph_executor import GraphExecutor, map_batched_leaves
from rlgraph.executors.input_checker import PYTHON_TYPES
from rlgraph.utils.backend import tf
from rlgraph.utils.errors import RLGraphRuntimeError

_PY_DTYPES = {int: "int32", float: "float32", bool: "bool"}


def tensor_spec(space):
    """A (nested) ``tf.TensorSpec`` for a space, batch and time dimensions left open (None)."""
    if space in PYTHON_TYPES:
        return tf.TensorSpec([], _PY_DTYPES[space])
    flat = {k: tf.TensorSpec(s.get_shape(with_batch_rank=True, with_time_rank=True),
                             tf.string if s.dtype.kind in "USO" else tf.as_dtype(s.dtype))
            for k, s in space.flatten().items()}
    return space.unflatten(flat)


class TensorFlowExecutor(GraphExecutor):
    """Executes API methods as static graphs.

    Args:
        autograph: Let ``tf.function`` convert Python control flow on tensors (default False: graph
            functions use ``tf.cond``/``tf.while_loop`` explicitly, which traces faster).
        **kwargs: See ``GraphExecutor``.

    Attributes:
        trace_counts: How often each API method was traced (new batch sizes must not add traces).
    """

    backend_name = "tf"

    def __init__(self, root_component, autograph=False, **kwargs):
        self.autograph = autograph
        self.trace_counts = defaultdict(int)
        # (API method, static arguments) -> its concrete function (the graphs TensorBoard shows).
        self.concrete_functions = {}
        # Random ops of the graphs draw from this generator (``tf_random``): its state can be saved and restored.
        self.op_generator = tf.random.Generator.from_seed(int(kwargs.get("seed") or 0) * 1_000_003 + 1)
        self._trace_lock = threading.RLock()
        self._tracers = {}  # API method -> traces it (with its default static arguments) unless traced already
        self._weight_functions = {}  # ("read"/"assign", variable names) -> a tf.function over those variables
        super().__init__(root_component, **kwargs)

    def build(self):
        self._tracers = {}
        with op_generator(self.op_generator):
            super().build()

    def trace(self, api_methods=None):
        """Traces API methods not traced yet (each is traced on its first call otherwise).

        Args:
            api_methods: Names of root API methods (default: all built ones).
        """
        for name in self.api_methods if api_methods is None else api_methods:
            tracer = self._tracers.get(name)
            if tracer is not None:  # None: a host call (no backend function).
                tracer()

    def _make_call(self, name, params, dynamic, checkers, defaults):
        raw = self._api_callable(name)
        signature = [tensor_spec(self.input_spaces[p]) for p in dynamic]
        counts = self.trace_counts
        functions = {}
        to_numpy = self.backend.to_numpy
        component = self.root.global_scope
        general = self._general_args
        py_casts = [(lambda x, d=np.dtype(_PY_DTYPES[s]): np.asarray(x, d)) if s in PYTHON_TYPES else None
                    for s in (self.input_spaces[p] for p in dynamic)]

        def function_for(static):
            key = tuple(sorted(static.items()))
            f = functions.get(key)
            if f is not None:
                return f
            with self._trace_lock:  # Threads calling a method first trace it once.
                f = functions.get(key)
                if f is not None:
                    return f
                def traced(*dyn):
                    counts[name] += 1
                    if not static:
                        return raw(*dyn)
                    return raw(**dict(zip(dynamic, dyn)), **static)
                f = tf.function(traced, input_signature=signature, autograph=self.autograph)
                # Random ops without an explicit seed derive theirs from the graph seed and their position in
                # the graph; distinct graph seeds per API method keep their random streams apart.
                tf.random.set_seed((self.seed * 1_000_003 + zlib.crc32(repr((name, key)).encode())) % 2**31)
                # Calling the concrete function skips tf.function's signature dispatch (~40% of a small call).
                with op_generator(self.op_generator):
                    f = f.get_concrete_function()
                self.concrete_functions[(name, key)] = f
                if self.validate_inputs:  # Structure, dtypes and shapes checked already: the flat call is safe.
                    f = _flat_call(f, signature)
                functions[key] = f
            return f

        static_defaults = dict(defaults)
        # Traced on its first call, not at build: a run traces only the methods it uses (an R2D2 agent has three
        # update methods with an LSTM's backward pass; a local run calls one of them).
        default = [None]

        def default_fn():
            if default[0] is None:
                default[0] = function_for(static_defaults)
            return default[0]
        self._tracers[name] = default_fn
        tensor_type = tf.Tensor
        pairs = [(checkers[p], cast) for p, cast in zip(dynamic, py_casts)]
        n = len(params)

        def run(f, dyn):
            try:
                out = f(*dyn)
            except tf.errors.InvalidArgumentError as e:
                raise RLGraphRuntimeError(f"API method '{name}' of '{component}': {_op_error_text(e)}") from None
            if isinstance(out, tensor_type):
                return out.numpy()
            return to_numpy(out)

        def call(*args, **kwargs):
            if not kwargs and len(args) == n and not defaults:
                dyn = [check(a) if cast is None else cast(check(a)) for (check, cast), a in zip(pairs, args)]
                return run(default[0] or default_fn(), dyn)
            dyn, static = general(name, params, dynamic, checkers, defaults, args, kwargs, component)
            dyn = [v if cast is None else cast(v) for (_, cast), v in zip(pairs, dyn)]
            f = default_fn() if static == static_defaults else function_for(static)
            return run(f, dyn)
        return call

    def _make_steps_call(self, name, dynamic, axes, static):
        """``execute_steps`` as one ``tf.function``: a ``tf.while_loop`` over the steps (one step's graph, not
        one copy per step, so a step's gradients are taken in a graph of one step's size), the outputs
        collected in ``TensorArray``s."""
        raw = self._api_callable(name)
        signature = [tf.TensorSpec([None, None], tf.int64)] + [tensor_spec(self.input_spaces[p]) for p in dynamic]
        out_dtypes = _output_dtypes(self.meta_graph.api[name].outputs)
        flat_dtypes = tf.nest.flatten(out_dtypes)
        counts, component, to_numpy = self.trace_counts, self.root.global_scope, self.backend.to_numpy
        py_casts = [(lambda x, d=np.dtype(_PY_DTYPES[s]): np.asarray(x, d)) if s in PYTHON_TYPES else None
                    for s in (self.input_spaces[p] for p in dynamic)]

        def traced(rows, *dyn):
            counts[f"{name}/steps"] += 1
            n = tf.shape(rows)[0]

            def body(k, arrays):
                sliced = [map_batched_leaves(v, a, lambda x, ax: tf.gather(x, rows[k], axis=ax))
                          for v, a in zip(dyn, axes)]
                out = raw(*sliced) if not static else raw(**dict(zip(dynamic, sliced)), **static)
                flat = tf.nest.flatten(out)
                return k + 1, tuple(a.write(k, tf.cast(x, a.dtype)) for a, x in zip(arrays, flat))

            arrays = tuple(tf.TensorArray(d, size=n) for d in flat_dtypes)
            _, arrays = tf.while_loop(lambda k, _: k < n, body, (tf.constant(0), arrays), parallel_iterations=1)
            return tf.nest.pack_sequence_as(out_dtypes, [a.stack() for a in arrays])

        f = tf.function(traced, input_signature=signature, autograph=False)
        tf.random.set_seed((self.seed * 1_000_003 + zlib.crc32(repr((name, "steps", static)).encode())) % 2**31)
        with op_generator(self.op_generator):
            f = f.get_concrete_function()
        if self.validate_inputs:  # Checked by ``execute_steps``: the flat call is safe.
            f = _flat_call(f, signature)

        def call(rows, dyn):
            dyn = [v if cast is None else cast(v) for v, cast in zip(dyn, py_casts)]
            try:
                out = f(np.asarray(rows, np.int64), *dyn)
            except tf.errors.InvalidArgumentError as e:
                raise RLGraphRuntimeError(f"API method '{name}' of '{component}': {_op_error_text(e)}") from None
            return to_numpy(out)
        return call

    def _weight_function(self, kind, variables):
        """One graph call reading or assigning all of ``variables`` at once, called on its flat signature
        (``_flat_call``): one eager op per variable cost ~0.15 ms (read) and ~0.25 ms (assign) each, and weight
        hand-overs to actors are frequent."""
        key = (kind, tuple(variables))
        fn = self._weight_functions.get(key)
        if fn is None:
            var_list = list(variables.values())
            if kind == "read":
                fn = tf.function(lambda: [tf.identity(v) for v in var_list], autograph=False)
                signature = []
            else:
                def assign(*values):
                    for v, x in zip(var_list, values):
                        v.assign(x)
                    return tf.constant(True)
                signature = [tf.TensorSpec(v.shape, v.dtype) for v in var_list]
                fn = tf.function(assign, autograph=False, input_signature=signature)
            with tf.init_scope():
                concrete = fn.get_concrete_function()
            fn = _flat_call(concrete, signature)
            with self._trace_lock:
                fn = self._weight_functions.setdefault(key, fn)
        return fn

    def _read_variables(self, variables):
        with tf.init_scope():
            return [np.array(t) for t in self._weight_function("read", variables)()]

    def _assign_variables(self, variables, values):
        values = [np.asarray(x, dtype=v.dtype.as_numpy_dtype) for x, v in zip(values, variables.values())]
        with tf.init_scope():
            self._weight_function("assign", variables)(*values)

    def get_rng_state(self):
        """The state of the generator the graphs' random ops draw from (``tf_random``)."""
        return dict(algorithm=int(self.op_generator.algorithm), state=self.op_generator.state.numpy().copy())

    def set_rng_state(self, state):
        if state is None:
            return
        values = np.asarray(state["state"])
        current = self.op_generator.state
        if int(state["algorithm"]) != int(self.op_generator.algorithm) or values.shape != tuple(current.shape):
            raise ValueError(f"a random-generator state {values.shape} of algorithm {state['algorithm']}, expected "
                             f"{tuple(current.shape)} of algorithm {int(self.op_generator.algorithm)}")
        self.op_generator.reset(values.astype(current.dtype.as_numpy_dtype))


def _output_dtypes(outputs):
    """The TF dtypes of a meta-graph API call's outputs, nested like the values it returns."""
    from rlgraph.graphs.records import Record
    from rlgraph.spaces import Space
    if isinstance(outputs, Record):
        space = outputs.space
        if isinstance(space, Space):
            return space.unflatten({k: tf.as_dtype(s.dtype) for k, s in space.flatten().items()})
        return tf.as_dtype(_PY_DTYPES.get(space, "float32"))
    if isinstance(outputs, dict):
        return {k: _output_dtypes(v) for k, v in outputs.items()}
    if isinstance(outputs, (tuple, list)):
        return tuple(_output_dtypes(v) for v in outputs)
    raise RLGraphRuntimeError(f"execute_steps: an output of {outputs!r} is not a graph value.")


def _flat_call(f, signature):
    """``f(*args)`` for concrete function ``f`` on arguments of ``signature``, calling its flat signature
    (``ConcreteFunction._call_flat``) on the tensors converted here: TF's binding of structured arguments costs
    ~20 us per leaf (a DQN update's 7 leaves: a third of the call). ``f`` itself where this TensorFlow lacks the
    method or flattens the arguments otherwise."""
    call_flat, captured = getattr(f, "_call_flat", None), getattr(f, "captured_inputs", None)
    specs = tf.nest.flatten(signature)
    try:
        traced = tf.nest.flatten(f.structured_input_signature[0])
        fits = len(f.inputs) - len(captured) == len(specs) == len(traced) and all(
            a.dtype == b.dtype and a.shape == b.shape and f.inputs[i].dtype == a.dtype
            for i, (a, b) in enumerate(zip(specs, traced)))
    except (AttributeError, TypeError, ValueError, IndexError):
        fits = False
    # Captures are the variables' handles, fixed after the build (deferred captures, callables, are not).
    if call_flat is None or not fits or any(callable(c) for c in getattr(f, "_captured_inputs", [None])):
        return f
    flatten, makers = tf.nest.flatten, [_tensor_maker(s.dtype) for s in specs]

    def call(*args):
        return call_flat([make(v) for make, v in zip(makers, flatten(args))], captured)
    return call


# TF allocates its tensors at this alignment and takes an array so aligned as its buffer instead of copying it.
_TF_ALIGNMENT = 64


def _tensor_maker(dtype):
    """A function turning an argument (a numpy array, or a value numpy converts) into an eager tensor of
    ``dtype`` for a flat call.

    ``tf.constant`` creates the tensor and then runs an ``_EagerConst`` op to place it on the default device:
    ~25 us per leaf, 4-8 leaves per call (a quarter of a small act call). The ``EagerTensor`` constructor with
    no device makes the same host tensor without the op (~3 us); the function call places its inputs as
    before. TF would take a 64-byte aligned array's memory as the tensor's buffer: such arrays are copied first,
    so the graph never shares memory with a caller's array (``tf.constant`` always copies). ``tf.constant``
    where this TensorFlow lacks that constructor, and for strings.
    """
    def public(value):
        return tf.constant(value, dtype)
    if dtype == tf.string or not tf.executing_eagerly():
        return public
    try:
        from tensorflow.python.eager import context
        from tensorflow.python.framework.ops import EagerTensor
        enum = dtype.as_datatype_enum
        context.context().ensure_initialized()
        EagerTensor(np.zeros(1, dtype.as_numpy_dtype), None, enum)  # This TensorFlow's constructor takes these.
    except Exception:  # noqa: BLE001 - any failure: the public constructor.
        return public
    ndarray, alignment = np.ndarray, _TF_ALIGNMENT

    def make(value):
        if isinstance(value, ndarray) and value.ctypes.data % alignment == 0:
            value = value.copy()
        return EagerTensor(value, None, enum)
    return make


def _op_error_text(error):
    """The informative line of a TF run-time error (an assertion's message where there is one)."""
    lines = [ln.strip() for ln in error.message.splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith("assertion failed:"):
            return ln.split("\t")[0]
    return lines[-1] if lines else str(error)
