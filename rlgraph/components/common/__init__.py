"""Generic helper components."""
from rlgraph.components.common.container_merger import ContainerMerger
from rlgraph.components.common.container_splitter import ContainerSplitter

__all__ = ["ContainerMerger", "ContainerSplitter"]
