"""The ``@rlgraph_api`` and ``@graph_fn`` decorators.

An API method is a component's public entry point. Its body wires sub-components' API methods and the
component's own graph functions together; it holds no numerics. A graph function holds the numerics,
written once per backend (or once, backend-free).

Life cycle: while the meta graph is assembled, calls to API methods and graph functions are recorded by
the active assembler (see ``rlgraph.graphs``) instead of being run. After the build, each component's API
methods and graph functions are bound on the instance to their plain implementations, so an executed API
call costs no more than the Python functions it is made of.
"""
import ast
import functools
import inspect
import sys
import textwrap
import threading

from rlgraph.utils.errors import RLGraphAPIError, RLGraphBackendError

_state = threading.local()


def get_assembler():
    """The assembler recording calls right now, or None."""
    return getattr(_state, "assembler", None)


class assembling:
    """Context manager that makes ``assembler`` record all API and graph-function calls."""

    def __init__(self, assembler):
        self.assembler = assembler

    def __enter__(self):
        self.previous = get_assembler()
        _state.assembler = self.assembler
        return self.assembler

    def __exit__(self, *exc):
        _state.assembler = self.previous


class APIMethodInfo:
    """What the framework knows about one API method."""

    def __init__(self, name, fn, must_be_complete=True, batch_size_arg=None):
        self.name = name
        self.fn = fn
        self.must_be_complete = must_be_complete
        self.batch_size_arg = batch_size_arg
        self.signature = inspect.signature(fn)
        params = list(self.signature.parameters.values())[1:]
        self.params = params
        self.arg_names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        self.var_positional = next((p.name for p in params if p.kind == p.VAR_POSITIONAL), None)
        self.var_keyword = next((p.name for p in params if p.kind == p.VAR_KEYWORD), None)
        self.is_simple = self.var_positional is None and self.var_keyword is None and all(
            p.default is p.empty for p in params)
        if batch_size_arg is not None and batch_size_arg not in self.arg_names:
            raise RLGraphAPIError(f"API method '{name}': batch_size_arg '{batch_size_arg}' is not one of its "
                                  f"arguments ({', '.join(self.arg_names)}).")

    def __repr__(self):
        return f"APIMethodInfo({self.name}{self.signature})"


def rlgraph_api(fn=None, *, name=None, must_be_complete=True, batch_size_arg=None):
    """Marks a component method as an API method.

    Args:
        fn: The method.
        name: The API name (default: the method's name).
        must_be_complete: If False, the component does not wait for this method's argument spaces before
            creating its variables. Use it to break input-incomplete cycles, where an argument can only be
            known after the component's own variables exist.
        batch_size_arg: The name of an ``int`` argument that is the size of a batch the method draws itself
            (e.g. from a memory). A multi-device strategy divides it over its towers, as it splits batched
            arguments (see ``rlgraph.executors.multi_device_sync``).
    """
    if fn is None:
        return functools.partial(rlgraph_api, name=name, must_be_complete=must_be_complete,
                                 batch_size_arg=batch_size_arg)
    info = APIMethodInfo(name or fn.__name__, fn, must_be_complete, batch_size_arg)

    @functools.wraps(fn)
    def api_method(self, *args, **kwargs):
        assembler = get_assembler()
        if assembler is not None:
            return assembler.call_api(self, info, args, kwargs)
        raise RLGraphAPIError(
            f"API method '{info.name}' of component '{self.global_scope}' was called, but the component is not "
            f"part of a built graph. Build it first, e.g. with rlgraph.tests.ComponentTest or an executor."
        )

    api_method._rlgraph_api = info
    return api_method


#: The pseudo-backend of a graph function's implementation on numpy values (``graph_fn(backend=HOST)``).
HOST = "host"


