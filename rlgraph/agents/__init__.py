"""Agents: algorithms built from components, behind a numpy API."""
from rlgraph.agents.agent import Agent
from rlgraph.agents.apex_agent import ApexAgent
from rlgraph.agents.appo_agent import APPOAgent
from rlgraph.agents.dqn_agent import DQNAgent
from rlgraph.agents.impala_agent import IMPALAAgent
from rlgraph.agents.r2d2_agent import R2D2Agent

__all__ = ["APPOAgent", "Agent", "ApexAgent", "DQNAgent", "IMPALAAgent", "R2D2Agent"]
