from setuptools import find_packages, setup

EXTRAS = {
    "tf": ["tensorflow-cpu==2.21.*"],
    "pytorch": ["torch==2.13.0"],
    # The JAX backend: the CPU wheel.
    "jax": ["jax[cpu]==0.10.*"],
    # Ray engine and `rlgraph tune` (Ray Tune adds pandas and pyarrow).
    "ray": ["ray[default,tune]==2.60.*"],
    "gym": ["gymnasium>=1.0,<2", "ale-py>=0.10", "opencv-python-headless>=4.8"],
    "tensorboard": ["tensorboard>=2.18"],
    # ``rlgraph export``: ONNX files (torch.onnx writes them with onnx; tf2onnx converts TensorFlow's), checked with
    # onnxruntime.
    "export": ["onnx>=1.16", "onnxruntime>=1.18", "tf2onnx>=1.17"],
    # ``--logger mlflow`` / ``--logger wandb``: experiment trackers (mlflow-skinny is MLflow's client without its
    # server and UI; ``pip install mlflow`` adds them).
    "mlflow": ["mlflow-skinny>=3.0"],
    "wandb": ["wandb>=0.20"],
    # The documentation site (mkdocs.yml): ``mkdocs build --strict``, the API pages from the docstrings
    # (mkdocstrings' Python handler reads the source statically: no backend is imported).
    "docs": ["mkdocs>=1.6.1,<2", "mkdocstrings[python]>=1.0,<2", "mkdocstrings-python>=2.0,<3"],
    "test": ["pytest>=8", "pytest-xdist>=3", "pytest-timeout>=2", "jsonschema>=4", "onnx>=1.16", "onnxruntime>=1.18",
             "tf2onnx>=1.17", "mlflow-skinny>=3.0", "wandb>=0.20",
             # tests/test_docs.py builds the site in strict mode.
             "mkdocs>=1.6.1,<2", "mkdocstrings[python]>=1.0,<2", "mkdocstrings-python>=2.0,<3",
             # tests/test_backend_ops.py checks the JAX operations table (skipped where JAX is missing).
             "jax[cpu]==0.10.*"],
    # Optional all-reduce adapter (execution_spec.all_reduce "horovod"); its last release (0.28.1) builds against
    # neither torch 2.13 nor TF 2.21, so "all" leaves it out and nothing depends on it.
    "horovod": ["horovod>=0.28.1"],
}
EXTRAS["all"] = sorted({d for k, v in EXTRAS.items() if k not in ("test", "horovod", "docs") for d in v})

setup(
    name="rlgraph",
    version="0.1.0",
    description="Deep reinforcement learning as graphs of reusable components, on TensorFlow or PyTorch.",
    packages=find_packages(include=["rlgraph", "rlgraph.*"]),
    python_requires=">=3.11",
    install_requires=["numpy>=2,<3", "optree>=0.13", "gymnasium>=1.0,<2", "tqdm>=4.66", "tensorboardX>=2.6",
                      "matplotlib>=3.8"],
    extras_require=EXTRAS,
    # No "pytest11" entry point: rlgraph's pytest plugin is opt-in (``pytest_plugins`` in a conftest.py), so
    # that installing rlgraph changes no other project's test suite.
    entry_points={
        "console_scripts": ["rlgraph=rlgraph.cli:main"],
    },
)
