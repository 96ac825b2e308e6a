"""The project's own exception types.

Every error raised for bad user input is one of these, so that callers can catch ``RLGraphError`` and
get a message that names what is wrong and where.
"""


class RLGraphError(Exception):
    """Base class of all rlgraph errors."""


class RLGraphSpaceError(RLGraphError, ValueError):
    """A value or a space does not match the space it was expected to be in."""


class RLGraphSpecError(RLGraphError, ValueError):
    """A spec (dict, JSON file, type name) cannot be turned into an object: unknown type or key, bad value.

    ``key`` (the argument or spec key, relative to the object being built) and ``reason`` (the message without
    its "<where>: " prefix) are set by ``rlgraph.utils.validation``, so that ``Specifiable.from_spec`` can
    restate the error under the full config path (``agent.optimizer_spec.learning_rate: ...``).
    """

    def __init__(self, message, key=None, reason=None):
        super().__init__(message)
        self.key, self.reason = key, reason


class RLGraphAPIError(RLGraphError, AttributeError):
    """An API method was defined or called wrongly (unknown method, wrong arguments)."""


class RLGraphBuildError(RLGraphError):
    """The graph could not be built: a component rejected its input spaces or a graph function failed."""


class RLGraphInputIncompleteError(RLGraphBuildError):
    """Some components never received spaces for all their API inputs (e.g. an input-incomplete cycle)."""


class RLGraphBackendError(RLGraphError, ImportError):
    """A deep-learning backend is unknown or not installed, or a component lacks an implementation for it."""


class RLGraphRuntimeError(RLGraphError, RuntimeError):
    """An executed API method failed a run-time check (e.g. a memory asked for more records than it holds)."""


class RLGraphCheckpointError(RLGraphError):
    """A stored model or checkpoint is missing, incomplete or damaged, or does not fit the run."""


class RLGraphDivergenceError(RLGraphError, FloatingPointError):
    """Training produced non-finite losses or weights (e.g. a learning rate far too high)."""


class RLGraphLearnerGroupError(RLGraphError, RuntimeError):
    """Distributed learners: a learner died, did not answer in time, or fell out of step with the others."""
