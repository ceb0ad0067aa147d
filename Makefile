# deferred-cleanup: every target provisions what it needs, skips what is
# already done, and says what it is doing.  See README.md.
PYTHON ?= python3
MATRIX  = $(PYTHON) tools/matrix.py
SOAK_N ?= 200

.PHONY: help probe test provision build docs sanitize tsan asan soak gpu-compare clean

help:
	@echo "make probe     measure CPython's pending-call machinery on every interpreter (build/probe/)"
	@echo "make test      build and run the whole suite on every interpreter, plus the run-once checks"
	@echo "make docs      build the documentation site into build/docs/html"
	@echo "make sanitize  the C++ core under ThreadSanitizer, then AddressSanitizer+UBSan"
	@echo "make soak      finalization soak on every interpreter (SOAK_N=$(SOAK_N) runs per case)"
	@echo "make gpu-compare  scenarios A-E on cuda-core and on our cuda driver (needs a GPU, cuda-core and"
	@echo "               deferred_cleanup installed in $(PYTHON); see notes/gpu-compare.md) -> build/gpu-compare"

provision:
	$(MATRIX) provision

build:
	$(MATRIX) build

probe:
	$(MATRIX) probe

test:
	$(MATRIX) test

docs:
	bash tools/docs.sh

sanitize: tsan asan

tsan:
	bash .ci/tsan.sh

asan:
	bash .ci/asan.sh

soak:
	SOAK_N=$(SOAK_N) $(MATRIX) test --no-once -- -m soak

# Runs with $(PYTHON) as it is (the GPU machine's own interpreter, with
# cuda-core and this package installed); exits 2 with one line saying why
# where there is no GPU, driver, cuda-core or deferred_cleanup.
# GPU_COMPARE_ARGS: e.g. --cuda-core 1.2.2=/tmp/cc122 --ours reference cuda-core-1.2
gpu-compare:
	$(PYTHON) tools/gpu_compare.py --out build/gpu-compare $(GPU_COMPARE_ARGS)

clean:
	rm -rf build
