"""Base class of memories whose storage lives in numpy arrays on the Python side, not in backend variables."""
import logging
import threading

import numpy as np

from rlgraph.components.memories.memory import Memory
from rlgraph.spaces import Space, TextBox
from rlgraph.utils.decorators import graph_fn, rlgraph_api
from rlgraph.utils.errors import RLGraphError, RLGraphRuntimeError, RLGraphSpaceError
from rlgraph.utils.initializers import variable_rng
from rlgraph.utils.placement import host_data_device
from rlgraph.utils.validation import Int, Optional, check_args

logger = logging.getLogger(__name__)


class NumpyMemory(Memory):
    """A memory kept in numpy (sum trees, queues, per-stream buffers) and reached from graph functions.

    Subclasses implement the storage in plain Python (``_insert_numpy``, ``_get_numpy``, ...); this class
    connects it to the backends:

    - PyTorch: graph functions call the numpy side directly (tensors <-> numpy without copies).
    - TensorFlow: graph functions call it through ``tf.numpy_function`` with output dtypes and static shapes
      taken from the record space. A failure on the numpy side travels out as a string output and is raised by
      ``tf.debugging.Assert``, which the TF executor turns into ``RLGraphRuntimeError`` carrying the message.
    - The PyTorch build runs every graph function on sample values. During those runs (``in_build_run``)
      the storage is left alone: ``numpy_call`` does not call the numpy side, so inserts and updates do
      nothing and reads return zero records of the right structure. ``get_state``/``set_state`` save and
      restore the numpy state all the same.

    All access to the storage holds ``self.lock``, so actors may insert from threads while a learner reads.
    The numpy side must not block on TF (a waiting ``numpy_function`` holds an inter-op thread); see
    ``FIFOQueue`` for how a memory that has to wait does it.

    API:
        insert_records(records): Stores a batch of records.
        get_size(): The number of items held (int64 scalar).

    Args:
        capacity: The maximum number of items held.
        seed: Seed of the memory's numpy generator (default: derived from the executor's seed and the
            component's scope).
    """

    default_scope = "numpy-memory"
    #: What the constructor's arguments must be (``rlgraph.utils.validation``).
    ARG_RULES = dict(seed=Optional(Int()))

    def __init__(self, capacity=1000, seed=None, scope=None, **kwargs):
        super().__init__(capacity=capacity, scope=scope, **kwargs)
        self.sampling_seed = check_args(type(self).__name__, NumpyMemory.ARG_RULES, dict(seed=seed))["seed"]
        self.lock = None

    def check_input_spaces(self, input_spaces, action_space=None):
        super().check_input_spaces(input_spaces, action_space)
        for key, space in input_spaces["records"].flatten().items():
            if isinstance(space, TextBox):
                raise RLGraphSpaceError(f"API method 'insert_records', argument 'records': {type(self).__name__} "
                                        f"stores numeric and bool records only, got a TextBox at key '{key}'.")

    def create_variables(self, input_spaces, action_space=None):
        self.check_capacity(input_spaces["records"])  # Before the storage is allocated.
        self.lock = threading.Lock()
        self._create_storage(input_spaces)

    def _create_storage(self, input_spaces):
        """Creates the numpy storage for the ``records`` space; sets ``self.record_space``."""
        raise NotImplementedError

    def make_rng(self):
        """A numpy generator from ``seed``, or from the executor's seed and this component's scope."""
        if self.sampling_seed is not None:
            return np.random.default_rng(int(self.sampling_seed))
        return variable_rng(self.seed, f"{self.global_scope}/sampling")

    def where(self, api_method):
        """Prefix of error messages (free of quotes: TF escapes them in assertion messages)."""
        return f"{type(self).__name__} {self.global_scope}, API method {api_method}"

    # --- numpy side (subclasses) -----------------------------------------------------------------------------
    def _insert_numpy(self, flat_records):
        """Stores records given as flat key -> array [n, ...]; raises ``RLGraphError`` on failure."""
        raise NotImplementedError

    def _size_numpy(self):
        """The number of items held (int)."""
        raise NotImplementedError

    # --- API -------------------------------------------------------------------------------------------------
    @rlgraph_api
    def get_size(self):
        return self._graph_fn_get_size()

    @graph_fn
    def _graph_fn_insert_records(self, records):
        keys = list(self.record_space.flatten())
        flat = self.record_space.flatten_value(records)

        def insert(*arrays):
            self._insert_numpy(dict(zip(keys, arrays)))
            return []
        self.numpy_call(insert, [flat[k] for k in keys], [], "insert_records")

    @graph_fn
    def _graph_fn_get_size(self):
        (size,) = self.numpy_call(lambda: [np.int64(self._size_numpy())], [], [(np.int64, ())], "get_size")
        return size

    # --- backend bridge (used only inside graph functions) -----------------------------------------------
    def numpy_call(self, fn, inputs, out_specs, api_method, num_records=0):
        """Runs the numpy side ``fn(*numpy_inputs) -> list of arrays`` from a graph function (``ops.host_call``:
        on TF through ``tf.numpy_function``, on PyTorch directly, without copies on the CPU).

        During the build's sample runs (``in_build_run``, which only PyTorch executes) ``fn`` is not called, so
        that the storage is left alone (and a read never waits for records, nor fails for want of them): the
        outputs are then zeros of ``out_specs`` with ``num_records`` rows (see ``zero_outputs``).

        Args:
            fn: The numpy-side function; it returns one array per entry of ``out_specs``.
            inputs: Tensors (or Python numbers) passed to ``fn`` as numpy arrays.
            out_specs: ``(numpy dtype, shape)`` per output; ``None`` dims stay open.
            api_method: Named in error messages.
            num_records: The number of rows of the build runs' zero outputs (a Python int there).

        Returns:
            The list of output tensors (TF: with static shapes set, depending on the check that raises the
            numpy side's error). An ``RLGraphError`` of the numpy side becomes an ``RLGraphRuntimeError`` naming
            the memory and ``api_method``.
        """
        prefix = self.where(api_method)

        def run(*arrays):
            if self.in_build_run:
                return self.zero_outputs(out_specs, int(num_records))
            try:
                return fn(*arrays)
            except RLGraphError as e:
                logger.debug("%s failed: %s", prefix, e)
                raise RLGraphError(f"{prefix}: {e}") from None

        if isinstance(num_records, (int, np.integer)) and not isinstance(num_records, bool) and num_records > 0:
            # A read of a known number of records: its outputs' leading dim is that number (static shapes, so that
            # a compiling backend (JAX) traces the read inside its program).
            out_specs = [(d, (int(num_records),) + tuple(s[1:]) if s and s[0] is None else tuple(s))
                         for d, s in out_specs]
        device = host_data_device(self.device)  # PyTorch: this component's device, or the one a tower runs on.
        return self.ops.host_call(run, inputs, out_specs, device=None if device is None else
                                  self.backend.normalize_device(device), name=f"{type(self).__name__}_{api_method}")

    def host_numpy_call(self, fn, *args, api_method):
        """Calls the numpy side from a host graph function (``graph_fn(backend=HOST)``); its ``RLGraphError``
        becomes ``RLGraphRuntimeError`` naming the memory and ``api_method``."""
        try:
            return fn(*args)
        except RLGraphError as e:
            raise RLGraphRuntimeError(f"{self.where(api_method)}: {e}") from None

    @staticmethod
    def host_outputs(outputs, out_specs):
        """The numpy side's outputs in the dtypes of ``out_specs`` (as ``numpy_call`` gives them to the backends),
        for a host graph function (``graph_fn(backend=HOST)``) returning what the backend functions return."""
        return [np.asarray(o, dtype) for o, (dtype, _) in zip(outputs, out_specs)]

    def zero_outputs(self, out_specs, n):
        """Numpy zeros for ``out_specs`` with ``n`` leading rows (what reads return during the build; scalars:
        zero)."""
        return [np.zeros((n,) + tuple(shape[1:]) if len(shape) else (), dtype) for dtype, shape in out_specs]


def flat_specs(space):
    """``[(flat key, numpy dtype, shape without batch/time ranks)]`` of a space's primitives."""
    if not isinstance(space, Space):
        raise RLGraphSpaceError(f"Expected a Space, got {space!r}.")
    return [(k, np.dtype(s.dtype), tuple(s.shape)) for k, s in space.flatten().items()]
