"""A policy: a neural network, plus one action adapter and one distribution per flat action key."""
import json
import os
from collections import OrderedDict

from rlgraph.components.action_adapters.action_adapter import ActionAdapter, check_primitive_action_space
from rlgraph.components.component import Component
from rlgraph.components.distributions.categorical import Categorical
from rlgraph.components.distributions.distribution import Distribution
from rlgraph.components.neural_networks.neural_network import NeuralNetwork
from rlgraph.spaces import ContainerSpace, FloatBox, IntBox, Space, Tuple
from rlgraph.utils.decorators import graph_fn, rlgraph_api
from rlgraph.utils.errors import RLGraphAPIError, RLGraphSpaceError
from rlgraph.utils.validation import Mapping, Optional, check_args, spec_error


def build_network(network_spec, where="network_spec"):
    """A ``NeuralNetwork`` from a network, a list of layer specs, a dict spec or a JSON file holding either."""
    if isinstance(network_spec, NeuralNetwork):
        return network_spec
    if isinstance(network_spec, (str, os.PathLike)) and os.path.isfile(str(network_spec)):
        try:
            with open(network_spec) as f:
                network_spec = json.load(f)
        except json.JSONDecodeError as e:
            raise spec_error(None, where, f"'{network_spec}' is not valid JSON: {e}") from None
    if isinstance(network_spec, (list, tuple)):
        network_spec = {"layers": list(network_spec)}
    if not isinstance(network_spec, dict):
        raise spec_error(None, where, f"expected a NeuralNetwork, a list of layer specs, a dict spec or a JSON file, "
                         f"got {network_spec!r}.")
    return NeuralNetwork.from_spec(network_spec, _path=where)


def _as_space(space, where):
    if space is None or isinstance(space, Space):
        return space
    return Space.from_spec(space, _path=where)


