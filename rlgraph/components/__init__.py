"""Components: the building blocks of rlgraph graphs.

Importing this package registers every component class, so that specs can name any of them by type.
"""
from rlgraph.components.component import Component
from rlgraph.components.action_adapters import ActionAdapter
from rlgraph.components.common import (Constant, ContainerMerger, ContainerSplitter, Exponential, Linear, Polynomial,
                                       Synchronizable, TimeDependentParameter)
from rlgraph.components.distributions import Categorical, Distribution, Normal
from rlgraph.components.explorations import EpsilonExploration, Exploration, apex_epsilon
from rlgraph.components.helpers import (DiscountedReturns, GeneralizedAdvantageEstimation, NStepReturns,
                                        SequenceHelper, ValueFunctionRescaling, VTraceFunction)
from rlgraph.components.layers import (ActivationLayer, ConcatLayer, Conv2DLayer, DenseLayer, Layer, LSTMLayer,
                                       ReshapeLayer)
from rlgraph.components.loss_functions import (APPOLossFunction, DQNLossFunction, IMPALALossFunction, LossFunction,
                                               R2D2LossFunction)
from rlgraph.components.memories import (FIFOQueue, Memory, NumpyMemory, PrioritizedReplay, ReplayMemory,
                                         SequenceReplay)
from rlgraph.components.neural_networks import MultiInputStreamNetwork, NeuralNetwork
from rlgraph.components.optimizers import AdamOptimizer, Optimizer, RMSPropOptimizer, SGDOptimizer
from rlgraph.components.policies import DuelingPolicy, Policy
from rlgraph.components.preprocessing import (Clip, ConvertType, Divide, GrayScale, ImageResize, Multiply,
                                              Preprocessor, PreprocessorStack, Sequence, Transpose)

__all__ = [
    "APPOLossFunction", "ActionAdapter", "ActivationLayer", "AdamOptimizer", "Categorical", "Clip", "ConcatLayer",
    "Component", "Constant", "ContainerMerger", "ContainerSplitter", "Conv2DLayer", "ConvertType", "DQNLossFunction",
    "DenseLayer", "DiscountedReturns", "Distribution", "Divide", "DuelingPolicy", "EpsilonExploration",
    "Exploration", "Exponential", "FIFOQueue", "GeneralizedAdvantageEstimation", "GrayScale", "IMPALALossFunction",
    "ImageResize", "LSTMLayer", "Layer", "Linear", "LossFunction", "Memory", "MultiInputStreamNetwork", "Multiply",
    "NStepReturns", "NeuralNetwork", "Normal", "NumpyMemory", "Optimizer", "Policy", "Polynomial", "Preprocessor",
    "PreprocessorStack", "PrioritizedReplay", "R2D2LossFunction", "RMSPropOptimizer", "ReplayMemory",
    "ReshapeLayer", "SGDOptimizer", "Sequence", "SequenceHelper", "SequenceReplay", "Synchronizable",
    "TimeDependentParameter", "Transpose", "VTraceFunction", "ValueFunctionRescaling", "apex_epsilon",
]
