"""RL maths: returns, advantages, V-trace, value rescaling and sequence helpers."""
from rlgraph.components.helpers.discounted_returns import DiscountedReturns
from rlgraph.components.helpers.generalized_advantage_estimation import GeneralizedAdvantageEstimation
from rlgraph.components.helpers.n_step_returns import NStepReturns
from rlgraph.components.helpers.sequence_helper import SequenceHelper
from rlgraph.components.helpers.v_trace_function import VTraceFunction
from rlgraph.components.helpers.value_function_rescaling import ValueFunctionRescaling

__all__ = ["DiscountedReturns", "GeneralizedAdvantageEstimation", "NStepReturns", "SequenceHelper",
           "VTraceFunction", "ValueFunctionRescaling"]
