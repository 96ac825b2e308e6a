"""The graph executor: builds a component tree on one backend and serves ``execute(api_method, *args)``."""
import json
import logging
import os
import time
from collections import OrderedDict

import numpy as np
import optree

from rlgraph.backends import get_backend
from rlgraph.components.component import Component
from rlgraph.executors.device_strategy import DeviceStrategy, make_device_strategy
from rlgraph.executors.input_checker import PYTHON_TYPES, bind_arguments, make_input_checker
from rlgraph.graphs.graph_builder import GraphBuilder
from rlgraph.graphs.meta_graph import GraphFnCall
from rlgraph.graphs.records import flatten_records
from rlgraph.utils.backend import get_default_backend, normalize_backend
from rlgraph.utils.decorators import HOST
from rlgraph.utils.errors import RLGraphAPIError, RLGraphError
from rlgraph.utils.specifiable import Specifiable

logger = logging.getLogger(__name__)

#: The variables of a stored model, under their full names (numpy's format, read without pickle).
VARIABLES_FILE = "variables.npz"

META_FILE = "rlgraph_model.json"


class GraphExecutor(Specifiable):
    """Builds ``root_component`` and runs its API methods, taking and returning numpy values.

    Use ``GraphExecutor.create(backend=..., ...)`` (or ``from_spec``) to get the executor of a backend.

    Args:
        root_component: The root of the component tree.
        input_spaces: Maps the root's API argument names to spaces (or ``int``/``float``/``bool``).
        action_space: Handed to every component at build time.
        seed: Seeds the initial variable values and the backend's random ops (default 0).
        device: Default device of the root (components inherit it), e.g. "cpu" or "gpu:0".
        validate_inputs: Check every argument against its space before the backend sees it.
        build: Build right away (else call ``build()``).
        api_methods: The root API methods to build and serve (default: all). Components that only the
            others use are left out and get no variables (e.g. an actor-only build of an algorithm).
        device_strategy: How the built graph is placed on devices (``rlgraph.executors.device_strategy``):
            None (default: one device) or e.g. ``{"type": "multi_device_sync", "devices": ["gpu:0", "gpu:1"]}``
            (update API methods run one tower per device on a slice of the batch, one averaged step).
    """

    backend_name = None
    compiles_per_shape = False  # True: each new input shape (e.g. batch size) compiles an API method again.

    def __init__(self, root_component, input_spaces=None, action_space=None, seed=None, device=None,
                 validate_inputs=True, build=True, api_methods=None, device_strategy=None):
        if not isinstance(root_component, Component):
            raise RLGraphError(f"root_component must be a Component, got {root_component!r}.")
        self.root = root_component
        self.backend = get_backend(self.backend_name)
        self.input_spaces = dict(input_spaces or {})
        self.action_space = action_space
        self.seed = 0 if seed is None else int(seed)
        self.device = device
        self.validate_inputs = validate_inputs
        self.api_method_names = None if api_methods is None else list(api_methods)
        # A fresh strategy per executor (it notes this graph's rewrites).
        self.device_strategy = make_device_strategy(
            device_strategy.to_spec() if isinstance(device_strategy, DeviceStrategy) else device_strategy)
        self.meta_graph = None
        self.build_seconds = None
        self._calls = {}
        self._signatures = {}  # API method -> (params, dynamic, checkers, defaults)
        self._step_calls = {}  # (API method, static arguments) -> the backend's callable of ``execute_steps``
        if device is not None and root_component._device is None:
            root_component._device = device
        if build:
            self.build()

    @staticmethod
    def create(backend=None, **kwargs):
        """The executor for ``backend`` ("tf", "pytorch" or "jax"; default ``$RLGRAPH_BACKEND`` or what is
        installed)."""
        name = normalize_backend(backend or get_default_backend())
        if name == "tf":
            from rlgraph.executors.tensorflow_executor import TensorFlowExecutor
            return TensorFlowExecutor(**kwargs)
        if name == "jax":
            from rlgraph.executors.jax_executor import JaxExecutor
            return JaxExecutor(**kwargs)
        from rlgraph.executors.pytorch_executor import PyTorchExecutor
        return PyTorchExecutor(**kwargs)

    # --- build ------------------------------------------------------------------------------------------
    def build(self):
        """Assembles the meta graph, builds it on the backend and prepares one callable per API method."""
        start = time.perf_counter()
        self.backend.set_seed(self.seed)
        builder = GraphBuilder(self.backend, seed=self.seed, action_space=self.action_space)
        self.meta_graph = builder.build(self.root, self.input_spaces, self.api_method_names)
        self.input_spaces = {k: v for k, v in builder_input_spaces(self.meta_graph).items()}
        self.device_strategy.prepare(self)
        self._calls, self._signatures, self._step_calls = {}, {}, {}
        for name, info in self.root.api_methods.items():
            if name not in self.meta_graph.api:
                continue
            params = [p.name for p in info.params]
            dynamic = [p for p in params if p in self.input_spaces]
            checkers = {p: make_input_checker(self.input_spaces[p], name, p, self.root.global_scope)
                        for p in dynamic} if self.validate_inputs else {p: (lambda x: x) for p in dynamic}
            defaults = {p.name: p.default for p in info.params if p.name not in self.input_spaces}
            self._signatures[name] = (params, dynamic, checkers, defaults)
            call = self._host_call(name, params, dynamic, checkers, defaults)
            self._calls[name] = call if call is not None else self.device_strategy.wrap_call(
                name, self._make_call(name, params, dynamic, checkers, defaults))
        self.build_seconds = time.perf_counter() - start
        logger.debug("Built '%s' on %s in %.3f s.", self.root.global_scope, self.backend.name, self.build_seconds)

    def _make_call(self, name, params, dynamic, checkers, defaults):
        """Returns ``call(*args, **kwargs)`` running root API method ``name``; backend-specific."""
        raise NotImplementedError

    def _host_call(self, name, params, dynamic, checkers, defaults):
        """``call(*args, **kwargs)`` running root API method ``name`` on the host, without the backend, where
        its whole body is one graph function with a host implementation (``graph_fn(backend=HOST)``) applied
        to the method's own arguments, returning nothing (a numpy memory's insert) or its outputs as they are
        (a memory's sample): the same effect, outputs and errors without a backend call (on TF: no
        ``tf.function`` and ``tf.numpy_function`` round trip; on PyTorch: no conversion to tensors and back).
        None where that does not hold, or where the device strategy runs the method as towers."""
        root_call = self.meta_graph.api[name]
        if defaults or params != dynamic or self.meta_graph.towers.get(name):
            return None
        fn_calls, api_calls = [], [root_call]
        while api_calls:
            for c in api_calls.pop().calls:
                (fn_calls if isinstance(c, GraphFnCall) else api_calls).append(c)
        if len(fn_calls) != 1:
            return None
        (node,) = fn_calls
        host = node.fn.impls.get(HOST)
        if host is None or node.fn.split_ops or node.kwargs or len(node.args) != len(dynamic) \
                or not _returns_outputs_of(root_call.outputs, node.outputs) \
                or not all(_same_records(arg, root_call.args[p]) for arg, p in zip(node.args, dynamic)):
            return None
        component, checks = node.component, [checkers[p] for p in dynamic]
        general, scope = self._general_args, self.root.global_scope
        to_numpy = self.backend.to_numpy  # Containers as the backend path gives them (tuples, dicts).

        def call(*args, **kwargs):
            if kwargs or len(args) != len(checks):
                args, _ = general(name, params, dynamic, checkers, defaults, args, kwargs, scope)
            else:
                args = [check(a) for check, a in zip(checks, args)]
            out = host(component, *args)
            return None if out is None else _unshared(to_numpy(out), args)
        return call

    def trace(self, api_methods=None):
        """Prepares the backend functions of ``api_methods`` (default: all) before their first call, where the
        backend traces them (TF); nothing to do here."""

    def _api_callable(self, name):
        """What the backend runs (TF: traces) for root API method ``name``: the bound method, or the device
        strategy's rewrite of it."""
        return self.device_strategy.wrap_api_method(name, getattr(self.root, name))

    # --- execution -----------------------------------------------------------------------------------------
    @property
    def api_methods(self):
        return list(self._calls)

    def execute(self, api_method, *args, **kwargs):
        """Runs root API method ``api_method`` on numpy (or Python) arguments; returns numpy values.

        Nested dicts/tuples are kept. Each argument is checked against its space first.
        """
        try:
            call = self._calls[api_method]
        except KeyError:
            if api_method in self.root.api_methods and self._calls:
                raise RLGraphAPIError(f"API method '{api_method}' of '{self.root.global_scope}' was left out of this "
                                      f"build (built: {', '.join(self._calls)}).") from None
            raise RLGraphAPIError(f"'{self.root.global_scope}' has no API method '{api_method}'; available: "
                                  f"{', '.join(self._calls) or 'none (not built)'}.") from None
        return call(*args, **kwargs)

    def execute_steps(self, api_method, rows, *args, **kwargs):
        """Runs root API method ``api_method`` once per step ``k`` in one executor call, step ``k`` on the batch
        rows ``rows[k]`` of every batched argument; returns its outputs stacked along a new leading axis.

        What one optimizer step per call would be for an update of several steps on minibatches of one batch
        (APPO's epochs and minibatches): the arguments are checked and converted once, and the backend loops
        inside (TF: a ``tf.while_loop`` in one graph, whose loop then runs outside Python; PyTorch: the rows
        taken from the converted tensors). Under a device strategy with towers, one ``execute`` per step.

        Args:
            api_method: The root API method (its batched arguments' batch axes are read off their spaces).
            rows: int array [K, R]: the rows of step k (each < the arguments' batch size).
            *args, **kwargs: The API method's arguments (whole batches); arguments without a batch rank go to
                every step unchanged.

        Returns:
            The method's outputs, each leaf stacked over the steps ([K, ...]).
        """
        if api_method not in self._signatures:
            self.execute(api_method, *args, **kwargs)  # Raises the error naming what was built.
        params, dynamic, checkers, defaults = self._signatures[api_method]
        component = self.root.global_scope
        dyn, static = self._general_args(api_method, params, dynamic, checkers, defaults, args, kwargs, component)
        axes = [_batch_axes(self.input_spaces[p]) for p in dynamic]
        rows = self._check_rows(api_method, rows, dyn, axes)
        if type(self.device_strategy) is not DeviceStrategy:  # Towers: one (rewritten) call per step.
            return GraphExecutor._make_steps_call(self, api_method, dynamic, axes, static)(rows, dyn)
        key = (api_method, tuple(sorted(static.items())))
        call = self._step_calls.get(key)
        if call is None:
            call = self._step_calls[key] = self._make_steps_call(api_method, dynamic, axes, static)
        return call(rows, dyn)

    def _check_rows(self, api_method, rows, dyn, axes):
        where = f"execute_steps('{api_method}')"
        rows = np.asarray(rows)
        if rows.ndim != 2 or rows.dtype.kind not in "iu" or rows.shape[0] < 1:
            raise RLGraphAPIError(f"{where}: rows must be an int array [steps, rows per step] with at least one "
                                  f"step, got {rows.dtype} of shape {rows.shape}.")
        sizes = set()
        for v, ax in zip(dyn, axes):
            map_batched_leaves(v, ax, lambda leaf, a: sizes.add(np.shape(leaf)[a]))
        if not sizes:
            raise RLGraphAPIError(f"{where}: the method has no argument with a batch rank to take rows of.")
        if len(sizes) > 1:
            raise RLGraphAPIError(f"{where}: the batched arguments disagree on the batch size ({sorted(sizes)}).")
        size = sizes.pop()
        if rows.size and (rows.min() < 0 or rows.max() >= size):
            raise RLGraphAPIError(f"{where}: rows must lie in [0, {size}) (the batch size), got rows from "
                                  f"{rows.min()} to {rows.max()}.")
        return rows.astype(np.int64)

    def _make_steps_call(self, name, dynamic, axes, static):
        """``call(rows, checked arguments) -> numpy outputs stacked over the steps``; backend-specific (default:
        one ``execute`` per step)."""
        def call(rows, dyn):
            return _stack([self.execute(name, *[_take(v, r, a) for v, a in zip(dyn, axes)], **static)
                           for r in rows])
        return call

    @staticmethod
    def _general_args(name, params, dynamic, checkers, defaults, args, kwargs, component):
        values = bind_arguments(name, params, args, kwargs, component)
        missing = [p for p in dynamic if p not in values]
        if missing:
            raise RLGraphAPIError(f"API method '{name}' of '{component}' is missing argument(s) {missing}.")
        dyn = [checkers[p](values[p]) for p in dynamic]
        static = {p: values.get(p, d) for p, d in defaults.items()}
        return dyn, static

    # --- variables -----------------------------------------------------------------------------------------
    def variables(self, trainable_only=False):
        """Ordered dict full name -> backend variable of the whole graph."""
        return self.root.all_variables(trainable_only=trainable_only)

    def read_variable_values(self, *variables):
        """Numpy values of variables given as objects, full names, names relative to the root, or components.

        One argument gives one value (a dict for a component); several give a list.
        """
        all_vars = self.variables()
        out = []
        for v in variables:
            if isinstance(v, Component):
                out.append(OrderedDict((k, self.backend.read_variable(x)) for k, x in v.all_variables().items()))
            elif isinstance(v, str):
                name = v if v in all_vars else f"{self.root.global_scope}/{v}"
                if name not in all_vars:
                    raise RLGraphError(f"No variable '{v}'; variables: {', '.join(all_vars)}.")
                out.append(self.backend.read_variable(all_vars[name]))
            else:
                out.append(self.backend.read_variable(v))
        return out[0] if len(out) == 1 else out

    def get_weights(self, trainable_only=True):
        """Ordered dict full name -> numpy value of the (trainable) variables."""
        variables = self.variables(trainable_only)
        return OrderedDict(zip(variables, self._read_variables(variables)))

    def set_weights(self, weights):
        """Sets variables from a ``{full name: array}`` dict (as ``get_weights`` returns); all checked first."""
        all_vars = self.variables()
        unknown = [k for k in weights if k not in all_vars]
        if unknown:
            raise RLGraphError(f"set_weights: unknown variable(s) {unknown}.")
        for k, value in weights.items():
            shape = tuple(self.backend.shape_and_dtype(all_vars[k])[0])
            if tuple(np.shape(value)) != shape:
                raise RLGraphError(f"set_weights: '{k}' has shape {shape}, got {np.shape(value)}.")
        self._assign_variables(OrderedDict((k, all_vars[k]) for k in weights), list(weights.values()))

    def _read_variables(self, variables):
        """Numpy copies of the values of ``variables`` (an ordered dict full name -> variable), in its order."""
        return [self.backend.read_variable(v) for v in variables.values()]

    def _assign_variables(self, variables, values):
        """Sets ``variables`` (an ordered dict full name -> variable, checked) to ``values`` (arrays, in order)."""
        for var, value in zip(variables.values(), values):
            self.backend.assign_variable(var, value)

    # --- models ------------------------------------------------------------------------------------------
    def _model_meta(self):
        return {
            "format": "rlgraph-model", "version": 1, "backend": self.backend.name, "root": self.root.global_scope,
            "variables": {k: [list(self.backend.shape_and_dtype(v)[0]), str(self.backend.shape_and_dtype(v)[1])]
                          for k, v in self.variables().items()},
        }

    def store_model(self, path):
        """Writes all variables to directory ``path``: ``variables.npz`` (numpy arrays under the variables' full
        names, the same on every backend) and ``rlgraph_model.json``; any backend loads it."""
        os.makedirs(path, exist_ok=True)
        self._store_variables(path)
        with open(os.path.join(path, META_FILE), "w") as f:
            json.dump(self._model_meta(), f, indent=1)
        return path

    def load_model(self, path):
        """Restores variables from ``path``, stored by an executor of any backend; refuses (changing nothing) a
        model of another graph (variable names, shapes or dtypes)."""
        meta_path = os.path.join(path, META_FILE)
        if not os.path.isfile(meta_path):
            raise RLGraphError(f"'{path}' holds no rlgraph model ({META_FILE} missing).")
        with open(meta_path) as f:
            meta = json.load(f)
        mine = self._model_meta()
        if meta.get("variables") != mine["variables"]:
            theirs, ours = meta.get("variables", {}), mine["variables"]
            diff = sorted(set(theirs) ^ set(ours)) or sorted(k for k in ours if theirs.get(k) != ours[k])
            raise RLGraphError(f"Model in '{path}' does not fit this graph; differing variables (name or "
                               f"shape/dtype): {diff[:10]}.")
        self._load_variables(path)

    def _store_variables(self, path):
        values = {name: self.backend.read_variable(var) for name, var in self.variables().items()}
        np.savez(os.path.join(path, VARIABLES_FILE), **values)

    def _load_variables(self, path):
        file = os.path.join(path, VARIABLES_FILE)
        if not os.path.isfile(file):
            raise RLGraphError(f"'{path}' holds no {VARIABLES_FILE}.")
        variables = self.variables()
        with np.load(file, allow_pickle=False) as stored:
            missing = [k for k in variables if k not in stored.files]
            if missing:
                raise RLGraphError(f"'{file}' lacks variable(s) {missing[:10]}.")
            values = [stored[k] for k in variables]
        self._assign_variables(variables, values)

    # --- random-number state ------------------------------------------------------------------------------
    def get_rng_state(self):
        """The state of the backend's random-number generators that graph functions draw from (numpy arrays
        and JSON scalars), or None where there is none to save; see ``set_rng_state``."""
        return None

    def set_rng_state(self, state):
        """Restores what ``get_rng_state`` returned, so that random ops continue their stored stream."""

    def tagged_rng_state(self):
        """``get_rng_state`` with the backend it belongs to, for a checkpoint: {"backend", "state"}."""
        return dict(backend=self.backend.name, state=self.get_rng_state())

    def restore_tagged_rng_state(self, tagged):
        """Restores what ``tagged_rng_state`` returned where it is of this backend; a state of another backend
        (a run moved between backends) cannot be: this executor's random ops then go on from their own seeded
        stream. Returns whether it was restored."""
        if tagged.get("backend") != self.backend.name:
            logger.info("The random-number state of the graph's ops was stored by backend '%s': this executor "
                        "(%s) keeps its own seeded stream; host-side streams (replay sampling, minibatch order) go "
                        "on exactly.", tagged.get("backend"), self.backend.name)
            return False
        self.set_rng_state(tagged["state"])
        return True

    def terminate(self):
        """Releases resources (nothing to release for in-process executors)."""


