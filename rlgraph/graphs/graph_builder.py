"""The build: pushes input spaces through the meta graph, creates variables, infers output spaces."""
import copy
import logging
import types
from collections import defaultdict, deque

import numpy as np
import optree

from rlgraph.graphs.meta_graph import APICall
from rlgraph.graphs.meta_graph_builder import MetaGraphBuilder, select_api_methods
from rlgraph.graphs.records import Record, flatten_records
from rlgraph.spaces import BoolBox, ContainerSpace, Dict, FloatBox, IntBox, Space, TextBox, Tuple
from rlgraph.utils.errors import (RLGraphBackendError, RLGraphBuildError, RLGraphError, RLGraphInputIncompleteError,
                                  RLGraphSpaceError, RLGraphSpecError)

logger = logging.getLogger(__name__)

#: The build runs every graph function twice, on sample values with these (batch, time) sizes. Leading
#: output dimensions that follow the batch (time) size from one run to the other are batch (time) ranks.
BUILD_SIZES = ((7, 5), (11, 3))
BUILD_BATCH_SIZE, BUILD_TIME_SIZE = BUILD_SIZES[0]

PYTHON_TYPES = (int, float, bool)


def normalize_input_space(space, where):
    """Turns a space spec (Space, dict spec, nested dict/tuple of spaces, Python type) into a Space/type."""
    if space in PYTHON_TYPES or isinstance(space, Space):
        return space
    if isinstance(space, dict) and "type" in space:
        return Space.from_spec(space, _path=where)
    if isinstance(space, dict):
        return Dict({k: normalize_input_space(v, f"{where}.{k}") for k, v in space.items()})
    if isinstance(space, (tuple, list)):
        return Tuple([normalize_input_space(v, f"{where}[{i}]") for i, v in enumerate(space)])
    raise RLGraphSpaceError(f"{where}: expected a Space, a space spec or int/float/bool, got {space!r}.")


def _signature(space):
    """What must agree between two calls passing the same argument: structure, types, shapes, dtypes.

    Ranks may differ, and so may integer bounds (an inferred IntBox has none).
    """
    if not isinstance(space, Space):
        return space
    return tuple((k, type(s).__name__, tuple(s.shape), str(s.dtype)) for k, s in space.flatten().items())


