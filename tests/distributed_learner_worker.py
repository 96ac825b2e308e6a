"""One learner process of a distributed-equivalence check: UPDATES updates on its share of fixed batches.

Usage: ``python tests/distributed_learner_worker.py BACKEND KIND OPTIMIZER RANK WORLD ADDRESSES OUTDIR``.
With WORLD 1 the learner updates on the whole batches alone and writes ``OUTDIR/initial.npz`` (its initial
variables) and ``OUTDIR/single.npz``; with WORLD > 1 it joins the learner group at ADDRESSES (comma-separated
host:port, one per learner), starts from ``initial.npz``, updates on slice RANK of every batch (split like
the towers split it) and writes ``OUTDIR/rank<RANK>.npz``. Used by ``tests/test_distributed_learners.py``.
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import device_towers_worker as towers  # noqa: E402


class _NumpyOps:
    @staticmethod
    def split(x, k, axis):
        return np.split(np.asarray(x), k, axis=axis)


def main(backend, kind, optimizer, rank, world, addresses, outdir):
    from rlgraph.agents import Agent
    from rlgraph.executors.multi_device_sync import _split
    from rlgraph.spaces import FloatBox, IntBox
    strategy = None
    if world > 1:
        from rlgraph.executors.process_group import init_process_group
        init_process_group(backend, rank, world, addresses.split(","), timeout_s=60)
        strategy = {"type": "distributed_sync"}
    agent = Agent.from_spec(towers.small_config(kind, optimizer), state_space=FloatBox(shape=(4,)),
                            action_space=IntBox(2), backend=backend, seed=3, device_strategy=strategy)
    executor = agent.executor
    if world == 1:
        np.savez(os.path.join(outdir, "initial.npz"), **executor.get_weights(trainable_only=False))
    else:
        with np.load(os.path.join(outdir, "initial.npz")) as f:
            executor.set_weights({k: f[k] for k in f.files})
    rng = np.random.default_rng(7)
    for _ in range(towers.UPDATES):
        name, args, kwargs = towers.update_call(agent, kind, rng)
        if world > 1:
            plan = executor.device_strategy.plans[name]
            values = dict(zip(plan.params, args), **kwargs)
            values = {p: _split(v, plan.split_rules[p], world, _NumpyOps)[rank] if p in plan.split_rules else v
                      for p, v in values.items()}
            args, kwargs = (), values
        executor.execute(name, *args, **kwargs)
    if rank == 0 and world > 1:
        with open(os.path.join(outdir, "describe.txt"), "w") as f:
            f.write(executor.meta_graph.describe())
    out = "single" if world == 1 else f"rank{rank}"
    np.savez(os.path.join(outdir, f"{out}.npz"), **executor.get_weights(trainable_only=False))


if __name__ == "__main__":
    b, k, o, r, w, a, d = sys.argv[1:8]
    main(b, k, o, int(r), int(w), a, d)
    sys.stdout.flush()
    os._exit(0)  # Skips the learner group's shutdown handshakes: the peers may be gone already.
