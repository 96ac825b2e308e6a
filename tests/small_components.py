"""Shared components of the JAX executor tests: a small regression with an optimizer, written once over ``self.ops``."""
from rlgraph import graph_fn, rlgraph_api
from rlgraph.components import Component, NeuralNetwork

LAYERS = ({"type": "dense", "units": 8, "activation": "tanh"}, {"type": "dense", "units": 1})


class Regression(Component):
    """A small MLP, an MSE loss written once over ``self.ops``, and an optimizer; ``predict`` changes nothing."""

    def __init__(self, optimizer, layers=LAYERS):
        super().__init__(scope="regression")
        self.network = NeuralNetwork(*layers)
        self.optimizer = optimizer
        self.add_components(self.network, self.optimizer)

    @rlgraph_api
    def update(self, x, y, time_percentage):
        loss = self._graph_fn_loss(self.network.call(x), y)
        return self.optimizer.step(self.network.variables(), loss, time_percentage)

    @rlgraph_api
    def apply(self, x, y, time_percentage):
        variables = self.network.variables()
        gradients = self.optimizer.calculate_gradients(variables, self._graph_fn_loss(self.network.call(x), y))
        return self.optimizer.apply_gradients(variables, gradients, time_percentage)

    @rlgraph_api
    def predict(self, x):
        return self.network.call(x)

    @graph_fn
    def _graph_fn_loss(self, predictions, y):
        return self.ops.mean(self.ops.square(predictions[:, 0] - y))
