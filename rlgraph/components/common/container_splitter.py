"""Splits a Dict or Tuple input into its parts."""
from rlgraph.components.component import Component
from rlgraph.spaces import ContainerSpace
from rlgraph.utils.decorators import rlgraph_api
from rlgraph.utils.errors import RLGraphSpaceError
from rlgraph.utils.validation import spec_error


class ContainerSplitter(Component):
    """``split(inputs)`` returns the values at ``output_order`` (keys or "/"-paths; ints index tuples).

    Args:
        *output_order: The keys to output, in this order (at least one).
    """

    default_scope = "container-splitter"

    def __init__(self, *output_order, scope=None, **kwargs):
        super().__init__(scope=scope, **kwargs)
        if not output_order:
            raise spec_error("ContainerSplitter", "output_order", "needs at least one key to output.")
        self.output_order = list(output_order)

    def check_input_spaces(self, input_spaces, action_space=None):
        space = input_spaces["inputs"]
        if not isinstance(space, ContainerSpace):
            raise RLGraphSpaceError(f"API method 'split', argument 'inputs': expected a Dict or Tuple space, "
                                    f"got {space!r}.")
        for key in self.output_order:
            s = space
            for part in str(key).split("/"):
                try:
                    s = s[int(part) if part.isdigit() and not isinstance(s, dict) and not hasattr(s, "keys") else part]
                except (KeyError, IndexError, TypeError):
                    raise RLGraphSpaceError(f"API method 'split', argument 'inputs': key '{key}' is not in "
                                            f"{space!r}.") from None

    @rlgraph_api
    def split(self, inputs):
        outs = []
        for key in self.output_order:
            value = inputs
            for part in str(key).split("/"):
                value = value[int(part) if part.isdigit() and isinstance(value, tuple) else part]
            outs.append(value)
        return tuple(outs) if len(outs) > 1 else outs[0]
