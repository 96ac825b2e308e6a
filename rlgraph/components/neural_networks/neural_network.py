"""A stack of layers built from a list of layer specs."""
import json
import os

from rlgraph.components.component import Component
from rlgraph.components.layers.layer import Layer
from rlgraph.utils.decorators import rlgraph_api
from rlgraph.utils.errors import RLGraphSpecError


class NeuralNetwork(Component):
    """Applies its layers in order: ``call(inputs)`` returns ``layer_n(...layer_1(inputs))``.

    Args:
        *layer_list: Layer objects or specs (dicts with a ``"type"``).
        layers: Alternatively, a list of layer specs, or a path to a JSON file holding one
            (e.g. ``[{"type": "dense", "units": 64, "activation": "relu"}, ...]``).
    """

    default_scope = "neural-network"

    def __init__(self, *layer_list, layers=None, scope=None, device=None, trainable=None):
        if layers is not None:
            if layer_list:
                raise RLGraphSpecError("NeuralNetwork: give layers either positionally or as 'layers', not both.")
            if isinstance(layers, str) and os.path.isfile(layers):
                with open(layers) as f:
                    layers = json.load(f)
            if not isinstance(layers, (list, tuple)):
                raise RLGraphSpecError(f"NeuralNetwork.layers: expected a list of layer specs, got {layers!r}.")
            layer_list = layers
        built = [Layer.from_spec(spec, _path=f"layers[{i}]") for i, spec in enumerate(layer_list)]
        if not built:
            raise RLGraphSpecError("NeuralNetwork needs at least one layer.")
        super().__init__(*built, scope=scope, device=device, trainable=trainable)
        self.layers = built

    @rlgraph_api
    def call(self, inputs):
        out = inputs
        for layer in self.layers:
            out = layer.call(out)
        return out
