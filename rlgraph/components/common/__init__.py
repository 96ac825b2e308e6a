"""Generic helper components."""
from rlgraph.components.common.container_merger import ContainerMerger
from rlgraph.components.common.container_splitter import ContainerSplitter
from rlgraph.components.common.synchronizable import Synchronizable
from rlgraph.components.common.time_dependent_parameters import (Constant, Exponential, Linear, Polynomial,
                                                                  TimeDependentParameter)

__all__ = ["Constant", "ContainerMerger", "ContainerSplitter", "Exponential", "Linear", "Polynomial",
           "Synchronizable", "TimeDependentParameter"]
