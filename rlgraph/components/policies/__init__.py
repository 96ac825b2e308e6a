"""Policies: networks with action adapters and distributions; the dueling Q-policy (Wang et al. 2016)."""
from rlgraph.components.policies.dueling_policy import DuelingPolicy
from rlgraph.components.policies.policy import Policy, build_network

__all__ = ["DuelingPolicy", "Policy", "build_network"]
