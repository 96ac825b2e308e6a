"""Epsilon-greedy exploration for discrete actions, and the Ape-X per-actor epsilons."""
import numpy as np

from rlgraph.components.component import Component
from rlgraph.components.explorations.epsilon_exploration import EpsilonExploration
from rlgraph.spaces import IntBox, Space
from rlgraph.utils.decorators import graph_fn, rlgraph_api
from rlgraph.utils.errors import RLGraphSpaceError
from rlgraph.utils.validation import Int, Number, check_args, spec_error

#: What ``apex_epsilon``'s arguments must be (``rlgraph.utils.validation``; the actor index is checked against
#: ``num_actors``).
APEX_EPSILON_RULES = dict(num_actors=Int(min=1), base=Number(min=0.0, max=1.0), alpha=Number())


def apex_epsilon(i, num_actors, base=0.4, alpha=7.0):
    """Ape-X's fixed epsilon of actor ``i`` of ``num_actors``: ``base ** (1 + alpha * i / (N - 1))``.

    Horgan et al. 2018, "Distributed Prioritized Experience Replay", section 4.1 (base 0.4, alpha 7). With
    one actor, that actor gets ``base``.

    Args:
        i: The actor's index in ``[0, num_actors)`` (an int, or an array of them).
        num_actors: The number of actors N (>= 1).
        base: The epsilon of actor 0.
        alpha: The exponent's range.

    Returns:
        A float (an array for an array ``i``).
    """
    args = check_args("apex_epsilon", APEX_EPSILON_RULES, dict(num_actors=num_actors, base=base, alpha=alpha))
    num_actors, base, alpha = args["num_actors"], args["base"], args["alpha"]
    index = np.asarray(i)
    if index.dtype.kind not in "iu" or np.any(index < 0) or np.any(index >= num_actors):
        raise spec_error("apex_epsilon", "i", f"expected an actor index, an int in [0, {num_actors}) (or an array of "
                         f"them), got {i!r}.")
    exponent = 1.0 + (alpha * index / (num_actors - 1) if num_actors > 1 else 0.0 * index)
    out = np.power(base, exponent)
    return float(out) if out.ndim == 0 else out


class Exploration(Component):
    """Epsilon-greedy exploration: each item's action is, with probability epsilon, replaced by a uniform one.

    Works on discrete (IntBox) actions, also with an item shape and in Dict/Tuple action spaces (an
    exploring item gets a uniform random value in every component). Epsilon is drawn per item (Mnih et
    al. 2015); Ape-X actors use a fixed epsilon each (``epsilon_spec=apex_epsilon(i, N)``) or, for many
    actors served by one graph, one epsilon per item via ``get_action_with_epsilon``.

    Args:
        epsilon_spec: The epsilon schedule (see ``EpsilonExploration``), e.g. ``["linear", 1.0, 0.05]`` or 0.1.
        action_space: The (discrete) action space whose bounds random actions come from. None: the space of
            the ``actions`` input if it is bounded, else the action space handed to the build.

    API:
        get_action(actions, time_percentage=None): The explored actions, epsilon at ``time_percentage``
            (None: 0.0, enough for a constant epsilon).
        get_action_with_epsilon(actions, epsilon): The same with a given epsilon, a scalar or one per item.
        get_epsilon(time_percentage=None): Epsilon at ``time_percentage``.
    """

    default_scope = "exploration"

    def __init__(self, epsilon_spec=("linear", 1.0, 0.1), action_space=None, scope=None, **kwargs):
        self.epsilon_exploration = EpsilonExploration(epsilon_spec)
        super().__init__(self.epsilon_exploration, scope=scope, **kwargs)
        if action_space is not None and not isinstance(action_space, Space):
            action_space = Space.from_spec(action_space, _path="Exploration.action_space")
        if action_space is not None:
            self._check_discrete(action_space.strip_ranks(), "Exploration, constructor argument 'action_space'")
        self.action_space = None if action_space is None else action_space.strip_ranks()
        self._bounds = None

    @staticmethod
    def _check_discrete(space, where):
        for key, leaf in space.flatten().items():
            if not isinstance(leaf, IntBox) or leaf.num_categories is None:
                at = f" at key '{key}'" if key else ""
                raise RLGraphSpaceError(f"{where}: epsilon-greedy exploration needs discrete actions with uniform "
                                        f"bounds (IntBox(n), optionally with a shape){at}, got {leaf!r}.")

    @staticmethod
    def _is_bounded_discrete(space):
        return isinstance(space, Space) and all(isinstance(s, IntBox) and s.num_categories is not None
                                                for s in space.flatten().values())

    def _resolve_action_space(self, input_spaces, action_space):
        actions = input_spaces.get("actions")
        if isinstance(actions, Space) and not all(isinstance(s, IntBox) for s in actions.flatten().values()):
            raise RLGraphSpaceError(f"API method 'get_action', argument 'actions': epsilon-greedy exploration needs "
                                    f"discrete actions (IntBox), got {actions!r}.")
        for candidate in (self.action_space, actions if self._is_bounded_discrete(actions) else None, action_space):
            if candidate is not None:
                space = candidate.strip_ranks()
                break
        else:
            raise RLGraphSpaceError(f"Exploration '{self.global_scope}': the actions' space {actions!r} has no "
                                    f"bounds and no action space is known; pass action_space to the constructor "
                                    f"or to the build.")
        self._check_discrete(space, f"Exploration '{self.global_scope}', action space")
        if isinstance(actions, Space):
            got, expected = actions.flatten(), space.flatten()
            if list(got) != list(expected) or any(not isinstance(g, IntBox) or tuple(g.shape) != tuple(e.shape)
                                                  for g, e in zip(got.values(), expected.values())):
                raise RLGraphSpaceError(f"API method 'get_action', argument 'actions': expected values of the "
                                        f"action space {space!r}, got {actions!r}.")
        return space

    def check_input_spaces(self, input_spaces, action_space=None):
        self._resolve_action_space(input_spaces, action_space)

    def create_variables(self, input_spaces, action_space=None):
        space = self._resolve_action_space(input_spaces, action_space)
        self._bounds = {key: (int(np.min(s.low)), int(np.max(s.high))) for key, s in space.flatten().items()}

    @rlgraph_api
    def get_action(self, actions, time_percentage=None):
        return self._graph_fn_explore(actions, self.epsilon_exploration.do_explore(actions, time_percentage))

    @rlgraph_api
    def get_action_with_epsilon(self, actions, epsilon):
        return self._graph_fn_explore(actions, self.epsilon_exploration.explore_mask(actions, epsilon))

    @rlgraph_api
    def get_epsilon(self, time_percentage=None):
        return self.epsilon_exploration.get_epsilon(time_percentage)

    @graph_fn(split_ops=True, add_auto_key_as_first_param=True)
    def _graph_fn_explore(self, key, actions, explore):
        ops = self.ops
        low, high = self._bounds[key]
        random_actions = ops.cast(ops.random_integers(ops.shape(actions), low, high, like=actions), actions.dtype)
        for _ in range(ops.ndim(actions) - ops.ndim(explore)):  # Actions with an item shape: the whole item explores.
            explore = ops.expand_dims(explore, -1)
        return ops.where(explore, random_actions, actions)
