"""Backend-free trajectory builders keyed by environment id: n-step transitions, unrolls, R2D2 sequences.

Rows may come for any subset of environment ids, in any order, from several actors; ids may start and stop
at any time. The builders import only numpy and optree, so engines' actors and servers can use them without
a deep-learning backend.
"""
from rlgraph.trajectories.n_step_builder import NStepBuilder
from rlgraph.trajectories.sequence_builder import SequenceBuilder
from rlgraph.trajectories.unroll_builder import UnrollBuilder

__all__ = ["NStepBuilder", "SequenceBuilder", "UnrollBuilder"]
