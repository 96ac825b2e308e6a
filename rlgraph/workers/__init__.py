"""Workers: drive agents against environments in one process (reused by the distributed engines); the actor's
step sequence that they, the engines' actors and servers and ``Agent.observe`` share (``ActorLoop``)."""
from rlgraph.workers.actor_loop import ActorLoop
from rlgraph.workers.pipelined_worker import PipelinedWorker
from rlgraph.workers.vector_worker import VectorWorker

__all__ = ["ActorLoop", "PipelinedWorker", "VectorWorker"]
