"""A uniform replay memory with ring-buffer semantics."""
from rlgraph.components.memories.memory import Memory
from rlgraph.utils.decorators import graph_fn, rlgraph_api


class ReplayMemory(Memory):
    """Keeps the last ``capacity`` records and samples them uniformly (with replacement).

    On TensorFlow the storage lives in variables updated inside the graph; on PyTorch in tensors.

    API:
        insert_records(records): Appends a batch, overwriting the oldest records when full.
        get_records(num_records): ``num_records`` records drawn uniformly from those held; raises
            ``RLGraphRuntimeError`` if fewer than ``num_records`` are held.
        get_size(): The number of records held.
    """

    default_scope = "replay-memory"

    def __init__(self, capacity=1000, scope=None, **kwargs):
        super().__init__(capacity=capacity, scope=scope, **kwargs)
        self.index = self.size = None

    def create_variables(self, input_spaces, action_space=None):
        super().create_variables(input_spaces, action_space)
        self.index = self.get_variable("index", dtype="int64", trainable=False)
        self.size = self.get_variable("size", dtype="int64", trainable=False)

    @rlgraph_api
    def get_records(self, num_records=1):
        return self._graph_fn_get_records(num_records)

    @rlgraph_api
    def get_size(self):
        return self._graph_fn_get_size()

    @graph_fn
    def _graph_fn_insert_records(self, records):
        ops = self.ops
        flat = self.record_space.flatten_value(records)
        n = ops.asarray(ops.shape(next(iter(flat.values())))[0], "int64", like=self.index)
        m = ops.minimum(n, self.capacity)  # Of a batch larger than the memory, only the last records stay.
        positions = (self.index + (n - m) + ops.arange(m, "int64", like=self.index)) % self.capacity
        for key, var in self.storage.items():
            ops.scatter_update(var, positions, flat[key][n - m:])
        ops.assign(self.index, (self.index + n) % self.capacity)
        ops.assign(self.size, ops.minimum(self.size + n, self.capacity))

    @graph_fn
    def _graph_fn_get_records(self, num_records):
        ops = self.ops
        n = ops.asarray(num_records, "int64")
        size = ops.read_value(self.size)
        if not self.in_build_run:  # The draw waits for the check.
            n = ops.check(n <= size, "ReplayMemory: asked for more records than the memory holds", n)
        indices = ops.random_integers((n,), 0, ops.maximum(size, 1), dtype="int64")
        return self.record_space.unflatten({k: ops.gather(v, indices) for k, v in self.storage.items()})

    @graph_fn
    def _graph_fn_get_size(self):
        return self.ops.read_value(self.size)
