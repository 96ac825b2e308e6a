"""A network over a Dict or Tuple input: one sub-network per input stream, concatenated, then a common stack."""
from collections import OrderedDict

from rlgraph.components.layers import ConcatLayer, ReshapeLayer
from rlgraph.components.neural_networks.neural_network import NeuralNetwork
from rlgraph.spaces import Dict, Tuple
from rlgraph.utils.errors import RLGraphSpaceError
from rlgraph.utils.validation import spec_error


class MultiInputStreamNetwork(NeuralNetwork):
    """Runs each part of a Dict/Tuple input through its own layers, concatenates the results, then applies
    the post-concat layers.

    This is how IMPALA (Espeholt et al. 2018) and R2D2 (Kapturowski et al. 2019) feed an agent: the image
    through a conv stack, the previous action (one-hot) and the previous reward as they are, all concatenated
    into the input of an LSTM. Example spec::

        {"type": "multi-input-stream-network",
         "input_network_specs": {"image": [{"type": "conv2d", "filters": 16, "kernel_size": 8, "strides": 4,
                                             "activation": "relu"}],
                                 "prev_action": [], "prev_reward": []},
         "post_network_spec": [{"type": "dense", "units": 256, "activation": "relu"},
                               {"type": "lstm", "units": 256}]}

    With ``flatten_streams`` each stream ends in a ``ReshapeLayer(flatten=True, one_hot_categories=True)``:
    images become vectors, IntBox inputs (actions) one-hot vectors and scalars (rewards) vectors of size 1,
    so that they can be concatenated. The API is ``NeuralNetwork``'s: ``call(inputs)``, and, if the post-concat
    stack holds an LSTM, ``call_recurrent(inputs, internal_states=None, resets=None)``.

    Args:
        input_network_specs: For a Dict input, a dict key -> list of layer specs (empty: no layers); for a
            Tuple input, a list of such lists, one per position. Every part of the input needs an entry.
        post_network_spec: The list of layer specs applied after the concatenation (may be empty).
        flatten_streams: Append a flattening (and one-hot) ReshapeLayer to each stream.
    """

    __aliases__ = ("multi-input-stream", "multi-stream-network")

    default_scope = "multi-input-stream-network"

    def __init__(self, input_network_specs, post_network_spec=(), flatten_streams=True, scope=None, device=None,
                 trainable=None):
        owner = "MultiInputStreamNetwork"
        if isinstance(input_network_specs, dict):
            specs = OrderedDict((str(k), v) for k, v in input_network_specs.items())
        elif isinstance(input_network_specs, (list, tuple)):
            specs = OrderedDict((i, v) for i, v in enumerate(input_network_specs))
        else:
            raise spec_error(owner, "input_network_specs", f"expected a dict (Dict inputs) or a list (Tuple inputs) "
                             f"of layer-spec lists, got {input_network_specs!r}.")
        if not specs:
            raise spec_error(owner, "input_network_specs", "needs at least one stream.")
        for key, layer_specs in specs.items():
            if not isinstance(layer_specs, (list, tuple)):
                raise spec_error(owner, f"input_network_specs[{key!r}]", f"expected a list of layer specs, got "
                                 f"{layer_specs!r}.")
            if "/" in str(key):
                raise spec_error(owner, "input_network_specs", f"key {key!r} must not hold '/'.")
        super().__init__(layers=post_network_spec or [], scope=scope, device=device, trainable=trainable)
        self.input_keys = list(specs)
        self.streams = OrderedDict()
        for key, layer_specs in specs.items():
            layer_list = list(layer_specs)
            if flatten_streams:
                layer_list.append(ReshapeLayer(flatten=True, one_hot_categories=True))
            self.streams[key] = NeuralNetwork(*layer_list, scope=f"stream-{key}")
        self.concat = ConcatLayer(axis=-1)
        self.add_components(*self.streams.values(), self.concat)

    def check_input_spaces(self, input_spaces, action_space=None):
        space = input_spaces["inputs"]
        tuple_input = isinstance(self.input_keys[0], int)
        if tuple_input and not isinstance(space, Tuple) or not tuple_input and not isinstance(space, Dict):
            raise RLGraphSpaceError(f"MultiInputStreamNetwork, argument 'inputs': input_network_specs is a "
                                    f"{'list' if tuple_input else 'dict'}, so expected a "
                                    f"{'Tuple' if tuple_input else 'Dict'} space, got {space!r}.")
        keys = list(range(len(space))) if tuple_input else list(space.keys())
        if sorted(keys) != sorted(self.input_keys):
            raise RLGraphSpaceError(f"MultiInputStreamNetwork, argument 'inputs': the input's parts {keys} do not "
                                    f"match the streams of input_network_specs {self.input_keys}.")

    def _apply_layers(self, inputs, internal_states=None, resets=None):
        streams = [stream.call(inputs[key]) for key, stream in self.streams.items()]
        return super()._apply_layers(self.concat.call(*streams), internal_states, resets)
