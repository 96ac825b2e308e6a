"""A stack of layers built from a list of layer specs, optionally recurrent."""
import json
import os

from rlgraph.components.component import Component
from rlgraph.components.layers import Layer, LSTMLayer
from rlgraph.utils.decorators import rlgraph_api
from rlgraph.utils.errors import RLGraphAPIError
from rlgraph.utils.validation import spec_error


class NeuralNetwork(Component):
    """Applies its layers in order: ``call(inputs)`` returns ``layer_n(...layer_1(inputs))``.

    A network holding an ``LSTMLayer`` is recurrent. Layers before the LSTM run on the time-ranked inputs
    (all layers accept any leading batch/time ranks), the LSTM unrolls over the time rank, and the layers after
    it run on its time-ranked outputs (e.g. value and policy heads on every step).

    API:
        call(inputs): The network's outputs. A recurrent network starts its LSTM from zeros and needs inputs
            with batch and time ranks.
        call_recurrent(inputs, internal_states=None, resets=None): Recurrent networks only (others do not
            have this API method). ``internal_states`` is the LSTM's ``(h, c)``, each ``[B, units]``
            (None: zeros); ``resets`` a bool ``[T, B]`` / ``[B, T]`` that zeroes the state before the steps
            where it is True (see ``LSTMLayer``). Returns ``(outputs, internal_states)``, the latter the state
            after the last step, to be passed to the next call.

    Args:
        *layer_list: Layer objects or specs (dicts with a ``"type"``).
        layers: Alternatively, a list of layer specs, or a path to a JSON file holding one
            (e.g. ``[{"type": "dense", "units": 64, "activation": "relu"}, ...]``). An empty list gives the
            identity.
    """

    default_scope = "neural-network"

    def __init__(self, *layer_list, layers=None, scope=None, device=None, trainable=None):
        if layers is not None:
            if layer_list:
                raise spec_error("NeuralNetwork", "layers", "give layers either positionally or as 'layers', not both.")
            if isinstance(layers, str) and os.path.isfile(layers):
                with open(layers) as f:
                    layers = json.load(f)
            if not isinstance(layers, (list, tuple)):
                raise spec_error("NeuralNetwork", "layers", f"expected a list of layer specs (or a JSON file holding "
                                 f"one), got {layers!r}.")
            layer_list = layers
        built = [Layer.from_spec(spec, _path=f"layers[{i}]") for i, spec in enumerate(layer_list)]
        lstms = [layer for layer in built if isinstance(layer, LSTMLayer)]
        if len(lstms) > 1:
            raise spec_error("NeuralNetwork", "layers", f"at most one LSTM layer is supported, got {len(lstms)}.")
        super().__init__(*built, scope=scope, device=device, trainable=trainable)
        self.layers = built
        self.lstm = lstms[0] if lstms else None
        if self.lstm is None:
            # API methods are listed per instance: a feed-forward network has no recurrent API.
            self.api_methods.pop("call_recurrent", None)

    @property
    def is_recurrent(self):
        """Whether the network holds an LSTM layer (and has the API method ``call_recurrent``)."""
        return self.lstm is not None

    @rlgraph_api
    def call(self, inputs):
        outputs, _ = self._apply_layers(inputs)
        return outputs

    @rlgraph_api
    def call_recurrent(self, inputs, internal_states=None, resets=None):
        if not self.is_recurrent:
            raise RLGraphAPIError(f"'{self.global_scope}' has no LSTM layer; use call() instead of call_recurrent().")
        return self._apply_layers(inputs, internal_states, resets)

    def _apply_layers(self, inputs, internal_states=None, resets=None):
        """Wires ``self.layers`` inside an API method; returns ``(outputs, LSTM state or None)``."""
        out, states = inputs, None
        for layer in self.layers:
            if layer is self.lstm:
                out, states = layer.call(out, internal_states, resets)
            else:
                out = layer.call(out)
        return out, states
