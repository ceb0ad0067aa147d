# deferred-cleanup: every target provisions what it needs, skips what is
# already done, and says what it is doing.  See README.md.
PYTHON ?= python3
MATRIX  = $(PYTHON) tools/matrix.py
SOAK_N ?= 200

.PHONY: help probe test provision build docs bench sanitize tsan asan soak clean

help:
	@echo "make probe     measure CPython's pending-call machinery on every interpreter (build/probe/)"
	@echo "make test      build and run the whole suite on every interpreter, plus the run-once checks"
	@echo "make docs      build the documentation site into build/docs/html"
	@echo "make bench     benchmarks: C++ core and end to end on every interpreter (build/bench/bench.json, bench.md)"
	@echo "make sanitize  the C++ core under ThreadSanitizer, then AddressSanitizer+UBSan"
	@echo "make soak      finalization soak on every interpreter (SOAK_N=$(SOAK_N) runs per case)"

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

bench:
	$(PYTHON) tools/bench.py

sanitize: tsan asan

tsan:
	bash .ci/tsan.sh

asan:
	bash .ci/asan.sh

soak:
	SOAK_N=$(SOAK_N) $(MATRIX) test --no-once -- -m soak

clean:
	rm -rf build
