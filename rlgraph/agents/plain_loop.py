"""What the plain loop (``get_actions``, ``env.step``, ``observe``, ``update``) needs besides the agent's roles:
recognising gymnasium's next-step auto-reset steps, and refusing a vector environment's batched spaces."""
import numpy as np
import optree

from rlgraph.spaces.space_utils import vector_env_batch_size
from rlgraph.utils.errors import RLGraphSpaceError


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