def _batch_axes(space):
    """The batch axis of each leaf of an argument of ``space`` (nested like its values; None: no batch rank)."""
    from rlgraph.spaces import Space
    if not isinstance(space, Space):
        return None
    return space.unflatten({k: s.batch_axis if s.has_batch_rank else None for k, s in space.flatten().items()})


def map_batched_leaves(value, axes, fn):
    """``value`` (a nested argument) with ``fn(leaf, batch_axis)`` applied to each leaf that has a batch axis
    (``axes`` as ``_batch_axes`` gives them); leaves without one are kept."""
    if isinstance(axes, dict):
        return {k: map_batched_leaves(value[k], a, fn) for k, a in axes.items()}
    if isinstance(axes, (tuple, list)):
        return tuple(map_batched_leaves(value[j], a, fn) for j, a in enumerate(axes))
    return value if axes is None else fn(value, axes)


def _take(value, rows, axes):
    """The rows ``rows`` of a numpy argument along each leaf's batch axis."""
    return map_batched_leaves(value, axes, lambda v, a: np.take(v, rows, axis=a))


def _unshared(out, args):
    """``out`` (numpy leaves in dicts and tuples) with each leaf that shares memory with an array among
    ``args`` copied: a host call's results are never the caller's arrays (as the backends' calls)."""
    arrays = [x for x in optree.tree_leaves(args) if isinstance(x, np.ndarray)]
    if not arrays:
        return out
    return optree.tree_map(lambda x: x.copy() if isinstance(x, np.ndarray) and any(
        np.may_share_memory(x, a) for a in arrays) else x, out)


