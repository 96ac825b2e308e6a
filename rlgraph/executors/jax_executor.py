"""JAX executor: each API method runs as one ``jax.jit`` program, compiled on its first call.

Layers, networks, policies, distributions, explorations, the RL maths, memories through host calls, and
optimizers: an update is one program with its gradients; with ``multi_device_sync`` towers that program is
sharded over several XLA devices; with ``distributed_sync`` (distributed learners) it runs over one device per
learner process, its gradients all-reduced between the processes. The build of a graph with a graph function that has
no JAX body raises one line naming the component and what to write.
"""
import logging
import os
import queue
import re
import threading
from collections import defaultdict

import numpy as np

from rlgraph.backends.jax_backend import (JaxGenerator, differentiating, functional, store_values,
                                         untraceable_errors)
from rlgraph.backends.op_generator import op_generator
from rlgraph.executors.device_strategy import DeviceStrategy
from rlgraph.executors.graph_executor import GraphExecutor, differentiates, map_batched_leaves
from rlgraph.executors.multi_device_sync import MultiDeviceSyncStrategy
from rlgraph.spaces import Space
from rlgraph.utils.backend import jax
from rlgraph.utils.errors import RLGraphBackendError, RLGraphError, RLGraphLearnerGroupError, RLGraphRuntimeError

logger = logging.getLogger(__name__)

#: Where compiled programs are kept between processes (``use_compilation_cache``); "none" turns it off.
CACHE_DIR_VARIABLE = "RLGRAPH_JAX_CACHE_DIR"
#: The cache's bound (JAX evicts the least recently used programs beyond it; a bound also makes JAX lock the
#: directory, so that processes of a run (Ray actors, test workers) can share it).
CACHE_MAX_BYTES = 1 << 30


def use_compilation_cache():
    """Turns on JAX's persistent compilation cache (once per process), unless the user configured one already.

    The first call of each program compiles it (APPO's update: seconds on a CPU); a cache on disk lets the next run
    of the same config, and every actor process of a run, load the program instead. Directory:
    ``$RLGRAPH_JAX_CACHE_DIR``, else ``$XDG_CACHE_HOME/rlgraph/jax`` (``~/.cache/rlgraph/jax``); "none" turns it
    off. Needs ``filelock`` (JAX locks a bounded cache); without it the cache stays off.

    Returns:
        str or None: The cache directory in use (None: off).
    """
    if jax.config.jax_compilation_cache_dir:
        return jax.config.jax_compilation_cache_dir  # The user's own.
    path = os.environ.get(CACHE_DIR_VARIABLE)
    if path is not None and path.strip().lower() in ("", "none", "off", "0"):
        return None
    if path is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = os.path.join(base, "rlgraph", "jax")
    try:
        import filelock  # noqa: F401 (JAX's cache needs it once bounded)
    except ImportError:
        logger.debug("JAX compilation cache off: the filelock package is not installed.")
        return None
    jax.config.update("jax_compilation_cache_max_size", CACHE_MAX_BYTES)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    jax.config.update("jax_compilation_cache_dir", path)
    return path


