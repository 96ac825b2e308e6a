"""Prioritized replay of whole fixed-length sequences with their stored initial recurrent state (R2D2)."""
from rlgraph.components.memories.numpy_memory import flat_specs
from rlgraph.components.memories.prioritized_replay import PrioritizedReplay
from rlgraph.spaces import BoolBox, Dict
from rlgraph.utils.decorators import HOST, graph_fn
from rlgraph.utils.errors import RLGraphSpaceError
from rlgraph.utils.validation import Int, Optional, Str, check_args, spec_error


class SequenceReplay(PrioritizedReplay):
    """Prioritized replay of whole fixed-length sequences with their initial recurrent state (Kapturowski et al.
    2019, R2D2; Schaul et al. 2016).

    The memory cuts nothing: sequences are cut before they arrive, by ``rlgraph.trajectories.SequenceBuilder``
    (length ``sequence_length = burn_in_length + train_length``, stride ``stride = L - overlap``; agents read
    these attributes to configure the builder). ``insert_records(records)`` takes a batch of B sequences as
    the builder emits them, without its "env_ids": a Dict with a batch rank (and no time rank) whose per-step
    keys have shape ``(L, ...)`` (zero-padded after an episode end), key ``mask_key`` (BoolBox of shape
    ``(L,)``: False on padding) and key ``state_key`` (any space: the recurrent state the actor had before the
    sequence's first row).

    New sequences get the largest priority seen so far; the learner sets priorities with ``update_records``
    (R2D2 uses ``eta * max_t |delta_t| + (1 - eta) * mean_t |delta_t|`` with eta = 0.9).

    API:
        insert_records(records): Stores a batch of sequences (ring buffer of ``capacity`` sequences).
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
            steps, 40 overlapping). Only read by the sequence builder (``stride``).
        alpha: Priority exponent (R2D2: 0.9).
        beta: Importance-sampling exponent (R2D2: 0.6).
        state_key: Record key of the initial recurrent state.
        mask_key: Record key of the validity mask.
        seed: Seed of the sampling generator.
    """

    default_scope = "sequence-replay"
    #: What the constructor's arguments must be (``rlgraph.utils.validation``).
    ARG_RULES = dict(burn_in_length=Int(min=0), train_length=Int(min=1), overlap=Optional(Int(min=0)),
                     state_key=Str(exclude="/", what="a non-empty record key without '/'"),
                     mask_key=Str(exclude="/", what="a non-empty record key without '/'"))

    def __init__(self, capacity=1000, burn_in_length=40, train_length=40, overlap=None, alpha=0.9, beta=0.6,
                 state_key="internal_states", mask_key="mask", seed=None, scope=None, **kwargs):
        owner = type(self).__name__
        if "terminal_key" in kwargs:
            raise spec_error(owner, "terminal_key", "is gone: the memory stores whole sequences, cut by "
                             "rlgraph.trajectories.SequenceBuilder before insert_records.")
        super().__init__(capacity=capacity, alpha=alpha, beta=beta, seed=seed, scope=scope, **kwargs)
        args = check_args(owner, SequenceReplay.ARG_RULES, dict(
            burn_in_length=burn_in_length, train_length=train_length, overlap=overlap, state_key=state_key,
            mask_key=mask_key))
        self.burn_in_length, self.train_length = args["burn_in_length"], args["train_length"]
        self.sequence_length = self.burn_in_length + self.train_length
        self.overlap = self.sequence_length // 2 if args["overlap"] is None else args["overlap"]
        if self.overlap >= self.sequence_length:
            raise spec_error(owner, "overlap", f"must be < the sequence length {self.sequence_length} "
                             f"(burn_in_length + train_length), got {self.overlap}.")
        self.stride = self.sequence_length - self.overlap
        if state_key == mask_key:
            raise spec_error(owner, "mask_key", f"must differ from state_key, got {state_key!r} for both.")
        self.state_key, self.mask_key = state_key, mask_key

    def check_input_spaces(self, input_spaces, action_space=None):
        super().check_input_spaces(input_spaces, action_space)
        space = input_spaces["records"]
        where = "API method 'insert_records', argument 'records'"
        L = self.sequence_length
        if not isinstance(space, Dict):
            raise RLGraphSpaceError(f"{where}: expected a Dict space of sequences (SequenceBuilder's output), got "
                                    f"{space!r}.")
        keys = list(space.keys())
        for key in (self.state_key, self.mask_key):
            if key not in keys:
                raise RLGraphSpaceError(f"{where}: the Dict needs key '{key}'; it has {keys}.")
        if len(keys) < 3:
            raise RLGraphSpaceError(f"{where}: the Dict needs per-step keys besides '{self.state_key}' and "
                                    f"'{self.mask_key}'; it has {keys}.")
        flat = space.flatten()
        if any(s.has_time_rank for s in flat.values()):
            raise RLGraphSpaceError(f"{where}: expected sequences as a batch of shape (L, ...) values without a "
                                    f"time rank (L = {L}), got {space!r}.")
        mask = space[self.mask_key]
        if not isinstance(mask, BoolBox) or mask.shape != (L,):
            raise RLGraphSpaceError(f"{where}: key '{self.mask_key}' must be a BoolBox of shape ({L},) (L = "
                                    f"burn_in_length + train_length), got {mask!r}.")
        for key, sub in flat.items():
            top = key.split("/")[0]
            if top in (self.state_key, self.mask_key):
                continue
            if len(sub.shape) == 0 or sub.shape[0] != L:
                hint = " (leave out the builder's 'env_ids')" if top == "env_ids" else ""
                raise RLGraphSpaceError(f"{where}: per-step key '{key}' must have shape ({L}, ...) (L = "
                                        f"burn_in_length {self.burn_in_length} + train_length {self.train_length}), "
                                        f"got shape {sub.shape}{hint}.")

    def _create_storage(self, input_spaces):
        super()._create_storage(input_spaces)
        plain = self.record_space.strip_ranks()
        self.step_space = Dict({k: v for k, v in plain.items() if k not in (self.state_key, self.mask_key)})
        self.state_space = plain[self.state_key]
        self._step_keys = [k for k, _, _ in flat_specs(self.step_space)]
        self._state_keys = {rel: (f"{self.state_key}/{rel}" if rel else self.state_key)
                            for rel, _, _ in flat_specs(self.state_space)}

    def _pack(self, outputs):
        *flat, indices, weights = outputs
        values = dict(zip(self._keys, flat))
        sequences = self.step_space.unflatten({k: values[k] for k in self._step_keys})
        sequences[self.mask_key] = values[self.mask_key]
        states = self.state_space.unflatten({rel: values[full] for rel, full in self._state_keys.items()})
        return sequences, states, indices, weights

    # --- graph functions (the API methods are PrioritizedReplay's) --------------------------------------------
    @graph_fn(returns=4)
    def _graph_fn_get_records(self, num_records):
        return self.sample_in_graph(num_records)

    @graph_fn(backend=HOST, returns=4)
    def _graph_fn_get_records(self, num_records):
        return self.sample_on_host(num_records)
