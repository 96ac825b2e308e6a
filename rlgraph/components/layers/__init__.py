"""Neural-network layers."""
from rlgraph.components.layers.activation_layer import ActivationLayer
from rlgraph.components.layers.concat_layer import ConcatLayer
from rlgraph.components.layers.conv2d_layer import Conv2DLayer
from rlgraph.components.layers.dense_layer import DenseLayer
from rlgraph.components.layers.layer import Layer
from rlgraph.components.layers.lstm_layer import LSTMLayer
from rlgraph.components.layers.reshape_layer import ReshapeLayer

__all__ = ["Layer", "ActivationLayer", "ConcatLayer", "Conv2DLayer", "DenseLayer", "LSTMLayer", "ReshapeLayer"]