class JaxExecutor(GraphExecutor):
    """Executes API methods as compiled JAX programs over the executor's variables and random key.

    Each root API method becomes ``jax.jit(functional(method, variables))``: one pure function of (the random key,
    the variables' values, the method's space-checked arguments) -> (outputs, the next key, the variables' new
    values); the executor holds the variables (``JaxVariable`` boxes) and the key (``op_generator``, a
    ``JaxGenerator``) and stores what each call returns. A graph function's assignments are functional updates of
    the boxes while the program is traced. Arguments outside the input spaces (static arguments, e.g.
    ``deterministic=True`` left out of ``input_spaces``) and arguments of the ``int`` and ``bool`` spaces (sizes
    such as ``batch_size``, flags) are constants of the program: one program per value; ``float`` arguments (e.g.
    ``time_percentage``) are traced.

    A program is traced and compiled on the method's first call with given input shapes and dtypes (as
    TensorFlow traces on the first call); XLA's shapes are static, so a new batch size compiles the method again.
    ``trace_counts`` counts the traces per method.

    Eager fallback: a method whose trace cannot be made runs eagerly, graph function by graph function, on the
    same variables and key (``eager_methods`` names them; logged once): a host call with an unknown output size
    (``JaxOps.host_call`` raises ``JaxUntraceableError``), or Python control flow or shapes depending on an input's
    values (JAX's ``ConcretizationTypeError``), or string arguments (a ``TextBox``). Root API methods that are one
    host graph function (a numpy memory's insert and sample) run on the host without JAX, as on every backend.

    ``execute_steps`` runs one program: a ``lax.scan`` over the steps (unrolled on CPU), each step the method's
    program on its rows.

    Towers (``device_strategy`` ``multi_device_sync``): an update method (one that steps an optimizer)
    stays one program, placed over a ``jax.sharding.Mesh`` of the towers' distinct XLA devices: its batched
    arguments sharded along their batch axes (``NamedSharding``; the strategy's split rules), the variables and
    key replicated; XLA's SPMD partitioner runs each device's share of the batch there and all-reduces what needs
    the whole batch (the gradients of the mean loss, batch statistics), so that the update equals one device's on
    the whole batch. The new variables come back to the default device, where the other programs run. Several
    CPU devices: ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` before JAX initialises. Towers repeating
    one device run as one program there (XLA gains nothing from splitting a batch on one device); a batch that
    does not divide over the towers is refused before it runs, as on the other backends. Under towers,
    ``execute_steps`` runs one (sharded) ``execute`` per step, and an eager method runs on the default device.

    Distributed learners (``device_strategy`` ``distributed_sync``, a ``JaxProcessGroup`` made by
    ``jax.distributed.initialize``): an update method runs over the group's ``Mesh`` of one device per learner
    process (``LearnerSharding``: a ``shard_map`` in which each process's program takes its own batch and key, and
    the variables, equal in all learners, are replicated); its gradients are averaged by ``lax.pmean`` between the
    loss pass and the optimizers (``differentiating``'s ``reduce_gradients``), an all-reduce XLA runs over the
    processes, so every learner applies the same step. Every learner must call its update methods in the same order
    with batches of the same shapes (the distributed engine's learners do); each gets the outputs of its own batch.
    Acting and evaluation methods run locally. An update method that cannot be traced is refused (it would skip the
    all-reduce).

    Gradients: an API method that reaches an optimizer (a component with ``differentiates``) runs as
    ``jax_backend.differentiating(method)``: a loss pass under ``jax.value_and_grad`` up to the optimizer's call,
    then the whole method with those gradients, in the same program (same key; host calls' outputs replayed).

    Outputs are returned as on the other backends: numpy arrays, dicts with their keys in the order the method
    built them (``jax.jit`` itself returns them sorted). Programs draw random bits with the non-partitionable
    threefry (``_random_bits``: ~4x faster to compile on a CPU than JAX's default).

    Attributes:
        trace_counts: API method -> how often its program was traced (once per input signature).
        eager_methods: The API methods that run eagerly (see above).
    """

    backend_name = "jax"
    compiles_per_shape = True
    op_generator = None
    #: Whether programs on one device donate the buffers of the variables they change (``DonatingJit``).
    donate = True

    def __init__(self, root_component, **kwargs):
        use_compilation_cache()
        self.trace_counts = defaultdict(int)
        self.eager_methods = set()
        self._variables = []
        self._tower_programs = {}  # API method -> its last program run as towers (``program_text``)
        super().__init__(root_component, **kwargs)

    def build(self):
        from rlgraph.executors.distributed_sync import DistributedSyncStrategy
        if type(self.device_strategy) not in (DeviceStrategy, MultiDeviceSyncStrategy, DistributedSyncStrategy):
            raise RLGraphBackendError(f"Device strategy {self.device_strategy!r} of '{self.root.global_scope}': "
                                      f"the JAX backend runs 'default', 'multi_device_sync' and 'distributed_sync'.")
        try:
            with _random_bits():
                super().build()
        except RLGraphError as e:
            missing = _missing_jax_body(e)
            if missing is None:
                raise
            raise RLGraphBackendError(f"{missing} To run it on JAX: {JAX_NOT_YET}") from None
        self._variables = list(self.variables().values())
        # The key stream continues where the build's draws (from the table's generator, seeded by the build) left.
        self.op_generator = JaxGenerator()
        self.op_generator.set_state(self.backend.ops.generator.get_state())

    # --- calls -------------------------------------------------------------------------------------------
    def _api_callable(self, name):
        """The bound root API method: towers need no rewrite on JAX (``_tower_sharding`` places the program)."""
        return getattr(self.root, name)

    def _tower_sharding(self, name, dynamic, constant):
        """The ``TowerSharding`` of root API method ``name`` where the device strategy runs it as towers over
        several devices (``LearnerSharding`` over distributed learners), else None."""
        strategy = self.device_strategy
        plan = getattr(strategy, "plans", {}).get(name)
        if plan is None:
            return None
        from rlgraph.executors.distributed_sync import DistributedSyncStrategy
        if isinstance(strategy, DistributedSyncStrategy):
            return LearnerSharding(strategy.group)
        devices = []
        for device in strategy.tower_devices:  # "cpu:i" / "gpu:i", checked to exist by the strategy.
            kind, index = device.split(":")
            device = jax.devices(kind)[int(index)]
            if device not in devices:
                devices.append(device)
        if len(devices) < 2:
            return None
        rules = [plan.split_rules.get(p) for p, c in zip(dynamic, constant) if not c]
        return TowerSharding(devices, rules)

    def _make_call(self, name, params, dynamic, checkers, defaults):
        method = self._api_callable(name)
        eager = any(_has_text(self.input_spaces[p]) for p in dynamic)
        # ``int`` and ``bool`` arguments (sizes, flags) are constants of the program; ``float`` ones are traced.
        constant = [self.input_spaces[p] in (int, bool) for p in dynamic]
        sharding = self._tower_sharding(name, dynamic, constant)
        learners = isinstance(sharding, LearnerSharding)
        if differentiates(self.meta_graph.api[name]):
            method = differentiating(method, lambda: self._variables,
                                     self.device_strategy._reduce_gradients if learners else None)
        programs = {}  # (static arguments, constant arguments) -> compiled program
        general, scope = self._general_args, self.root.global_scope
        n = len(params)
        n_leading = len(dynamic) if params[:len(dynamic)] == dynamic else -1

        def program_for(static, constants):
            key = (tuple(sorted(static.items())), constants)
            try:
                return programs[key]
            except KeyError:
                pass
            except TypeError:  # An unhashable static argument: compiled for this call only.
                key = None
            given = iter(constants)
            layout = []

            def traced(*values):
                self.trace_counts[name] += 1
                values = iter(values)
                args = [next(given) if c else next(values) for c in constant]
                out = method(*args) if not static else method(**dict(zip(dynamic, args)), **static)
                layout[:] = [_layout(out)]
                return out
            pure = functional(traced, self._variables)
            if learners:
                compiled = sharding.compile(pure)
            else:  # Towers: the mesh's replicas of the variables are cached between calls (not donated).
                compiled = jax.jit(pure) if sharding is not None or not self.donate else DonatingJit(pure)
            program = _Program(compiled, layout)
            if key is not None:
                programs[key] = program
            return program

        def run(dyn, static):
            if learners and (name in self.eager_methods or eager):
                raise RLGraphBackendError(sharding.untraced(name, scope, "it has text arguments"))
            if name in self.eager_methods or eager:
                return self._run_eagerly(method, dynamic, dyn, static)
            constants = tuple(v for v, c in zip(dyn, constant) if c)
            try:
                program = program_for(static, constants)
                if sharding is not None:
                    self._tower_programs[name] = program
                return self._run_program(program, [v for v, c in zip(dyn, constant) if not c], sharding)
            except untraceable_errors() as e:
                if learners:
                    why = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                    raise RLGraphBackendError(sharding.untraced(name, scope, why)) from None
                logger.info("API method '%s' of '%s' cannot be traced by jax.jit (%s: %s); it runs eagerly.",
                            name, scope, type(e).__name__, str(e).splitlines()[0] if str(e) else "")
                self.eager_methods.add(name)
                return self._run_eagerly(method, dynamic, dyn, static)

        def call(*args, **kwargs):
            if not kwargs:
                if not defaults and len(args) == n:
                    return run([checkers[p](a) for p, a in zip(dynamic, args)], {})
                if len(args) == n_leading:
                    return run([checkers[p](a) for p, a in zip(dynamic, args)], defaults)
            dyn, static = general(name, params, dynamic, checkers, defaults, args, kwargs, scope)
            return run(dyn, static)
        return call

    def _make_steps_call(self, name, dynamic, axes, static):
        """``execute_steps``: one program, a ``lax.scan`` over the steps (unrolled on CPU; each step the method's
        whole program on its rows, the variables and key carried), compiled per rows shape and constant arguments.
        Methods that run eagerly, or with text arguments, run one ``execute`` per step."""
        method = self._api_callable(name)
        if differentiates(self.meta_graph.api[name]):
            method = differentiating(method, lambda: self._variables)
        constant = [self.input_spaces[p] in (int, bool) for p in dynamic]
        per_step = GraphExecutor._make_steps_call(self, name, dynamic, axes, static)
        programs = {}
        eager = any(_has_text(self.input_spaces[p]) for p in dynamic)
        traced_axes = [a for a, c in zip(axes, constant) if not c]

        def program_for(constants):
            program = programs.get(constants)
            if program is not None:
                return program
            variables = self._variables
            layout = []

            def step(*values):
                self.trace_counts[name] += 1
                given, values = iter(constants), iter(values)
                args = [next(given) if c else next(values) for c in constant]
                out = method(*args) if not static else method(**dict(zip(dynamic, args)), **static)
                layout[:] = [_layout(out)]
                return out
            pure_step = functional(step, variables)

            def pure(key, values, rows, *dyn):
                changed = set()  # The variables a step changes (known once the body is traced).

                def body(carry, r):
                    key, values = carry
                    sliced = [map_batched_leaves(v, a, lambda x, ax: jax.numpy.take(x, r, axis=ax))
                              for v, a in zip(dyn, traced_axes)]
                    outputs, key, new = pure_step(key, values, *sliced)
                    changed.update(i for i, n in enumerate(new) if n is not None)
                    return (key, [v if n is None else n.astype(v.dtype) for v, n in zip(values, new)]), outputs
                # XLA:CPU runs a convolution inside a while loop several times slower than outside one (a
                # Pong CNN's gradient step 8x), so on CPU the scan is unrolled: one straight-line program of the
                # steps (compiled once per number of steps).
                (key, values), outputs = jax.lax.scan(body, (key, list(values)), rows,
                                                      unroll=jax.default_backend() == "cpu")
                return outputs, key, [v if i in changed else None for i, v in enumerate(values)]
            program = programs[constants] = _Program(DonatingJit(pure) if self.donate else jax.jit(pure), layout)
            return program

        def call(rows, dyn):
            if eager or name in self.eager_methods:
                return per_step(rows, dyn)
            constants = tuple(v for v, c in zip(dyn, constant) if c)
            traced = [v for v, c in zip(dyn, constant) if not c]
            try:
                program = program_for(constants)
                return self._run_program(program, [jax.numpy.asarray(rows)] + traced)
            except untraceable_errors() as e:
                logger.info("execute_steps('%s') of '%s' cannot be traced by jax.jit (%s); one call per step.",
                            name, self.root.global_scope, type(e).__name__)
                self.eager_methods.add(name)
                return per_step(rows, dyn)
        return call

    def _run_program(self, program, dyn, sharding=None):
        """Runs a compiled program on the executor's key and variables; stores the new ones once it succeeded.
        With a ``TowerSharding``: the arguments sharded, the key and variables replicated over its mesh."""
        generator, variables = self.op_generator, self._variables
        key, values = generator.key, [v.value for v in variables]
        if isinstance(sharding, LearnerSharding):
            outputs, key, values = sharding.run(program.compiled, key, values, dyn)
            generator.key = key
            store_values(variables, values)
            return _to_numpy(outputs, program.layout[0] if program.layout else None)
        try:
            if sharding is not None:
                key, values, dyn = sharding.place(key, values, dyn)
                program.last_inputs = sharding.signature(key, values, *dyn)
            with _random_bits():
                outputs, key, values = program.compiled(key, values, *dyn)
                jax.block_until_ready((outputs, key, values))  # A failed check fails here, before any state changes.
            if sharding is not None:
                key, values = sharding.home(key, values)
        except jax.errors.JaxRuntimeError as e:
            raise RLGraphRuntimeError(_runtime_message(e)) from None
        generator.key = key
        store_values(variables, values)
        return _to_numpy(outputs, program.layout[0] if program.layout else None)

    def _run_eagerly(self, method, dynamic, dyn, static):
        with op_generator(self.op_generator), _random_bits():
            if not static:
                return _to_numpy(method(*dyn))
            return _to_numpy(method(**dict(zip(dynamic, dyn)), **static))

    def program_text(self, api_method):
        """The optimized HLO text of the program that the last call of ``api_method`` ran as towers (shows its
        sharding and the all-reduces XLA inserted), else None."""
        program = self._tower_programs.get(api_method)
        if program is None or program.last_inputs is None:
            return None
        with _random_bits():
            return program.compiled.lower(*program.last_inputs).compile().as_text()

    # --- variables and random state ----------------------------------------------------------------------
    def get_rng_state(self):
        """The executor's key stream (``generator``: the raw key data), which graph functions draw from."""
        return None if self.op_generator is None else {"generator": self.op_generator.get_state()}

    def set_rng_state(self, state):
        """Restores what ``get_rng_state`` returned; None (or a state without ``generator``) changes nothing."""
        if state is None or state.get("generator") is None or self.op_generator is None:
            return
        self.op_generator.set_state(state["generator"])


