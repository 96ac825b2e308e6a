"""Merges several inputs into one Dict (or Tuple)."""
from rlgraph.components.component import Component
from rlgraph.utils.decorators import rlgraph_api
from rlgraph.utils.errors import RLGraphAPIError
from rlgraph.utils.validation import spec_error


class ContainerMerger(Component):
    """``merge(*inputs)`` returns ``{key_i: inputs[i]}``, or a tuple with ``merge_tuples=True``.

    Args:
        *input_names: The keys of the merged dict, one per input (or their number, for tuples).
        merge_tuples: Produce a tuple instead of a dict.
    """

    default_scope = "container-merger"

    def __init__(self, *input_names, merge_tuples=False, scope=None, **kwargs):
        super().__init__(scope=scope, **kwargs)
        if merge_tuples and len(input_names) == 1 and isinstance(input_names[0], int):
            input_names = tuple(range(input_names[0]))
        if not input_names:
            raise spec_error("ContainerMerger", "input_names", "needs the names of its inputs.")
        if not merge_tuples and any(not isinstance(n, str) or "/" in n for n in input_names):
            raise spec_error("ContainerMerger", "input_names", f"dict keys must be strings without '/', got "
                             f"{input_names}.")
        self.input_names = list(input_names)
        self.merge_tuples = merge_tuples

    @rlgraph_api
    def merge(self, *inputs):
        if len(inputs) != len(self.input_names):
            raise RLGraphAPIError(f"'{self.global_scope}': merge() expects {len(self.input_names)} inputs "
                                  f"({self.input_names}), got {len(inputs)}.")
        if self.merge_tuples:
            return tuple(inputs)
        return dict(zip(self.input_names, inputs))
