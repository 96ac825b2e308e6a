"""Execution engines: place and coordinate actors and learners (the top layer, above agents and workers).

``rlgraph.engines.runner.train`` runs a config on any engine; ``ExecutionSpec`` is a config's
``execution_spec`` section. Engine packages (``rlgraph.engines.ray``) import their dependencies only when used.
"""
from rlgraph.engines.execution_spec import ExecutionSpec
from rlgraph.engines.runner import EXECUTORS, make_engine, train

__all__ = ["EXECUTORS", "ExecutionSpec", "make_engine", "train"]
