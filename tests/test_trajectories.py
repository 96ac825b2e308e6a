"""Tests of the trajectory builders (rlgraph.trajectories) against hand-rolled per-episode numpy references.

Every step carries a unique id ``uid = env_id * 100000 + t + 1`` (t: the env's step counter) in its values,
so items can be compared as multisets keyed by ``(env_id, uid of their first step)``. The references below
loop over each env's episodes in plain Python and share no code with the builders.
"""
from collections import defaultdict

import numpy as np
import optree
import pytest

from rlgraph.trajectories import NStepBuilder, SequenceBuilder, UnrollBuilder
from rlgraph.utils.errors import RLGraphError, RLGraphSpecError

GAMMA = 0.9


# ------------------------------------------------------------------------------------------- data and schedules


class Streams:
    """Random per-env step streams; logs every step and drop per env for the references."""

    def __init__(self, seed, p_terminal=0.07, p_truncation=0.05, nested=False):
        self.rng = np.random.default_rng(seed)
        self.p_terminal, self.p_truncation, self.nested = p_terminal, p_truncation, nested
        self.t = defaultdict(int)
        self.events = defaultdict(list)  # env -> [("step", dict) | ("drop",)]

    def rows(self, env_ids):
        """The next step of each of ``env_ids`` as a step dict (leading dim K) plus per-row info."""
        env_ids = np.asarray(env_ids, np.int64)
        k = env_ids.size
        uid = np.array([e * 100000 + self.t[e] + 1 for e in env_ids], np.float64)
        for e in env_ids:
            self.t[e] += 1
        rewards = self.rng.integers(-3, 4, k).astype(np.float32) / 2
        terminals = self.rng.random(k) < self.p_terminal
        truncations = (self.rng.random(k) < self.p_truncation) & ~terminals
        truncations |= (self.rng.random(k) < 0.3) & terminals  # Both flags set: counts as terminal.
        states = np.stack([uid, -uid], 1)
        if self.nested:
            states = {"pos": states, "img": uid[:, None, None] * np.ones((1, 2, 3))}
            actions = ((uid % 7).astype(np.int64), (uid * 2).astype(np.float64))
        else:
            actions = (uid % 7).astype(np.int64)
        for i, e in enumerate(env_ids):
            self.events[int(e)].append(("step", dict(uid=uid[i], reward=float(rewards[i]),
                                                     terminal=bool(terminals[i]), truncation=bool(truncations[i]))))
        return dict(uid=uid, states=states, actions=actions, rewards=rewards, terminals=terminals,
                    truncations=truncations)

    def drop(self, env_ids):
        for e in env_ids:
            self.events[int(e)].append(("drop",))


def schedule(kind, rng, calls=250, num_envs=6):
    """A list of ("add", ids) and ("drop", ids) operations."""
    ops = []
    if kind == "in_order":
        ops = [("add", list(range(num_envs)))] * calls
    elif kind == "shuffled":
        ops = [("add", rng.permutation(num_envs).tolist()) for _ in range(calls)]
    elif kind == "subsets":
        for _ in range(calls):
            ops.append(("add", rng.permutation(num_envs)[:rng.integers(1, num_envs + 1)].tolist()))
    elif kind == "churn":  # Ids stop (dropped) and new ids (any ints) start; a dropped id may come back.
        active, dropped, next_id = list(range(num_envs)), [], 50
        for _ in range(calls):
            if rng.random() < 0.1 and len(active) > 1:
                gone = [active.pop(int(rng.integers(len(active))))]
                ops.append(("drop", gone + [999999]))  # Unknown ids are ignored.
                dropped += gone
            if rng.random() < 0.1:
                if dropped and rng.random() < 0.3:
                    active.append(dropped.pop(0))
                else:
                    active.append(next_id)
                    next_id += int(rng.integers(1, 40))
            ops.append(("add", rng.permutation(active)[:rng.integers(1, len(active) + 1)].tolist()))
    elif kind == "actors":  # Actors with disjoint id ranges, interleaved; an actor that dies restarts anew.
        actors = [1000 * a + np.arange(4) for a in range(3)]
        restarts = 3
        for _ in range(calls):
            a = int(rng.integers(len(actors)))
            if rng.random() < 0.04:
                ops.append(("drop", actors[a].tolist()))
                actors[a] = 1000 * restarts + np.arange(int(rng.integers(1, 6)))
                restarts += 1
            ops.append(("add", rng.permutation(actors[a]).tolist()))
    else:
        raise ValueError(kind)
    return ops


