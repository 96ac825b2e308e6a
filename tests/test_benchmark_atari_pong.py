"""Smoke test of ``benchmarks/atari_pong.py`` on a shrunken batch: both sides of each ratio do the same work."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))

import atari_pong  # noqa: E402

#: A small unroll (4 steps x 4 environments, 2 epochs x 2 minibatches of 2 columns) keeps the test short.
SMALL = dict(num_envs=4, unroll_length=4)


def test_inference_computes_the_same_values(backend):
    row = atari_pong.measure_act(backend, rounds=1, seconds=0.0, **SMALL)
    assert row["value_diff"] < 1e-4
    assert row["ours"] > 0 and row["bare"] > 0


def test_first_update_has_the_same_loss(backend):
    row = atari_pong.measure_learn(backend, rounds=1, seconds=0.0, **SMALL)
    assert np.isfinite(row["loss_ours"])
    assert abs(row["loss_ours"] - row["loss_bare"]) < 1e-4 * max(1.0, abs(row["loss_bare"]))
    assert row["samples"] == 4 * 4 * 2 and row["ratio"] > 0
