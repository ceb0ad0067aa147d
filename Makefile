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
LOST_WAKEUP_N ?= 2000000

.PHONY: help probe test provision build docs bench sanitize tsan asan mutate soak gpu-compare lost-wakeup clean

help:
	@echo "make probe     measure CPython's pending-call machinery on every interpreter (build/probe/)"
	@echo "make test      build and run the whole suite on every interpreter, plus the run-once checks"
	@echo "make probe PYTHON=/path/to/python, make test PYTHON=/path/to/python"
	@echo "               the same on exactly that interpreter (e.g. a CPython build tree's ./python)"
	@echo "make docs      build the documentation site into build/docs/html"
	@echo "make bench     benchmarks: C++ core and end to end on every interpreter (build/bench/bench.json, bench.md)"
	@echo "make sanitize  the C++ core under ThreadSanitizer, then AddressSanitizer+UBSan"
	@echo "make mutate    the mutation kill matrix: every mutant in tests/mutants/ must be killed (build/mutate/)"
	@echo "make soak      finalization soak on every interpreter (SOAK_N=$(SOAK_N) runs per case)"
	@echo "make gpu-compare  scenarios A-E on cuda-core and on our cuda driver (needs a GPU, cuda-core and"
	@echo "               deferred_cleanup installed in $(PYTHON); see notes/gpu-compare.md) -> build/gpu-compare"
	@echo "make lost-wakeup  the lost wakeup on this CPU, per variant (LOST_WAKEUP_N=$(LOST_WAKEUP_N) handoffs)"

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

bench:
	$(PYTHON) tools/bench.py

sanitize: tsan asan

tsan:
	bash .ci/tsan.sh

asan:
	bash .ci/asan.sh

mutate:
	$(PYTHON) tools/mutate.py

soak:
	SOAK_N=$(SOAK_N) $(MATRIX) test $(WHICH) --no-once -- -m soak

# Runs with $(PYTHON) as it is (the GPU machine's own interpreter, with
# cuda-core and this package installed); exits 2 with one line saying why
# where there is no GPU, driver, cuda-core or deferred_cleanup.
# GPU_COMPARE_ARGS: e.g. --cuda-core 1.2.2=/tmp/cc122 --ours reference cuda-core-1.2
gpu-compare:
	$(PYTHON) tools/gpu_compare.py --out build/gpu-compare $(GPU_COMPARE_ARGS)
# The lost wakeup on real hardware (tests/cpp/lost_wakeup.cpp): one line per
# variant; the counts go to build/lost-wakeup/lost-wakeup.json and, with the
# disassembly of our build (tools/disasm.py), to notes/lost-wakeup/ for the
# docs page "The lost wakeup on real hardware".
lost-wakeup:
	@mkdir -p build/lost-wakeup notes/lost-wakeup
	cmake -S tests/cpp -B build/lost-wakeup -DDC_LOST_WAKEUP_ONLY=ON -DCMAKE_BUILD_TYPE=None \
	  >build/lost-wakeup/configure.log 2>&1 || { cat build/lost-wakeup/configure.log; exit 1; }
	cmake --build build/lost-wakeup --target lost_wakeup
	build/lost-wakeup/lost_wakeup --iterations $(LOST_WAKEUP_N) --json build/lost-wakeup/lost-wakeup.json
	cp build/lost-wakeup/lost-wakeup.json notes/lost-wakeup/lost-wakeup.json
	$(PYTHON) tools/disasm.py ours build/lost-wakeup/lost_wakeup -o notes/lost-wakeup/disasm-ours.txt

clean:
	rm -rf build