#: What a build of a graph with a graph function lacking a JAX body appends to the line naming it.
JAX_NOT_YET = ("add a JAX body (@graph_fn(backend=\"jax\"), or one body for every backend written over self.ops), "
               "or use backend 'tf' or 'pytorch' for this graph.")


def _missing_jax_body(error):
    """The message of the error, in the chain of ``error`` (a build's), that a graph function has no JAX body (the
    builder's check of the graph's graph functions, or one called inside another, e.g. an optimizer's gradients),
    else None."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, RLGraphBackendError) and "has no implementation for backend 'jax'" in str(error):
            return str(error)
        error = error.__cause__ or error.__context__
    return None


def _has_text(space):
    if not isinstance(space, Space):
        return False
    return any(s.dtype.kind in "USO" for s in space.flatten().values())


def _runtime_message(error):
    """The message of the ``RLGraphRuntimeError`` a host callback raised inside a program, else JAX's first line."""
    text = str(error)
    match = re.search(r"RLGraph\w*Error: ([^\n]*)", text)
    return match.group(1) if match else (text.splitlines()[0] if text else type(error).__name__)


def _random_bits():
    """The random-bit generation of the executor's programs: threefry, not "partitionable". JAX's default since 0.5
    (``jax_threefry_partitionable``) serves arrays sharded over several devices, which these one-device programs
    are not, and XLA compiles its draws ~4x slower on a CPU (a 64x10 uniform draw: ~1.5 s against ~0.4 s here), a
    cost every program with a random draw pays on its first call. Set per call (JAX's thread-local context), so the
    user's own JAX code keeps its setting."""
    return jax.threefry_partitionable(False)


