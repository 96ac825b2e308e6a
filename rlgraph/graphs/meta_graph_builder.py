"""Assembly: calling the root's API methods once with type-free records yields the meta graph."""
import logging

from rlgraph.graphs.meta_graph import APICall, GraphFnCall, MetaGraph
from rlgraph.graphs.records import Record, contains_records, flatten_records, to_record
from rlgraph.utils.decorators import assembling
from rlgraph.utils.errors import RLGraphAPIError, RLGraphBuildError

logger = logging.getLogger(__name__)


class MetaGraphBuilder:
    """Records the API and graph-function calls of a component tree into a ``MetaGraph``."""

    def __init__(self):
        self.meta_graph = None
        self._stack = []

    def assemble(self, root, input_spaces, api_methods=None):
        """Assembles the meta graph of ``root``.

        Args:
            root: The root component (it must have no parent).
            input_spaces: Maps root API argument names to spaces; arguments with a default value and no
                space are passed their default.
            api_methods: Names of the root API methods to assemble (default: all). Sub-components that only
                the others call stay out of the graph and get no variables (e.g. an actor-only build of an
                algorithm leaves out its memory, optimizer and target network).

        Returns:
            The ``MetaGraph``.
        """
        if root.parent is not None:
            raise RLGraphBuildError(f"'{root.global_scope}' has a parent; build the root of the tree instead.")
        self.meta_graph = MetaGraph(root)
        selected = select_api_methods(root, api_methods)
        with assembling(self):
            for name, info in selected.items():
                if info.var_positional or info.var_keyword:
                    raise RLGraphBuildError(f"Root API method '{name}' of '{root.global_scope}' takes *args or "
                                            f"**kwargs; a root API method needs named arguments.")
                args = []
                for p in info.params:
                    if p.name in input_spaces:
                        args.append(Record(label=f"{name}.{p.name}"))
                    elif p.default is not p.empty:
                        args.append(p.default)
                    else:
                        raise RLGraphBuildError(
                            f"No input space for argument '{p.name}' of API method '{name}' of the root component "
                            f"'{root.global_scope}'. Pass it in input_spaces, e.g. input_spaces=dict({p.name}=...)."
                        )
                getattr(root, name)(*args)
        return self.meta_graph

    # --- called by the decorators while assembling ---------------------------------------------------------
    def call_api(self, component, info, args, kwargs):
        caller = self._stack[-1] if self._stack else None
        if caller is not None and component is not caller.component and component.parent is not caller.component:
            raise RLGraphAPIError(
                f"API method '{caller.info.name}' of '{caller.component.global_scope}' calls API method "
                f"'{info.name}' of '{component.global_scope}', which is not one of its sub-components. "
                f"Register it with add_components()."
            )
        try:
            bound = info.signature.bind(component, *args, **kwargs)
        except TypeError as e:
            raise RLGraphAPIError(f"Call of API method '{info.name}' of '{component.global_scope}': {e}") from None
        bound.apply_defaults()
        arguments = list(bound.arguments.items())[1:]
        call_args = {}
        for name, value in arguments:
            if name == info.var_positional:
                for i, v in enumerate(value):
                    call_args[f"{name}[{i}]"] = to_record(v) if contains_records(v) else v
            elif name == info.var_keyword:
                for k, v in value.items():
                    call_args[k] = to_record(v) if contains_records(v) else v
            else:
                call_args[name] = to_record(value) if contains_records(value) else value
        # Run the body with the (structure-)records it expects.
        call = APICall(component, info, call_args, caller)
        if caller is not None:
            caller.calls.append(call)
        else:
            self.meta_graph.api[info.name] = call
        self.meta_graph.api_calls.append(call)
        self._stack.append(call)
        try:
            outputs = info.fn(component, *args, **kwargs)
        finally:
            self._stack.pop()
        call.outputs = outputs
        if outputs is None:
            _check_forgotten_return(call)
        return outputs

    def call_graph_fn(self, component, gf, args, kwargs):
        caller = self._stack[-1] if self._stack else None
        if caller is None or caller.component is not component:
            who = caller.component.global_scope if caller else "outside any API method"
            raise RLGraphAPIError(f"Graph function '{gf.name}' of '{component.global_scope}' is called from {who}; "
                                  f"only the component's own API methods may call its graph functions.")
        args = tuple(to_record(a) if contains_records(a) else a for a in args)
        kwargs = {k: to_record(v) if contains_records(v) else v for k, v in kwargs.items()}
        node = GraphFnCall(component, gf, args, kwargs, caller, gf.num_outputs)
        caller.calls.append(node)
        self.meta_graph.graph_fn_calls.append(node)
        if not node.outputs:
            return None
        return node.outputs[0] if len(node.outputs) == 1 else tuple(node.outputs)


def _base_records(record, out):
    """Adds ``record`` and the records it is made of (the one it indexes, a structure's members) to ``out``."""
    if record.id in out:
        return
    out.add(record.id)
    if record.parent is not None:
        _base_records(record.parent, out)
    if record.children is not None:
        for child in flatten_records(record.children):
            _base_records(child, out)


def _check_forgotten_return(call):
    """An API method that returned None although the last call in its body produced values that nothing used:
    it forgot its ``return`` (its callers would silently get None). Raises ``RLGraphAPIError`` naming it."""
    used = set()
    for c in call.calls:
        inputs = c.input_records() if isinstance(c, GraphFnCall) else flatten_records(list(c.args.values()))
        for rec in inputs:
            _base_records(rec, used)
    for c in reversed(call.calls):
        produced = c.outputs if isinstance(c, GraphFnCall) else flatten_records(c.outputs)
        if not produced:
            continue
        if not any(rec.id in used for rec in produced):
            what = f"graph function '{c.fn.name}'" if isinstance(c, GraphFnCall) else \
                f"API method '{c.info.name}' of '{c.component.global_scope}'"
            raise RLGraphAPIError(f"API method '{call.info.name}' of '{call.component.global_scope}' returns None, "
                                  f"but the values of its call of {what} are used by nothing: write `return "
                                  f"{'self.' + c.fn.name if isinstance(c, GraphFnCall) else '...'}(...)` (or drop "
                                  f"the call).")
        return


def select_api_methods(root, api_methods=None):
    """The root's API methods named in ``api_methods`` (all if None), in definition order; unknown names raise."""
    if api_methods is None:
        return dict(root.api_methods)
    unknown = [n for n in api_methods if n not in root.api_methods]
    if unknown:
        raise RLGraphAPIError(f"'{root.global_scope}' has no API method(s) {unknown}; available: "
                              f"{', '.join(root.api_methods)}.")
    return {n: info for n, info in root.api_methods.items() if n in set(api_methods)}
