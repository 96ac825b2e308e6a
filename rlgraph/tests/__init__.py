"""Testing helpers for users' and rlgraph's own components."""
from rlgraph.tests.component_test import ComponentTest, assert_equal_nested, run_on_backends

__all__ = ["ComponentTest", "assert_equal_nested", "run_on_backends"]
