"""Action adapters: linear heads from network outputs to the parameters of action distributions."""
from rlgraph.components.action_adapters.action_adapter import ActionAdapter, check_primitive_action_space

__all__ = ["ActionAdapter", "check_primitive_action_space"]
