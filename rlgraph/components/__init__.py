"""Components: the building blocks of rlgraph graphs."""
from rlgraph.components.component import Component
from rlgraph.components.common import ContainerMerger, ContainerSplitter
from rlgraph.components.layers import DenseLayer, Layer
from rlgraph.components.memories import Memory, ReplayMemory
from rlgraph.components.neural_networks import NeuralNetwork

__all__ = ["Component", "ContainerMerger", "ContainerSplitter", "DenseLayer", "Layer", "Memory", "NeuralNetwork",
           "ReplayMemory"]
