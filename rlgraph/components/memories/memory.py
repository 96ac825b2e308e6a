"""Base class of memories: storage for records, kept in backend variables."""
from rlgraph.components.component import Component, bytes_text
from rlgraph.spaces import Space
from rlgraph.utils.decorators import rlgraph_api
from rlgraph.utils.errors import RLGraphSpaceError
from rlgraph.utils.validation import Int, check


class Memory(Component):
    """Stores records of the space that ``insert_records`` receives, ``capacity`` of them at most.

    The storage is one variable per primitive of the record space, of shape ``[capacity, *shape]``.

    Args:
        capacity: The maximum number of records held.
    """

    default_scope = "memory"
    #: What the constructor's arguments must be (``rlgraph.utils.validation``).
    ARG_RULES = dict(capacity=Int(min=1))

    def __init__(self, capacity=1000, scope=None, **kwargs):
        super().__init__(scope=scope, **kwargs)
        self.capacity = check(type(self).__name__, "capacity", capacity, Memory.ARG_RULES["capacity"])
        self.record_space = None
        self.storage = None

    def check_input_spaces(self, input_spaces, action_space=None):
        space = input_spaces.get("records")
        if not isinstance(space, Space) or not all(s.has_batch_rank for s in space.flatten().values()):
            raise RLGraphSpaceError(f"API method 'insert_records', argument 'records': expected a space with a "
                                    f"batch rank, got {space!r}.")

    def check_capacity(self, record_space):
        """Refuses, before anything is allocated, a ``capacity`` whose storage (``capacity`` records of
        ``record_space``, plus ``index_bytes()``) could never fit into this machine's memory, naming the config
        key (``memory_spec.capacity``) and the bytes."""
        import numpy as np
        per_record = sum(int(np.prod(s.shape, dtype=np.int64)) * np.dtype(s.dtype).itemsize
                         for s in record_space.strip_ranks().flatten().values())
        index = self.index_bytes()
        self.check_size(self.capacity * per_record + index,
                        f"{self.capacity:,} records of {per_record:,} bytes each"
                        + (f" plus {bytes_text(index)} of priority trees" if index else ""), "capacity")

    def index_bytes(self):
        """The bytes of the structures kept beside the records (none here; e.g. a prioritized replay's trees)."""
        return 0

    def create_variables(self, input_spaces, action_space=None):
        self.check_capacity(input_spaces["records"])
        self.record_space = input_spaces["records"].strip_ranks().with_batch_rank()
        self.storage = self.get_variable("storage", from_space=self.record_space, add_batch_rank=self.capacity)

    @rlgraph_api
    def insert_records(self, records):
        return self._graph_fn_insert_records(records)
