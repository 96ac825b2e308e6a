"""A uniform replay memory with ring-buffer semantics."""
from rlgraph.components.memories.memory import Memory
from rlgraph.backends.pytorch_backend import torch_random
from rlgraph.backends.tf_backend import tf_random
from rlgraph.utils.backend import tf, torch
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

    # --- TensorFlow ------------------------------------------------------------------------------------
    @graph_fn(backend="tf")
    def _graph_fn_insert_records(self, records):
        flat = self.record_space.flatten_value(records)
        n = tf.shape(next(iter(flat.values())), out_type=tf.int64)[0]
        m = tf.minimum(n, self.capacity)  # Of a batch larger than the memory, only the last records stay.
        positions = (self.index + (n - m) + tf.range(m, dtype=tf.int64)) % self.capacity
        for key, var in self.storage.items():
            var.scatter_nd_update(positions[:, None], flat[key][n - m:])
        self.index.assign((self.index + n) % self.capacity)
        self.size.assign(tf.minimum(self.size + n, self.capacity))

    @graph_fn(backend="tf")
    def _graph_fn_get_records(self, num_records):
        n = tf.cast(num_records, tf.int64)
        size = self.size.read_value()
        check = tf.debugging.assert_less_equal(
            n, size, message="ReplayMemory: asked for more records than the memory holds")
        with tf.control_dependencies([check]):
            indices = tf_random.uniform(tf.reshape(n, [1]), maxval=tf.maximum(size, 1), dtype=tf.int64)
        return self.record_space.unflatten({k: tf.gather(v, indices) for k, v in self.storage.items()})

    @graph_fn(backend="tf")
    def _graph_fn_get_size(self):
        return self.size.read_value()

    # --- PyTorch -----------------------------------------------------------------------------------------
    @graph_fn(backend="pytorch")
    def _graph_fn_insert_records(self, records):
        flat = self.record_space.flatten_value(records)
        n = int(next(iter(flat.values())).shape[0])
        m = min(n, self.capacity)
        index = int(self.index)
        positions = (index + (n - m) + torch.arange(m)) % self.capacity
        for key, var in self.storage.items():
            var[positions] = flat[key][n - m:].to(var.dtype)
        self.index.fill_((index + n) % self.capacity)
        self.size.fill_(min(int(self.size) + n, self.capacity))

    @graph_fn(backend="pytorch")
    def _graph_fn_get_records(self, num_records):
        n, size = int(num_records), int(self.size)
        self.check_at_run_time(n <= size, lambda: f"ReplayMemory: asked for {n} records, but the memory holds {size}.")
        indices = torch_random.randint(0, max(size, 1), (n,))
        return self.record_space.unflatten({k: v[indices] for k, v in self.storage.items()})

    @graph_fn(backend="pytorch")
    def _graph_fn_get_size(self):
        return self.size.clone()
