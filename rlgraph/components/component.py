"""The base class of everything a graph is made of."""
import contextlib
import copy
import functools
import logging
import os
import re
from collections import OrderedDict

import numpy as np

from rlgraph.utils.decorators import GraphFunction, graph_fn, inherit_graph_fn_impls, rlgraph_api
from rlgraph.utils.errors import (RLGraphAPIError, RLGraphBuildError, RLGraphError, RLGraphRuntimeError,
                                  RLGraphSpecError)
from rlgraph.utils.initializers import initial_value, variable_rng
from rlgraph.utils.specifiable import Specifiable

logger = logging.getLogger(__name__)


def _kebab(name):
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()


#: Attributes that ``Component.__init__`` sets: asked for on a component whose ``__init__`` never called it, they
#: raise the error saying so (instead of Python's ``AttributeError``).
_BASE_ATTRIBUTES = frozenset(("api_methods", "graph_fns", "sub_components", "parent", "scope", "_scope_given",
                              "_device", "_trainable", "backend", "variable_registry", "weight_names", "seed",
                              "api_input_spaces", "api_method_input_spaces", "input_complete", "variable_complete",
                              "built", "in_build_run"))


def _not_initialized(cls_name):
    return RLGraphAPIError(f"{cls_name}.__init__ does not call super().__init__(...): a Component's __init__ must "
                           f"call it (e.g. super().__init__(scope=scope, **kwargs)) before the component is used.")


def _check_base_init(cls, init):
    """``init`` (a subclass's own ``__init__``) followed by the check that it ran ``Component.__init__``."""
    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        if "api_methods" not in self.__dict__:
            raise _not_initialized(cls.__name__)
    __init__._rlgraph_base_init_checked = True
    return __init__


def bytes_text(n):
    """``n`` bytes as "16.0 TiB", "512.0 MiB", ..."""
    n = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024


def machine_memory(available=False):
    """This machine's physical memory in bytes, or (``available``) the part of it available now (Linux's
    MemAvailable; elsewhere the total); None where the system does not tell."""
    if available:
        try:
            with open("/proc/meminfo") as f:
                for line in f:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


