# The README's commands. Each target creates or updates .venv first; the
# install is skipped when setup.cfg and pyproject.toml are unchanged.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
export TF_CPP_MIN_LOG_LEVEL ?= 3

BENCH_VENV := .venv-bench

.PHONY: demo test test-fast bench install parity-fixtures family-fixtures

$(STAMP): setup.cfg pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q -e ".[test,garden,demo,beam]"
	touch $(STAMP)

install: $(STAMP)
	@echo "bert-tf is in $(VENV)/bin: run \`. $(VENV)/bin/activate\` to put it on your PATH in this shell"

demo: $(STAMP)
	$(VENV)/bin/bert-tf demo

# Everything: the machine's speed (a slow host shows in the log), then the
# suite and every docstring example in the package, in 3
# processes, one file at a time each, in collection order (the longest
# files first: tests/conftest.py), so the end of the run is not one long
# file alone. 3 on 2 cores on purpose: a process often waits (on its
# subprocesses, a network timeout, a sleep before a SIGKILL), and the third
# keeps both cores busy (2-core EPYC, the same tests: 14:21 with 3
# processes, 15:48 and 16:44 with 2).
test: $(STAMP)
	$(VENV)/bin/python benchmarks/machine_speed.py
	$(VENV)/bin/python -m pytest -q tests --doctest-modules bert_tf -n 3 --dist loadfile --no-loadscope-reorder --durations=25

# The inner loop: no test marked slow (training runs, exports, real
# weights), no doctests; under 90 s on the 2-core reference machine.
test-fast: $(STAMP)
	$(VENV)/bin/python -m pytest -q tests -m "not slow" -n 2

# Speed and fidelity figures beside peers (keras-hub, HF transformers +
# PyTorch, ONNX Runtime, OpenVINO), installed in their own environment to
# keep the pins clean. transformers 4.x: 5.0 removed the question-answering
# pipeline that benchmarks/serving.py compares with.
$(BENCH_VENV)/.installed: setup.cfg pyproject.toml
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install -q -e . keras-hub torch==2.13.0 \
		"transformers<5" onnx onnxruntime openvino nncf
	$(BENCH_VENV)/bin/pip install -q tf-models-official==2.20.0 tensorflow==2.20.0 \
		tensorflow-text==2.20.1 keras==3.15.1
	touch $@

bench: $(BENCH_VENV)/.installed
	$(BENCH_VENV)/bin/python benchmarks/input_pipeline.py
	$(BENCH_VENV)/bin/python benchmarks/pair_creation.py
	$(BENCH_VENV)/bin/python benchmarks/tokenizer_fidelity.py
	$(BENCH_VENV)/bin/python benchmarks/model_throughput.py
	$(BENCH_VENV)/bin/python benchmarks/serving.py
	$(BENCH_VENV)/bin/python benchmarks/serving_profile.py
	$(BENCH_VENV)/bin/python benchmarks/int8_kernels.py
	$(BENCH_VENV)/bin/python benchmarks/elementwise_threads.py

# Regenerates the committed reference fixtures with PyTorch + transformers.
parity-fixtures: $(STAMP)
	$(VENV)/bin/pip install -q -e ".[parity]"
	$(VENV)/bin/python scripts/make_reference_fixtures.py

# The BERT-family fixtures (tiny random ELECTRA, DistilBERT and cased BERT,
# and HF's fast-tokenizer ids on the multilingual sample), written by
# transformers in the bench environment.
family-fixtures: $(BENCH_VENV)/.installed
	$(BENCH_VENV)/bin/python scripts/make_family_fixtures.py
