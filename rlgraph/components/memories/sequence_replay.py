"""Prioritized replay of fixed-length, overlapping sequences with stored recurrent state (R2D2)."""
import numpy as np

from rlgraph.components.memories.numpy_memory import flat_specs, numpy_to_torch
from rlgraph.components.memories.prioritized_replay import PrioritizedReplay
from rlgraph.components.memories.prioritized_replay_buffer import PrioritizedReplayBuffer
from rlgraph.spaces import BoolBox, Dict
from rlgraph.utils.decorators import graph_fn
from rlgraph.utils.errors import RLGraphError, RLGraphSpaceError, RLGraphSpecError


def _positive_int(owner, name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise RLGraphSpecError(f"{owner}: {name} must be an int >= {minimum}, got {value!r}.")
    return int(value)


class SequenceReplay(PrioritizedReplay):
    """Stores per-step records as fixed-length, overlapping sequences with their initial recurrent state and
    samples whole sequences by priority (Kapturowski et al. 2019, R2D2; Schaul et al. 2016).

    Input: ``insert_records(records)`` takes a Dict of per-step values with a batch rank. The batch rank is
    the time axis of one stream of consecutive steps; if the space also has a time rank, the batch rank
    indexes ``B`` parallel streams (e.g. vector environments; ``[B, T, ...]``, or ``[T, B, ...]`` if
    time-major), each cut separately and the number of streams fixed by the first insert. Key
    ``terminal_key`` (a scalar BoolBox) marks the last step of an episode; key ``state_key`` (any space)
    holds the recurrent state the actor had *before* each step.

    How sequences are cut (length ``L = burn_in_length + train_length``, stride ``S = L - overlap``):
    steps are collected per stream and episode. Whenever the collected steps reach ``L``, steps
    ``[0, L)`` become a sequence and the first ``S`` steps are dropped, so window ``k`` of an episode
    covers its steps ``[k S, k S + L)``. Sequences never cross episode ends: when an episode ends, its
    remaining window (starting at the next multiple of ``S``) is stored if it holds steps that no stored
    sequence covers yet, zero-padded to ``L``; ``mask`` is False on padding steps (an episode shorter than
    ``L`` gives one padded sequence). Steps of an unfinished episode wait for the next insert.

    Stored per sequence: the ``L`` steps of every key except ``state_key``, the mask, and the value of
    ``state_key`` at the sequence's first step (the initial recurrent state). New sequences get the largest
    priority seen so far; the learner sets priorities with ``update_records`` (R2D2 uses
    ``eta * max_t |delta_t| + (1 - eta) * mean_t |delta_t|`` with eta = 0.9).

    API:
        insert_records(records): Cuts and stores sequences as above.
        get_records(num_records): ``(sequences, initial_states, indices, importance_weights)``: sequences is
            the Dict of per-step keys (without ``state_key``) plus ``mask_key``, each ``[B, L, ...]``;
            initial_states has the structure of ``state_key`` with shape ``[B, ...]``. Raises
            ``RLGraphRuntimeError`` if fewer than ``num_records`` sequences are held.
        update_records(indices, priorities): Sets sequence priorities (finite, >= 0).
        get_size(): The number of sequences held.

    Args:
        capacity: The maximum number of sequences.
        burn_in_length: Steps at the start of a sequence used only to warm up the recurrent state.
        train_length: Steps after the burn-in that are trained on.
        overlap: Steps shared by adjacent sequences of an episode, in [0, L); default ``L // 2`` (R2D2: 80
            steps, 40 overlapping).
        alpha: Priority exponent (R2D2: 0.9).
        beta: Importance-sampling exponent (R2D2: 0.6).
        state_key: Record key of the recurrent state.
        terminal_key: Record key of the episode-end flags.
        mask_key: Key of the validity mask added to the sampled sequences.
        seed: Seed of the sampling generator.
    """

    default_scope = "sequence-replay"

    def __init__(self, capacity=1000, burn_in_length=40, train_length=40, overlap=None, alpha=0.9, beta=0.6,
                 state_key="internal_states", terminal_key="terminals", mask_key="mask", seed=None, scope=None,
                 **kwargs):
        super().__init__(capacity=capacity, alpha=alpha, beta=beta, seed=seed, scope=scope, **kwargs)
        owner = type(self).__name__
        self.burn_in_length = _positive_int(owner, "burn_in_length", burn_in_length, 0)
        self.train_length = _positive_int(owner, "train_length", train_length, 1)
        self.sequence_length = self.burn_in_length + self.train_length
        overlap = self.sequence_length // 2 if overlap is None else overlap
        self.overlap = _positive_int(owner, "overlap", overlap, 0)
        if self.overlap >= self.sequence_length:
            raise RLGraphSpecError(f"{owner}: overlap must be < the sequence length {self.sequence_length}, "
                                   f"got {overlap}.")
        self.stride = self.sequence_length - self.overlap
        for name, key in (("state_key", state_key), ("terminal_key", terminal_key), ("mask_key", mask_key)):
            if not isinstance(key, str) or not key or "/" in key:
                raise RLGraphSpecError(f"{owner}: {name} must be a non-empty record key without '/', got {key!r}.")
        if len({state_key, terminal_key, mask_key}) != 3:
            raise RLGraphSpecError(f"{owner}: state_key, terminal_key and mask_key must differ.")
        self.state_key, self.terminal_key, self.mask_key = state_key, terminal_key, mask_key
        self._pending = None
        self._covered = None

    def check_input_spaces(self, input_spaces, action_space=None):
        super().check_input_spaces(input_spaces, action_space)
        space = input_spaces["records"]
        where = "API method 'insert_records', argument 'records'"
        if not isinstance(space, Dict):
            raise RLGraphSpaceError(f"{where}: expected a Dict space of per-step values, got {space!r}.")
        keys = list(space.keys())
        for key in (self.state_key, self.terminal_key):
            if key not in keys:
                raise RLGraphSpaceError(f"{where}: the Dict needs key '{key}'; it has {keys}.")
        if self.mask_key in keys:
            raise RLGraphSpaceError(f"{where}: key '{self.mask_key}' is added to the sampled sequences (mask_key); "
                                    f"rename the record key or pass another mask_key.")
        terminal = space[self.terminal_key]
        if not isinstance(terminal, BoolBox) or terminal.shape != ():
            raise RLGraphSpaceError(f"{where}: key '{self.terminal_key}' must be a scalar BoolBox (episode ends), "
                                    f"got {terminal!r}.")

    def _create_storage(self, input_spaces):
        space = input_spaces["records"]
        first = next(iter(space.flatten().values()))
        self.streams_layout = ("time-major" if first.time_major else "batch-major") if first.has_time_rank \
            else "single"
        plain = space.strip_ranks()
        self.record_space = plain.with_batch_rank()
        self.step_space = Dict({k: v for k, v in plain.items() if k != self.state_key})
        self.state_space = plain[self.state_key]
        L = self.sequence_length
        self._step_keys = [k for k, _, _ in flat_specs(self.step_space)]
        self._state_keys = {rel: (f"{self.state_key}/{rel}" if rel else self.state_key)
                            for rel, _, _ in flat_specs(self.state_space)}
        spec = {k: ((L,) + shape, dtype) for k, dtype, shape in flat_specs(self.step_space)}
        spec.update({full: (shape, dtype) for (rel, dtype, shape), full
                     in zip(flat_specs(self.state_space), self._state_keys.values())})
        spec[self.mask_key] = ((L,), np.dtype(bool))
        self.buffer = PrioritizedReplayBuffer(self.capacity, alpha=self.alpha, beta=self.beta, record_spec=spec,
                                              rng=self.make_rng())
        self._keys = self._step_keys + [self.mask_key] + list(self._state_keys.values())
        self._get_specs = [(spec[k][1], (None,) + spec[k][0]) for k in self._keys] + \
                          [(np.int64, (None,)), (np.float32, (None,))]
        self._record_keys = list(self.record_space.flatten())
        self._record_specs = {k: (dtype, shape) for k, dtype, shape in flat_specs(self.record_space)}
        self._pending = self._covered = None

    def get_state(self):
        state = super().get_state()
        if state is None:
            return None
        with self.lock:
            pending = None if self._pending is None else [{k: v.copy() for k, v in p.items()} for p in self._pending]
            return {"buffer": state, "pending": pending, "covered": None if self._covered is None
                    else list(self._covered)}

    def set_state(self, state):
        if state is None:
            return
        super().set_state(state["buffer"])
        with self.lock:
            self._pending = None if state["pending"] is None else \
                [{k: v.copy() for k, v in p.items()} for p in state["pending"]]
            self._covered = None if state["covered"] is None else list(state["covered"])

    # --- numpy side -----------------------------------------------------------------------------------------
    def _insert_numpy(self, flat_records):
        if self.streams_layout == "single":
            streams = {k: np.asarray(v)[None] for k, v in flat_records.items()}
        elif self.streams_layout == "time-major":
            streams = {k: np.swapaxes(np.asarray(v), 0, 1) for k, v in flat_records.items()}
        else:
            streams = {k: np.asarray(v) for k, v in flat_records.items()}
        num_streams = streams[self.terminal_key].shape[0]
        with self.lock:
            if self._pending is None:
                self._pending = [self._empty_steps() for _ in range(num_streams)]
                self._covered = [0] * num_streams
            elif num_streams != len(self._pending):
                raise RLGraphError(f"records hold {num_streams} streams, but earlier inserts had "
                                   f"{len(self._pending)}; the number of streams is fixed by the first insert.")
            sequences = []
            for b in range(num_streams):
                chunk = {k: v[b] for k, v in streams.items()}
                start = 0
                for end in np.flatnonzero(chunk[self.terminal_key]):
                    self._extend(b, {k: v[start:end + 1] for k, v in chunk.items()}, True, sequences)
                    start = end + 1
                if start < chunk[self.terminal_key].shape[0]:
                    self._extend(b, {k: v[start:] for k, v in chunk.items()}, False, sequences)
            if sequences:
                self.buffer.insert({k: np.stack([s[k] for s in sequences]) for k in self._keys})

    def _empty_steps(self):
        return {k: np.zeros((0,) + shape, dtype) for k, (dtype, shape) in self._record_specs.items()}

    def _extend(self, stream, steps, episode_ends, out):
        """Appends steps of one episode to a stream's pending steps and cuts the sequences they complete."""
        L, S = self.sequence_length, self.stride
        pending = {k: np.concatenate([self._pending[stream][k], steps[k]]) for k in self._record_keys}
        covered = self._covered[stream]
        n = pending[self.terminal_key].shape[0]
        while n >= L:
            out.append(self._sequence(pending, L))
            pending = {k: v[S:] for k, v in pending.items()}
            n -= S
            covered = L - S
        if episode_ends:
            if n > covered:
                out.append(self._sequence(pending, n))
            pending, covered = self._empty_steps(), 0
        self._pending[stream], self._covered[stream] = pending, covered

    def _sequence(self, pending, n):
        L = self.sequence_length
        sequence = {}
        for k in self._step_keys:
            if n == L:
                sequence[k] = pending[k][:L]
            else:
                padded = np.zeros((L,) + pending[k].shape[1:], pending[k].dtype)
                padded[:n] = pending[k][:n]
                sequence[k] = padded
        for full in self._state_keys.values():
            sequence[full] = pending[full][0]
        sequence[self.mask_key] = np.arange(L) < n
        return sequence

    def _pack(self, outputs):
        *flat, indices, weights = outputs
        values = dict(zip(self._keys, flat))
        sequences = self.step_space.unflatten({k: values[k] for k in self._step_keys})
        sequences[self.mask_key] = values[self.mask_key]
        states = self.state_space.unflatten({rel: values[full] for rel, full in self._state_keys.items()})
        return sequences, states, indices, weights

    # --- graph functions (the API methods are PrioritizedReplay's) --------------------------------------------
    @graph_fn(backend="tf", returns=4)
    def _graph_fn_get_records(self, num_records):
        return self._pack(self.tf_numpy_call(self._get_numpy, [num_records], self._get_specs, "get_records"))

    @graph_fn(backend="pytorch", returns=4)
    def _graph_fn_get_records(self, num_records):
        n = int(num_records)
        if self.in_build_run:
            outputs = self.zero_outputs(self._get_specs, n)
        else:
            outputs = self.torch_numpy_call(self._get_numpy, n, api_method="get_records")
        return self._pack([numpy_to_torch(o) for o in outputs])
