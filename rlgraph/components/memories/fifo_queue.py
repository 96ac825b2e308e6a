"""A blocking, thread-safe first-in-first-out queue of records (for IMPALA/APPO learners)."""
import heapq
import logging
import threading
import time

import numpy as np

from rlgraph.components.memories.numpy_memory import NumpyMemory, flat_specs
from rlgraph.utils.backend import tf
from rlgraph.utils.decorators import graph_fn, rlgraph_api
from rlgraph.utils.errors import RLGraphError
from rlgraph.utils.validation import Number, Optional, check_args

logger = logging.getLogger(__name__)


class FIFOQueue(NumpyMemory):
    """A bounded FIFO queue: actors put batches of records (e.g. rollouts), a learner takes them in order
    (as the IMPALA learner queue, Espeholt et al. 2018).

    The records live in preallocated numpy ring arrays guarded by a ``threading.Condition``, so
    ``insert_records`` and ``get_records`` may be called from different threads (several actor threads,
    one learner). Both wait until they can complete, at most ``timeout`` seconds, then raise
    ``RLGraphRuntimeError`` instead of waiting forever. A batch is put and taken as a whole (atomically).

    Waiting: on PyTorch, calls block in the caller's thread. On TensorFlow, a ``numpy_function`` that blocked
    would hold one of TF's few inter-op threads, and a few blocked producers would starve the learner's
    ``get_records`` (a deadlock until the timeout). So TF calls never block inside ``numpy_function``: an
    attempt that cannot complete registers a wake-up slot (a native TF queue of its own) and the graph
    dequeues from it, an asynchronous op that holds no thread; every change of the queue, and a watchdog
    thread at the earliest deadline, puts a token into each registered slot, and the woken calls try again.

    API:
        insert_records(records): Appends a batch of records; waits while the queue lacks room for all of them.
            A batch larger than ``capacity`` can never fit and raises at once.
        get_records(num_records): Removes and returns the ``num_records`` oldest records (in insertion
            order); waits until that many are held. More than ``capacity`` raises at once.
        get_size(): The number of records held.

    Args:
        capacity: The maximum number of records held.
        timeout: Seconds a put or get may wait (None: wait forever).
    """

    default_scope = "fifo-queue"
    #: TF: how many calls can wait on their own wake-up queue at once (more wait in 5 ms blocking slices).
    MAX_TF_WAITERS = 16
    #: What the constructor's arguments must be (``rlgraph.utils.validation``).
    ARG_RULES = dict(timeout=Optional(Number(min=0.0)))

    def __init__(self, capacity=1000, timeout=60.0, scope=None, **kwargs):
        super().__init__(capacity=capacity, scope=scope, **kwargs)
        self.timeout = check_args(type(self).__name__, FIFOQueue.ARG_RULES, dict(timeout=timeout))["timeout"]
        self.condition = None
        self._storage = None
        self._head = self._size = 0
        # TF waiting (see the class docstring).
        self._wake_queues = None
        self._free_slots = []
        self._registered = []
        self._deadlines = []
        self._watchdog = None

    def _create_storage(self, input_spaces):
        self.record_space = input_spaces["records"].strip_ranks().with_batch_rank()
        specs = flat_specs(self.record_space)
        self._keys = [k for k, _, _ in specs]
        self._storage = {k: np.zeros((self.capacity,) + shape, dtype) for k, dtype, shape in specs}
        self._get_specs = [(dtype, (None,) + shape) for _, dtype, shape in specs]
        self._head = self._size = 0
        self.condition = threading.Condition(self.lock)
        self._registered, self._deadlines = [], []
        if self.backend.name == "tf":
            name = self.global_scope.replace("/", ".")
            self._wake_queues = [tf.queue.FIFOQueue(2 ** 20, [tf.int32], shapes=[[]], name=f"{name}.wake-up-{i}")
                                 for i in range(self.MAX_TF_WAITERS)]
            self._free_slots = list(range(self.MAX_TF_WAITERS))

    def get_state(self):
        if self._storage is None:
            return None
        with self.lock:
            return {"storage": {k: v.copy() for k, v in self._storage.items()}, "head": self._head,
                    "size": self._size}

    def set_state(self, state):
        if state is None:
            return
        with self.condition:
            for k, v in state["storage"].items():
                self._storage[k][...] = v
            self._head, self._size = int(state["head"]), int(state["size"])
            self.condition.notify_all()

    # --- numpy side (callers hold self.condition) -------------------------------------------------------------
    def _check_put(self, n):
        if n > self.capacity:
            raise RLGraphError(f"a batch of {n} records never fits into a queue of capacity {self.capacity}.")

    def _check_take(self, n):
        if n < 0 or n > self.capacity:
            raise RLGraphError(f"num_records must lie in [0, {self.capacity}] (the capacity), got {n}.")

    def _put(self, arrays):
        positions = (self._head + self._size + np.arange(len(arrays[0]))) % self.capacity
        for k, array in zip(self._keys, arrays):
            self._storage[k][positions] = array
        self._size += len(arrays[0])
        self.condition.notify_all()

    def _take(self, n):
        positions = (self._head + np.arange(n)) % self.capacity
        out = [self._storage[k].take(positions, axis=0) for k in self._keys]
        self._head = (self._head + n) % self.capacity
        self._size -= n
        self.condition.notify_all()
        return out

    def _timeout_error(self, what):
        return RLGraphError(f"timed out after {self.timeout} s {what} (the queue holds {self._size} of "
                            f"{self.capacity} records).")

    def _size_numpy(self):
        return self._size

    # PyTorch: blocking calls in the caller's thread.
    def _insert_numpy(self, flat_records):
        arrays = [np.asarray(flat_records[k]) for k in self._keys]
        n = _batch_size(arrays)
        self._check_put(n)
        with self.condition:
            if not self.condition.wait_for(lambda: self.capacity - self._size >= n, self.timeout):
                raise self._timeout_error(f"waiting for room for {n} records")
            self._put(arrays)

    def _get_numpy(self, num_records):
        n = int(num_records)
        self._check_take(n)
        with self.condition:
            if not self.condition.wait_for(lambda: self._size >= n, self.timeout):
                raise self._timeout_error(f"waiting for {n} records")
            return self._take(n)

    # --- TF waiting ------------------------------------------------------------------------------------------
    def _tf_attempt(self, ready, act, what, deadline, slot):
        """One non-blocking attempt (runs in ``numpy_function``): ``(done, deadline, slot, outputs)``.

        A call that cannot complete registers its wake-up slot (a native TF queue of its own) and waits for a
        token there; every change of the queue, and the watchdog at the earliest deadline, puts one token
        into each registered slot. A caller that finds no free slot waits briefly in here instead.
        """
        now = time.monotonic()
        if deadline < 0:
            deadline = np.inf if self.timeout is None else now + self.timeout
        with self.condition:
            try:
                if ready():
                    outputs = act()
                    self._wake_all()
                    self._release(slot)
                    return True, deadline, -1, outputs
                if now >= deadline:
                    raise self._timeout_error(what)
            except RLGraphError:
                self._release(slot)
                raise
            if slot < 0 and self._free_slots:
                slot = self._free_slots.pop()
            if slot < 0:
                self.condition.wait(min(0.005, deadline - now))  # No slot free: a short blocking wait.
                return False, deadline, -1, None
            self._registered.append(slot)
            if np.isfinite(deadline):
                heapq.heappush(self._deadlines, deadline)
                self._ensure_watchdog()
            return False, deadline, slot, None

    def _release(self, slot):
        if slot >= 0:
            self._free_slots.append(slot)

    def _wake_all(self):
        """Puts one token into the slot of each registered waiter (lock held; eager enqueues never block)."""
        registered, self._registered, self._deadlines = self._registered, [], []
        for slot in registered:
            self._wake_queues[slot].enqueue(0)

    def _ensure_watchdog(self):
        """Starts (once) the daemon thread that wakes all waiters at the earliest deadline; lock held."""
        if self._watchdog is None or not self._watchdog.is_alive():
            self._watchdog = threading.Thread(target=self._watch, name=f"{self.global_scope}-watchdog", daemon=True)
            self._watchdog.start()
        else:
            self.condition.notify_all()  # A new, possibly earlier, deadline.

    def _watch(self):
        with self.condition:
            while True:
                if not self._deadlines:
                    if not self.condition.wait(timeout=10.0) and not self._deadlines:
                        self._watchdog = None
                        return
                    continue
                delay = self._deadlines[0] - time.monotonic()
                if delay > 0:
                    self.condition.wait(timeout=delay)
                else:
                    self._wake_all()

    def _tf_wait_loop(self, ready, act, what, inputs, out_specs, api_method):
        """Runs ``act`` once ``ready()`` holds, waiting on wake-up tokens in between; used by TF graph fns."""
        specs = [(np.dtype(d), tuple(s)) for d, s in out_specs]
        prefix = self.where(api_method)

        def zeros():
            return [np.zeros(tuple(0 if d is None else d for d in shape), dtype) for dtype, shape in specs]

        def attempt(deadline, slot, *arrays):
            error = b""
            try:
                done, deadline, slot, outputs = self._tf_attempt(
                    lambda: ready(*arrays), lambda: act(*arrays), what(*arrays), float(deadline), int(slot))
            except RLGraphError as e:
                done, slot, outputs, error = True, -1, None, f"{prefix}: {e}".encode("utf-8", "replace")
            outputs = zeros() if outputs is None else [np.asarray(o, d) for o, (d, _) in zip(outputs, specs)]
            return [np.bool_(done), np.float64(deadline), np.int32(slot)] + outputs + \
                [np.asarray(error, dtype=object)]

        def body(done, deadline, slot, *outputs_and_error):
            results = tf.numpy_function(attempt, [deadline, slot] + list(inputs),
                                        [tf.bool, tf.float64, tf.int32] + [tf.as_dtype(d) for d, _ in specs] +
                                        [tf.string], stateful=True, name=f"FIFOQueue_{api_method}")
            for r, shape in zip(results, [(), (), ()] + [s for _, s in specs] + [()]):
                r.set_shape(shape)
            done, deadline, slot = results[:3]
            waited = tf.cond(tf.logical_or(done, slot < 0), lambda: tf.constant(0),
                             lambda: tf.queue.QueueBase.from_list(slot, self._wake_queues).dequeue())
            with tf.control_dependencies([waited]):
                return [tf.identity(r) for r in results]

        initial = [tf.constant(False), tf.constant(-1.0, tf.float64), tf.constant(-1, tf.int32)] + \
            [tf.zeros(tuple(0 if d is None else d for d in shape), tf.as_dtype(dtype)) for dtype, shape in specs] + \
            [tf.constant("")]
        invariants = [tf.TensorShape([])] * 3 + [tf.TensorShape(shape) for _, shape in specs] + [tf.TensorShape([])]
        _, _, _, *outputs, error = tf.while_loop(lambda done, *_: tf.logical_not(done), body, initial,
                                                 shape_invariants=invariants, parallel_iterations=1)
        check = tf.debugging.Assert(tf.equal(tf.strings.length(error), 0), [error])
        with tf.control_dependencies([check]):
            return [tf.ensure_shape(tf.identity(o), shape) for o, (_, shape) in zip(outputs, specs)]

    # --- API -------------------------------------------------------------------------------------------------
    @rlgraph_api
    def get_records(self, num_records=1):
        return self._graph_fn_get_records(num_records)

    @graph_fn(backend="tf")
    def _graph_fn_insert_records(self, records):
        flat = self.record_space.flatten_value(records)

        def ready(*arrays):
            self._check_put(_batch_size(arrays))
            return self.capacity - self._size >= _batch_size(arrays)

        self._tf_wait_loop(ready, lambda *arrays: self._put(arrays) or [],
                           lambda *arrays: f"waiting for room for {_batch_size(arrays)} records",
                           [flat[k] for k in self._keys], [], "insert_records")

    # PyTorch's _graph_fn_insert_records is NumpyMemory's.

    # Per backend (queues): TF waits on its native wake-up queues between non-blocking attempts (a blocking
    # numpy_function would hold an inter-op thread), PyTorch blocks in the caller's thread.
    @graph_fn(backend="tf")
    def _graph_fn_get_records(self, num_records):
        def ready(n):
            self._check_take(int(n))
            return self._size >= int(n)

        outputs = self._tf_wait_loop(ready, lambda n: self._take(int(n)), lambda n: f"waiting for {int(n)} records",
                                     [num_records], self._get_specs, "get_records")
        return self.record_space.unflatten(dict(zip(self._keys, outputs)))

    @graph_fn(backend="pytorch")
    def _graph_fn_get_records(self, num_records):
        outputs = self.numpy_call(self._get_numpy, [num_records], self._get_specs, "get_records",
                                  num_records=num_records)
        return self.record_space.unflatten(dict(zip(self._keys, outputs)))

    @graph_fn(backend="jax")
    def _graph_fn_get_records(self, num_records):
        # As PyTorch's, blocking in the host call; a jit program has static shapes: ``num_records`` is a constant
        # of the program (an int argument), so the outputs have that many rows.
        specs = self._get_specs
        if isinstance(num_records, (int, np.integer)):
            specs = [(dtype, (int(num_records),) + tuple(shape[1:])) for dtype, shape in specs]
        outputs = self.numpy_call(self._get_numpy, [num_records], specs, "get_records", num_records=num_records)
        return self.record_space.unflatten(dict(zip(self._keys, outputs)))


def _batch_size(arrays):
    sizes = [np.shape(a)[0] if np.ndim(a) else None for a in arrays]
    if None in sizes or len(set(sizes)) != 1:
        raise RLGraphError(f"all record arrays need the same leading batch size, got {sizes}.")
    return sizes[0]
