"""The dueling Q-network policy (Wang et al. 2016)."""
from collections import OrderedDict

from rlgraph.components.layers.activations import ActivationName
from rlgraph.components.layers.dense_layer import DenseLayer
from rlgraph.components.policies.policy import Policy
from rlgraph.spaces import IntBox
from rlgraph.utils.decorators import graph_fn, rlgraph_api
from rlgraph.utils.errors import RLGraphSpaceError
from rlgraph.utils.validation import Int, Optional, check_args


class DuelingPolicy(Policy):
    """Q-values from a state-value stream and an advantage stream: ``Q = V + A - mean_a(A)``.

    Wang et al. 2016, "Dueling Network Architectures for Deep Reinforcement Learning", eq. 9. Both streams
    sit on the shared network's output; each may have one hidden dense layer (512 units in the paper).
    Actions are discrete (an IntBox action space, optionally with an item shape: one Q-vector per
    component). ``get_action`` is greedy on Q by default; with ``deterministic=False`` it samples from
    ``softmax(Q)`` (Boltzmann), and ``log_prob`` is always under ``softmax(Q)``. The Q-values are the
    ``Categorical`` distribution's logits, so the other ``Policy`` API methods work on them too.

    Args:
        network_spec: See ``Policy``.
        action_space: An IntBox action space (or None: the action space handed to the build).
        units_state_value_stream: Units of the hidden layer of the state-value stream (None: no hidden layer).
        units_advantage_stream: Units of the hidden layer of the advantage stream (None: no hidden layer).
        stream_activation: Activation of the hidden stream layers.
        action_adapter_spec: See ``Policy`` (the advantage stream's output layer).

    API (besides ``Policy``'s):
        get_action(nn_inputs, internal_states=None, deterministic=True, resets=None): As ``Policy``'s (greedy
            by default), plus "q_values".
        get_q_values(nn_inputs, internal_states=None, resets=None): dict with "q_values" ``[..., n]``,
            "state_values" ``[...]`` and "advantages" ``[..., n]`` (before centering).
        get_state_values(nn_inputs, internal_states=None, resets=None): dict with "state_values".
        get_advantages(nn_inputs, internal_states=None, resets=None): dict with "advantages".
    """

    default_scope = "dueling-policy"
    #: What the constructor's arguments must be (``rlgraph.utils.validation``), besides ``Policy``'s.
    ARG_RULES = dict(units_state_value_stream=Optional(Int(min=1)), units_advantage_stream=Optional(Int(min=1)),
                     stream_activation=ActivationName())

    def __init__(self, network_spec, action_space=None, units_state_value_stream=None, units_advantage_stream=None,
                 stream_activation="relu", action_adapter_spec=None, scope=None, **kwargs):
        args = check_args("DuelingPolicy", DuelingPolicy.ARG_RULES, dict(
            units_state_value_stream=units_state_value_stream, units_advantage_stream=units_advantage_stream,
            stream_activation=stream_activation))
        units_state_value_stream, units_advantage_stream = args["units_state_value_stream"], \
            args["units_advantage_stream"]
        super().__init__(network_spec, action_space=action_space, action_adapter_spec=action_adapter_spec,
                         distribution_spec=None, scope=scope, **kwargs)
        if self.action_space is not None and not isinstance(self.action_space, IntBox):
            raise RLGraphSpaceError(f"DuelingPolicy: the action space must be an IntBox (discrete actions), got "
                                    f"{self.action_space!r}.")
        self.state_value_hidden = self.advantage_hidden = None
        if units_state_value_stream is not None:
            self.state_value_hidden = DenseLayer(units_state_value_stream, activation=stream_activation,
                                                 scope="state-value-hidden")
        if units_advantage_stream is not None:
            self.advantage_hidden = DenseLayer(units_advantage_stream, activation=stream_activation,
                                               scope="advantage-hidden")
        self.state_value_layer = DenseLayer(1, scope="state-value")
        self.add_components(*[c for c in (self.state_value_hidden, self.advantage_hidden, self.state_value_layer)
                              if c is not None])

    def _resolve_action_space(self, action_space):
        space = super()._resolve_action_space(action_space)
        if not isinstance(space, IntBox):
            raise RLGraphSpaceError(f"DuelingPolicy '{self.global_scope}': the action space must be an IntBox "
                                    f"(discrete actions), got {space!r}.")
        return space

    # --- wiring helpers -------------------------------------------------------------------------------------
    def _state_values(self, nn_outputs):
        hidden = nn_outputs if self.state_value_hidden is None else self.state_value_hidden.call(nn_outputs)
        return self.state_value_layer.call(hidden)

    def _advantages(self, nn_outputs):
        hidden = nn_outputs if self.advantage_hidden is None else self.advantage_hidden.call(nn_outputs)
        return self.action_adapters[""].call(hidden)

    def _parameters(self, nn_outputs):
        q_values, _ = self._graph_fn_q_values(self._state_values(nn_outputs), self._advantages(nn_outputs))
        return OrderedDict([("", q_values)])

    # --- API ------------------------------------------------------------------------------------------------
    @rlgraph_api
    def get_action(self, nn_inputs, internal_states=None, deterministic=True, resets=None):
        result = self._act(nn_inputs, internal_states, deterministic, resets, "get_action")
        result["q_values"] = result["adapter_outputs"]
        return result

    @rlgraph_api
    def get_q_values(self, nn_inputs, internal_states=None, resets=None):
        nn_outputs, states = self._network_outputs(nn_inputs, internal_states, resets, "get_q_values")
        advantages = self._advantages(nn_outputs)
        q_values, state_values = self._graph_fn_q_values(self._state_values(nn_outputs), advantages)
        return self._with_states(dict(q_values=q_values, state_values=state_values, advantages=advantages), states)

    @rlgraph_api
    def get_state_values(self, nn_inputs, internal_states=None, resets=None):
        nn_outputs, states = self._network_outputs(nn_inputs, internal_states, resets, "get_state_values")
        return self._with_states(dict(state_values=self._graph_fn_squeeze(self._state_values(nn_outputs))), states)

    @rlgraph_api
    def get_advantages(self, nn_inputs, internal_states=None, resets=None):
        nn_outputs, states = self._network_outputs(nn_inputs, internal_states, resets, "get_advantages")
        return self._with_states(dict(advantages=self._advantages(nn_outputs)), states)

    # --- graph functions ------------------------------------------------------------------------------------
    @graph_fn
    def _graph_fn_q_values(self, state_value, advantages):
        """``(Q, V)``: ``Q = V + A - mean(A)`` over the last (action) axis; V ``[..., 1]`` -> ``[...]``."""
        v = state_value
        for _ in range(self._action_ranks[0]):  # IntBox with an item shape: one V per item, broadcast.
            v = v[..., None]
        q = v + advantages - self.ops.mean(advantages, axis=-1, keepdims=True)
        return q, state_value[..., 0]

    @graph_fn
    def _graph_fn_squeeze(self, state_value):
        return state_value[..., 0]
