"""Backend-free trajectory builders keyed by environment id: n-step transitions, unrolls, R2D2 sequences.

One contract for all of them: ``add(env_ids, step)`` takes one step of the environments ``env_ids`` (a dict
of per-row values, as an actor's ``make_step`` returns it) and returns the items it completes, or None; each
builder names the step keys it needs. Rows may come for any subset of environment ids, in any order, from
several actors; ids may start and stop at any time. The builders import only numpy and optree, so engines'
actors and servers can use them without a deep-learning backend.
"""
from rlgraph.trajectories.n_step_builder import NStepBuilder
from rlgraph.trajectories.sequence_builder import SequenceBuilder
from rlgraph.trajectories.unroll_builder import UnrollBuilder

__all__ = ["NStepBuilder", "SequenceBuilder", "UnrollBuilder"]
