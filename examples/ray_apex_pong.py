"""Ape-X on Atari Pong on a Ray cluster: actors step their own ale-py vector envs and compute priorities,
replay is sharded over Ray actors, the learner runs here.

    ray start --head --port 6379                 # on the head node; `ray start --address HEAD:6379` on the others
    python examples/ray_apex_pong.py HEAD:6379 16   # cluster address, number of actors

Without an address a local Ray is started (actors on this machine). The address is checked as
``rlgraph train --ray-address`` checks it (a cluster that does not answer is one line, not a hang in ``ray.init``).
"""
import json
import sys

from rlgraph.engines import train
from rlgraph.utils.errors import RLGraphError


def main(argv):
    address = argv[0] if len(argv) > 0 else None
    try:
        num_actors = int(argv[1]) if len(argv) > 1 else 2
    except ValueError:
        print(f"ray_apex_pong.py: error: the number of actors must be an int, got {argv[1]!r}.", file=sys.stderr)
        return 2
    try:
        # The engine joins the cluster at ray_address (after checking that it answers) or starts a local one.
        summary = train("configs/apex_pong.json", engine="ray", num_actors=num_actors, ray_address=address,
                        progress=True)
    except RLGraphError as e:
        print(f"ray_apex_pong.py: error: {e}", file=sys.stderr)
        return 2
    print(json.dumps({k: summary[k] for k in ("env_steps", "env_steps_per_second", "final_mean_return",
                                              "actor_restarts", "actors", "logdir")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