def _stack(outputs):
    """Per-step numpy outputs stacked leaf by leaf along a new leading axis."""
    first = outputs[0]
    if isinstance(first, dict):
        return {k: _stack([o[k] for o in outputs]) for k in first}
    if isinstance(first, (tuple, list)):
        return tuple(_stack([o[j] for o in outputs]) for j in range(len(first)))
    return np.stack([np.asarray(o) for o in outputs])


def _returns_outputs_of(api_outputs, fn_outputs):
    """Whether an API method returns nothing and its graph function has no outputs, or it returns exactly the
    graph function's outputs as the function returns them (the one output, or all of them in order)."""
    if api_outputs is None or not fn_outputs:
        return api_outputs is None and not fn_outputs
    if len(fn_outputs) == 1:
        return api_outputs is fn_outputs[0]
    return isinstance(api_outputs, (tuple, list)) and len(api_outputs) == len(fn_outputs) and \
        all(a is b for a, b in zip(api_outputs, fn_outputs))


def _same_records(a, b):
    """Whether two (nested) graph values hold the same records, in the same order (and hold any)."""
    ra, rb = flatten_records(a), flatten_records(b)
    return bool(ra) and len(ra) == len(rb) and all(x is y for x, y in zip(ra, rb))


def builder_input_spaces(meta_graph):
    """The normalized input spaces of the root's API arguments, read off the built meta graph."""
    out = {}
    for call in meta_graph.api.values():
        for arg, rec in call.record_args().items():
            out[arg] = rec.space
    return out


__all__ = ["GraphExecutor", "PYTHON_TYPES"]


def differentiates(call):
    """Whether the call graph of a root API call reaches a component that differentiates: one with a true
    ``differentiates`` class attribute (optimizers; a component whose graph functions differentiate
    by themselves must set it too: PyTorch runs the other API methods without autograd, JAX differentiates only
    the methods that reach one)."""
    from rlgraph.graphs.meta_graph import APICall
    stack = [call]
    while stack:
        c = stack.pop()
        if getattr(c.component, "differentiates", False):
            return True
        stack.extend(sub for sub in c.calls if isinstance(sub, APICall))
    return False
