"""Optimizers: gradient computation, global-norm clipping and update rules on both backends."""
from rlgraph.components.optimizers.adam_optimizer import AdamOptimizer
from rlgraph.components.optimizers.optimizer import Optimizer
from rlgraph.components.optimizers.rmsprop_optimizer import RMSPropOptimizer
from rlgraph.components.optimizers.sgd_optimizer import SGDOptimizer

__all__ = ["AdamOptimizer", "Optimizer", "RMSPropOptimizer", "SGDOptimizer"]
