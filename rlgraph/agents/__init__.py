"""Agents: algorithms built from components, behind a numpy API."""
from rlgraph.agents.agent import Agent
from rlgraph.agents.apex_agent import ApexAgent
from rlgraph.agents.dqn_agent import DQNAgent

__all__ = ["Agent", "ApexAgent", "DQNAgent"]
