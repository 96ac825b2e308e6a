"""Distributed learners: synchronous data-parallel learner processes that keep one set of weights.

``rlgraph train CONFIG --engine distributed --num-learners N`` (see ``DistributedEngine``).
"""
from rlgraph.engines.distributed.distributed_engine import DistributedEngine

__all__ = ["DistributedEngine"]