class _Program:
    """A compiled program and the layout of its outputs (``_layout``, recorded when it is traced); towers: the
    shapes and shardings of its last inputs (``program_text``)."""

    __slots__ = ("compiled", "layout", "last_inputs")

    def __init__(self, compiled, layout):
        self.compiled, self.layout, self.last_inputs = compiled, layout, None


class DonatingJit:
    """``jax.jit`` of a ``functional`` program ``pure(key, values, *args) -> (outputs, key, new values)`` that
    donates the buffers of the variables the program changes: XLA writes their new values into the old ones' memory
    (an update's weights and optimizer slots are not held twice), and the old arrays are deleted by the call.

    Which variables a program changes (``new values`` not None), and whether it calls the host, is known from its
    first trace (``jax.make_jaxpr``; the compiled program replays that trace's jaxpr for the same input signature,
    so the component code is traced once, as without donation). A program that calls the host (a numpy memory's
    ``host_call``, or a check of values, ``ops.check``: both ``io_callback`` s) donates nothing: a host call can fail
    while the program runs, after the donated buffers were given away, and a failing call must leave the variables
    as they were (a replay memory's sample checks its size, so DQN's and R2D2's updates do not donate; APPO's and
    IMPALA's updates and a memory's inserts do). Programs that change no variable (acting) donate nothing either. A
    buffer that two variables share (one assigned the other's value) is copied before the call, so that the other
    keeps its value.

    Not used for programs over several devices (towers, distributed learners): their replicated variables are cached
    between calls.

    Attributes:
        donated: Indices of the donated variables in ``values`` (None before the first call).
    """

    def __init__(self, pure):
        self.pure = pure
        self.donated = None
        self._jitted = None

    def __call__(self, key, values, *args):
        if self._jitted is None:
            self._jitted = self._compile(key, values, args)
        if not self.donated:
            return self._jitted(key, values, *args)
        counts = {}
        for v in values:
            counts[id(v)] = counts.get(id(v), 0) + 1
        donated = [values[i] for i in self.donated]
        donated = [jax.numpy.copy(v) if counts[id(v)] > 1 else v for v in donated]
        kept = list(values)
        for i in self.donated:
            kept[i] = None
        return self._jitted(key, donated, kept, *args)

    def _compile(self, key, values, args):
        from jax.extend.core import jaxpr_as_fun
        closed, shapes = jax.make_jaxpr(self.pure, return_shape=True)(key, values, *args)
        in_tree = jax.tree_util.tree_structure((key, values, *args))
        in_avals = [(a.shape, a.dtype) for a in closed.in_avals]
        out_tree = jax.tree_util.tree_structure(shapes)
        replay = jaxpr_as_fun(closed)
        pure = self.pure

        def program(key, values, *args):
            leaves, tree = jax.tree_util.tree_flatten((key, values, *args))
            if tree == in_tree and [(x.shape, x.dtype) for x in leaves] == in_avals:
                return jax.tree_util.tree_unflatten(out_tree, replay(*leaves))  # The first trace, replayed.
            return pure(key, values, *args)  # Another signature: traced anew.
        changed = [i for i, new in enumerate(shapes[2]) if new is not None]
        self.donated = [] if closed.effects else changed
        if not self.donated:
            return jax.jit(program)
        donated = self.donated

        def partitioned(key, donated_values, kept, *args):
            values = list(kept)
            for i, v in zip(donated, donated_values):
                values[i] = v
            return program(key, values, *args)
        return jax.jit(partitioned, donate_argnums=(1,))


