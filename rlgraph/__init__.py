"""rlgraph: deep reinforcement learning as graphs of reusable components, on TensorFlow or PyTorch."""
import logging
import os

# Keep TensorFlow's C++ start-up chatter out of the user's console unless they asked for it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from rlgraph.utils.decorators import graph_fn, rlgraph_api

__version__ = "0.1.0"

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = ["graph_fn", "rlgraph_api", "__version__"]
