"""Memories: replay buffers and queues."""
from rlgraph.components.memories.fifo_queue import FIFOQueue
from rlgraph.components.memories.memory import Memory
from rlgraph.components.memories.numpy_memory import NumpyMemory
from rlgraph.components.memories.prioritized_replay import PrioritizedReplay
from rlgraph.components.memories.replay_memory import ReplayMemory
from rlgraph.components.memories.sequence_replay import SequenceReplay

__all__ = ["FIFOQueue", "Memory", "NumpyMemory", "PrioritizedReplay", "ReplayMemory", "SequenceReplay"]
