# The README's two commands: `make demo` and `make test`. Both set up .venv first when needed.
VENV   ?= .venv
PY     := $(VENV)/bin/python
export MALLOC_TOP_PAD_ ?= 67108864

.PHONY: setup demo test test-long bench clean clean-numba-cache

setup:
	@scripts/setup.sh

demo: setup
	$(VENV)/bin/robot-dynamics demo

# The suite in two parts: every test not marked `serial`, spread over TEST_WORKERS processes (pytest-xdist;
# --dist loadfile keeps a file on one worker, so its module fixtures are built once, and each worker's DDS
# domains are its own, see test/conftest.py), then the `serial` tests alone in one process (judged on timing
# against a machine nobody else loads: the attack benchmark's quick run, the process-fault and burst tests, the
# 60 s replay). Measured here (2 cores, 2026-12-07, kernels cached): one process 342 s + 77 s before the
# process-fault tests became serial; two workers 203 s for the first part. TEST_WORKERS=0: one process.
TEST_WORKERS ?= 2
test: setup
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile -m "not serial" test
	$(PY) -m pytest -q -p no:cacheprovider -m serial test

# Longer fuzz profile (more hypothesis examples), not run by CI.
test-long: setup
	HYPOTHESIS_PROFILE=long $(PY) -m pytest -q -p no:cacheprovider test

bench: setup
	$(PY) benchmarks/run_all.py

clean:
	rm -rf build $(VENV) *.egg-info

# numba caches compiled kernels in __pycache__ and only notices edits to the file that defines a kernel:
# after changing a file whose kernels another file's kernels call (dynamics/rnea_kernels.py, whose helpers
# dynamics/momentum_terms.py inlines; retiming/stage_lp.py, called from retiming/topp_ra.py), drop the cache.
clean-numba-cache:
	find robot_dynamics_ros -name '*.nbi' -delete -o -name '*.nbc' -delete
