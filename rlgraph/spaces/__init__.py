"""Spaces: shapes, dtypes, bounds and batch/time ranks of the values flowing through rlgraph.

No deep-learning backend is imported here.
"""
from rlgraph.spaces.bool_box import BoolBox
from rlgraph.spaces.box_space import BoxSpace
from rlgraph.spaces.container_space import ContainerSpace
from rlgraph.spaces.dict_space import Dict
from rlgraph.spaces.float_box import FloatBox
from rlgraph.spaces.int_box import IntBox
from rlgraph.spaces.space import Space
from rlgraph.spaces.text_box import TextBox
from rlgraph.spaces.tuple_space import Tuple

__all__ = ["Space", "BoxSpace", "FloatBox", "IntBox", "BoolBox", "TextBox", "ContainerSpace", "Dict", "Tuple"]
