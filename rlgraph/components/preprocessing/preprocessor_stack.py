"""A sequence of preprocessors built from a list of specs."""
from rlgraph.components.preprocessing.preprocessor import Preprocessor
from rlgraph.utils.decorators import rlgraph_api
from rlgraph.utils.validation import spec_error


class PreprocessorStack(Preprocessor):
    """Applies its preprocessors in order; an empty stack is the identity.

    API:
        preprocess(inputs): ``p_n.preprocess(...p_1.preprocess(inputs))``.
        reset(): Resets every stateful preprocessor (e.g. ``Sequence``) at the start of an episode.

    Args:
        *preprocessors: Preprocessor objects or specs (dicts with a ``"type"``).
        preprocessing_spec: Alternatively, a list of preprocessor specs (as an agent config's
            ``"preprocessing_spec"``), e.g. ``[{"type": "grayscale", "keep_rank": true},
            {"type": "image-resize", "width": 84, "height": 84}, {"type": "divide", "divisor": 255}]``.
    """

    __aliases__ = ("preprocessor-stack", "preprocessing")

    default_scope = "preprocessor-stack"

    def __init__(self, *preprocessors, preprocessing_spec=None, scope=None, **kwargs):
        if preprocessing_spec is not None:
            if preprocessors:
                raise spec_error("PreprocessorStack", "preprocessing_spec", "give preprocessors either positionally "
                                 "or as 'preprocessing_spec', not both.")
            if not isinstance(preprocessing_spec, (list, tuple)):
                raise spec_error("PreprocessorStack", "preprocessing_spec", f"expected a list of preprocessor specs, "
                                 f"got {preprocessing_spec!r}.")
            preprocessors = preprocessing_spec
        built = [Preprocessor.from_spec(spec, _path=f"preprocessing_spec[{i}]") for i, spec in enumerate(preprocessors)]
        super().__init__(*built, scope=scope, **kwargs)
        self.preprocessors = built

    @property
    def stateful(self):
        return any(p.stateful for p in self.preprocessors)

    @rlgraph_api
    def preprocess(self, inputs):
        out = inputs
        for p in self.preprocessors:
            out = p.preprocess(out)
        return out

    @rlgraph_api
    def reset(self):
        for p in self.preprocessors:
            if p.stateful:
                p.reset()