SCHEDULES = ["in_order", "shuffled", "subsets", "churn", "actors"]


def run(builder_add, builder_drop, ops, streams):
    """Feeds ``ops``; returns the emitted outputs and the drop counts the builder returned."""
    outputs, drops = [], []
    for op, ids in ops:
        if op == "drop":
            drops.append(builder_drop(ids))
            streams.drop(ids)
        else:
            out = builder_add(ids, streams.rows(ids))
            if out is not None:
                outputs.append(out)
    return outputs, drops


def episodes_of(events, split_on_done=True):
    """Per env: [(steps, how)] with how "done", "drop" or "live" (the data ended)."""
    out, current = [], []
    for event in events:
        if event[0] == "drop":
            out.append((current, "drop"))
            current = []
        else:
            current.append(event[1])
            if split_on_done and (event[1]["terminal"] or event[1]["truncation"]):
                out.append((current, "done"))
                current = []
    out.append((current, "live"))
    return out


def expected_drops(ops, drops_per_env):
    """The reference's drop count of each drop op, from each env's drop counts in order."""
    drops_per_env = {env: list(d) for env, d in drops_per_env.items()}
    return [sum(drops_per_env[e].pop(0) for e in ids) for op, ids in ops if op == "drop"]


def assert_same_items(got, expected):
    """``got``/``expected``: lists of (key, values tuple); equal as multisets (floats to 1e-5)."""
    got_keys, exp_keys = [g[0] for g in got], [e[0] for e in expected]
    assert len(set(got_keys)) == len(got_keys), "an item was emitted twice"
    assert sorted(got_keys) == sorted(exp_keys)
    got, expected = sorted(got, key=lambda item: item[0]), sorted(expected, key=lambda item: item[0])
    for i in range(len(got[0][1]) if got else 0):  # One vectorized comparison per value.
        np.testing.assert_allclose(np.array([g[1][i] for g in got], np.float64),
                                   np.array([e[1][i] for e in expected], np.float64), rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------------------- NStepBuilder


def nstep_reference(events, env, n, gamma):
    """(items, drop counts, pending steps) of one env, from its episodes."""
    items, drops, pending = [], [], 0
    for steps, how in episodes_of(events):
        E = len(steps)
        for i in range(E):
            if i + n > E and how != "done":
                continue  # The window is not complete yet.
            window = steps[i:i + n]
            ret = sum(gamma ** k * s["reward"] for k, s in enumerate(window))
            last = window[-1]
            items.append(((env, steps[i]["uid"]), (ret, last["uid"] + 0.5, last["terminal"], steps[i]["uid"] % 7)))
        left = min(E, n - 1)  # The steps whose windows are not complete.
        if how == "drop":
            drops.append(left)
        elif how == "live":
            pending += left
    return items, drops, pending


def nstep_items(outputs, nested=False):
    items = []
    for out in outputs:
        states = out["states"]["pos"] if nested else out["states"]
        next_states = out["next_states"]["pos"] if nested else out["next_states"]
        actions = out["actions"][0] if nested else out["actions"]
        items += [((int(e), s), (r, ns, term, a)) for e, s, r, ns, term, a in zip(
            out["env_ids"], states[:, 0], out["rewards"], next_states[:, 0], out["terminals"], actions)]
        np.testing.assert_array_equal(out["weights_version"], states[:, 0] * 3)  # Carried from the first step.
        if nested:
            np.testing.assert_array_equal(out["states"]["img"], states[:, :1, None] * np.ones((1, 2, 3)))
            np.testing.assert_array_equal(out["actions"][1], 2 * states[:, 0])
            np.testing.assert_array_equal(out["next_states"]["img"], next_states[:, :1, None] * np.ones((1, 2, 3)))
    return items


def nstep_step(rows):
    """The NStepBuilder step of Streams rows: next_states encode uid + 0.5, a carried key."""
    step = {k: rows[k] for k in ("states", "actions", "rewards", "terminals", "truncations")}
    uid = rows["uid"]
    ns = np.stack([uid + 0.5, -uid], 1)
    if isinstance(rows["states"], dict):
        ns = {"pos": ns, "img": (uid + 0.5)[:, None, None] * np.ones((1, 2, 3))}
    step["next_states"] = ns
    step["weights_version"] = (uid * 3).astype(np.float64)
    return step


def as_int64(ids):
    """Ids as a vector of environments passes them: an int64 array (equal ids: the builders' fast path)."""
    return np.asarray(ids, np.int64)


def check_nstep(kind, n, seed, nested=False, ids_as=list):
    ops = schedule(kind, np.random.default_rng(seed))
    streams = Streams(seed, nested=nested)
    builder = NStepBuilder(n, GAMMA)
    outputs, drops = run(lambda ids, rows: builder.add(ids_as(ids), nstep_step(rows)), builder.drop, ops, streams)
    expected, exp_drops, pending = [], {}, 0
    for env, events in streams.events.items():
        items, exp_drops[env], p = nstep_reference(events, env, n, GAMMA)
        expected += items
        pending += p
    assert_same_items(nstep_items(outputs, nested), expected)
    assert builder.num_pending_steps == pending
    assert drops == expected_drops(ops, exp_drops)


@pytest.mark.parametrize("kind", SCHEDULES)
@pytest.mark.parametrize("n", [1, 3, 5])
def test_n_step_builder_matches_reference(kind, n):
    check_nstep(kind, n, seed=11 + n)


@pytest.mark.parametrize("kind", SCHEDULES)
@pytest.mark.parametrize("n", [1, 3])
def test_n_step_builder_fast_path_matches_reference(kind, n):
    # int64 array ids: calls with the ids and step layout of the previous call skip the checks and lookups.
    check_nstep(kind, n, seed=17 + n, ids_as=as_int64)


def test_n_step_builder_nested_values():
    check_nstep("churn", 3, seed=4, nested=True)


def test_n_step_builder_pass_through_and_emits_at_episode_end():
    builder = NStepBuilder(1, 0.5)
    step = dict(states=np.arange(3.0)[:, None], actions=np.arange(3), rewards=np.ones(3, np.float32),
                next_states=np.arange(3.0)[:, None] + 1, terminals=np.array([False, True, False]),
                truncations=np.array([False, False, True]))
    out = builder.add([7, 3, 5], step)
    assert out["states"] is step["states"] and out["rewards"] is step["rewards"]  # Straight through.
    assert out["terminals"].tolist() == [False, True, False] and out["env_ids"].tolist() == [7, 3, 5]
    assert "truncations" not in out and builder.num_pending_steps == 0
    # n = 4: an episode end emits all pending steps at once, each with its return cut there.
    builder = NStepBuilder(4, 0.5)
    for t in range(2):
        assert builder.add([1], dict(states=[[t]], actions=[t], rewards=[1.0], next_states=[[t + 1]],
                                     terminals=[False], truncations=[False])) is None
    out = builder.add([1], dict(states=[[2]], actions=[2], rewards=[1.0], next_states=[[3]], terminals=[False],
                                truncations=[True]))
    assert out["states"][:, 0].tolist() == [0, 1, 2] and out["rewards"].tolist() == [1.75, 1.5, 1.0]
    assert out["next_states"][:, 0].tolist() == [3, 3, 3] and out["terminals"].tolist() == [False] * 3
    assert builder.num_pending_steps == 0


# ------------------------------------------------------------------------------------------- UnrollBuilder


def unroll_reference(events, env, T):
    items, drops, pending = [], [], 0
    for steps, how in episodes_of(events, split_on_done=False):
        for c in range(len(steps) // T):
            chunk = steps[c * T:(c + 1) * T]
            items.append(((env, chunk[0]["uid"]), ([s["uid"] for s in chunk], [s["reward"] for s in chunk],
                                                  [s["terminal"] for s in chunk], chunk[0]["uid"] * 2,
                                                  chunk[-1]["uid"] + 0.5)))
        if how == "drop":
            drops.append(len(steps) % T)
        elif how == "live":
            pending += len(steps) % T
    return items, drops, pending


def unroll_step(rows, first_keys=("internal_states",)):
    uid = rows["uid"]
    step = dict(states=rows["states"], rewards=rows["rewards"], terminals=rows["terminals"],
                internal_states=(uid[:, None] * 2, np.ones((uid.size, 3), np.float32)),
                next_states=np.stack([uid + 0.5, -uid], 1))
    if first_keys == ("first_uid",):  # A flat first key (a single array).
        del step["internal_states"]
        step["first_uid"] = uid * 2
    return step


def check_unroll(kind, T, seed, nested=False, ids_as=list, first_keys=("internal_states",)):
    ops = schedule(kind, np.random.default_rng(seed))
    streams = Streams(seed, nested=nested)
    builder = UnrollBuilder(T, first_keys=first_keys, last_keys=("next_states",))
    outputs, drops = run(lambda ids, rows: builder.add(ids_as(ids), unroll_step(rows, first_keys)), builder.drop, ops,
                         streams)
    got = []
    for out in outputs:
        assert set(out) == {"unroll", "first", "last", "env_ids"}
        assert set(out["unroll"]) == {"states", "rewards", "terminals"}
        if first_keys == ("first_uid",):
            out["first"] = dict(internal_states=(out["first"]["first_uid"][:, None],
                                                 np.ones((len(out["env_ids"]), 3), np.float32)))
        states = out["unroll"]["states"]["pos"] if nested else out["unroll"]["states"]
        M = len(out["env_ids"])
        assert states.shape == (T, M, 2) and out["unroll"]["rewards"].shape == (T, M)
        for i in range(M):
            got.append(((int(out["env_ids"][i]), states[0, i, 0]),
                        (states[:, i, 0], out["unroll"]["rewards"][:, i], out["unroll"]["terminals"][:, i],
                         out["first"]["internal_states"][0][i, 0], out["last"]["next_states"][i, 0])))
            np.testing.assert_array_equal(out["first"]["internal_states"][1][i], 1.0)
            if nested:
                np.testing.assert_array_equal(out["unroll"]["states"]["img"][:, i], states[:, i, 0, None, None]
                                              * np.ones((1, 2, 3)))
    expected, exp_drops, pending = [], {}, 0
    for env, events in streams.events.items():
        items, exp_drops[env], p = unroll_reference(events, env, T)
        expected += items
        pending += p
    assert_same_items(got, expected)
    assert builder.num_pending_steps == pending
    assert drops == expected_drops(ops, exp_drops)


@pytest.mark.parametrize("kind", SCHEDULES)
@pytest.mark.parametrize("T", [1, 5])
def test_unroll_builder_matches_reference(kind, T):
    check_unroll(kind, T, seed=21 + T)


@pytest.mark.parametrize("kind", SCHEDULES)
@pytest.mark.parametrize("first_keys", [("internal_states",), ("first_uid",)])
def test_unroll_builder_fast_path_matches_reference(kind, first_keys):
    # int64 array ids: calls with the ids and step layout of the previous call skip the checks and lookups.
    check_unroll(kind, 5, seed=27, ids_as=as_int64, first_keys=first_keys)


def test_unroll_builder_nested_values_and_copies():
    check_unroll("actors", 4, seed=5, nested=True)
    builder = UnrollBuilder(2)
    builder.add([0], dict(x=np.array([1.0])))
    out = builder.add([0], dict(x=np.array([2.0])))
    builder.add([0], dict(x=np.array([3.0])))
    builder.add([0], dict(x=np.array([4.0])))
    np.testing.assert_array_equal(out["unroll"]["x"][:, 0], [1.0, 2.0])  # Not overwritten: a copy.
    assert out["first"] == {} and out["last"] == {}


# ------------------------------------------------------------------------------------------- SequenceBuilder


def sequence_reference(events, env, L, S, P):
    """(items [(env, row uids of a sequence)], drop counts, pending steps) of one env, from its episodes."""
    items, drops, pending = [], [], 0
    for steps, how in episodes_of(events):
        rows = [0.0] * P
        for s in steps:
            rows.append(s["uid"])
            if s["truncation"] and not s["terminal"]:
                rows.append(s["uid"] + 0.5)  # The bootstrap step.
        E = len(rows) if steps else 0
        k = 0
        while k * S + L <= E:
            items.append((env, rows[k * S:k * S + L]))
            k += 1
        last_end = (k - 1) * S + L if k else 0
        if how == "done" and E > last_end:
            items.append((env, rows[k * S:]))
        elif how != "done":
            left = max(E - max(last_end, P), 0)
            if how == "drop":
                drops.append(left)
            else:
                pending += left
    return items, drops, pending


def sequence_step(rows):
    uid = rows["uid"]
    step = dict(obs=rows["states"], actions=rows["actions"], rewards=rows["rewards"],
                internal_states=(uid[:, None] * np.ones((1, 2)), -uid[:, None]))
    dones = rows["terminals"] | rows["truncations"]
    boot = np.flatnonzero(rows["truncations"] & ~rows["terminals"])
    b = uid[boot] + 0.5
    obs = np.stack([b, -b], 1)
    if isinstance(rows["states"], dict):
        obs = {"pos": obs, "img": b[:, None, None] * np.ones((1, 2, 3))}
        actions = ((b % 7).astype(np.int64) * 0, b * 0)
    else:
        actions = (b % 7).astype(np.int64) * 0
    boot_step = dict(obs=obs, actions=actions, rewards=np.zeros(boot.size, np.float32),
                     internal_states=(b[:, None] * np.ones((1, 2)), -b[:, None]))
    return step, dones, boot, boot_step


def sequence_items(outputs, L, nested=False):
    """[(env, uids of the mask-True rows)] of the builder's outputs, after checking their layout."""
    got = []
    for out in outputs:
        assert set(out) == {"obs", "actions", "rewards", "mask", "internal_states", "env_ids"}
        obs = out["obs"]["pos"] if nested else out["obs"]
        mask = out["mask"]
        B, lengths = len(out["env_ids"]), mask.sum(1)
        assert obs.shape == (B, L, 2) and mask.shape == (B, L) and mask.dtype == bool
        np.testing.assert_array_equal(mask, np.arange(L)[None, :] < lengths[:, None])
        np.testing.assert_array_equal(obs[~mask], 0.0)  # Zero padding after the end.
        np.testing.assert_array_equal(out["rewards"][~mask], 0.0)
        first = obs[:, 0, 0]  # The state is the one of the first row (0 for a start padding row).
        np.testing.assert_array_equal(out["internal_states"][0], first[:, None] * np.ones((1, 2)))
        np.testing.assert_array_equal(out["internal_states"][1], -first[:, None])
        if nested:
            np.testing.assert_array_equal(out["obs"]["img"], obs[..., :1, None] * np.ones((1, 1, 2, 3)))
        got += [(int(e), obs[i, :n, 0]) for i, (e, n) in enumerate(zip(out["env_ids"], lengths))]
    return got


def check_sequences(kind, L, S, P, seed, nested=False):
    ops = schedule(kind, np.random.default_rng(seed), calls=150)
    streams = Streams(seed, nested=nested)
    builder = SequenceBuilder(L, S, start_padding=P)
    starts_ok = []

    def add(ids, rows):
        # episode_starts: True exactly for ids whose previous step ended an episode, dropped and new ids.
        expected = [not streams.events[e][:-1] or streams.events[e][-2][0] == "drop"
                    or streams.events[e][-2][1]["terminal"] or streams.events[e][-2][1]["truncation"] for e in ids]
        starts_ok.append(builder.episode_starts(ids).tolist() == expected)
        step, dones, boot, boot_step = sequence_step(rows)
        return builder.add(ids, dict(step, dones=dones, bootstrap_rows=boot, bootstrap_step=boot_step))

    outputs, drops = run(add, builder.drop, ops, streams)
    assert all(starts_ok)
    got = [(env, tuple(uids.tolist())) for env, uids in sequence_items(outputs, L, nested)]
    expected, exp_drops, pending = [], {}, 0
    for env, events in streams.events.items():
        items, exp_drops[env], p = sequence_reference(events, env, L, S, P)
        expected += [(e, tuple(rows)) for e, rows in items]
        pending += p
    assert len(set(got)) == len(got), "a sequence was emitted twice"
    assert sorted(got) == sorted(expected)  # Multisets of (env, row uids): padding rows have uid 0.
    assert builder.num_pending_steps == pending
    assert drops == expected_drops(ops, exp_drops)


@pytest.mark.parametrize("kind", SCHEDULES)
@pytest.mark.parametrize("L,S,P", [(6, 3, 0), (6, 4, 2), (5, 5, 0), (4, 1, 3), (6, 5, 4)])
def test_sequence_builder_matches_reference(kind, L, S, P):
    check_sequences(kind, L, S, P, seed=31 + L + S + P)


def test_sequence_builder_nested_values():
    check_sequences("churn", 6, 3, 2, seed=8, nested=True)


def test_sequence_builder_start_padding_rows_are_masked_true():
    builder = SequenceBuilder(5, 2, start_padding=2)
    out = builder.add([4], dict(x=np.array([7.0]), internal_states=np.array([[1.0]]), dones=[True]))
    assert out["mask"].tolist() == [[True, True, True, False, False]]
    assert out["x"].tolist() == [[0.0, 0.0, 7.0, 0.0, 0.0]] and out["internal_states"].tolist() == [[0.0]]
    assert builder.episode_starts([4, 5]).tolist() == [True, True]


# ------------------------------------------------------------------------------------------- common behaviour


def sequence_step_with_dones(rows):
    step, dones, _, _ = sequence_step(rows)
    return dict(step, dones=dones)


def make_builders():
    return dict(nstep=(NStepBuilder(3, GAMMA), lambda b, ids, rows: b.add(ids, nstep_step(rows))),
                unroll=(UnrollBuilder(4, first_keys=("internal_states",), last_keys=("next_states",)),
                        lambda b, ids, rows: b.add(ids, unroll_step(rows))),
                sequence=(SequenceBuilder(5, 2, start_padding=1),
                          lambda b, ids, rows: b.add(ids, sequence_step_with_dones(rows))))


@pytest.mark.parametrize("name", ["nstep", "unroll", "sequence"])
def test_drop_forgets_partial_windows_and_slots_are_reused(name):
    builder, add = make_builders()[name]
    streams = Streams(0, p_terminal=0.0, p_truncation=0.0)
    add(builder, [1, 2], streams.rows([1, 2]))
    add(builder, [1, 2], streams.rows([1, 2]))
    pending = builder.num_pending_steps
    assert pending == 4
    assert builder.drop([2, 12345]) == 2 and builder.num_pending_steps == pending - 2
    assert builder.drop([2]) == 0
    # A dropped id starts afresh: its old partial window never appears.
    outputs = []
    for _ in range(12):
        out = add(builder, [2, 1], streams.rows([2, 1]))
        outputs += [out] if out is not None else []
    uids = set()
    for out in outputs:
        for value in (out.get("states"), out.get("obs"), out.get("unroll", {}).get("states")):
            if value is not None:
                uids |= set(np.asarray(value)[..., 0].ravel().tolist())
    assert 200001.0 not in uids and 200002.0 not in uids and 200003.0 in uids
    # Ids keep changing: the storage stays bounded by the number of ids live at one time.
    capacity = builder._slots.capacity
    for k in range(200):
        ids = [1000 + 2 * k, 1001 + 2 * k]
        add(builder, ids, streams.rows(ids))
        builder.drop(ids)
    assert builder._slots.capacity == capacity and builder._slots.num_ids == 2
    builder.reset()
    assert builder.num_pending_steps == 0


@pytest.mark.parametrize("name", ["nstep", "unroll", "sequence"])
def test_bad_calls_raise_clear_errors(name):
    builder, add = make_builders()[name]
    streams = Streams(0)
    rows = streams.rows([0, 1, 2])
    step = dict(nstep=nstep_step, unroll=unroll_step,
                sequence=lambda r: dict(sequence_step(r)[0], dones=np.zeros(3, bool)))[name](rows)
    with pytest.raises(RLGraphError, match="unique.*repeated: \\[1\\]"):
        builder.add([0, 1, 1], step)
    required = dict(nstep="rewards", unroll="next_states", sequence="internal_states")[name]
    with pytest.raises(RLGraphError, match=f"lacks the required key.*{required}"):
        builder.add([0, 1, 2], {k: v for k, v in step.items() if k != required})
    with pytest.raises(RLGraphError, match="leading dimension of 2"):
        builder.add([0, 1], step)
    with pytest.raises(RLGraphError, match="ints"):
        builder.add([0.5, 1, 2], step)
    with pytest.raises(RLGraphError, match=">= 0"):
        builder.add([-1, 1, 2], step)
    with pytest.raises(RLGraphError, match="dict"):
        builder.add([0, 1, 2], [1, 2, 3])
    assert builder.num_pending_steps == 0
    builder.add([0, 1, 2], step)
    with pytest.raises(RLGraphError, match="structure"):
        builder.add([0, 1, 2], dict(step, surplus=np.zeros(3)))
    with pytest.raises(RLGraphError, match="shape"):
        key = dict(nstep="rewards", unroll="rewards", sequence="rewards")[name]
        builder.add([0, 1, 2], dict(step, **{key: np.zeros((3, 2), np.float32)}))


@pytest.mark.parametrize("name", ["nstep", "unroll"])
def test_fast_path_refuses_bad_steps_and_takes_other_dtypes(name):
    # After steps with the same int64 ids and layout (the fast path), a step that differs still goes through
    # every check (and changes nothing when it fails), and one with other (castable) dtypes is converted.
    builder, _ = make_builders()[name]
    make = dict(nstep=nstep_step, unroll=unroll_step)[name]
    streams = Streams(0, p_terminal=0.0, p_truncation=0.0)
    ids = np.arange(3)
    outputs = [builder.add(ids.copy(), make(streams.rows(ids))) for _ in range(6)]
    assert any(out is not None for out in outputs)
    step, pending = make(streams.rows(ids)), builder.num_pending_steps
    with pytest.raises(RLGraphError, match="leading dimension of 3"):
        builder.add(ids, dict(step, rewards=step["rewards"][:2]))
    with pytest.raises(RLGraphError, match="leading dimension of 2"):
        builder.add(ids[:2], step)
    with pytest.raises(RLGraphError, match="structure"):
        builder.add(ids, dict(step, surplus=np.zeros(3)))
    with pytest.raises(RLGraphError, match="shape"):
        builder.add(ids, dict(step, rewards=np.zeros((3, 2), np.float32)))
    assert builder.num_pending_steps == pending
    reference, _ = make_builders()[name]
    streams_ref = Streams(0, p_terminal=0.0, p_truncation=0.0)
    for _ in range(6):
        reference.add([0, 1, 2], make(streams_ref.rows(ids)))  # Lists: never the fast path.
    step_ref = make(streams_ref.rows(ids))
    for _ in range(3):  # float64 rewards: converted; then back to float32 (the fast path again).
        got = builder.add(ids, dict(step, rewards=step["rewards"].astype(np.float64)))
        expected = reference.add([0, 1, 2], dict(step_ref, rewards=step_ref["rewards"].astype(np.float64)))
        for out, ref in ((got, expected), (builder.add(ids, step), reference.add([0, 1, 2], step_ref))):
            assert (out is None) == (ref is None)
            if out is not None:
                for a, b in zip(optree.tree_leaves(out), optree.tree_leaves(ref)):
                    np.testing.assert_array_equal(a, b)
        step, step_ref = make(streams.rows(ids)), make(streams_ref.rows(ids))
    assert builder.num_pending_steps == reference.num_pending_steps


def test_sequence_builder_bad_bootstrap_and_specs():
    builder = SequenceBuilder(4, 2)
    step = dict(x=np.zeros(2), internal_states=np.zeros((2, 1)), dones=[False, True])
    with pytest.raises(RLGraphError, match="bootstrap_rows'\\] must be rows of this step"):
        builder.add([0, 1], dict(step, bootstrap_rows=[5], bootstrap_step=dict(x=np.zeros(1),
                                                                                internal_states=np.zeros((1, 1)))))
    with pytest.raises(RLGraphError, match="structure"):
        builder.add([0, 1], dict(step, bootstrap_rows=[1], bootstrap_step=dict(x=np.zeros(1), y=np.zeros(1),
                                                                                internal_states=np.zeros((1, 1)))))
    with pytest.raises(RLGraphError, match="bootstrap_step"):
        builder.add([0, 1], dict(step, bootstrap_rows=[1]))
    with pytest.raises(RLGraphError, match="dones"):
        builder.add([0, 1], dict(step, dones=[False]))
    with pytest.raises(RLGraphError, match="required key 'dones'"):
        builder.add([0, 1], {k: v for k, v in step.items() if k != "dones"})
    with pytest.raises(RLGraphError, match="mask"):
        builder.add([0, 1], dict(step, mask=np.zeros(2)))
    assert builder.num_pending_steps == 0
    for kwargs in (dict(stride=5), dict(stride=0), dict(start_padding=4), dict(sequence_length=0)):
        with pytest.raises(RLGraphSpecError):
            SequenceBuilder(**dict(dict(sequence_length=4, stride=2), **kwargs))
    for make in (lambda: NStepBuilder(0, 0.9), lambda: NStepBuilder(3, -1.0), lambda: UnrollBuilder(0),
                 lambda: UnrollBuilder(4, first_keys="h")):
        with pytest.raises(RLGraphSpecError):
            make()


def test_trajectories_import_no_backend():
    import subprocess
    import sys
    code = ("import sys, rlgraph.trajectories; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'tensorflow') "
            "or m.startswith(('rlgraph.agents', 'rlgraph.components'))]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
