"""Stacks the most recent inputs (frame stacking)."""
from rlgraph.components.preprocessing.preprocessor import Preprocessor
from rlgraph.spaces import BoxSpace
from rlgraph.utils.decorators import graph_fn
from rlgraph.utils.errors import RLGraphSpaceError
from rlgraph.utils.validation import Int, check_args


class Sequence(Preprocessor):
    """Outputs the last ``sequence_length`` inputs, oldest first (frame stacking, Mnih et al. 2015).

    The first input after construction or ``reset()`` fills the whole sequence: inputs x0, x1, x2 give
    ``[x0, x0, x0, x0]``, ``[x0, x0, x0, x1]``, ``[x0, x0, x1, x2]`` for ``sequence_length=4``. The frames are
    stacked along a new last axis (``add_rank``: ``[..., *item, N]``) or concatenated along the item's last
    axis (``[..., *item[:-1], item[-1] * N]``, e.g. ``[84, 84, 1]`` frames -> ``[84, 84, 4]``).

    The state lives in variables: a ring buffer ``[sequence_length, batch_size, *item]`` (no ``batch_size``
    dim for inputs without a batch rank), the next slot to write and whether the buffer is filled. Inputs with
    a batch rank must have exactly ``batch_size`` rows (one per environment); ``reset()`` restarts all rows.

    Args:
        sequence_length: How many inputs to stack.
        batch_size: The batch size of the inputs (if they have a batch rank).
        add_rank: Stack along a new last axis (else concatenate along the last axis).
    """

    __aliases__ = ("sequence", "frame-stack")

    default_scope = "sequence"

    stateful = True
    #: What the constructor's arguments must be (``rlgraph.utils.validation``).
    ARG_RULES = dict(sequence_length=Int(min=1), batch_size=Int(min=1))

    def __init__(self, sequence_length=4, batch_size=1, add_rank=True, scope=None, **kwargs):
        super().__init__(scope=scope, **kwargs)
        args = check_args("Sequence", Sequence.ARG_RULES,
                          dict(sequence_length=sequence_length, batch_size=batch_size))
        self.sequence_length = args["sequence_length"]
        self.batch_size = args["batch_size"]
        self.add_rank = add_rank
        self.buffer = self.index = self.filled = None
        self._batched = None

    def check_input_spaces(self, input_spaces, action_space=None):
        space = input_spaces["inputs"]
        if not isinstance(space, BoxSpace) or space.has_time_rank or (not self.add_rank and space.rank == 0):
            raise RLGraphSpaceError(f"Sequence, API method 'preprocess', argument 'inputs': expected a box without "
                                    f"time rank{'' if self.add_rank else ' and of rank >= 1 (add_rank=False)'}, got "
                                    f"{space!r}.")
        self.check_numeric_leaves(space, allow_bool=True)

    def create_variables(self, input_spaces, action_space=None):
        space = input_spaces["inputs"]
        self._batched = space.has_batch_rank
        lead = (self.sequence_length,) + ((self.batch_size,) if self._batched else ())
        self.buffer = self.get_variable("buffer", shape=lead + tuple(space.shape), dtype=space.dtype, trainable=False)
        self.index = self.get_variable("index", dtype="int64", trainable=False)
        self.filled = self.get_variable("filled", dtype="bool", trainable=False)

    # The build runs graph functions on sample inputs of batch sizes 7 and 11, not ``batch_size``. Those runs
    # (``in_build_run``) return the stacked input without touching the state, on both backends: PyTorch would
    # fail on the batch-size check, TensorFlow's symbolic trace on the static batch-size mismatch of the
    # buffer update (the executor traces the real function after the build).

    @graph_fn
    def _graph_fn_preprocess(self, inputs):
        ops = self.ops
        n = self.sequence_length
        if self.in_build_run:
            return self._stack([inputs] * n)
        index = ops.read_value(self.index)
        if self._batched:  # The buffer and index updates are computed from the checked values.
            message = f"Sequence '{self.global_scope}': the batch size of the inputs must be {self.batch_size}"
            inputs, index = ops.check(ops.shape(inputs)[0] == self.batch_size, message, (inputs, index))
        # The first input after a reset fills all n slots, every later one the slot at ``index``.
        count = ops.where(self.filled, 1, n)
        slots = (index + ops.arange(count, "int64", like=index)) % n
        ops.scatter_update(self.buffer, slots, ops.broadcast_to(ops.expand_dims(inputs, 0),
                                                                (count,) + tuple(ops.shape(inputs))))
        start = (index + 1) % n
        ops.assign(self.index, start)
        ops.assign(self.filled, True)
        order = ops.unstack((start + ops.arange(n, "int64", like=start)) % n)  # Oldest first.
        return self._stack([self.buffer[slot] for slot in order])

    def _stack(self, frames):
        return self.ops.stack(frames, axis=-1) if self.add_rank else self.ops.concat(frames, axis=-1)

    @graph_fn
    def _graph_fn_reset(self):
        self.ops.assign(self.index, 0)
        self.ops.assign(self.filled, False)
