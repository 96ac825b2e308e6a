"""Workers: drive agents against environments in one process (reused by the distributed engines)."""
from rlgraph.workers.pipelined_worker import PipelinedWorker
from rlgraph.workers.vector_worker import VectorWorker

__all__ = ["PipelinedWorker", "VectorWorker"]
