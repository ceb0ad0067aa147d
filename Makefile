# SPDX-License-Identifier: Apache-2.0
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
# MATRIX_PYTHON runs the tools (tools/matrix.py and the rest: standard library
# only, Python 3.10 or newer).  It is never PYTHON itself unless no other
# python3 here is new enough: the interpreter under test may be too old or
# broken to run them.  The first of python3, python3.14 ... python3.10 on PATH
# that is 3.10 or newer, else PYTHON, else python3.
PYTHON ?=
TOOLS_PYTHON := $(shell for p in python3 python3.14 python3.13 python3.12 python3.11 python3.10; do \
  command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
  >/dev/null 2>&1 && { command -v $$p; break; }; done)
MATRIX_PYTHON ?= $(or $(TOOLS_PYTHON),$(PYTHON),python3)
# gpu-compare runs ON the interpreter that has cuda-core installed: PYTHON as it is.
GPU_PYTHON = $(if $(PYTHON),$(PYTHON),python3)
WHICH   = $(if $(PYTHON),--python $(PYTHON))
MATRIX  = $(MATRIX_PYTHON) tools/matrix.py
SOAK_N ?= 200
REPEAT_N ?= 5
# LOAD=N: keep N busy processes running during `make test` (a loaded run; tools/matrix.py --load)
LOAD ?= 0
# JOBS=N: run up to N of `make test`'s jobs (pytest sessions) at once; empty: one per core plus one
JOBS ?=
LOST_WAKEUP_N ?= 2000000

TARGETS = help probe test provision build docs bench sanitize tsan asan mutate soak repeat \
  gpu-compare lost-wakeup clean
.PHONY: $(TARGETS)

# Bad input is refused before anything runs, in one line (make's $(error):
# exit status 2): a target that does not exist, and a PYTHON= that is missing,
# not CPython or older than 3.10 (checked by tools/matrix.py on MATRIX_PYTHON).
UNKNOWN_TARGETS = $(filter-out $(TARGETS),$(MAKECMDGOALS))
ifneq ($(UNKNOWN_TARGETS),)
$(error no target '$(firstword $(UNKNOWN_TARGETS))': the targets are $(TARGETS) ("make help" says what each does))
endif
ifneq ($(PYTHON),)
ifneq ($(filter probe test provision build soak,$(MAKECMDGOALS)),)
PYTHON_PROBLEM := $(shell $(MATRIX_PYTHON) tools/matrix.py check-python '$(PYTHON)' 2>&1)
ifneq ($(PYTHON_PROBLEM),)
$(error $(PYTHON_PROBLEM))
endif
endif
endif

help:
	@echo "make probe     measure CPython's pending-call machinery on every interpreter (build/probe/)"
	@echo "make test      build and run the whole suite on every interpreter, plus the run-once checks"
	@echo "make test LOAD=8  the same with 8 busy processes running (a loaded run; the summary gives each job's wall and CPU minutes)"
	@echo "make test JOBS=N  at most N jobs at once (default: one per core plus one; JOBS=1 prints each job's output as it runs)"
	@echo "make probe PYTHON=/path/to/python, make test PYTHON=/path/to/python"
	@echo "               the same on exactly that interpreter (e.g. a CPython build tree's ./python)"
	@echo "make docs      build the documentation site into build/docs/html"
	@echo "make bench     benchmarks: C++ core and end to end on every interpreter (build/bench/bench.json, bench.md)"
	@echo "make sanitize  the C++ core under ThreadSanitizer, then AddressSanitizer+UBSan"
	@echo "make mutate    the mutation kill matrix: every mutant in tests/mutants/ must be killed (build/mutate/)"
	@echo "make soak      finalization soak on every interpreter (SOAK_N=$(SOAK_N) runs per case)"
	@echo "make repeat    the per-interpreter suite REPEAT_N=$(REPEAT_N) times with every core kept busy"
	@echo "               (build/repeat/repeat.md): flakes that an idle machine hides"
	@echo "make gpu-compare  scenarios A-E on cuda-core and on our cuda driver (needs a GPU, cuda-core and"
	@echo "               deferred_cleanup installed in $(GPU_PYTHON); see notes/gpu-compare.md) -> build/gpu-compare"
	@echo "make lost-wakeup  the lost wakeup on this CPU, per variant (LOST_WAKEUP_N=$(LOST_WAKEUP_N) handoffs),"
	@echo "               and the gate's store buffering (GATE_SB_N=$(GATE_SB_N) rounds per policy)"

provision:
	$(MATRIX) provision $(WHICH)

build:
	$(MATRIX) build $(WHICH)

probe:
	$(MATRIX) probe $(WHICH)

test:
	$(MATRIX) test $(WHICH) $(if $(filter-out 0,$(LOAD)),--load $(LOAD)) $(if $(JOBS),--jobs $(JOBS))

docs:
	bash tools/docs.sh

bench:
	$(MATRIX_PYTHON) tools/bench.py

sanitize: tsan asan

tsan:
	bash .ci/tsan.sh

asan:
	bash .ci/asan.sh

mutate:
	$(MATRIX_PYTHON) tools/mutate.py

soak:
	SOAK_N=$(SOAK_N) $(MATRIX) test $(WHICH) --no-once -- -m soak

repeat:
	$(MATRIX_PYTHON) tools/repeat_under_load.py --runs $(REPEAT_N)

# Runs with $(PYTHON) as it is, python3 when not given (the GPU machine's own
# interpreter, with cuda-core and this package installed); exits 2 with one line saying why
# where there is no GPU, driver, cuda-core or deferred_cleanup.
# GPU_COMPARE_ARGS: e.g. --cuda-core 1.2.2=/tmp/cc122 --ours reference cuda-core-1.2
gpu-compare:
	$(GPU_PYTHON) tools/gpu_compare.py --out build/gpu-compare $(GPU_COMPARE_ARGS)
# The lost wakeup on real hardware (tests/cpp/lost_wakeup.cpp, LOST_WAKEUP_N
# handoffs per variant) and the in-flight gate's store-buffering pair
# (tests/cpp/gate_sb.cpp, GATE_SB_N rounds per policy), with the disassembly
# of both programs: tools/evidence.py writes and stamps the four files into
# notes/lost-wakeup/, the committed copies the page "The lost wakeup on real
# hardware" falls back to (tools/docs.sh re-measures them with small counts
# into build/evidence/ before every build of the site).
GATE_SB_N ?= 2000000
lost-wakeup:
	$(MATRIX_PYTHON) tools/evidence.py --out notes/lost-wakeup --iterations $(LOST_WAKEUP_N) \
	  --gate-iterations $(GATE_SB_N)

clean:
	rm -rf build
