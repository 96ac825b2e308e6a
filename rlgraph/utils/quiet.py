"""Keeps the deep-learning libraries' and Ray's start-up notices out of a run's terminal unless asked for.

TensorFlow's C++ runtime prints absl's "All log messages before absl::InitializeLog()" and oneDNN's notice on
import (once per process), and an error-level oneDNN line about AVX-512 where a machine has it; Ray prints
notices at ``ray.init``. None of them is about the user's run. ``quiet_libraries`` sets what these libraries
read before they are imported, so it must run before the first import of TensorFlow or Ray (the command line
calls it first thing); ``-v`` keeps everything.
"""
import logging
import os

#: Environment variables read by the libraries at import; set only where the user has not set them.
QUIET_ENVIRONMENT = {
    "TF_CPP_MIN_LOG_LEVEL": "3",  # TensorFlow's C++ log: nothing below FATAL (its errors surface as exceptions).
    "GRPC_VERBOSITY": "ERROR",  # gRPC's C core (TensorFlow and Ray load it).
    "GLOG_minloglevel": "2",  # glog-based logs of Ray's core worker.
    "RAY_DEDUP_LOGS": "1",
    # The backends' C++ start-up notices (absl, oneDNN, CPU features) go to file descriptor 2 before any log
    # level applies: rlgraph's lazy import of a backend holds them back (``rlgraph.utils.backend``).
    "RLGRAPH_QUIET_IMPORTS": "1",
}

#: Python loggers of the libraries, raised to WARNING (their INFO lines are start-up chatter).
QUIET_LOGGERS = ("tensorflow", "absl", "ray", "h5py", "matplotlib", "PIL", "urllib3", "filelock")
#: Python loggers whose warnings are notices about a library's defaults, not about the run: raised to ERROR. Ray
#: warns at every start of a local Ray that token authentication is enabled (its secure default since 2.5x,
#: which stays on).
QUIET_NOTICES = ("ray._private.authentication.authentication_token_setup",)


def quiet_libraries(verbose=False):
    """Silences the libraries' notices below warnings in this process and the processes it starts.

    Args:
        verbose: Keep everything (``rlgraph -v``): nothing is changed.

    Returns:
        The environment variables that were set (a dict).
    """
    if verbose:
        return {}
    changed = {}
    for key, value in QUIET_ENVIRONMENT.items():
        if key not in os.environ:
            os.environ[key] = changed[key] = value
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    for name in QUIET_NOTICES:
        logging.getLogger(name).setLevel(logging.ERROR)
    return changed
