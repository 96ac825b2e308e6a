"""Exploration: epsilon-greedy for discrete actions, with schedules or Ape-X per-actor epsilons."""
from rlgraph.components.explorations.epsilon_exploration import EpsilonExploration
from rlgraph.components.explorations.exploration import Exploration, apex_epsilon

__all__ = ["EpsilonExploration", "Exploration", "apex_epsilon"]