class TowerSharding:
    """Where a towered update program runs: a one-axis ``Mesh`` of the towers' distinct devices, each batched
    argument sharded along its batch axis, everything else (key, variables, arguments without a batch rank)
    replicated.

    Args:
        devices: The distinct ``jax.Device`` s (at least two).
        rules: Per traced argument of the program, the strategy's split rule: a nested structure of batch axes
            (None: not batched).
    """

    AXIS = "towers"

    def __init__(self, devices, rules):
        from jax.sharding import Mesh, NamedSharding, PartitionSpec
        self.mesh = Mesh(np.array(devices), (self.AXIS,))
        self.size = len(devices)
        self.replicated = NamedSharding(self.mesh, PartitionSpec())
        self._batched = {}  # batch axis -> its NamedSharding
        self._spec = lambda axis: NamedSharding(self.mesh, PartitionSpec(*([None] * axis), self.AXIS))
        self.rules = rules
        self.default = jax.devices()[0]
        self._replicas = {}  # index in [key] + values -> (the value on the default device, its replicated copy)

    def place(self, key, values, dyn):
        """``key`` and ``values`` replicated over the mesh (copied where they changed since the last call), the
        arguments ``dyn`` sharded by their rules."""
        cache = self._replicas
        leaves = [key] + list(values)
        missing = [i for i, x in enumerate(leaves) if cache.get(i, (None,))[0] is not x]
        if missing:
            placed = jax.device_put([leaves[i] for i in missing], self.replicated)
            for i, x in zip(missing, placed):
                cache[i] = (leaves[i], x)
        key, *values = [cache[i][1] for i in range(len(leaves))]
        return key, values, [self._place(v, r) for v, r in zip(dyn, self.rules)]

    def _place(self, value, rule):
        if value is None or rule is None:
            return value  # Uncommitted host values: XLA replicates them.
        if isinstance(rule, dict):
            if not isinstance(value, dict):
                return value
            return {k: self._place(v, rule.get(k)) for k, v in value.items()}
        if isinstance(rule, tuple):
            if not isinstance(value, (tuple, list)):
                return value
            return type(value)(self._place(v, r) for v, r in zip(value, rule))
        shape = np.shape(value)
        if len(shape) <= rule or shape[rule] % self.size:
            return value  # Towers repeating devices: a batch may divide over the towers, not over the devices.
        sharding = self._batched.get(rule)
        if sharding is None:
            sharding = self._batched[rule] = self._spec(rule)
        return jax.device_put(value, sharding)

    def home(self, key, values):
        """The program's new ``key`` and ``values`` on the default device (where the other programs run): the
        replica there where the mesh holds one (no copy), else a copy; the replicas kept for the next call."""
        leaves, out = [key] + list(values), []
        for i, x in enumerate(leaves):
            if x is None:
                out.append(None)
                continue
            local = self._local(x)
            if x.sharding.is_fully_replicated:
                self._replicas[i] = (local, x)
            else:  # Where XLA left a new value sharded: replicated again on the next call.
                self._replicas.pop(i, None)
            out.append(local)
        return out[0], out[1:]

    def _local(self, x):
        for shard in getattr(x, "addressable_shards", ()):
            if shard.device == self.default and shard.data.shape == x.shape:
                return shard.data
        return jax.device_put(x, self.default)

    @staticmethod
    def signature(*inputs):
        """``inputs`` as ``jax.ShapeDtypeStruct`` s with their shardings (to lower the program again)."""
        def spec(x):
            if isinstance(x, jax.Array):
                return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding)
            return x
        return jax.tree_util.tree_map(spec, inputs)


