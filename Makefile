# Two commands on a fresh machine (only Python 3.11 and pip needed):
#   make run   - install into .venv and run the main job
#   make test  - install into .venv and run the tests
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install run test test-all test-fast bench clean

$(STAMP): setup.py pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install torch==2.13.0
	$(PY) -m pip install -e ".[tf,pytorch,gym,ray,tensorboard,test]"
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/rlgraph train configs/appo_cartpole.json

test: $(STAMP)
	$(PY) -m pytest -n 2 -q -m "not long" --durations=15

test-all: $(STAMP)
	$(PY) -m pytest -n 2 -q --durations=15

test-fast: $(STAMP)
	$(PY) -m pytest -n 2 -q -m "not slow"

bench: $(STAMP)
	$(PY) benchmarks/build_overhead.py
	$(PY) benchmarks/memories.py

clean:
	rm -rf $(VENV) build *.egg-info
