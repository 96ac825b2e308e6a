"""The engines with JAX learners: Ray actors and central inference train a JAX learner; the distributed
engine refuses JAX in a process where JAX ran already (its learner group must come first) before any learner process
starts (distributed JAX learners themselves: tests/test_jax_distributed.py)."""
import copy
import os
import time

import numpy as np
import pytest

from rlgraph.engines.runner import load_config, make_engine
from rlgraph.utils.errors import RLGraphSpecError

pytest.importorskip("jax")

CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")


def engine_for(name, engine, **execution):
    config, _ = load_config(os.path.join(CONFIGS, f"{name}.json"))
    config = copy.deepcopy(config)
    config["execution_spec"] = dict(execution)
    return make_engine(config, executor=engine, backend="jax", seed=0)[:2]


def changed(before, after):
    """The names of the weights that differ between two ``get_weights`` dicts (same keys)."""
    assert list(before) == list(after)
    return [k for k in before if not np.array_equal(before[k], after[k])]


@pytest.mark.slow  # ~35 s on the loaded 2-core machine: a local Ray, two actors importing JAX and compiling.
@pytest.mark.timeout(180)
def test_ray_actors_act_with_the_jax_learners_new_weights():
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        engine, agent = engine_for("impala_cartpole", "ray", num_actors=2, envs_per_actor=4, learner_queue_size=4)
        try:
            initial = agent.get_weights()
            assert all(type(v) is np.ndarray for v in initial.values())  # Numpy, not jax.Array, crosses processes.
            agent.learner.set_batch_columns(8, max_pending=engine.queue_size)
            out = engine.run(1000)
            updates = agent.updates
            assert updates == len(out["results"]) >= 2 and all(np.isfinite(r["loss"]) for r in out["results"])
            assert agent.learner.weights_version == updates
            learned = agent.get_weights()
            assert changed(initial, learned)
            # The weights the actors received: one sample with the current weights (as _launch sends them), then
            # the actor agent's weights equal the learner's exactly, and it acts at the learner's version.
            ref, version = engine._current_weights()
            assert version == updates
            for actor in engine.actors:
                items, stats = actor.sample.options(num_returns=2).remote(1, ref, version, None)
                assert ray.get(stats)["weights_version"] == updates
                weights, actor_version = ray.get(actor.weights.remote())
                assert actor_version == updates and not changed(learned, weights)
            assert engine.summary()["actor_restarts"] == 0
        finally:
            engine.close()
    finally:
        ray.shutdown()


@pytest.mark.timeout(180)
def test_central_inference_serves_the_jax_learners_current_weights(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))  # (as rlgraph train sets it)
    engine, agent = engine_for("appo_cartpole", "central", num_actors=2, envs_per_actor=8)
    try:
        initial = agent.get_weights()
        out = engine.run(1500)
        assert out["env_steps"] >= 1500
        assert engine.actor_backends() == [[], []]  # The actors import no backend, JAX neither.
        updates = agent.updates
        assert updates == sum(r["num_updates"] for r in out["results"]) >= 3
        assert all(np.isfinite(r["loss"]) for r in out["results"])
        assert agent.learner.weights_version == updates and changed(initial, agent.get_weights())
        # Inference runs on the learner's current weights: the last result's steps were acted on by recent versions
        # (had the actors acted with the initial weights, its policy lag would be at least the updates before it).
        last = out["results"][-1]
        assert len(out["results"]) >= 4 and last["policy_lag_max"] < updates - last["num_updates"]
    finally:
        engine.close()


def test_distributed_engine_refuses_jax_where_jax_ran_before_any_learner_starts():
    """jax.distributed.initialize must come before JAX runs anything in a learner's process: in this process, where
    JAX ran, the distributed engine refuses at once, before it starts any learner process."""
    import jax
    from rlgraph.executors.process_group import current_process_group

    jax.numpy.zeros(1).block_until_ready()
    start = time.perf_counter()
    with pytest.raises(RLGraphSpecError, match=r"^distributed learners on JAX: jax.distributed.initialize must come "
                                               r"before JAX runs anything"):
        engine_for("appo_cartpole", "distributed", num_learners=2)
    assert current_process_group() is None and time.perf_counter() - start < 10
