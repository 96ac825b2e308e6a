"""Environments: gymnasium adapters, in-process vector envs, Atari, a deterministic test chain and pixel Catch.

Only spaces and utils of rlgraph are imported here (plus gymnasium; ale-py lazily, for Atari).
"""
from rlgraph.environments.atari import AtariEnv
from rlgraph.environments.atari_vector_env import AtariVectorEnv
from rlgraph.environments.catch import CatchEnv
from rlgraph.environments.catch_vector_env import CatchVectorEnv
from rlgraph.environments.deterministic_env import ChainEnv
from rlgraph.environments.deterministic_vector_env import ChainVectorEnv
from rlgraph.environments.environment import Environment
from rlgraph.environments.gym_env import GymEnv
from rlgraph.environments.vector_env import VectorEnv

__all__ = ["Environment", "GymEnv", "VectorEnv", "AtariEnv", "AtariVectorEnv", "ChainEnv", "ChainVectorEnv",
           "CatchEnv", "CatchVectorEnv"]
