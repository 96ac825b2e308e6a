"""Training runs on top of workers and execution engines."""
from rlgraph.training.trainer import Trainer

__all__ = ["Trainer"]