class LearnerSharding:
    """Where an update program of distributed learners runs: the ``JaxProcessGroup``'s ``Mesh`` of one device per
    learner process, as a ``shard_map`` whose every shard is one learner's whole program.

    Each learner feeds its own key and arguments, stacked along a new leading axis of the learners (a global array
    whose shard on this process's device is its own value: ``jax.make_array_from_single_device_arrays``, no copy of
    the data); the variables, equal in all learners, are replicated (their local arrays, no copy). Inside, the
    program is the learner's own (``functional``) with its gradients averaged by the group's ``all_reduce_mean``
    (``lax.pmean``); XLA runs that all-reduce between the processes (gloo on CPUs). The outputs and the next key
    come back stacked (each learner reads its own), the new variables replicated (each reads its local copy).

    Args:
        group: This process's ``JaxProcessGroup``.
    """

    def __init__(self, group):
        from jax.sharding import NamedSharding, PartitionSpec
        self.group = group
        self.axis, self.device, self.size = group.AXIS, group.device, group.world_size
        self.stacked = NamedSharding(group.mesh, PartitionSpec(self.axis))
        self.replicated = NamedSharding(group.mesh, PartitionSpec())
        self._impl = None  # The random key's implementation (threefry), known from the first call's key.
        self._replicas = {}  # index in values -> (the local array, the replicated global array holding it)
        self._warm = set()  # (program, input shapes) that ran once (traced and compiled)
        self._runner = _BoundedRunner(f"rlgraph-jax-learner-{group.rank}")

    def compile(self, pure):
        """``jax.jit`` of ``pure`` (``functional``'s ``(key, values, *args) -> (outputs, key, values)``) over the
        learners' mesh: ``(stacked key data, replicated values, *stacked args) -> (stacked outputs, stacked key data,
        replicated values)``."""
        from jax.sharding import PartitionSpec as P
        tree_map, axis, mesh = jax.tree_util.tree_map, self.axis, self.group.mesh

        def learner(key_data, values, *args):
            key = jax.random.wrap_key_data(key_data[0], impl=self._impl)
            outputs, key, values = pure(key, values, *tree_map(lambda x: x[0], args))
            return tree_map(lambda x: x[None], outputs), jax.random.key_data(key)[None], values

        def program(key_data, values, *args):
            mapped = jax.shard_map(learner, mesh=mesh, in_specs=(P(axis), P()) + (P(axis),) * len(args),
                                   out_specs=(P(axis), P(axis), P()), check_vma=False)
            return mapped(key_data, values, *args)
        return jax.jit(program)

    def run(self, compiled, key, values, dyn):
        """Runs ``compiled`` (from ``compile``) on this learner's ``key``, ``values`` and arguments ``dyn``; returns
        its outputs (numpy), next key and new values (local arrays, None where unchanged).

        Raises:
            RLGraphRuntimeError: A host call of the program failed (its own message).
            RLGraphLearnerGroupError: The all-reduce failed (another learner died or left the group), or did not
                complete within the group's ``timeout_s`` (plus ``COMPILE_ALLOWANCE_S`` on a program's first run).
        """
        if self._impl is None:
            self._impl = jax.random.key_impl(key)
        key_data, values, dyn = self._place(key, values, dyn)

        def execute():
            with _random_bits():
                out = compiled(key_data, values, *dyn)
                return jax.block_until_ready(out)  # A failure fails here, before any state changes.
        signature = (id(compiled), tuple((x.shape, x.dtype) for x in jax.tree_util.tree_leaves(dyn)))
        first = signature not in self._warm
        timeout = self.group.timeout_s + (COMPILE_ALLOWANCE_S if first else 0.0)
        try:
            try:
                outputs, key_data, values = self._runner.run(execute, timeout)
            except TimeoutError:
                raise RLGraphLearnerGroupError(
                    f"learner {self.group.rank}: the gradient all-reduce over {self.size} JAX learners did not "
                    f"complete within {timeout:g} s (a learner stopped answering, or fell out of step).") from None
            self._warm.add(signature)
            outputs = jax.tree_util.tree_map(lambda x: np.array(self._local(x))[0], outputs)
            key = jax.random.wrap_key_data(np.asarray(self._local(key_data))[0], impl=self._impl)
            values = [None if v is None else self._home(i, v) for i, v in enumerate(values)]
        except (RLGraphError, *untraceable_errors()):
            raise
        except (jax.errors.JaxRuntimeError, ValueError, RuntimeError) as e:
            if re.search(r"RLGraph\w*Error: ", str(e)):
                raise RLGraphRuntimeError(_runtime_message(e)) from None
            if isinstance(e, jax.errors.JaxRuntimeError) or re.search(r"gloo|collective|all-?reduce|peer", str(e),
                                                                        re.IGNORECASE):
                text = " ".join(str(e).split())[:300]
                raise RLGraphLearnerGroupError(
                    f"learner {self.group.rank}: the gradient all-reduce over {self.size} JAX learners failed (a "
                    f"learner died or left the group): {text}") from None
            raise
        return outputs, key, values

    def untraced(self, name, scope, why):
        """The message refusing an update method that cannot run as one traced program over the learners."""
        return (f"API method '{name}' of '{scope}' cannot be traced by jax.jit ({why}), so its gradients cannot be "
                f"all-reduced over the {self.size} distributed JAX learners; distributed learners need update methods "
                f"that trace (use backend 'tf' or 'pytorch' for this graph).")

    def _place(self, key, values, dyn):
        """The program's inputs: the key data and ``dyn`` stacked (this learner's rows), ``values`` replicated (the
        global arrays of the last call's outputs where a variable still holds one, no copy)."""
        leaves, tree = jax.tree_util.tree_flatten([jax.random.key_data(key), list(dyn)])
        placed = jax.device_put([np.asarray(x)[None] for x in leaves], self.device)
        key_data, dyn = jax.tree_util.tree_unflatten(tree, [
            jax.make_array_from_single_device_arrays((self.size,) + x.shape[1:], self.stacked, [x]) for x in placed])
        out, missing = list(values), []
        for i, v in enumerate(values):
            if v is not None:
                cached = self._replicas.get(i)
                if cached is not None and cached[0] is v:
                    out[i] = cached[1]
                else:
                    missing.append(i)
        if missing:
            local = jax.device_put([values[i] for i in missing], self.device)
            for i, x in zip(missing, local):
                out[i] = jax.make_array_from_single_device_arrays(tuple(x.shape), self.replicated, [x])
                self._replicas[i] = (values[i], out[i])
        return key_data, out, dyn

    def _home(self, i, value):
        """This learner's copy of a new replicated ``value`` (variable ``i``), kept for the next call."""
        local = self._local(value)
        self._replicas[i] = (local, value)
        return local

    def _local(self, x):
        return x.addressable_shards[0].data


