"""The plain loop of a local agent (``get_actions``, ``env.step``, ``observe``, ``update``): what it keeps between
the calls, recognising gymnasium's next-step auto-reset steps, and refusing a vector environment's batched
spaces. The step itself runs through the ``ActorLoop`` that rlgraph's workers and engines use too."""
import numpy as np
import optree

from rlgraph.spaces.space_utils import vector_env_batch_size
from rlgraph.trajectories import UnrollBuilder
from rlgraph.utils.errors import RLGraphError, RLGraphSpaceError
from rlgraph.workers.actor_loop import ActorLoop


class PlainLoop:
    """What a local agent keeps between ``get_actions`` and ``observe``, around its ``ActorLoop``.

    - The extras of the last exploring ``get_actions`` until ``observe`` takes them (so ``observe`` needs no
      extras).
    - The recurrent state per row for the next exploring ``get_actions`` (the loop's ``internal_states``,
      carried on by a plain ``observe``; zero at the start and after an episode's end).
    - The last observed step (next_states as passed and checked, terminals, truncations, env_ids), to
      recognise gymnasium's next-step auto-reset steps and leave them out of the trajectories.
    - Unrolls held back once such steps were left out: environments then complete their unrolls at different
      steps; they wait until they hold a column per environment, so that each update learns from as many
      columns as without the reset steps (the weights do not change while they wait).

    It is the loop's sink: the loop hands it the env steps and items, and it hands them to the learner.

    Args:
        owner: The agent's name (in error messages).
        actor, builder, learner: The local agent's roles and trajectory builder.
        check: The ``StepCheck`` of ``observe``'s arguments.
    """

    def __init__(self, owner, actor, builder, learner, check):
        self.owner = owner
        self.learner = learner
        self.loop = ActorLoop(actor, builder, sink=self, check=check)
        self._pending_extras = None
        self._last_step = None
        self._held_items = None
        # The observed step's number of rows and whether they are all environments (env_ids not given).
        self._num_rows, self._all_rows = 0, True

    def get_actions(self, states, internal_states):
        """``(actions, extras)`` of an exploring call; remembers the extras for ``observe``."""
        actions, extras = self.loop.act(states, internal_states=internal_states)
        self._pending_extras = extras
        return actions, extras

    def observe(self, states, actions, rewards, next_states, terminals, truncations, env_ids, extras):
        """One step (see ``Agent.observe``): checked, reset steps left out, into the loop."""
        loop = self.loop
        plain, raw_states, raw_next_states = not extras, states, next_states
        # Checked first: a bad argument raises here and leaves the builder, memory and counters as they were.
        states, actions, rewards, next_states, terminals, truncations, env_ids = loop.check_step(
            states, actions, rewards, next_states, terminals, truncations, env_ids, extras)
        num_rows = len(terminals)
        if plain:
            extras = self._remembered_extras(num_rows)
        ids = loop.env_ids(num_rows) if env_ids is None else env_ids
        self._num_rows, self._all_rows = num_rows, env_ids is None
        last = self._last_step
        # Next-step auto-reset steps: looked for in the plain loop, and where this step's states are the arrays
        # observed as the last step's next_states.
        reset_rows = None
        if last is not None and (plain or raw_states is last[0]):
            reset_rows = next_step_reset_rows(last, ids, env_ids, states, rewards, terminals, truncations)
        restart = terminals | truncations
        if reset_rows is None:
            loop.add_step(states, actions, rewards, next_states, terminals, truncations, extras, ids)
        else:
            keep = np.ones(num_rows, bool)
            keep[reset_rows] = False
            if keep.any():
                rows = optree.tree_map(lambda x: np.asarray(x)[keep], (states, actions, rewards, next_states,
                                                                        terminals, truncations, extras))
                loop.add_step(*rows, ids[keep])
            if self._held_items is None and isinstance(loop.builder, UnrollBuilder):
                self._held_items = []
            restart = restart | ~keep  # A reset step's row starts its episode afresh.
        self._last_step = (raw_next_states, next_states, terminals, truncations, env_ids)
        if plain:
            self._pending_extras = None
            loop.carry_states(extras, rewards, restart)
        else:
            loop.internal_states = None

    def _remembered_extras(self, num_rows):
        """The extras of the last exploring ``get_actions``, for an ``observe`` of ``num_rows`` rows without extras
        (none after no such call, for an actor that takes steps the agent did not act on)."""
        extras = self._pending_extras
        if extras is None and self.loop.actor.steps_without_extras:
            return {}  # Transitions the agent did not act on.
        if extras is None:
            raise RLGraphError(f"{self.owner}.observe(): no extras (a step needs {list(self.loop.actor.extras_keys)}): "
                               f"call agent.get_actions(states) (exploring) for this step's states before observe, "
                               f"or pass the extras of get_actions(states, return_extras=True) as observe(..., "
                               f"**extras).")
        acted = len(extras["weights_version"])
        if acted != num_rows:
            raise RLGraphError(f"{self.owner}.observe(): {num_rows} rows, but the last get_actions(explore=True) "
                               f"acted for {acted}; observe each step's rows right after get_actions on their "
                               f"states, or pass that call's extras: get_actions(..., return_extras=True), then "
                               f"observe(..., **extras).")
        return extras

    # --- the loop's sink ---------------------------------------------------------------------------------------
    def observe_env_steps(self, num_steps):
        """Counts the loop's env steps for the learner."""
        self.learner.observe_env_steps(num_steps)

    def add_items(self, items):
        """Hands the loop's items to the learner, or, once reset steps were left out of unrolls of all
        environments, holds them back until they hold a column per environment."""
        if self._held_items is None or not self._all_rows:
            self.learner.add_items(items)
            return
        self._held_items.append(items)
        if sum(len(held["env_ids"]) for held in self._held_items) >= self._num_rows:
            for held in self._held_items:
                self.learner.add_items(held)
            self._held_items = []

    def reset(self):
        """Drops partial trajectories, unrolls held back and what the plain loop remembered."""
        self.loop.reset()
        self._pending_extras = self._last_step = self._held_items = None


