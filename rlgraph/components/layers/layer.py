"""Base class of neural-network layers."""
from rlgraph.components.component import Component
from rlgraph.utils.decorators import rlgraph_api


class Layer(Component):
    """A layer: API method ``call(inputs)`` applies the graph function ``_graph_fn_call``."""

    @rlgraph_api
    def call(self, inputs):
        return self._graph_fn_call(inputs)