class GraphBuilder:
    """Builds a component tree on one backend.

    Args:
        backend: A ``rlgraph.backends.Backend``.
        seed: Seeds the variables' initial values (see ``rlgraph.utils.initializers``).
        action_space: Handed to every component's ``check_input_spaces`` and ``create_variables``.
    """

    def __init__(self, backend, seed=0, action_space=None):
        self.backend = backend
        self.seed = seed
        self.action_space = action_space
        self.meta_graph = None
        self._rng = np.random.default_rng(seed)

    # --- public -----------------------------------------------------------------------------------------
    def build(self, root, input_spaces, api_methods=None):
        """Assembles and builds ``root``; returns its ``MetaGraph`` with every record's space filled in.

        ``api_methods`` names the root API methods to build (default: all); input spaces of arguments that
        only the others take are ignored.
        """
        input_spaces = {k: normalize_input_space(v, f"input_spaces['{k}']") for k, v in (input_spaces or {}).items()}
        unknown = [k for k in input_spaces if not any(k in info.arg_names for info in root.api_methods.values())]
        if unknown:
            raise RLGraphBuildError(f"input_spaces has {unknown} but no API method of '{root.global_scope}' takes "
                                    f"such an argument (API methods: {', '.join(root.api_methods)}).")
        if api_methods is not None:
            selected = select_api_methods(root, api_methods)
            input_spaces = {k: v for k, v in input_spaces.items()
                            if any(k in info.arg_names for info in selected.values())}
        self.meta_graph = meta = MetaGraphBuilder().assemble(root, input_spaces, api_methods)
        for node in meta.graph_fn_calls:
            try:
                node.fn.impl_for(self.backend.name)
            except RLGraphBackendError as e:
                raise RLGraphBackendError(f"Component '{node.component.global_scope}' (API method "
                                          f"'{node.api_call.info.name}'): {e}") from None
        components = meta.components
        self._snapshots, self._state_snapshots = {}, []
        try:
            for c in components:
                self._bind(c)
                c.in_build_run = True
            self.backend.run_build(lambda: self._propagate(meta, input_spaces))
        except BaseException:
            for c in components:
                self._unbind(c)
            raise
        finally:
            for c in components:
                c.in_build_run = False
            self._restore_snapshots()
        for c in components:
            c.built = True
        self._contract_pass_through_calls(meta)
        return meta

    # --- binding ----------------------------------------------------------------------------------------
    def _bind(self, component):
        """Puts plain implementations on the instance: API bodies, backend graph functions."""
        component.backend = self.backend
        component.seed = self.seed
        component.variable_registry.clear()
        component.weight_names.clear()
        component.api_input_spaces.clear()
        component.api_method_input_spaces.clear()
        component.input_complete = component.variable_complete = component.built = False
        for name, info in component.api_methods.items():
            component.__dict__[name] = types.MethodType(info.fn, component)
        for name, gf in component.graph_fns.items():
            try:
                impl = types.MethodType(gf.impl_for(self.backend.name), component)
            except RLGraphBackendError as e:
                impl = _missing_impl(component, e)
            if gf.split_ops:
                impl = _split_wrapper(impl, gf)
            component.__dict__[name] = self.backend.wrap_graph_fn_device(impl, component.device)

    @staticmethod
    def _unbind(component):
        for name in list(component.api_methods) + list(component.graph_fns):
            component.__dict__.pop(name, None)
        component.backend = None
        component.built = False

    # --- propagation ------------------------------------------------------------------------------------
    def _propagate(self, meta, input_spaces):
        consumers = defaultdict(list)
        required = defaultdict(set)
        called = set()
        seen_records = {}

        def register_record(rec):
            if rec.id in seen_records:
                return
            seen_records[rec.id] = rec
            if rec.parent is not None:
                register_record(rec.parent)
                consumers[rec.parent.id].append(("derived", rec))
            if rec.children is not None:
                for child in flatten_records(rec.children):
                    register_record(child)
                    consumers[child.id].append(("derived", rec))

        for call in meta.api_calls:
            called.add(call.component)
            for arg, rec in call.record_args().items():
                register_record(rec)
                consumers[rec.id].append(("api", call, arg))
                if call.info.must_be_complete:
                    required[call.component].add(arg)
        for call in meta.api_calls:  # Outputs indexed from a structure (``stats[key]``) get spaces too.
            for rec in flatten_records(call.outputs):
                register_record(rec)
        for node in meta.graph_fn_calls:
            for rec in node.input_records():
                register_record(rec)
                consumers[rec.id].append(("fn", node))
            for rec in node.outputs:
                seen_records[rec.id] = rec

        self._waiting = defaultdict(list)
        self._subtree_waiting = []
        self._called = called
        for node in meta.graph_fn_calls:
            self._waiting[node.component].append(node)
        queue, self._ready, deferred = deque(), deque(), []

        # Root inputs.
        for name, call in meta.api.items():
            for arg, rec in call.record_args().items():
                self._set(rec, input_spaces[arg], self._sample(input_spaces[arg]), queue)
        for c in meta.components:
            if c in called and not required[c]:
                self._complete(c)
            elif c not in called:
                logger.debug("Component '%s' is not called by any API method; it gets no variables.", c.global_scope)

        def drain():
            while queue:
                rec = queue.popleft()
                for consumer in consumers[rec.id]:
                    kind = consumer[0]
                    if kind == "api":
                        _, call, arg = consumer
                        self._register_api_space(call, arg, rec)
                        comp = call.component
                        required[comp].discard(arg)
                        if not comp.variable_complete and not required[comp]:
                            self._complete(comp)
                    elif kind == "fn":
                        self._enqueue_ready(consumer[1])
                    else:
                        self._derive(consumer[1], queue)

        drain()
        retried = set()
        while self._ready or deferred:
            if not self._ready:
                self._ready.extend(deferred)
                deferred.clear()
            node = self._ready.popleft()
            if node.done:
                continue
            try:
                self._run(node, queue)
            except _GraphFnFailed as failure:
                if node in retried:
                    raise failure.error from failure.cause
                retried.add(node)
                deferred.append(node)
            drain()

        incomplete = [c for c in meta.components if c in called and not c.variable_complete]
        if incomplete:
            lines = []
            for c in incomplete:
                missing = sorted(required[c])
                apis = sorted({call.info.name for call in meta.api_calls if call.component is c
                               and set(call.record_args()) & set(missing)})
                lines.append(f"'{c.global_scope}': no space yet for argument(s) {missing} (API methods {apis})")
            raise RLGraphInputIncompleteError(
                "The build cannot go on; these components never received the spaces of all their API arguments:\n  "
                + "\n  ".join(lines) + "\nThis is an input-incomplete cycle if such an argument depends on an output "
                "of the component itself. If the argument does not affect the component's variables, mark its API "
                "method with @rlgraph_api(must_be_complete=False)."
            )
        pending = [n for n in meta.graph_fn_calls if not n.done]
        if pending:
            raise RLGraphBuildError(f"Graph functions never received all their input spaces: "
                                    f"{', '.join(n.name for n in pending)}.")

    def _set(self, rec, space, values, queue):
        rec.space, rec.values, rec.known = space, values, True
        queue.append(rec)

    @staticmethod
    def _inputs_known(node):
        return all(r.known for r in node.input_records())

    def _ready_to_run(self, node):
        """Inputs known, the component's variables exist (and, where required, all its sub-components')."""
        if not node.component.variable_complete or not self._inputs_known(node):
            return False
        if node.fn.requires_variable_completeness:
            return all(c.variable_complete for c in node.component.get_all_sub_components() if c in self._called)
        return True

    def _enqueue_ready(self, node):
        if node.done or node in self._ready:
            return
        if self._ready_to_run(node):
            self._ready.append(node)
        elif node.fn.requires_variable_completeness and node.component.variable_complete \
                and node not in self._subtree_waiting:
            self._subtree_waiting.append(node)

    def _register_api_space(self, call, arg, rec):
        comp = call.component
        comp.api_input_spaces.setdefault(arg, rec.space)
        per_method = comp.api_method_input_spaces.setdefault(call.info.name, {})
        old = per_method.setdefault(arg, rec.space)
        if _signature(old) != _signature(rec.space):
            raise RLGraphBuildError(
                f"Component '{comp.global_scope}', API method '{call.info.name}', argument '{arg}': received "
                f"{rec.space!r}, but an earlier call passed {old!r} for the same argument. Only the batch and time "
                f"ranks (and integer bounds) may differ between calls."
            )

    def _complete(self, comp):
        spaces = dict(comp.api_input_spaces)
        comp.input_complete = True
        try:
            comp.check_input_spaces(spaces, self.action_space)
            with self.backend.variable_scope(comp.device):
                comp.create_variables(spaces, self.action_space)
        except RLGraphSpecError as e:
            if e.key is not None:  # A config key's error (e.g. a size too large): kept, to be named in full.
                raise
            raise type(e)(f"Component '{comp.global_scope}': {e}") from e
        except RLGraphError as e:
            raise type(e)(f"Component '{comp.global_scope}': {e}") from e
        except Exception as e:
            raise RLGraphBuildError(f"Component '{comp.global_scope}' failed to create its variables for input "
                                    f"spaces {spaces}: {type(e).__name__}: {e}") from e
        if self.backend.build_runs_eagerly:
            for name, var in comp.variable_registry.items():
                self._snapshots[name] = (var, self.backend.read_variable(var))
            state = comp.get_state()
            if state is not None:
                self._state_snapshots.append((comp, copy.deepcopy(state)))
        comp.variable_complete = True
        for node in self._waiting.pop(comp, []):
            self._enqueue_ready(node)
        # Graph functions that wait for whole subtrees (e.g. variables()) may be ready now.
        for node in list(self._subtree_waiting):
            if self._ready_to_run(node):
                self._subtree_waiting.remove(node)
                self._ready.append(node)

    def _restore_snapshots(self):
        for var, value in self._snapshots.values():
            self.backend.assign_variable(var, value)
        for comp, state in self._state_snapshots:
            comp.set_state(state)
        self._snapshots, self._state_snapshots = {}, []

    def _derive(self, rec, queue):
        if rec.known:
            return
        if rec.parent is not None:
            parent = rec.parent
            if not parent.known:
                return
            if not isinstance(parent.space, ContainerSpace):
                raise RLGraphBuildError(f"Record '{parent.label}' with space {parent.space!r} is indexed with "
                                        f"[{rec.key!r}], but only Dict and Tuple spaces can be indexed.")
            key = rec.key  # A Tuple's entries may be named by their index as a string ("pair/1").
            if isinstance(parent.space, Tuple) and isinstance(key, str) and key.isdigit():
                key = int(key)
            try:
                space = parent.space[key]
                values = tuple(v[key] for v in parent.values)
            except (KeyError, IndexError, TypeError):
                raise RLGraphBuildError(f"Record '{parent.label}' with space {parent.space!r} has no key "
                                        f"{rec.key!r}.") from None
            self._set(rec, space, values, queue)
        else:
            leaves = flatten_records(rec.children)
            if not all(r.known for r in leaves):
                return
            if isinstance(rec.children, dict):
                space = _container(Dict, {k: r.space for k, r in rec.children.items()})
                values = tuple({k: r.values[i] for k, r in rec.children.items()} for i in range(2))
            else:
                space = _container(Tuple, [r.space for r in rec.children])
                values = tuple(tuple(r.values[i] for r in rec.children) for i in range(2))
            self._set(rec, space, values, queue)

    def _run(self, node, queue):
        comp = node.component
        fn = getattr(comp, node.fn.name)
        runs = []
        for i in range(2):
            args = [a.values[i] if isinstance(a, Record) else a for a in node.args]
            kwargs = {k: v.values[i] if isinstance(v, Record) else v for k, v in node.kwargs.items()}
            try:
                out = fn(*args, **kwargs)
            except Exception as e:
                spaces = ", ".join(_space_text(a.space) if isinstance(a, Record) else repr(a) for a in node.args)
                where = (f"Graph function '{node.fn.name}' of component '{comp.global_scope}' (called by API method "
                         f"'{node.api_call.info.name}')")
                if _is_python_control_flow_on_tensor(e):
                    raise _GraphFnFailed(RLGraphBuildError(
                        f"{where} uses a tensor as a Python bool or iterates over it (an `if`, `while`, `and`/`or`/"
                        f"`not` or a `for` on a tensor), which works on PyTorch only: a graph function's tensors "
                        f"have no value while TensorFlow's graph is made. Write self.ops.where(condition, x, y) to "
                        f"choose element-wise (compute both branches), reduce to a Python constant outside the "
                        f"graph function, or loop over a Python range."), e) from e
                raise _GraphFnFailed(RLGraphBuildError(
                    f"{where} failed on inputs ({spaces}): {type(e).__name__}: {e}"), e) from e
            runs.append(self._split_outputs(node, out))
        time_major = self._time_layout(node)
        node.done = True
        for j, rec in enumerate(node.outputs):
            values = (runs[0][j], runs[1][j])
            try:
                space = self.infer_space(*values, time_major=time_major)
            except RLGraphError as e:
                raise RLGraphBuildError(f"Output {rec.index} of graph function '{node.fn.name}' of "
                                        f"'{comp.global_scope}': {e}") from e
            self._set(rec, space, values, queue)

    @staticmethod
    def _split_outputs(node, out):
        n = len(node.outputs)
        if n == 0:
            return []
        if n == 1:
            return [out]
        if not isinstance(out, (tuple, list)) or len(out) != n:
            got = len(out) if isinstance(out, (tuple, list)) else 1
            raise RLGraphBuildError(
                f"Graph function '{node.fn.name}' of '{node.component.global_scope}' returned {got} value(s), but "
                f"its callers expect {n}. Declare the count with @graph_fn(returns=...).")
        return list(out)

    @staticmethod
    def _time_layout(node):
        """None if no input has a time rank, else whether inputs are time-major."""
        for rec in node.input_records():
            for s in (rec.space.flatten().values() if isinstance(rec.space, Space) else ()):
                if s.has_time_rank:
                    return s.time_major
        return None

    def infer_space(self, value, value2, time_major=None):
        """The space of a graph function's output, from its values in the build's two runs.

        Leading dimensions that follow the build's batch size from one run to the other (``BUILD_SIZES``)
        are a batch rank; a time rank where they follow the time size; a batch rank into which the time rank
        was folded where they follow the product. A leading dimension of unknown size (symbolic tracing,
        data-dependent shapes) is read as a batch rank, or as time and batch ranks laid out like the inputs'.

        Args:
            value: The output of the first run.
            value2: The output of the second run.
            time_major: None if no input had a time rank, else whether the inputs were time-major.
        """
        if value is None:
            return None
        if isinstance(value, dict):
            return _container(Dict, {k: self.infer_space(v, value2[k], time_major) for k, v in value.items()})
        if isinstance(value, (tuple, list)):
            return _container(Tuple, [self.infer_space(v, w, time_major) for v, w in zip(value, value2)])
        shape, dtype = self.backend.shape_and_dtype(value)
        shape2, _ = self.backend.shape_and_dtype(value2)
        (b1, t1), (b2, t2) = BUILD_SIZES
        pairs = list(zip(shape, shape2))
        kw = {}
        if len(pairs) != len(shape2):
            raise RLGraphSpaceError(f"output rank depends on the batch size ({shape} vs {shape2}).")
        if len(pairs) >= 2 and pairs[:2] in ([(t1, t2), (b1, b2)], [(b1, b2), (t1, t2)]):
            kw = dict(add_batch_rank=True, add_time_rank=True, time_major=pairs[0] == (t1, t2))
            pairs = pairs[2:]
        elif time_major is not None and len(pairs) >= 2 and pairs[0] == pairs[1] == (None, None):
            kw = dict(add_batch_rank=True, add_time_rank=True, time_major=time_major)
            pairs = pairs[2:]
        elif pairs and (pairs[0] in ((b1, b2), (b1 * t1, b2 * t2), (None, None)) or pairs[0][0] != pairs[0][1]):
            kw = dict(add_batch_rank=True)
            pairs = pairs[1:]
        if any(a != b or a is None for a, b in pairs):
            raise RLGraphSpaceError(f"cannot infer a space from values of shapes {shape} and {shape2} (two build "
                                    f"runs with different batch sizes): only leading batch/time dimensions may "
                                    f"change with the batch size or be unknown.")
        shape = tuple(a for a, _ in pairs)
        kind = dtype.kind
        if kind == "f":
            return FloatBox(shape=shape, dtype=dtype, **kw)
        if kind in "iu":
            return IntBox(shape=shape, dtype=dtype, **kw)
        if kind == "b":
            return BoolBox(shape=shape, **kw)
        if kind in "USO":
            return TextBox(shape=shape, **kw)
        raise RLGraphSpaceError(f"cannot infer a space for values of dtype {dtype}.")

    def _sample(self, space):
        """Two sample backend values of ``space``, with the batch/time sizes of the two build runs."""
        return tuple(self._sample_one(space, b, t) for b, t in BUILD_SIZES)

    def _sample_one(self, space, batch, time):
        if space in PYTHON_TYPES:
            return self.backend.python_scalar_input({int: batch, float: 0.5, bool: False}[space], space)

        def leaf(s):
            size = None
            if s.has_time_rank:
                size = (time, batch) if s.time_major else (batch, time)
            elif s.has_batch_rank:
                size = batch
            if isinstance(s, IntBox) and s.num_categories is None and np.any(np.asarray(s.high) - np.asarray(s.low) > 2**20):
                return s.zeros(size)
            return s.sample(size, rng=self._rng)

        flat = {k: leaf(s) for k, s in space.flatten().items()}
        return self.backend.to_backend(space.unflatten(flat))

    # --- after the build ---------------------------------------------------------------------------------
    def _contract_pass_through_calls(self, meta):
        """Binds API methods that only forward to one sub-component's API method straight to that method."""
        calls_by_method = defaultdict(list)
        for call in meta.api_calls:
            calls_by_method[(call.component, call.info.name)].append(call)
        for comp in reversed(meta.components):
            for name in comp.api_methods:
                calls = calls_by_method.get((comp, name))
                if not calls:
                    continue
                targets = {_pass_through_target(c) for c in calls}
                if len(targets) == 1 and None not in targets:
                    target_comp, target_name = targets.pop()
                    comp.__dict__[name] = getattr(target_comp, target_name)


