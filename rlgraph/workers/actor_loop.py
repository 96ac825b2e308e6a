"""The actor's step sequence, written once: act for environment rows, and turn each step into trajectory items."""
import numpy as np
import optree

from rlgraph.utils.errors import RLGraphError


class ActorLoop:
    """One actor's step sequence over a vector of environments, keyed by environment id.

    Its two halves, which an engine may call apart (the central-inference server answers its actors in
    between, so that they step their environments while it assembles trajectories):

    - ``act(states, env_ids)``: the actor's actions and extras for these rows (``Actor.get_actions``), with
      everything the actor needs passed to it explicitly: the rows' recurrent state, which the loop keeps per
      environment id (``carry_states`` moves it on after each step: the extras' next state, zeroed where an
      episode ended), the fixed exploration epsilons of those ids (epsilon-greedy actors with one epsilon per
      environment) and the env steps that drive the exploration schedule;
    - ``add_step(...)``: this step's results become trajectory items: the actor's step rows
      (``Actor.make_step``), added to the trajectory builder, which returns the items they complete; the actor
      completes those (``Actor.process_items``) and the loop hands them over to its ``sink``, with the env
      steps taken, and returns them.

    ``observe`` is the second half for a vector of environments that steps with the loop: ``check_step``
    (where the loop has a ``StepCheck``), ``add_step`` and ``carry_states``. A worker's whole step,
    ``obs, items, num_env_steps = loop.step(env, obs)``, is::

        actions, extras = loop.act(obs)
        next_obs, rewards, terminals, truncations = env.step(actions)
        items = loop.observe(obs, actions, rewards, env.final_obs, terminals, truncations, extras)
        obs = next_obs

    Args:
        actor: The acting role (``rlgraph.agents.actor.Actor``).
        builder: The trajectory builder (``Agent.make_trajectory_builder()``; any builder of
            ``rlgraph.trajectories``: ``add(env_ids, step)``).
        sink: Where finished items go: ``observe_env_steps(num_steps)`` is told every step's env steps and
            ``add_items(items)`` gets the items (a ``Learner``); None: ``add_step`` only returns them.
        check: A ``rlgraph.agents.step_check.StepCheck``, run by ``observe`` on each step before anything of it
            reaches the actor, builder or sink; None: steps are taken as they come (from a ``VectorEnv`` and
            this loop's actor).
        num_envs: The number of environment ids (``0 .. num_envs - 1``) where ``act`` gets ``env_ids``: the
            recurrent state and fixed epsilons are kept for all of them. None: every call is for all
            environments, row ``i`` being id ``i``.
        defer_processing: ``add_step`` returns the builder's items as they are, for the owner to complete many
            steps' items at once (``Actor.process_item_list``) before they leave; needs ``sink`` None.

    Attributes:
        internal_states: The recurrent state per environment (a tuple of arrays, one row per environment id),
            or None: new episodes (or an actor without recurrent state). Its owner may set it (a restored run).
    """

    def __init__(self, actor, builder, sink=None, check=None, num_envs=None, defer_processing=False):
        if defer_processing and sink is not None:
            raise RLGraphError("ActorLoop: defer_processing hands the items back unprocessed, so it needs no sink "
                               "(a sink takes them completed).")
        self.actor = actor
        self.defer_processing = bool(defer_processing)
        self.builder = builder
        self.sink = sink
        self.check = check
        self.num_envs = None if num_envs is None else int(num_envs)
        self.internal_states = None
        self._stateless = False  # The actor keeps no recurrent state (known once asked).
        self._epsilons = None  # (Fixed epsilons per environment id or None,) once asked.
        self._ids = np.zeros(0, np.int64)

    def env_ids(self, num_rows):
        """The ids ``0 .. num_rows - 1`` of a call for all environments (one array, reused)."""
        if self._ids.size != num_rows:
            self._ids = np.arange(num_rows, dtype=np.int64)
        return self._ids

    # --- acting -------------------------------------------------------------------------------------------
    def act(self, states, env_ids=None, internal_states=None, explore=True, timesteps=None):
        """``(actions, extras)`` of the actor for these rows.

        Args:
            states: One row per environment.
            env_ids: The rows' environment ids (in ``[0, num_envs)``); None: all environments, in id order.
            internal_states: The rows' recurrent state; None: the loop's own (``internal_states``; for a call
                for all environments, used where it has the call's number of rows, else new episodes).
            explore: Explore (sample, epsilon-greedy) or act greedily.
            timesteps: The env steps that drive the exploration schedule (None: the actor's own count).
        """
        kwargs = {} if timesteps is None else dict(timesteps=timesteps)
        if env_ids is None:
            if internal_states is None and self.internal_states is not None and \
                    _rows(self.internal_states) == _rows(states):
                internal_states = self.internal_states
        else:
            if internal_states is None:
                table = self._state_table()
                internal_states = None if table is None else tuple(s[env_ids] for s in table)
            epsilons = self._env_epsilons()
            if epsilons is not None:
                kwargs["epsilons"] = epsilons[env_ids]
        return self.actor.get_actions(states, explore, internal_states, **kwargs)

    def carry_states(self, extras, rewards, dones, env_ids=None):
        """Moves the recurrent state on past a step: the next state in the step's ``extras``, zeroed for
        environments whose episode ended (``dones``); ``env_ids``: the step's ids (None: all, in id order)."""
        after = self.actor.next_internal_states(extras, rewards, dones)
        if env_ids is None:
            self.internal_states = after
        elif after is not None:
            for table, rows in zip(self._state_table(), after):
                table[env_ids] = rows

    def _state_table(self):
        """The recurrent state of all ``num_envs`` environments (created as new episodes), or None."""
        if self.internal_states is None and not self._stateless:
            initial = self.actor.initial_internal_states(self._num_envs())
            if initial is None:
                self._stateless = True
            else:
                self.internal_states = tuple(np.array(s, copy=True) for s in initial)
        return self.internal_states

    def _env_epsilons(self):
        """The actor's fixed epsilons of all ``num_envs`` environments (None: it has none)."""
        if self._epsilons is None:
            row_epsilons = getattr(self.actor, "row_epsilons", None)
            self._epsilons = (None if row_epsilons is None else row_epsilons(self._num_envs()),)
        return self._epsilons[0]

    def _num_envs(self):
        if self.num_envs is None:
            raise RLGraphError(f"ActorLoop of {type(self.actor).__name__}: a call for some environments (env_ids) "
                               f"needs the loop's num_envs (the number of environment ids); this loop was built "
                               f"without it.")
        return self.num_envs

    # --- a step's results become trajectory items -----------------------------------------------------------
    def check_step(self, states, actions, rewards, next_states, terminals, truncations=None, env_ids=None,
                   extras=None):
        """The step's arguments checked and converted by the loop's ``StepCheck`` (see ``StepCheck.check``)."""
        return self.check.check(states, actions, rewards, next_states, terminals, truncations, env_ids,
                                {} if extras is None else extras)

    def add_step(self, states, actions, rewards, next_states, terminals, truncations, extras, env_ids=None):
        """The step's rows (``Actor.make_step``) into the builder; the items they complete, completed by the actor
        (``Actor.process_items``; left as they are with ``defer_processing``), go to the sink; returns them (None if
        none).

        Args:
            states, actions, rewards, next_states, terminals, truncations: The step (one row per environment;
                ``next_states``: what the actions led to, i.e. an ended episode's final observation).
            extras: What ``act`` returned with the step's actions.
            env_ids: The rows' environment ids (None: all environments, in id order).
        """
        actor, sink = self.actor, self.sink
        num_rows = len(terminals)
        step = actor.make_step(states, actions, rewards, next_states, terminals, truncations, extras)
        items = self.builder.add(self.env_ids(num_rows) if env_ids is None else env_ids, step)
        if sink is not None:
            sink.observe_env_steps(num_rows)
        if items is not None and not self.defer_processing:
            items = actor.process_items(items)
            if sink is not None:
                sink.add_items(items)
        return items

    def observe(self, states, actions, rewards, next_states, terminals, truncations, extras, env_ids=None):
        """One step of environments that step with this loop: checked (where the loop has a ``StepCheck``),
        added (``add_step``, whose items it returns) and the recurrent state carried on (``carry_states``)."""
        if self.check is not None:
            states, actions, rewards, next_states, terminals, truncations, env_ids = self.check_step(
                states, actions, rewards, next_states, terminals, truncations, env_ids, extras)
        items = self.add_step(states, actions, rewards, next_states, terminals, truncations, extras, env_ids)
        self.carry_states(extras, rewards, terminals | truncations, env_ids)
        return items

    def step(self, env, states, timesteps=None):
        """One step of a vector env (``rlgraph.environments.VectorEnv``) that steps with this loop: ``act`` on
        ``states`` (its current observations), ``env.step`` and ``observe`` (with ``env.final_obs`` as the next
        states, so that episodes that ended bootstrap from their last observation, not the reset's).

        Returns:
            ``(next_states, items, num_env_steps)``: the observations to act on next, the items the step
            completed (None: none) and the env steps it took.
        """
        actions, extras = self.act(states, timesteps=timesteps)
        next_states, rewards, terminals, truncations = env.step(actions)
        items = self.observe(states, actions, rewards, env.final_obs, terminals, truncations, extras)
        return next_states, items, len(rewards)

    # --- environments that start over ------------------------------------------------------------------------
    def forget(self, env_ids):
        """Drops the partial trajectories of ``env_ids`` and starts their recurrent state afresh (their
        environments start over).

        Returns:
            The env steps dropped (held in partial trajectories that no item covers).
        """
        lost = int(self.builder.drop(env_ids) or 0)
        if self.internal_states is not None:
            initial = self.actor.initial_internal_states(len(env_ids))
            for table, rows in zip(self.internal_states, initial):
                table[env_ids] = rows
        return lost

    def reset(self, internal_states=True):
        """Drops all partial trajectories and, with ``internal_states``, the recurrent state (new episodes)."""
        self.builder.reset()
        if internal_states:
            self.internal_states = None


def _rows(tree):
    """The number of rows of a (possibly nested) batch."""
    return int(np.shape(optree.tree_leaves(tree)[0])[0])
