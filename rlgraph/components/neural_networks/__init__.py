"""Neural networks built from layers."""
from rlgraph.components.neural_networks.multi_input_stream_network import MultiInputStreamNetwork
from rlgraph.components.neural_networks.neural_network import NeuralNetwork

__all__ = ["MultiInputStreamNetwork", "NeuralNetwork"]
