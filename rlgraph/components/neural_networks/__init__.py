"""Neural networks built from layers."""
from rlgraph.components.neural_networks.neural_network import NeuralNetwork

__all__ = ["NeuralNetwork"]