class Component(Specifiable):
    """A node of an algorithm's graph.

    A component exposes API methods (``@rlgraph_api``), keeps its numerics in graph functions
    (``@graph_fn``) and talks to other components only through their API methods. Sub-components are
    registered with ``add_components`` (or passed to ``__init__``); together they form a tree whose paths
    (``root/policy/dense-layer``) name components and their variables.

    Subclasses override ``check_input_spaces`` to reject unsuitable inputs and ``create_variables`` to make
    their variables once the spaces of all their API arguments are known.

    Args:
        *sub_components: Components to register as sub-components.
        scope: This component's name within its parent (default: the class name in kebab-case).
        device: A device for this component's variables and graph functions, e.g. "cpu" or "gpu:0";
            default: the parent's.
        trainable: Whether this component's variables are trained; default: the parent's (else True).
    """

    #: The scope a component gets when none is given (default: the class name in kebab-case).
    default_scope = None
    #: Whether a graph function of this component differentiates (calls ``tf.gradients``/``torch.autograd``):
    #: on PyTorch, root API methods that reach no such component run with autograd off (``Optimizer`` sets it).
    differentiates = False

    def __init__(self, *sub_components, scope=None, device=None, trainable=None):
        self.scope = scope or type(self).default_scope or _kebab(type(self).__name__)
        if "/" in self.scope:
            raise RLGraphError(f"Scope '{self.scope}' must not contain '/'.")
        self._scope_given = scope is not None
        self._device = device
        self._trainable = trainable
        self.parent = None
        self.sub_components = OrderedDict()
        apis, fns = type(self)._collect_api()
        self.api_methods = OrderedDict(apis)
        self.graph_fns = OrderedDict(fns)
        # Filled during the build.
        self.backend = None
        # Argument name -> space (the first received, if API methods share an argument name), and per API
        # method: method name -> {argument name -> space}.
        self.api_input_spaces = OrderedDict()
        self.api_method_input_spaces = OrderedDict()
        self.input_complete = False
        self.variable_complete = False
        self.built = False
        # True while the build runs graph functions on sample values (twice, with different batch sizes;
        # effects are undone afterwards). Run-time checks go through ``check_at_run_time``, which skips them
        # then; read the flag directly only to behave differently during those runs (e.g. leave a numpy
        # storage alone).
        self.in_build_run = False
        self.variable_registry = OrderedDict()
        self.weight_names = set()
        self.seed = 0
        self.add_components(*sub_components)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # A subclass whose __init__ forgets super().__init__() is told so at construction, naming the class.
        init = cls.__dict__.get("__init__")
        if init is not None and not getattr(init, "_rlgraph_base_init_checked", False):
            cls.__init__ = _check_base_init(cls, init)
        # A graph function overridden for one backend only keeps the inherited implementations of the others.
        inherit_graph_fn_impls(cls)

    def __getattr__(self, name):
        # Only called for attributes not found: those of Component.__init__ mean that it never ran.
        if name in _BASE_ATTRIBUTES and "api_methods" not in self.__dict__:
            raise _not_initialized(type(self).__name__)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def check_size(self, nbytes, what, fix=None, needed=None, available=False):
        """Refuses, before anything is allocated, storage that could never fit into this machine's memory.

        Args:
            nbytes: The bytes it would take.
            what: What would take them (e.g. "its variable 'kernel' of shape (4, 1000000000) float32").
            fix: The argument to lower (e.g. "capacity"); the error names it under the component's config path
                (``spec_path``, set by ``from_spec``, e.g. "memory_spec.capacity"). None: the sizes in its spec.
            needed: The bytes that making it takes at its peak (default ``nbytes``).
            available: Compare with the memory available now (storage filled at once), not the machine's total
                (storage that fills over a run).

        Raises:
            RLGraphSpecError: More than the machine's memory.
        """
        total = machine_memory(available)
        needed = nbytes if needed is None else needed
        if total is None or needed <= total:
            return
        if needed > nbytes:
            what = f"{what} takes {bytes_text(nbytes)} and"
        verb = "would need" if needed > nbytes else "would take"
        where = self.__dict__.get("spec_path")
        key = (f"{where}.{fix}" if where else None) if fix else where
        have = f"the {bytes_text(total)} of memory available" if available else \
            f"this machine's {bytes_text(total)} of memory"
        lower = f"lower {fix}" if fix else "lower the sizes in its spec"
        reason = (f"{type(self).__name__} '{self.global_scope}': {what} {verb} {bytes_text(needed)}"
                  f"{' to be made' if needed > nbytes else ''}, more than {have}; {lower}.")
        if key is None:  # (Built in code, not from a config.)
            raise RLGraphSpecError(reason)
        # Keyed: Specifiable.from_spec restates it under the full config path (agent.memory_spec.capacity).
        raise RLGraphSpecError(f"{key}: {reason}", key=key, reason=reason)

    @classmethod
    def _collect_api(cls):
        """API methods and graph functions of the class (most derived first), cached per class."""
        if "_rlgraph_api_infos" not in cls.__dict__:
            apis, fns, shadowed = OrderedDict(), OrderedDict(), set()
            for klass in cls.__mro__:
                for name, attr in vars(klass).items():
                    if name in shadowed:
                        continue
                    shadowed.add(name)
                    info = getattr(attr, "_rlgraph_api", None)
                    if info is not None:
                        apis[name] = info
                    elif isinstance(attr, GraphFunction):
                        fns[name] = attr
            cls._rlgraph_api_infos, cls._rlgraph_graph_fns = apis, fns
        return cls._rlgraph_api_infos, cls._rlgraph_graph_fns

    # --- tree ---------------------------------------------------------------------------------------------
    def add_components(self, *components):
        """Registers ``components`` as sub-components (scopes made unique among siblings)."""
        for c in components:
            if not isinstance(c, Component):
                raise RLGraphError(f"'{self.global_scope}': add_components() takes Components, got {c!r}.")
            if c.parent is not None and c.parent is not self:
                raise RLGraphError(f"Component '{c.global_scope}' already has a parent; use copy() to reuse it.")
            if c.parent is self:
                continue
            if c.scope in self.sub_components:
                if c._scope_given:
                    raise RLGraphError(f"'{self.global_scope}' already has a sub-component with scope '{c.scope}'.")
                base, i = c.scope, 1
                while f"{base}-{i}" in self.sub_components:
                    i += 1
                c.scope = f"{base}-{i}"
            c.parent = self
            self.sub_components[c.scope] = c

    @property
    def global_scope(self):
        """The component's path from the root, e.g. ``root/policy/dense-layer``."""
        return self.scope if self.parent is None else f"{self.parent.global_scope}/{self.scope}"

    @property
    def device(self):
        if self._device is not None or self.parent is None:
            return self._device
        return self.parent.device

    @property
    def trainable(self):
        if self._trainable is not None:
            return self._trainable
        return True if self.parent is None else self.parent.trainable

    def get_all_sub_components(self, include_self=False):
        """All components below this one (depth-first, parents before children)."""
        out = [self] if include_self else []
        for c in self.sub_components.values():
            out.extend(c.get_all_sub_components(include_self=True))
        return out

    def get_sub_component_by_name(self, path):
        """The sub-component at ``path`` (relative, "/"-separated), or raises listing the children."""
        node = self
        for part in path.split("/"):
            if part not in node.sub_components:
                raise RLGraphError(f"'{node.global_scope}' has no sub-component '{part}' "
                                   f"(it has: {', '.join(node.sub_components) or 'none'}).")
            node = node.sub_components[part]
        return node

    # --- spaces and variables -----------------------------------------------------------------------------
    def check_input_spaces(self, input_spaces, action_space=None):
        """Checks the spaces of the API arguments; raise ``RLGraphSpaceError`` to reject them.

        Args:
            input_spaces: Maps each API argument name to its space.
            action_space: The graph's action space, if any.
        """

    def create_variables(self, input_spaces, action_space=None):
        """Creates this component's variables with ``get_variable``; called once all input spaces are known."""

    @property
    def ops(self):
        """The operations table of this component's backend (``rlgraph.backends.ops``): graph functions whose
        backends differ only in spelling are written once with it."""
        if self.backend is None:
            raise RLGraphError(f"'{self.global_scope}': the backend operations (self.ops) exist once the "
                               f"component is built on a backend.")
        return self.backend.ops

    def no_gradient_recording(self):
        """A context for API method bodies whose computations are constants to the loss (e.g. target-network
        passes): the backend records nothing for a backward pass there (``Backend.no_gradient_recording``);
        no effect while the meta graph is assembled, before any backend exists."""
        return contextlib.nullcontext() if self.backend is None else self.backend.no_gradient_recording()

    def get_variable(self, name, shape=(), dtype="float32", initializer=None, trainable=None, from_space=None,
                     add_batch_rank=None):
        """Creates a variable of this component on its backend and device.

        Args:
            name: Local name; the full name is ``<global scope>/<name>``.
            shape: The shape (ignored with ``from_space``).
            dtype: A numpy dtype or its name.
            initializer: See ``rlgraph.utils.initializers.initial_value`` (default zeros).
            trainable: Whether the optimizer trains it (default: the component's ``trainable``; only float
                variables can be trainable).
            from_space: Create one variable per primitive of this space, of the space's shape and dtype;
                returns an ``OrderedDict`` flat key -> variable.
            add_batch_rank: With ``from_space``: an int, the size of a leading dimension to add (e.g. a
                memory's capacity).

        Returns:
            The backend variable (or, with ``from_space``, an ordered dict of them).
        """
        if self.backend is None:
            raise RLGraphBuildError(f"'{self.global_scope}': get_variable('{name}') is only possible during the "
                                    f"build (in create_variables).")
        if from_space is not None:
            out = OrderedDict()
            for key, space in from_space.flatten().items():
                lead = (int(add_batch_rank),) if add_batch_rank else ()
                sub = f"{name}/{key}" if key else name
                out[key] = self.get_variable(sub, shape=lead + tuple(space.shape), dtype=space.dtype,
                                             initializer=initializer, trainable=False)
            return out
        full_name = f"{self.global_scope}/{name}"
        if full_name in self.variable_registry:
            raise RLGraphBuildError(f"'{self.global_scope}' already has a variable '{name}'.")
        dtype = np.dtype(dtype)
        shape = tuple(int(d) for d in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        count = 1
        for d in shape:
            count *= d
        # Made as a float64 numpy array, cast, then copied by the backend: the peak is about 8 + 2 x itemsize
        # bytes per element, all at once.
        self.check_size(count * dtype.itemsize, f"its variable '{name}' of shape {shape} {dtype.name}",
                        needed=count * (8 + 2 * dtype.itemsize), available=True)
        is_weight = trainable is not False and dtype.kind == "f"
        if trainable is None:
            trainable = self.trainable and dtype.kind == "f"
        value = initial_value(initializer, shape, dtype, variable_rng(self.seed, full_name))
        var = self.backend.create_variable(full_name, value, trainable=bool(trainable), device=self.device)
        self.variable_registry[full_name] = var
        if is_weight:
            self.weight_names.add(full_name)
        return var

    def all_variables(self, trainable_only=False, weights_only=False):
        """An ordered dict full name -> variable of this component and all its sub-components.

        Args:
            trainable_only: Only variables the optimizer trains.
            weights_only: Only weights: float variables not created with ``trainable=False`` (so a frozen
                target network's weights count, a memory's storage or an optimizer's slots do not).
        """
        out = OrderedDict()
        for c in self.get_all_sub_components(include_self=True):
            for name, var in c.variable_registry.items():
                if trainable_only and not self.backend.is_trainable(var):
                    continue
                if weights_only and name not in c.weight_names:
                    continue
                out[name] = var
        return out

    @rlgraph_api
    def variables(self):
        """API method: this component's weights (with its sub-components'), as a dict.

        Weights are the float variables not created with ``trainable=False``: a frozen copy (target network)
        has them too, so that ``sync`` can pair them; a memory's storage and optimizer slots are excluded.

        Keys are the names relative to this component with "/" replaced by "." (e.g. ``dense.kernel``),
        so that two copies of a component (a network and its target network) have the same keys.
        """
        return self._graph_fn_variables()

    @graph_fn(returns=1, requires_variable_completeness=True)
    def _graph_fn_variables(self):
        prefix = len(self.global_scope) + 1
        return {name[prefix:].replace("/", "."): var
                for name, var in self.all_variables(weights_only=True).items()}

    def get_state(self):
        """State kept outside backend variables (e.g. a numpy buffer), or None.

        Eager backends run each graph function once during the build; the builder saves this state after
        ``create_variables`` and hands it back to ``set_state`` afterwards, as it does for variables.
        """
        return None

    def set_state(self, state):
        """Restores what ``get_state`` returned."""

    # --- run-time checks ------------------------------------------------------------------------------------
    def check_at_run_time(self, condition, message, error=RLGraphRuntimeError):
        """Raises ``error(message)`` unless ``condition`` holds; skipped during the build's sample runs.

        The one home for checks in graph functions that only make sense on real data: "asked for more records
        than the memory holds", "sequences shorter than the burn-in", "the keys of two variable dicts differ"
        (while the build still creates sub-components' variables). The build runs every graph function on
        sample values (``in_build_run``), where such a check would fail for no fault of the caller's.

        The condition is a Python value, so it is evaluated when the graph function's Python code runs: on
        PyTorch at every call, on TensorFlow when the function is traced (a check on static information:
        shapes, dict keys, Python arguments). Checks on tensor values inside a TensorFlow graph are
        ``tf.debugging.assert_*`` ops instead; the build's symbolic trace never executes them.

        Args:
            condition: What must hold: a bool (or anything with a truth value, e.g. a 0-d torch tensor), or a
                callable without arguments returning one, called only outside the build's runs (for a check
                that costs something or that the build's sample values would break).
            message: The error message, or a callable without arguments returning it (called only when the
                check fails, so that formatting costs nothing on success). Name the component, API method
                and argument, what was expected and what was received.
            error: The ``RLGraphError`` subclass to raise: ``RLGraphRuntimeError`` (default) for run-time
                failures, ``RLGraphSpaceError`` for arguments that do not fit.

        Raises:
            error: If the check fails outside the build's sample runs.
        """
        if self.in_build_run:
            return
        if callable(condition):
            condition = condition()
        try:
            ok = bool(condition)
        except TypeError as e:  # A symbolic TF tensor (tf.errors.OperatorNotAllowedInGraphError is a TypeError).
            raise RLGraphError(f"'{self.global_scope}': check_at_run_time() takes a Python condition, got "
                               f"{condition!r} ({type(e).__name__}: {e}). Check tensor values inside a TensorFlow "
                               f"graph function with tf.debugging.assert_* ops.") from None
        if not ok:
            raise error(message() if callable(message) else message)

    # --- copies ---------------------------------------------------------------------------------------------
    def copy(self, scope=None, device=None, trainable=None):
        """A deep copy of this (not yet built) component, e.g. for a target network.

        Args:
            scope: The copy's scope (default: this one's).
            device: The copy's device (default: this one's).
            trainable: The copy's trainable flag (default: this one's).
        """
        if self.built or self.backend is not None:
            raise RLGraphError(f"'{self.global_scope}': copy() a component before it is built.")
        parent, self.parent = self.parent, None
        try:
            new = copy.deepcopy(self)
        finally:
            self.parent = parent
        if scope is not None:
            new.scope, new._scope_given = scope, True
        if device is not None:
            new._device = device
        if trainable is not None:
            new._trainable = trainable
        return new

    # --- API helpers ----------------------------------------------------------------------------------------
    def api_method_info(self, name):
        """The ``APIMethodInfo`` of API method ``name``, or raises listing the available ones."""
        info = self.api_methods.get(name)
        if info is None:
            raise RLGraphAPIError(f"'{self.global_scope}' has no API method '{name}'; available: "
                                  f"{', '.join(self.api_methods) or 'none'}.")
        return info

    def __repr__(self):
        return f"{type(self).__name__}('{self.global_scope}')"

