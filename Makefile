# deferred-cleanup: every target provisions what it needs, skips what is
# already done, and says what it is doing.  See README.md.
#
# PYTHON is the interpreter UNDER TEST, not the one that runs the tools:
#   make probe PYTHON=/path/to/python   probe exactly that interpreter
#   make test  PYTHON=/path/to/python   build and test exactly that interpreter
# (e.g. a CPython build tree's ./python), in a virtual environment made from it,
# with no pyenv, no Debian root and no root.  Left empty, the whole matrix
# (pyenv 3.10-3.13 and the Debian unstable root) is used.  PYTHON may come
# from make's command line or the environment.
# MATRIX_PYTHON runs tools/matrix.py (standard library only): PYTHON when
# given, else python3.
PYTHON ?=
MATRIX_PYTHON ?= $(if $(PYTHON),$(PYTHON),python3)
WHICH   = $(if $(PYTHON),--python $(PYTHON))
MATRIX  = $(MATRIX_PYTHON) tools/matrix.py
SOAK_N ?= 200

.PHONY: help probe test provision build docs sanitize tsan asan soak clean

help:
	@echo "make probe     measure CPython's pending-call machinery on every interpreter (build/probe/)"
	@echo "make test      build and run the whole suite on every interpreter, plus the run-once checks"
	@echo "make probe PYTHON=/path/to/python, make test PYTHON=/path/to/python"
	@echo "               the same on exactly that interpreter (e.g. a CPython build tree's ./python)"
	@echo "make docs      build the documentation site into build/docs/html"
	@echo "make sanitize  the C++ core under ThreadSanitizer, then AddressSanitizer+UBSan"
	@echo "make soak      finalization soak on every interpreter (SOAK_N=$(SOAK_N) runs per case)"

provision:
	$(MATRIX) provision $(WHICH)

build:
	$(MATRIX) build $(WHICH)

probe:
	$(MATRIX) probe $(WHICH)

test:
	$(MATRIX) test $(WHICH)

docs:
	bash tools/docs.sh

sanitize: tsan asan

tsan:
	bash .ci/tsan.sh

asan:
	bash .ci/asan.sh

soak:
	SOAK_N=$(SOAK_N) $(MATRIX) test $(WHICH) --no-once -- -m soak

clean:
	rm -rf build
