"""Entry point of a learner process of rank > 0 started by the distributed engine.

``python -m rlgraph.engines.distributed.learner_process CONFIG --backend B --rank R --seed S --control
HOST:PORT [--user-code JSON]``: installs the driver's user code (``rlgraph.utils.user_modules.UserCode``: the
modules of the config's types and environment, gymnasium registrations), joins learner 0's control channel
and the learner group, then follows learner 0 (see ``rlgraph.engines.distributed.learner.serve``). Users start remote learners with ``rlgraph train CONFIG
--engine distributed --learner-rank R`` instead.
"""
import argparse
import logging
import os
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("config")
    parser.add_argument("--backend", required=True)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--control", required=True)
    parser.add_argument("--user-code", default=None, help="the driver's UserCode as JSON")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format=f"learner {args.rank} %(asctime)s %(levelname)s %(message)s")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from rlgraph.utils.process_watchdog import watch_parent
    watch_parent(what=f"learner {args.rank}")  # Learner 0 killed by SIGKILL takes the learners it started along.
    from rlgraph.engines.distributed.learner import serve
    from rlgraph.engines.execution_spec import ExecutionSpec
    from rlgraph.utils.specifiable import load_json
    config = load_json(args.config, "config")
    spec = ExecutionSpec.from_config(config)
    code = 0
    try:
        from rlgraph.utils.user_modules import UserCode
        UserCode.from_json(args.user_code).install()
        serve(config, config["environment_spec"], args.backend, spec, args.rank, args.seed, args.control,
              spec.learner_addresses)
    except Exception:
        logging.getLogger(__name__).exception("learner %d failed", args.rank)
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    # Skips the backends' shutdown handshakes with the other learners, which may be gone already.
    os._exit(code)


if __name__ == "__main__":
    main()
