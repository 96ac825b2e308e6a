"""Type-free records: the values that flow through the meta graph while it is assembled."""
import itertools

from rlgraph.utils.errors import RLGraphAPIError

_ids = itertools.count()


class Record:
    """A value in the meta graph: produced by a graph function, a root input, or derived from other records.

    During assembly a record has no space and no value. The builder fills in ``space`` (the inferred space)
    and ``values`` (two sample backend values, from the build's two runs with different batch and time
    sizes).

    Attributes:
        producer: The ``GraphFnCall`` that outputs it, or None.
        index: Its position among the producer's outputs.
        parent: For a derived record: the record it indexes (``record[key]``).
        key: For a derived record: the key or index.
        children: For a structure record: the nested dict/tuple of records it groups.
        label: A name for rendering (root argument name, or producer output).
    """

    __slots__ = ("id", "producer", "index", "parent", "key", "children", "label", "space", "values", "known")

    def __init__(self, producer=None, index=0, parent=None, key=None, children=None, label=""):
        self.id = next(_ids)
        self.producer = producer
        self.index = index
        self.parent = parent
        self.key = key
        self.children = children
        self.label = label
        self.space = None
        self.values = None
        self.known = False

    def __getitem__(self, key):
        if isinstance(key, str) and "/" in key:
            rec = self
            for part in key.split("/"):
                rec = rec[int(part) if part.isdigit() else part]
            return rec
        return Record(parent=self, key=key, label=f"{self.label}[{key!r}]")

    def _unsupported(self, *args, **kwargs):
        raise RLGraphAPIError(
            f"Record '{self.label}' was used in a computation inside an API method. API methods only wire "
            f"components together; put numerical code into a @graph_fn and call that instead."
        )

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _unsupported
    __pow__ = __neg__ = __abs__ = __lt__ = __le__ = __gt__ = __ge__ = __matmul__ = _unsupported

    def __bool__(self):
        raise RLGraphAPIError(
            f"Record '{self.label}' has no truth value while the graph is assembled: branch inside a @graph_fn, "
            f"or on Python constants, not on records."
        )

    def __iter__(self):
        raise RLGraphAPIError(
            f"Record '{self.label}' cannot be unpacked in an API method (its size is unknown while assembling). "
            f"Return several values from the graph function instead, or index it: record[key]."
        )

    def __len__(self):
        self.__iter__()

    def __repr__(self):
        s = f" {self.space!r}" if self.known else ""
        return f"Record({self.label or self.id}{s})"

    __hash__ = object.__hash__

    def __eq__(self, other):
        return self is other


def contains_records(value):
    """Whether ``value`` is a record or a dict/tuple/list holding one."""
    if isinstance(value, Record):
        return True
    if isinstance(value, dict):
        return any(contains_records(v) for v in value.values())
    if isinstance(value, (tuple, list)):
        return any(contains_records(v) for v in value)
    return False


def to_record(value):
    """Turns a nested dict/tuple of records into one structure record; returns records unchanged."""
    if isinstance(value, Record):
        return value
    if isinstance(value, list):
        value = tuple(value)
    if isinstance(value, dict):
        children = {k: to_record(v) if contains_records(v) else v for k, v in value.items()}
    else:
        children = tuple(to_record(v) if contains_records(v) else v for v in value)
    for c in (children.values() if isinstance(children, dict) else children):
        if not isinstance(c, Record):
            raise RLGraphAPIError(f"A container passed between components mixes records and constants ({c!r}); "
                                  f"pass constants as separate arguments.")
    return Record(children=children, label="struct")


def flatten_records(value):
    """All records in a nested structure (records, dicts, tuples, lists), in order."""
    if isinstance(value, Record):
        return [value]
    if isinstance(value, dict):
        return [r for v in value.values() for r in flatten_records(v)]
    if isinstance(value, (tuple, list)):
        return [r for v in value for r in flatten_records(v)]
    return []
