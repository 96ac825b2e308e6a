"""A layer that concatenates its inputs along one axis."""
from rlgraph.components.layers.layer import Layer
from rlgraph.spaces import BoxSpace, TextBox
from rlgraph.utils.decorators import graph_fn, rlgraph_api
from rlgraph.utils.errors import RLGraphAPIError, RLGraphSpaceError
from rlgraph.utils.validation import Int, check_args


class ConcatLayer(Layer):
    """``call(*inputs)`` concatenates its inputs (one or more) along ``axis``.

    All inputs must have the same dtype, the same batch/time ranks and the same item shape except along
    ``axis``.

    Args:
        axis: The axis within one item (not counting batch/time ranks): non-negative counts from the item's
            first axis, negative from its last (default -1, the last axis).
    """

    __aliases__ = ("concat",)

    default_scope = "concat"
    #: What the constructor's arguments must be (``rlgraph.utils.validation``).
    ARG_RULES = dict(axis=Int())

    def __init__(self, axis=-1, scope=None, **kwargs):
        super().__init__(scope=scope, **kwargs)
        self.axis = check_args("ConcatLayer", ConcatLayer.ARG_RULES, dict(axis=axis))["axis"]
        self._backend_axis = None

    def check_input_spaces(self, input_spaces, action_space=None):
        spaces = [input_spaces[k] for k in sorted(input_spaces, key=lambda k: int(k[len("inputs["):-1]))]
        where = "ConcatLayer, API method 'call'"
        for i, s in enumerate(spaces):
            if not isinstance(s, BoxSpace) or isinstance(s, TextBox) or s.rank < 1:
                raise RLGraphSpaceError(f"{where}, argument 'inputs[{i}]': expected a numeric box of rank >= 1 "
                                        f"(flatten scalars first), got {s!r}.")
        first = spaces[0]
        rank = first.rank
        if not -rank <= self.axis < rank:
            raise RLGraphSpaceError(f"{where}: axis {self.axis} is out of range for items of rank {rank} ({first!r}).")
        axis = self.axis % rank
        for i, s in enumerate(spaces[1:], start=1):
            other = s.shape[:axis] + s.shape[axis + 1:]
            mine = first.shape[:axis] + first.shape[axis + 1:]
            if (s.rank != rank or other != mine or s.dtype != first.dtype
                    or (s.has_batch_rank, s.has_time_rank, s.time_major) !=
                    (first.has_batch_rank, first.has_time_rank, first.time_major)):
                raise RLGraphSpaceError(f"{where}, argument 'inputs[{i}]': {s!r} cannot be concatenated with "
                                        f"inputs[0] {first!r} along item axis {self.axis} (dtypes, batch/time "
                                        f"ranks and all other dims must agree).")

    def create_variables(self, input_spaces, action_space=None):
        # A negative axis counts from the end of the whole value, which has the same meaning with any leading
        # ranks; a non-negative one is shifted past the leading ranks in the graph function.
        self._backend_axis = self.axis - input_spaces["inputs[0]"].rank if self.axis >= 0 else self.axis

    @rlgraph_api
    def call(self, *inputs):
        if not inputs:
            raise RLGraphAPIError(f"'{self.global_scope}': call() needs at least one input.")
        return self._graph_fn_call(*inputs)

    @graph_fn
    def _graph_fn_call(self, *inputs):
        return self.ops.concat(inputs, axis=self._backend_axis)
