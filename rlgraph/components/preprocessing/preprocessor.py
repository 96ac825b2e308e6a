"""Base class of preprocessors."""
from rlgraph.components.component import Component
from rlgraph.spaces import BoolBox, BoxSpace, TextBox
from rlgraph.utils.decorators import graph_fn, rlgraph_api
from rlgraph.utils.errors import RLGraphSpaceError


class Preprocessor(Component):
    """Transforms states before an agent uses them (scaling, gray-scaling, resizing, frame stacking, ...).

    API:
        preprocess(inputs): The transformed inputs (graph function ``_graph_fn_preprocess``).
        reset(): Clears the state kept between calls (graph function ``_graph_fn_reset``); a no-op for
            stateless preprocessors.

    Subclasses that keep state between calls set ``stateful = True`` and implement ``_graph_fn_reset``.
    """

    #: Whether ``preprocess`` keeps state between calls (which ``reset`` clears).
    stateful = False

    @rlgraph_api
    def preprocess(self, inputs):
        return self._graph_fn_preprocess(inputs)

    @rlgraph_api
    def reset(self):
        return self._graph_fn_reset()

    @graph_fn
    def _graph_fn_reset(self):
        """Stateless preprocessors have nothing to reset."""

    def check_numeric_leaves(self, space, allow_bool=False):
        """Raises ``RLGraphSpaceError`` unless every primitive of ``space`` is a numeric box.

        Args:
            space: The space of the ``inputs`` argument of ``preprocess``.
            allow_bool: Whether BoolBox parts are accepted.
        """
        for key, leaf in space.flatten().items():
            if not isinstance(leaf, BoxSpace) or isinstance(leaf, TextBox) or (
                    isinstance(leaf, BoolBox) and not allow_bool):
                where = f" (key '{key}')" if key else ""
                raise RLGraphSpaceError(f"{type(self).__name__}, API method 'preprocess', argument 'inputs'{where}: "
                                        f"expected a numeric box, got {leaf!r}.")
