"""The meta graph: which API method calls which, and which graph function consumes which record."""
from collections import OrderedDict

from rlgraph.graphs.records import flatten_records


def _space_text(space):
    return space.__name__ if isinstance(space, type) else repr(space)


class APICall:
    """One call of an API method, recorded during assembly.

    Attributes:
        component: The called component.
        info: Its ``APIMethodInfo``.
        args: Maps argument name to record (or constant) as bound from the call.
        outputs: What the method returned (a nested structure of records).
        calls: The API calls and graph-function calls made by its body, in order.
        caller: The enclosing ``APICall`` (None for a root API method).
    """

    def __init__(self, component, info, args, caller):
        self.component = component
        self.info = info
        self.args = args
        self.outputs = None
        self.calls = []
        self.caller = caller

    @property
    def name(self):
        return f"{self.component.global_scope}.{self.info.name}"

    def record_args(self):
        return OrderedDict((k, v) for k, v in self.args.items() if flatten_records(v))

    def __repr__(self):
        return f"APICall({self.name})"


class GraphFnCall:
    """One call of a graph function, recorded during assembly.

    Attributes:
        component: The component owning the graph function.
        fn: The ``GraphFunction``.
        args: The positional arguments (records or constants); ``kwargs`` the keyword ones.
        outputs: The output records.
        api_call: The ``APICall`` whose body made the call.
        done: Set by the builder once the function has run and its outputs' spaces are known.
    """

    def __init__(self, component, fn, args, kwargs, api_call, num_outputs):
        from rlgraph.graphs.records import Record
        self.component = component
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.api_call = api_call
        self.outputs = [Record(producer=self, index=i, label=f"{fn.name}:{i}") for i in range(num_outputs)]
        self.done = False

    @property
    def name(self):
        return f"{self.component.global_scope}.{self.fn.name}"

    def input_records(self):
        return flatten_records(list(self.args)) + flatten_records(list(self.kwargs.values()))

    def __repr__(self):
        return f"GraphFnCall({self.name})"


class MetaGraph:
    """The assembled structure of a root component's API, before any backend object exists.

    Attributes:
        root: The root component.
        api: Maps each root API method name to its root ``APICall``.
        api_calls: Every ``APICall``, in the order they were made.
        graph_fn_calls: Every ``GraphFnCall``, in the order they were made.
        components: Every component of the tree (root first).
        towers: Root API method name -> the devices of its towers, where a device strategy runs it as one
            tower per device (``rlgraph.executors.multi_device_sync``); empty otherwise.
        learners: The learner processes whose gradients the update methods all-reduce (1: this process only;
            ``rlgraph.executors.distributed_sync``).
    """

    def __init__(self, root):
        self.root = root
        self.towers = OrderedDict()
        self.learners = 1
        self.api = OrderedDict()
        self.api_calls = []
        self.graph_fn_calls = []
        self.components = root.get_all_sub_components(include_self=True)

    @property
    def api_methods(self):
        """Names of the root's API methods."""
        return list(self.api)

    def call_chain(self, api_method):
        """The component API calls (``path.method``) made by root API method ``api_method``, depth-first."""
        out = []

        def walk(call):
            out.append(call.name)
            for c in call.calls:
                if isinstance(c, APICall):
                    walk(c)
        walk(self.api[api_method])
        return out

    def describe(self, api_method=None):
        """A readable indented text of the API calls and graph functions (with spaces once built)."""
        lines = []

        def fmt_args(mapping):
            parts = []
            for k, v in mapping.items():
                recs = flatten_records(v)
                if recs and len(recs) == 1 and recs[0] is v and v.known:
                    parts.append(f"{k}: {_space_text(v.space)}")
                else:
                    parts.append(k if recs else f"{k}={v!r}")
            return ", ".join(parts)

        def walk(call, depth):
            pad = "  " * depth
            lines.append(f"{pad}{call.name}({fmt_args(call.args)})")
            for c in call.calls:
                if isinstance(c, APICall):
                    walk(c, depth + 1)
                else:
                    outs = ", ".join(_space_text(r.space) if r.known else "?" for r in c.outputs)
                    lines.append(f"{pad}  [graph_fn] {c.name} -> {outs or 'nothing'}")

        for name, call in self.api.items():
            if api_method is None or name == api_method:
                if name in self.towers:
                    over = f", all-reduced over {self.learners} learner processes" if self.learners > 1 else ""
                    lines.append(f"[{len(self.towers[name])} towers, gradients averaged{over}, one step] " + ", ".join(
                        f"tower {i}: {d}" for i, d in enumerate(self.towers[name])))
                walk(call, 0)
        return "\n".join(lines)

    def to_dot(self):
        """The call graph in Graphviz dot: boxes are API methods, ellipses graph functions."""
        lines = ["digraph rlgraph {", "  rankdir=LR;", "  node [fontname=\"Helvetica\"];"]
        ids, edges = {}, set()

        def node(key, label, shape):
            if key not in ids:
                ids[key] = f"n{len(ids)}"
                lines.append(f"  {ids[key]} [label=\"{label}\", shape={shape}];")
            return ids[key]

        def walk(call):
            src = node(("api", call.component, call.info.name), call.name, "box")
            for c in call.calls:
                if isinstance(c, APICall):
                    dst = node(("api", c.component, c.info.name), c.name, "box")
                    walk(c)
                else:
                    dst = node(("fn", c.component, c.fn.name), c.name, "ellipse")
                edges.add((src, dst))

        for call in self.api.values():
            walk(call)
        lines.extend(f"  {a} -> {b};" for a, b in sorted(edges))
        lines.append("}")
        return "\n".join(lines)

    def __repr__(self):
        return f"MetaGraph(root='{self.root.global_scope}', api={self.api_methods})"
