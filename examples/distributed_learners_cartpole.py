"""APPO on CartPole with 2 synchronous learner processes that all-reduce their gradients (one set of weights).

    python examples/distributed_learners_cartpole.py                    # 2 learners on this machine (PyTorch)
    python examples/distributed_learners_cartpole.py tf                 # the same on TensorFlow
    python examples/distributed_learners_cartpole.py pytorch HOST0:29500,HOST1:29500 0   # learner 0 of 2 ...
    python examples/distributed_learners_cartpole.py pytorch HOST0:29500,HOST1:29500 1   # ... and learner 1

With addresses, start one learner per machine (same config, same addresses; learner 0 uses its port and the
next one). Learner 0 trains, evaluates and writes checkpoints; the others follow it. Stops when a greedy
evaluation reaches a mean return of 450 (the config's train_spec).
"""
import json
import os
import sys

CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "configs", "appo_cartpole.json")


def main(backend="pytorch", addresses=None, rank=0):
    from rlgraph.engines import train
    from rlgraph.engines.runner import load_config

    config, _ = load_config(CONFIG)
    execution = dict(num_learners=2)
    if addresses:
        execution.update(learner_addresses=addresses.split(","), learner_rank=int(rank))
    config["execution_spec"] = dict(config.get("execution_spec", {}), **execution)
    summary = train(config, executor="distributed", backend=backend, progress=int(rank) == 0,
                    config_name="appo_cartpole-distributed")
    print(json.dumps({k: summary.get(k) for k in ("env_steps", "wall_seconds", "seconds_to_target",
                                                  "eval_mean_return", "num_learners", "learner_env_steps",
                                                  "learner_rank", "logdir") if k in summary}, indent=1))


if __name__ == "__main__":
    main(*sys.argv[1:4])
