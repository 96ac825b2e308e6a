"""Neural-network layers."""
from rlgraph.components.layers.dense_layer import DenseLayer
from rlgraph.components.layers.layer import Layer

__all__ = ["Layer", "DenseLayer"]
