"""Prioritized experience replay as a component (Schaul et al. 2016)."""
import numpy as np

from rlgraph.components.memories.numpy_memory import NumpyMemory, flat_specs
from rlgraph.components.memories.prioritized_replay_buffer import PrioritizedReplayBuffer
from rlgraph.utils.decorators import HOST, graph_fn, rlgraph_api
from rlgraph.utils.validation import Number, check_args


class PrioritizedReplay(NumpyMemory):
    """Proportional prioritized replay (Schaul et al. 2016, Prioritized Experience Replay).

    Records are sampled with probability P(i) = p_i^alpha / sum_k p_k^alpha (stratified: one draw in each of
    ``num_records`` equal segments of the priority mass) and weighted by importance-sampling weights
    w_i = (N P(i))^-beta / max_j w_j. Storage and sum/min trees are the numpy ``PrioritizedReplayBuffer``
    (O(log N) per record); see ``NumpyMemory`` for how the backends reach it.

    API:
        insert_records(records): Appends a batch (ring buffer: the oldest records are overwritten when full);
            new records get the largest priority seen so far (initially 1).
        get_records(num_records): ``(records, indices, importance_weights)``; indices int64, weights float32.
            Raises ``RLGraphRuntimeError`` if the memory holds fewer than ``num_records`` records.
        insert_records_with_priorities(records, priorities): Appends a batch with the given raw priorities.
        update_records(indices, priorities): Sets the raw priorities (e.g. |TD error| + eps) of the records at
            ``indices``; negative, NaN or infinite priorities and unknown indices raise ``RLGraphRuntimeError``
            (nothing is changed then).
        get_size(): The number of records held.

    Args:
        capacity: The maximum number of records.
        alpha: Priority exponent (0 = uniform sampling).
        beta: Importance-sampling exponent (0 = no correction, 1 = full correction).
        seed: Seed of the sampling generator (default: from the executor's seed and the scope), so that
            TF and PyTorch draw the same samples.
    """

    default_scope = "prioritized-replay"
    #: What the constructor's arguments must be (``rlgraph.utils.validation``).
    ARG_RULES = dict(alpha=Number(min=0.0), beta=Number(min=0.0))

    def __init__(self, capacity=1000, alpha=0.6, beta=0.4, seed=None, scope=None, **kwargs):
        super().__init__(capacity=capacity, seed=seed, scope=scope, **kwargs)
        args = check_args(type(self).__name__, PrioritizedReplay.ARG_RULES, dict(alpha=alpha, beta=beta))
        self.alpha, self.beta = args["alpha"], args["beta"]
        self.buffer = None
        self._get_specs = None

    def index_bytes(self):
        """The sum and min segment trees: two float64 arrays of twice the capacity rounded up to a power of 2."""
        return 2 * 2 * 8 * (1 << max(0, int(self.capacity) - 1).bit_length())

    def _create_storage(self, input_spaces):
        self.record_space = input_spaces["records"].strip_ranks().with_batch_rank()
        specs = flat_specs(self.record_space)
        self.buffer = PrioritizedReplayBuffer(self.capacity, alpha=self.alpha, beta=self.beta,
                                              record_spec={k: (shape, dtype) for k, dtype, shape in specs},
                                              rng=self.make_rng())
        self._keys = [k for k, _, _ in specs]
        self._get_specs = [(dtype, (None,) + shape) for _, dtype, shape in specs] + \
                          [(np.int64, (None,)), (np.float32, (None,))]

    def get_state(self):
        if self.buffer is None:
            return None
        with self.lock:
            return self.buffer.get_state()

    def set_state(self, state):
        if state is not None:
            with self.lock:
                self.buffer.set_state(state)

    # --- numpy side -----------------------------------------------------------------------------------------
    def _insert_numpy(self, flat_records):
        with self.lock:
            self.buffer.insert(flat_records)

    def _get_numpy(self, num_records):
        with self.lock:
            records, indices, weights = self.buffer.sample(int(num_records))
        return [records[k] for k in self._keys] + [indices, weights]

    def _update_numpy(self, indices, priorities):
        with self.lock:
            self.buffer.update(indices, priorities)
        return []

    def _size_numpy(self):
        return self.buffer.size

    def _pack(self, outputs):
        *flat, indices, weights = outputs
        return self.record_space.unflatten(dict(zip(self._keys, flat))), indices, weights

    def _insert_with_priorities_numpy(self, flat_records, priorities):
        with self.lock:
            self.buffer.insert(flat_records, priorities)
        return []

    # --- API -------------------------------------------------------------------------------------------------
    @rlgraph_api(must_be_complete=False)
    def insert_records_with_priorities(self, records, priorities):
        """Inserts records with given raw priorities (Ape-X: actors compute initial priorities)."""
        return self._graph_fn_insert_records_with_priorities(records, priorities)

    @graph_fn
    def _graph_fn_insert_records_with_priorities(self, records, priorities):
        keys = list(self.record_space.flatten())
        flat = self.record_space.flatten_value(records)

        def insert(*arrays):
            return self._insert_with_priorities_numpy(dict(zip(keys, arrays[:-1])), arrays[-1])
        self.numpy_call(insert, [flat[k] for k in keys] + [priorities], [], "insert_records_with_priorities")

    @graph_fn(backend=HOST)
    def _graph_fn_insert_records_with_priorities(self, records, priorities):
        flat = self.record_space.flatten_value(records)
        self.host_numpy_call(self._insert_with_priorities_numpy, {k: np.asarray(v) for k, v in flat.items()},
                             np.asarray(priorities), api_method="insert_records_with_priorities")

    # Inserts run on the host where a root API method is only the insert (``GraphExecutor``); the backends'
    # implementation is NumpyMemory's.
    @graph_fn(backend=HOST)
    def _graph_fn_insert_records(self, records):
        flat = self.record_space.flatten_value(records)
        self.host_numpy_call(self._insert_numpy, {k: np.asarray(v) for k, v in flat.items()},
                             api_method="insert_records")

    @rlgraph_api
    def get_records(self, num_records=1):
        return self._graph_fn_get_records(num_records)

    @rlgraph_api(must_be_complete=False)  # Its indices come from get_records: no say in the storage.
    def update_records(self, indices, priorities):
        return self._graph_fn_update_records(indices, priorities)

    @graph_fn(returns=3)
    def _graph_fn_get_records(self, num_records):
        return self.sample_in_graph(num_records)

    def sample_in_graph(self, num_records):
        """``get_records``' outputs in a graph function: the numpy side's sample, packed (``_pack``)."""
        return self._pack(self.numpy_call(self._get_numpy, [num_records], self._get_specs, "get_records",
                                          num_records=num_records))

    @graph_fn(backend=HOST, returns=3)
    def _graph_fn_get_records(self, num_records):
        return self.sample_on_host(num_records)

    def sample_on_host(self, num_records):
        """``get_records``' outputs on the host: the numpy side's sample in the dtypes the backends give, packed."""
        outputs = self.host_numpy_call(self._get_numpy, int(num_records), api_method="get_records")
        return self._pack(self.host_outputs(outputs, self._get_specs))

    @graph_fn
    def _graph_fn_update_records(self, indices, priorities):
        self.numpy_call(self._update_numpy, [indices, priorities], [], "update_records")