def _pass_through_target(call):
    if not call.info.is_simple or len(call.calls) != 1 or not isinstance(call.calls[0], APICall):
        return None
    sub = call.calls[0]
    mine, theirs = list(call.args.values()), list(sub.args.values())
    if len(mine) != len(theirs) or any(a is not b or not isinstance(a, Record) for a, b in zip(mine, theirs)):
        return None
    if call.outputs is not sub.outputs:
        return None
    return sub.component, sub.info.name


def _space_text(space):
    return space.__name__ if isinstance(space, type) else repr(space)


def _container(cls, children):
    leaves = [s for s in (children.values() if isinstance(children, dict) else children) if s is not None]
    prims = [p for s in leaves for p in (s.flatten().values() if isinstance(s, Space) else ())]
    kw = {}
    if prims:
        kw = dict(add_batch_rank=prims[0].has_batch_rank, add_time_rank=prims[0].has_time_rank,
                  time_major=prims[0].time_major)
    return cls(children, **kw)


def _is_python_control_flow_on_tensor(error):
    """Whether ``error`` is TensorFlow's refusal of a symbolic tensor used as a Python bool or iterated over
    (``OperatorNotAllowedInGraphError``), found without importing TensorFlow."""
    return any(k.__name__ == "OperatorNotAllowedInGraphError" and k.__module__.startswith("tensorflow")
               for k in type(error).__mro__)