class Policy(Component):
    """Maps network inputs to actions: ``network -> action adapter(s) -> distribution(s)``.

    Each primitive action of the action space (each flat key of a Dict/Tuple space) gets its own
    ``ActionAdapter`` and ``Distribution`` (``Categorical`` for IntBox, ``Normal`` for FloatBox); results are
    nested back into the action space's structure. ``log_prob`` values are per action component;
    ``log_likelihood`` and ``entropy`` are joint (summed over all components and keys), one per item.

    Recurrent networks (``network.is_recurrent``, API ``call_recurrent(inputs, internal_states, resets)``):
    every API method also takes ``internal_states`` (None: the network's initial state) and ``resets``, and
    its result holds the next ``"internal_states"``. For other networks both must be left out.

    Args:
        network_spec: A ``NeuralNetwork``, a list of layer specs, a dict spec, or a JSON file holding one.
        action_space: The action space (Space or spec). None: the action space handed to the build, which
            must then be primitive and fit ``distribution_spec``.
        action_adapter_spec: Extra ``ActionAdapter`` keywords for every adapter (e.g. ``kernel_initializer``),
            or a spec with a ``"type"`` naming an ``ActionAdapter`` subclass.
        distribution_spec: The distribution of a primitive action space (default: Categorical for IntBox,
            Normal for FloatBox; Categorical when the action space is only known at build time).

    API:
        get_action(nn_inputs, internal_states=None, deterministic=False, resets=None): dict with "action",
            "log_prob" (per component, nested like the action), "log_likelihood" (joint) and
            "adapter_outputs" (the distribution parameters, nested like the action). ``deterministic`` is a
            Python bool or a bool tensor (scalar or one per item) choosing the distributions' modes.
        get_deterministic_action(nn_inputs, internal_states=None, resets=None): ``get_action`` with the
            distributions' modes.
        get_action_and_log_likelihood(nn_inputs, internal_states=None, deterministic=False, resets=None):
            the same dict as ``get_action`` (kept for callers that name what they use).
        get_log_likelihood(nn_inputs, actions, internal_states=None, resets=None): dict with
            "log_likelihood", "log_prob" and "adapter_outputs" of given ``actions``.
        get_entropy(nn_inputs, internal_states=None, resets=None): dict with the joint "entropy".
        get_adapter_outputs(nn_inputs, internal_states=None, resets=None): dict with "nn_outputs" and
            "adapter_outputs".
    """

    default_scope = "policy"
    #: What the constructor's arguments must be (``rlgraph.utils.validation``).
    ARG_RULES = dict(action_adapter_spec=Optional(Mapping()))

    def __init__(self, network_spec, action_space=None, action_adapter_spec=None, distribution_spec=None, scope=None,
                 **kwargs):
        check_args(type(self).__name__, Policy.ARG_RULES, dict(action_adapter_spec=action_adapter_spec))
        network = build_network(network_spec, "network_spec")
        space = _as_space(action_space, f"{type(self).__name__}.action_space")
        if space is not None:
            space = space.strip_ranks()
        flat = space.flatten() if space is not None else OrderedDict([("", None)])
        for key, leaf in flat.items():
            where = f"{type(self).__name__}, action space" + (f" key '{key}'" if key else "")
            if leaf is not None:
                check_primitive_action_space(leaf, where)
        if distribution_spec is not None and len(flat) > 1:
            raise spec_error(type(self).__name__, "distribution_spec", f"only for a primitive action space; the "
                             f"container {space!r} gets the default distribution per key.")
        self.action_space = space
        self.flat_action_spaces = flat
        self.action_adapters, self.distributions = OrderedDict(), OrderedDict()
        for key, leaf in flat.items():
            suffix = "-" + key.replace("/", "-") if key else ""
            self.action_adapters[key] = ActionAdapter.from_spec(
                dict(action_adapter_spec or {}), _path=f"{type(self).__name__}.action_adapter_spec",
                action_space=leaf, scope=f"action-adapter{suffix}")
            if distribution_spec is not None:
                dist = Distribution.from_spec(distribution_spec, _path=f"{type(self).__name__}.distribution_spec",
                                              action_space=leaf, scope="distribution")
            elif leaf is None:
                dist = Categorical(scope="distribution")
            else:
                dist = Distribution.for_space(leaf, scope=f"distribution{suffix}")
            self.distributions[key] = dist
        super().__init__(network, *self.action_adapters.values(), *self.distributions.values(), scope=scope,
                         **kwargs)
        self.network = network
        self.resolved_action_space = None
        self._action_ranks = None

    @property
    def is_recurrent(self):
        """Whether the network is recurrent (then the API takes and returns ``internal_states``)."""
        return bool(getattr(self.network, "is_recurrent", False))

    # --- build ----------------------------------------------------------------------------------------------
    def _resolve_action_space(self, action_space):
        if self.action_space is not None:
            return self.action_space
        if action_space is None:
            raise RLGraphSpaceError(f"{type(self).__name__} '{self.global_scope}': no action space; pass "
                                    f"action_space to the constructor or to the build (executor / ComponentTest).")
        space = action_space.strip_ranks()
        if isinstance(space, ContainerSpace):
            raise RLGraphSpaceError(f"{type(self).__name__} '{self.global_scope}': the container action space "
                                    f"{space!r} must be passed to the constructor (action_space=...), which creates "
                                    f"one adapter and distribution per key.")
        check_primitive_action_space(space, f"{type(self).__name__} '{self.global_scope}'")
        self.distributions[""].check_action_space(space, f"'{self.global_scope}', action space of the build; "
                                                          f"pass distribution_spec to the Policy")
        return space

    def check_input_spaces(self, input_spaces, action_space=None):
        space = self._resolve_action_space(action_space)
        actions = input_spaces.get("actions")
        if actions is not None:
            expected = space.flatten()
            got = actions.flatten() if isinstance(actions, Space) else {}
            ok = list(got) == list(expected) and all(
                isinstance(g, IntBox if isinstance(e, IntBox) else FloatBox) and tuple(g.shape) == tuple(e.shape)
                for g, e in zip(got.values(), expected.values()))
            if not ok:
                raise RLGraphSpaceError(f"API method 'get_log_likelihood', argument 'actions': expected values of "
                                        f"the action space {space!r}, got {actions!r}.")
        for arg in ("internal_states", "resets"):
            if arg in input_spaces and not self.is_recurrent:
                raise RLGraphSpaceError(f"Argument '{arg}': the network {self.network!r} is not recurrent; leave "
                                        f"'{arg}' out.")

    def create_variables(self, input_spaces, action_space=None):
        self.resolved_action_space = self._resolve_action_space(action_space)
        self._action_ranks = tuple(len(s.shape) for s in self.resolved_action_space.flatten().values())

    # --- wiring helpers (called by API methods while the graph is assembled) ------------------------------
    def _network_outputs(self, nn_inputs, internal_states, resets, api):
        if self.is_recurrent:
            kwargs = {"internal_states": internal_states}
            if resets is not None:
                kwargs["resets"] = resets
            return self.network.call_recurrent(nn_inputs, **kwargs)
        if internal_states is not None or resets is not None:
            raise RLGraphAPIError(f"{type(self).__name__} '{self.global_scope}', API method '{api}': "
                                  f"internal_states/resets given, but the network is not recurrent.")
        return self.network.call(nn_inputs), None

    def _parameters(self, nn_outputs):
        """Flat key -> distribution parameters."""
        return OrderedDict((key, adapter.call(nn_outputs)) for key, adapter in self.action_adapters.items())

    def _nest(self, flat):
        if self.action_space is None or not isinstance(self.action_space, ContainerSpace):
            return flat[""]
        return self.action_space.unflatten(flat)

    def _flat_actions(self, actions):
        if self.action_space is None or not isinstance(self.action_space, ContainerSpace):
            return OrderedDict([("", actions)])
        out = OrderedDict()
        for key in self.flat_action_spaces:
            value, space = actions, self.action_space
            for part in key.split("/"):
                index = int(part) if isinstance(space, Tuple) else part
                value, space = value[index], space[index]
            out[key] = value
        return out

    def _with_states(self, result, internal_states):
        if self.is_recurrent:
            result["internal_states"] = internal_states
        return result

    def _act(self, nn_inputs, internal_states, deterministic, resets, api):
        nn_outputs, states = self._network_outputs(nn_inputs, internal_states, resets, api)
        parameters = self._parameters(nn_outputs)
        actions, log_probs = OrderedDict(), OrderedDict()
        for key, dist in self.distributions.items():
            actions[key], log_probs[key] = dist.draw_with_log_prob(parameters[key], deterministic)
        return self._with_states(dict(
            action=self._nest(actions), log_prob=self._nest(log_probs),
            log_likelihood=self._graph_fn_joint(tuple(log_probs.values())),
            adapter_outputs=self._nest(parameters)), states)

    # --- API ------------------------------------------------------------------------------------------------
    @rlgraph_api
    def get_action(self, nn_inputs, internal_states=None, deterministic=False, resets=None):
        return self._act(nn_inputs, internal_states, deterministic, resets, "get_action")

    @rlgraph_api
    def get_deterministic_action(self, nn_inputs, internal_states=None, resets=None):
        return self._act(nn_inputs, internal_states, True, resets, "get_deterministic_action")

    @rlgraph_api
    def get_action_and_log_likelihood(self, nn_inputs, internal_states=None, deterministic=False, resets=None):
        return self._act(nn_inputs, internal_states, deterministic, resets, "get_action_and_log_likelihood")

    @rlgraph_api
    def get_log_likelihood(self, nn_inputs, actions, internal_states=None, resets=None):
        nn_outputs, states = self._network_outputs(nn_inputs, internal_states, resets, "get_log_likelihood")
        parameters = self._parameters(nn_outputs)
        flat_actions = self._flat_actions(actions)
        log_probs = OrderedDict((key, dist.log_prob(parameters[key], flat_actions[key]))
                                for key, dist in self.distributions.items())
        return self._with_states(dict(
            log_likelihood=self._graph_fn_joint(tuple(log_probs.values())), log_prob=self._nest(log_probs),
            adapter_outputs=self._nest(parameters)), states)

    @rlgraph_api
    def get_entropy(self, nn_inputs, internal_states=None, resets=None):
        nn_outputs, states = self._network_outputs(nn_inputs, internal_states, resets, "get_entropy")
        parameters = self._parameters(nn_outputs)
        entropies = tuple(dist.entropy(parameters[key]) for key, dist in self.distributions.items())
        return self._with_states(dict(entropy=self._graph_fn_joint(entropies)), states)

    @rlgraph_api
    def get_adapter_outputs(self, nn_inputs, internal_states=None, resets=None):
        nn_outputs, states = self._network_outputs(nn_inputs, internal_states, resets, "get_adapter_outputs")
        return self._with_states(dict(nn_outputs=nn_outputs, adapter_outputs=self._nest(self._parameters(nn_outputs))),
                                 states)

    # --- graph functions ------------------------------------------------------------------------------------
    @graph_fn
    def _graph_fn_joint(self, values):
        """Sums per-component values over each action's own axes and over all keys: one value per item."""
        total = None
        for value, rank in zip(values, self._action_ranks):
            value = self.ops.sum(value, axis=tuple(range(-rank, 0))) if rank else value
            total = value if total is None else total + value
        return total
