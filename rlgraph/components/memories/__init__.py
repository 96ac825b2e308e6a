"""Memories: replay buffers and queues."""
from rlgraph.components.memories.memory import Memory
from rlgraph.components.memories.replay_memory import ReplayMemory

__all__ = ["Memory", "ReplayMemory"]