class _GraphFnFailed(Exception):
    def __init__(self, error, cause):
        super().__init__(str(error))
        self.error, self.cause = error, cause


def _missing_impl(component, error):
    def missing(*args, **kwargs):
        raise RLGraphBackendError(f"Component '{component.global_scope}': {error}")
    return missing


def _split_wrapper(impl, gf):
    """Calls ``impl`` once per primitive leaf of the container arguments and merges the results."""
    n_out = gf.num_outputs
    with_key = gf.add_auto_key_as_first_param

    def split(*args, **kwargs):
        idx = [i for i, a in enumerate(args) if isinstance(a, (dict, tuple))]
        if not idx:
            return impl("", *args, **kwargs) if with_key else impl(*args, **kwargs)
        first = args[idx[0]]
        paths, leaves0, treedef = optree.tree_flatten_with_path(first, none_is_leaf=True)
        leaves = {}
        for i in idx:
            try:
                leaves[i] = treedef.flatten_up_to(args[i])
            except (ValueError, TypeError) as e:
                raise RLGraphSpaceError(f"Graph function '{gf.name}': container arguments 0 and {i} have different "
                                        f"structures ({e}).") from None
        results = []
        for j, path in enumerate(paths):
            call_args = [leaves[i][j] if i in leaves else a for i, a in enumerate(args)]
            if with_key:
                call_args.insert(0, "/".join(str(p) for p in path))
            results.append(impl(*call_args, **kwargs))
        if n_out <= 1:
            return treedef.unflatten(results)
        return tuple(treedef.unflatten([r[k] for r in results]) for k in range(n_out))

    return split
