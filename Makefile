# deferred-cleanup: every target provisions what it needs and skips what is
# already done.  See README.md.
PYTHON ?= python3
MATRIX  = $(PYTHON) tools/matrix.py

.PHONY: probe test provision build docs sanitize soak clean help

help:
	@echo "make probe     measure CPython's pending-call machinery on every interpreter (build/probe/)"
	@echo "make test      build and run the whole suite on every interpreter, plus the run-once checks"
	@echo "make docs      build the documentation site into build/docs/html"
	@echo "make sanitize  C++ core under ThreadSanitizer and AddressSanitizer+UBSan"
	@echo "make soak      finalization soak on every interpreter (SOAK_N=200)"

provision:
	$(MATRIX) provision

build:
	$(MATRIX) build

probe:
	$(MATRIX) probe

test:
	$(MATRIX) test

clean:
	rm -rf build
