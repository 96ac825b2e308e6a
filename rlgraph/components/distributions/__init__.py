"""Probability distributions over actions: ``Categorical`` (logits) and ``Normal`` (diagonal Gaussian)."""
from rlgraph.components.distributions.categorical import Categorical
from rlgraph.components.distributions.distribution import Distribution
from rlgraph.components.distributions.normal import Normal

__all__ = ["Categorical", "Distribution", "Normal"]