#: Seconds the first run of an update program over distributed learners may take beyond the group's timeout (every
#: learner traces and compiles it before the all-reduce).
COMPILE_ALLOWANCE_S = 300.0


class _BoundedRunner:
    """Runs calls one at a time in a daemon thread and waits at most a timeout for each: an all-reduce of XLA's CPU
    collectives blocks until every learner takes part, with no deadline of its own (a learner that stopped without
    dying would hang the others). A call still running after its timeout is left behind (the thread is a daemon; it
    ends when the collective fails, e.g. once the stopped learner is killed)."""

    def __init__(self, name):
        self.name = name
        self._jobs = queue.SimpleQueue()
        self._thread = None

    def run(self, fn, timeout):
        """``fn()``'s result (or its exception); ``TimeoutError`` after ``timeout`` seconds."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
            self._thread.start()
        job = [fn, threading.Event(), None, None]  # fn, done, result, error
        self._jobs.put(job)
        if not job[1].wait(timeout):
            raise TimeoutError(f"no result within {timeout} s")
        if job[3] is not None:
            raise job[3]
        return job[2]

    def _serve(self):
        while True:
            job = self._jobs.get()
            try:
                job[2] = job[0]()
            except BaseException as e:  # noqa: BLE001 - handed to the waiting caller.
                job[3] = e
            finally:
                job[1].set()


def _layout(x):
    """The key order of the dicts in a method's outputs: ``jax.jit`` returns dicts with sorted keys, the method's
    callers get them in the order the method built them, as on the other backends. None where nothing to keep."""
    if isinstance(x, dict):
        return {k: _layout(v) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        inner = [_layout(v) for v in x]
        return inner if any(v is not None for v in inner) else None
    return None


def _to_numpy(x, layout=None):
    """A call's outputs as writable numpy arrays (dicts kept, in the key order of ``layout`` where given; lists as
    tuples; Python values as they are)."""
    if isinstance(x, jax.Array):
        return np.array(x)
    if isinstance(x, dict):
        keys = list(layout) if isinstance(layout, dict) and set(layout) == set(x) else list(x)
        return {k: _to_numpy(x[k], layout[k] if isinstance(layout, dict) and k in layout else None) for k in keys}
    if isinstance(x, (tuple, list)):
        inner = layout if isinstance(layout, list) and len(layout) == len(x) else [None] * len(x)
        return tuple(_to_numpy(v, sub) for v, sub in zip(x, inner))
    return x