class GraphFunction:
    """A graph function: one implementation per backend (or one backend-free implementation).

    Attributes:
        name: The method name.
        impls: Maps a backend name ("tf", "pytorch") or None (any backend) to a plain function; ``HOST`` to
            the implementation on numpy values an executor may run without the backend (see ``graph_fn``).
        returns: The number of outputs, or None to read it from the source's return statements.
        split_ops: If True, container (dict/tuple) arguments are split into their primitive leaves, the
            function is called once per leaf (other arguments passed as they are), and the results are
            merged back into the container's structure.
        add_auto_key_as_first_param: With ``split_ops``, passes each leaf's flat key as first argument.
        requires_variable_completeness: The build runs the function only once the component AND all its
            (called) sub-components have created their variables (e.g. to collect all their variables).
    """

    def __init__(self, name, returns=None, split_ops=False, add_auto_key_as_first_param=False,
                 requires_variable_completeness=False):
        self.name = name
        self.impls = {}
        self.returns = returns
        self.split_ops = split_ops
        self.add_auto_key_as_first_param = add_auto_key_as_first_param
        self.requires_variable_completeness = requires_variable_completeness
        self._num_outputs = None
        self.__doc__ = None

    def add_impl(self, backend, fn):
        self.impls[backend] = fn
        if self.__doc__ is None:
            self.__doc__ = fn.__doc__

    def impl_for(self, backend):
        """The implementation for ``backend``, or raises naming the missing one."""
        fn = self.impls.get(backend) or self.impls.get(None)
        if fn is None:
            have = ", ".join(sorted(str(b) for b in self.impls if b != HOST))
            raise RLGraphBackendError(f"Graph function '{self.name}' has no implementation for backend "
                                      f"'{backend}' (it has: {have}).")
        return fn

    @property
    def num_outputs(self):
        """How many values the graph function returns (declared, or counted from its source)."""
        if self.returns is not None:
            return self.returns
        if self._num_outputs is None:
            counts = {count_return_values(fn) for fn in self.impls.values()}
            counts.discard(None)
            self._num_outputs = max(counts) if counts else 1
        return self._num_outputs

    def __get__(self, instance, owner):
        if instance is None:
            return self
        return functools.partial(_call_graph_fn_unbuilt, instance, self)

    def __repr__(self):
        return f"GraphFunction({self.name}, backends={sorted(str(b) for b in self.impls)})"


def _call_graph_fn_unbuilt(component, gf, *args, **kwargs):
    assembler = get_assembler()
    if assembler is not None:
        return assembler.call_graph_fn(component, gf, args, kwargs)
    raise RLGraphAPIError(f"Graph function '{gf.name}' of component '{component.global_scope}' was called outside "
                          f"of an API method of a built graph.")


def graph_fn(fn=None, *, backend=None, returns=None, split_ops=False, add_auto_key_as_first_param=False,
             requires_variable_completeness=False):
    """Marks a component method as a graph function.

    Write one backend-free implementation with ``@graph_fn``, or one per backend with
    ``@graph_fn(backend="tf")`` and ``@graph_fn(backend="pytorch")`` under the same method name. A subclass
    that overrides one backend's implementation only keeps the one it inherits for the other backend (see
    ``inherit_graph_fn_impls``).

    Args:
        fn: The method.
        backend: "tf", "pytorch" or None (any backend); or ``HOST`` ("host"): an implementation on numpy values
            that touches no backend state (e.g. a numpy memory's insert), which an executor runs directly,
            without the backend, where a root API method is this one graph function applied to its own
            arguments (``GraphExecutor``). It complements the backend implementations; it never replaces them.
        returns: Number of return values; by default counted from the source's return statements.
        split_ops: Call once per primitive leaf of container arguments and merge the results back.
        add_auto_key_as_first_param: With ``split_ops``, pass each leaf's flat key first.
        requires_variable_completeness: Build-run it only once all sub-components have their variables.
    """
    if fn is None:
        return functools.partial(graph_fn, backend=backend, returns=returns, split_ops=split_ops,
                                 add_auto_key_as_first_param=add_auto_key_as_first_param,
                                 requires_variable_completeness=requires_variable_completeness)
    if backend is not None and backend != HOST:
        from rlgraph.utils.backend import normalize_backend
        backend = normalize_backend(backend)
    # A second implementation of an existing graph function defined in the same class body.
    namespace = sys._getframe(1).f_locals
    existing = namespace.get(fn.__name__)
    if isinstance(existing, GraphFunction):
        gf = existing
        if backend in gf.impls:
            raise RLGraphAPIError(f"Graph function '{fn.__name__}' defines backend '{backend}' twice.")
        if returns is not None:
            gf.returns = returns
    else:
        gf = GraphFunction(fn.__name__, returns=returns, split_ops=split_ops,
                           add_auto_key_as_first_param=add_auto_key_as_first_param,
                           requires_variable_completeness=requires_variable_completeness)
    gf.add_impl(backend, fn)
    return gf


#: Decorator options that must agree between a graph function and the one whose implementations it inherits.
_INHERITED_OPTIONS = ("split_ops", "add_auto_key_as_first_param", "requires_variable_completeness")


