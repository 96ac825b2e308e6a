"""A policy with a state-value head: the actor and the critic of IMPALA and APPO."""
from collections import OrderedDict

from rlgraph.components.layers.dense_layer import DenseLayer
from rlgraph.components.policies.policy import Policy, build_network
from rlgraph.utils.decorators import graph_fn, rlgraph_api
from rlgraph.utils.validation import spec_error


class ActorCriticPolicy(Policy):
    """``Policy`` plus a baseline ``V(s)``: a linear head on the network's output (shared trunk, as in
    Mnih et al. 2016, A3C, and Espeholt et al. 2018, IMPALA) or a separate value network on the inputs.

    Acting and learning each take one pass through the network: ``get_action_and_value`` samples actions and
    returns their log-likelihood and ``V(s)`` (the behaviour policy's values, for APPO's value clipping);
    ``evaluate_actions`` returns log-likelihood, entropy and ``V(s)`` of given actions (the learner).
    Recurrent networks take and return ``internal_states`` and take ``resets`` as ``Policy`` describes.

    Args:
        network_spec: The shared network (see ``Policy``).
        action_space: The action space (see ``Policy``).
        value_network_spec: None: the value head sits on the shared network's output. A list of layer specs
            (or a network spec): a separate value network on the policy's inputs (feed-forward only),
            followed by the linear head.
        value_kernel_initializer: Initializer of the value head's kernel.
        **kwargs: See ``Policy`` (``action_adapter_spec``, ``distribution_spec``, ``scope``, ...).

    API (besides ``Policy``'s):
        get_action_and_value(nn_inputs, internal_states=None, deterministic=False, resets=None): dict with
            "action", "log_likelihood" (joint, one per item), "value" (``V(s)``, one per item) and, for
            recurrent networks, "internal_states".
        evaluate_actions(nn_inputs, actions, internal_states=None, resets=None): dict with "log_likelihood",
            "entropy" (joint), "value" and, for recurrent networks, "internal_states".
        get_state_value(nn_inputs, internal_states=None, resets=None): dict with "value" (and
            "internal_states").
    """

    default_scope = "actor-critic-policy"

    def __init__(self, network_spec, action_space=None, value_network_spec=None,
                 value_kernel_initializer="glorot_uniform", scope=None, **kwargs):
        super().__init__(network_spec, action_space=action_space, scope=scope, **kwargs)
        self.value_network = None
        if value_network_spec is not None:
            self.value_network = build_network(value_network_spec, "value_network_spec")
            if self.value_network.is_recurrent:
                raise spec_error("ActorCriticPolicy", "value_network_spec", "the separate value network must be "
                                 "feed-forward (put an LSTM into network_spec; the value head shares it).")
            self.value_network.scope = "value-network"
            self.add_components(self.value_network)
        self.value_layer = DenseLayer(1, kernel_initializer=value_kernel_initializer, scope="value-head")
        self.add_components(self.value_layer)

    # --- wiring helpers -------------------------------------------------------------------------------------
    def _value(self, nn_inputs, nn_outputs):
        hidden = nn_outputs if self.value_network is None else self.value_network.call(nn_inputs)
        return self._graph_fn_squeeze(self.value_layer.call(hidden))

    # --- API ------------------------------------------------------------------------------------------------
    @rlgraph_api
    def get_action_and_value(self, nn_inputs, internal_states=None, deterministic=False, resets=None):
        nn_outputs, states = self._network_outputs(nn_inputs, internal_states, resets, "get_action_and_value")
        parameters = self._parameters(nn_outputs)
        actions, log_probs = OrderedDict(), OrderedDict()
        for key, dist in self.distributions.items():
            actions[key], log_probs[key] = dist.draw_with_log_prob(parameters[key], deterministic)
        return self._with_states(dict(
            action=self._nest(actions), log_likelihood=self._graph_fn_joint(tuple(log_probs.values())),
            value=self._value(nn_inputs, nn_outputs)), states)

    @rlgraph_api
    def evaluate_actions(self, nn_inputs, actions, internal_states=None, resets=None):
        nn_outputs, states = self._network_outputs(nn_inputs, internal_states, resets, "evaluate_actions")
        parameters = self._parameters(nn_outputs)
        flat_actions = self._flat_actions(actions)
        log_probs = tuple(dist.log_prob(parameters[key], flat_actions[key])
                          for key, dist in self.distributions.items())
        entropies = tuple(dist.entropy(parameters[key]) for key, dist in self.distributions.items())
        return self._with_states(dict(
            log_likelihood=self._graph_fn_joint(log_probs), entropy=self._graph_fn_joint(entropies),
            value=self._value(nn_inputs, nn_outputs)), states)

    @rlgraph_api
    def get_state_value(self, nn_inputs, internal_states=None, resets=None):
        nn_outputs, states = self._network_outputs(nn_inputs, internal_states, resets, "get_state_value")
        return self._with_states(dict(value=self._value(nn_inputs, nn_outputs)), states)

    # --- graph functions ------------------------------------------------------------------------------------
    @graph_fn
    def _graph_fn_squeeze(self, value):
        return value[..., 0]
