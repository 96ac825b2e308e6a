"""IMPALA's ``num_minibatches``: each batch (new or replayed) is learned from in that many optimizer steps, each on
an equal share of its environment columns, shuffled by the learner's generator; the same weights as a learner
without minibatches given those shares one after another; bad values, and more minibatches than the batch has
columns, refused with a message naming them."""
import os
import sys

import numpy as np
import pytest

from rlgraph.utils.errors import RLGraphError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_execute_steps import batch as unroll_batch  # noqa: E402
from test_impala_replay import SEED, impala  # noqa: E402


def columns_of(batch, columns):
    """The batch's environment columns ``columns`` (unroll [T, B], bootstrap [B], versions [T, B])."""
    return dict(unroll={k: v[:, columns] for k, v in batch["unroll"].items()},
                bootstrap={k: v[columns] for k, v in batch["bootstrap"].items()},
                policy_versions=batch["policy_versions"][:, columns])


def assert_same_weights(a, b):
    a, b = a.executor.get_weights(trainable_only=False), b.executor.get_weights(trainable_only=False)
    for key in a:
        np.testing.assert_allclose(a[key], b[key], rtol=1e-5, atol=1e-6, err_msg=key)


@pytest.mark.all_backends
@pytest.mark.parametrize("num_minibatches", [2, 4])
def test_minibatches_are_steps_on_shuffled_column_shares(backend, num_minibatches):
    split = impala(backend, num_minibatches=num_minibatches)
    whole = impala(backend)
    whole.executor.set_weights(split.executor.get_weights(trainable_only=False))
    rng = np.random.default_rng(SEED)  # The learner's generator: seeded with the agent's seed.
    for i in range(2):
        batch = unroll_batch(split, version=num_minibatches * i, seed=i)
        out = split.learner.update(batch)
        assert out["num_updates"] == num_minibatches
        shares = np.split(rng.permutation(8), num_minibatches)
        for share in shares:
            assert len(share) == 8 // num_minibatches
            whole.learner.update(columns_of(batch, share))
        assert_same_weights(split, whole)
    assert split.learner.updates == whole.learner.updates == 2 * num_minibatches


@pytest.mark.all_backends
def test_replayed_batches_are_split_too(backend):
    agent = impala(backend, num_minibatches=2, replay_proportion=1.0, replay_slots=1)
    out = agent.learner.update(unroll_batch(agent))
    assert out["replayed_batches"] == 1 and out["num_updates"] == 4


@pytest.mark.parametrize("value, says", [(0, "positive int"), (1.5, "int"), ("two", "int")])
def test_bad_num_minibatches_is_refused_naming_the_key(value, says):
    with pytest.raises(RLGraphError) as info:
        impala("pytorch", num_minibatches=value)
    message = str(info.value)
    assert "num_minibatches" in message and says in message, message


def test_more_minibatches_than_columns_is_refused_naming_both():
    agent = impala("pytorch", num_minibatches=16)
    with pytest.raises(RLGraphError, match=r"num_minibatches=16 is more than the batch's 8 environment columns"):
        agent.learner.update(unroll_batch(agent))