def next_step_reset_rows(last, ids, env_ids, states, rewards, terminals, truncations):
    """Rows of an observed step that are gymnasium next-step auto-reset steps (None if none).

    Such a row's environment ended its episode in the ``last`` observed step, its reward is 0, it does not end
    an episode, and its ``states`` are that episode's final observation (the ``next_states`` observed then).

    Args:
        last: The last observed step: ``(next_states as passed, next_states checked, terminals, truncations,
            env_ids)``.
        ids: The env ids of this step's rows; ``env_ids``: as passed (None: the row positions).
        states, rewards, terminals, truncations: This step, checked (``StepCheck``).
    """
    _, finals, last_terminals, last_truncations, last_env_ids = last
    ended = last_terminals | last_truncations
    if not ended.any():
        return None
    if env_ids is None and last_env_ids is None and len(ended) == len(ids):  # Rows are env ids 0..N-1.
        rows = final_rows = np.flatnonzero(ended)
    else:
        last_ids = np.arange(len(ended)) if last_env_ids is None else last_env_ids
        where = dict(zip(last_ids[ended].tolist(), np.flatnonzero(ended).tolist()))
        rows = np.array([r for r, i in enumerate(ids.tolist()) if i in where], np.int64)
        final_rows = np.array([where[i] for i in ids[rows].tolist()], np.int64)
    candidates = (rewards[rows] == 0) & ~terminals[rows] & ~truncations[rows]
    if not candidates.any():
        return None
    rows, final_rows = rows[candidates], final_rows[candidates]
    same = np.ones(rows.size, bool)
    for now, final in zip(optree.tree_leaves(states), optree.tree_leaves(finals)):
        now, final = np.asarray(now)[rows], np.asarray(final)[final_rows]
        same &= (now == final).reshape(rows.size, -1).all(axis=1)
    return rows[same] if same.any() else None


def refuse_vector_env_spaces(owner, state_space, action_space):
    """Raises if the state and action spaces look like a gymnasium vector env's batched spaces."""
    num_envs = vector_env_batch_size(state_space, action_space)
    if num_envs is not None:
        raise RLGraphSpaceError(
            f"{owner}: state_space {_gym_name(state_space)} and action_space {_gym_name(action_space)} look like the "
            f"batched spaces of a vector environment ({num_envs} rows, one per environment); an agent takes the spaces "
            f"of one environment: pass env.single_observation_space and env.single_action_space (gymnasium's vector "
            f"envs), or env.state_space and env.action_space (rlgraph's VectorEnv).")


def _gym_name(space):
    """A one-line name of a gymnasium space (their reprs list every bound)."""
    return f"{type(space).__name__}{tuple(space.shape) if space.shape is not None else ''}"


def batched_action_hint(action_space):
    """A hint for a build error when the action space looks like a vector env's (gymnasium MultiDiscrete with
    equal dimensions), else None."""
    if type(action_space).__name__ != "MultiDiscrete" or not type(action_space).__module__.startswith("gymnasium"):
        return None
    nvec = np.asarray(action_space.nvec)
    if nvec.ndim != 1 or nvec.size < 2 or not (nvec == nvec[0]).all():
        return None
    return (f"action_space {_gym_name(action_space)} looks like a vector environment's batched action space: pass "
            f"env.single_action_space and env.single_observation_space")