def inherit_graph_fn_impls(cls):
    """Completes the graph functions of class ``cls`` with the backend implementations it inherits.

    A subclass may override one backend's implementation of a graph function only (e.g.
    ``@graph_fn(backend="tf") def _graph_fn_x``) and keep its parents' others: the class attribute found
    first in the MRO gets, for each backend it does not implement, the implementation found first further
    along the MRO (as Python's attribute lookup would, per backend). A backend-free implementation
    (``@graph_fn`` without ``backend=``) serves every backend, so it replaces all inherited ones. A plain
    (non-graph-function) attribute in between hides everything below it.

    The completed graph function is a new ``GraphFunction`` set on ``cls`` (the parents' objects are not
    changed). Called for every ``Component`` subclass at class creation.

    Raises:
        RLGraphAPIError: If an implementation would be inherited across different decorator options
            (``split_ops``, ``add_auto_key_as_first_param``, ``requires_variable_completeness``, or two
            different declared ``returns``), where the inherited implementation would be called wrongly. The
            message names the class, the graph function and the backend(s) to define.
    """
    from rlgraph.utils.backend import BACKENDS
    names = {name for klass in cls.__mro__ for name, attr in vars(klass).items() if isinstance(attr, GraphFunction)}
    for name in names:
        chain = []
        for klass in cls.__mro__:
            if name in vars(klass):
                attr = vars(klass)[name]
                if not isinstance(attr, GraphFunction):
                    break
                chain.append((klass, attr))
        if len(chain) < 2:
            continue
        _, own = chain[0]
        if None in own.impls or all(b in own.impls for b in BACKENDS):
            continue  # Serves every backend itself.
        inherited = {}  # backend -> (class, GraphFunction) it comes from
        for klass, gf in chain[1:]:
            for backend in gf.impls:
                if backend not in own.impls and backend not in inherited:
                    inherited[backend] = (klass, gf)
            if None in gf.impls:
                break  # Nothing below is reachable: this one serves all remaining backends.
        if not inherited:
            continue
        returns = own.returns
        for backend, (klass, gf) in inherited.items():
            what = "a backend-free implementation" if backend is None else f"backend '{backend}'"
            diffs = [f"{opt}={getattr(own, opt)!r} vs {getattr(gf, opt)!r}" for opt in _INHERITED_OPTIONS
                     if getattr(own, opt) != getattr(gf, opt)]
            if own.returns is not None and gf.returns is not None and own.returns != gf.returns:
                diffs.append(f"returns={own.returns!r} vs {gf.returns!r}")
            if diffs:
                missing = ", ".join(sorted(str(b) for b in inherited if b is not None)) or "all backends"
                raise RLGraphAPIError(
                    f"Class '{cls.__qualname__}': graph function '{name}' overrides backend(s) "
                    f"{sorted(str(b) for b in own.impls)} only and would inherit {what} from "
                    f"'{klass.__qualname__}', but their @graph_fn options differ ({'; '.join(diffs)}). Define "
                    f"'{name}' for the missing backend(s) ({missing}) in '{cls.__qualname__}' as well, or use the "
                    f"same options.")
            if returns is None:
                returns = gf.returns
        merged = GraphFunction(name, returns=returns, split_ops=own.split_ops,
                               add_auto_key_as_first_param=own.add_auto_key_as_first_param,
                               requires_variable_completeness=own.requires_variable_completeness)
        for backend, fn in own.impls.items():
            merged.add_impl(backend, fn)
        for backend, (_, gf) in inherited.items():
            merged.add_impl(backend, gf.impls[backend])
        setattr(cls, name, merged)


def count_return_values(fn):
    """Counts the values a function returns, from the largest tuple in its return statements.

    Returns None if the source is unavailable; 0 if it never returns a value.
    """
    try:
        source = textwrap.dedent(inspect.getsource(fn))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return None
    func = tree.body[0]
    counts = []

    class Visitor(ast.NodeVisitor):
        def visit_FunctionDef(self, node):
            if node is func:
                self.generic_visit(node)

        visit_AsyncFunctionDef = visit_FunctionDef

        def visit_Lambda(self, node):
            pass

        def visit_Return(self, node):
            if node.value is None or (isinstance(node.value, ast.Constant) and node.value.value is None):
                counts.append(0)
            elif isinstance(node.value, ast.Tuple) and not any(isinstance(e, ast.Starred) for e in node.value.elts):
                counts.append(len(node.value.elts))
            else:
                counts.append(1)

    Visitor().visit(func)
    return max(counts) if counts else 0
