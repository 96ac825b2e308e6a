"""Preprocessors: transformations of states before an agent uses them."""
from rlgraph.components.preprocessing.clip import Clip
from rlgraph.components.preprocessing.convert_type import ConvertType
from rlgraph.components.preprocessing.divide import Divide
from rlgraph.components.preprocessing.grayscale import GrayScale
from rlgraph.components.preprocessing.image_resize import ImageResize
from rlgraph.components.preprocessing.multiply import Multiply
from rlgraph.components.preprocessing.preprocessor import Preprocessor
from rlgraph.components.preprocessing.preprocessor_stack import PreprocessorStack
from rlgraph.components.preprocessing.sequence import Sequence
from rlgraph.components.preprocessing.transpose import Transpose

__all__ = ["Clip", "ConvertType", "Divide", "GrayScale", "ImageResize", "Multiply", "Preprocessor",
           "PreprocessorStack", "Sequence", "Transpose"]
