#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# make docs: build the documentation site into build/docs/html.
#
# What it does, skipping whatever is already done:
#   1. Debian packages: doxygen, graphviz (dot), which the site needs, and,
#      for the tests only, chromium and chromium-driver (the browser check in
#      tests/test_docs.py) and clang-format (tests/test_format.py); as root,
#      apt-get installs the missing ones (after apt-get update when the
#      package lists are empty).  Not root: a missing doxygen or dot is an
#      error (one line naming them); the tests' packages are only named.
#   2. The probe: the version page is generated from build/probe/probe.json,
#      which `make probe` (tools/matrix.py probe) writes for every interpreter.
#      When that file is missing or older than the probe's sources, the page
#      shows the committed probe data instead, docs/_data/probe.json (the
#      whole matrix, measured at the commit its stamp names), and says so, on
#      the page and here: `make docs` needs no matrix, no Debian root and no
#      root.  DC_DOCS_PROBE=1 runs `python3 tools/matrix.py probe` first
#      instead (the whole matrix: pyenv and, as root, the Debian root).
#   3. The hardware evidence: tools/evidence.py rebuilds tests/cpp's
#      lost_wakeup and gate_sb (-O2), runs them with DC_EVIDENCE_N handoffs
#      and DC_GATE_N rounds (default 200000 each, a few seconds) and
#      disassembles them into build/evidence/, stamped with the commit and
#      source hashes; the lost-wakeup page renders these, the committed
#      notes/lost-wakeup/ copies when they are missing.  DC_DOCS_NO_EVIDENCE=1
#      skips this step.
#   4. Sphinx, in the matrix's `docs` environment (Python 3.12, the extension
#      built in, docs/requirements.txt installed; tools/matrix.py provisions
#      it): `-b html -W --keep-going -n -E`, so every warning fails the build
#      and all of them are listed.  docs/conf.py runs Doxygen (XML only) when
#      the build starts.  Warnings are also written to build/docs/warnings.log.
#      Skipped when the last build succeeded and nothing it reads (docs/,
#      include/, reference/, notes/, tools/, probe.json, build/evidence) changed since;
#      DC_DOCS_FORCE=1 rebuilds anyway.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "[docs] $*"; }

# ------------------------------------------------------------ 1. Debian packages
need=()
site_need=()  # what the site itself cannot be built without
command -v doxygen >/dev/null || { need+=(doxygen); site_need+=(doxygen); }
command -v dot >/dev/null || { need+=(graphviz); site_need+=(graphviz); }
command -v chromium >/dev/null || need+=(chromium)
command -v chromedriver >/dev/null || need+=(chromium-driver)
command -v clang-format >/dev/null || need+=(clang-format)  # tests/test_format.py
if ((${#need[@]})); then
  if [ "$(id -u)" != 0 ]; then
    if ((${#site_need[@]})); then
      say "missing Debian packages the site needs: ${site_need[*]} (not root: install them with apt-get and run again)"
      exit 1
    fi
    say "not root: not installing ${need[*]} (only the tests need them: the browser and format checks)"
    need=()
  fi
fi
if ((${#need[@]})); then
  say "apt-get install ${need[*]}"
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null; then
    say "apt-get update, then install again"
    DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null || say "apt-get update reported errors; trying the install anyway"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
  fi
fi
say "doxygen $(doxygen --version), $(dot -V 2>&1 | head -1)"

# ------------------------------------------------------------ 2. the probe
probe_json=build/probe/probe.json
probe_sources=$(ls reference/src/probe*.cpp reference/python/deferred_cleanup/probe*.py \
  reference/python/deferred_cleanup/report*.py reference/python/deferred_cleanup/cpython_facts.py \
  tools/matrix.py 2>/dev/null || true)
stale=""
if [ ! -f "$probe_json" ]; then
  stale="$probe_json is missing"
else
  for f in $probe_sources; do
    if [ "$f" -nt "$probe_json" ]; then stale="$f is newer than $probe_json"; break; fi
  done
  if [ -z "$stale" ] && ! python3 tools/provenance.py check "$probe_json" >/dev/null 2>&1; then
    stale="$probe_json has no provenance stamp or a source it measured changed"
  fi
fi
committed_probe=docs/_data/probe.json
export DC_DOCS_PROBE_JSON=""  # read by docs/_ext/dc_docs.py (probe-matrix); empty: build/probe
if [ -n "$stale" ]; then
  if [ "${DC_DOCS_PROBE:-0}" != 1 ] && [ -f "$committed_probe" ]; then
    DC_DOCS_PROBE_JSON=$committed_probe
    say "$stale: the version page shows the committed probe data, $committed_probe" \
      "($(python3 -c 'import json,sys; p=json.load(open(sys.argv[1])).get("provenance") or {}; print("measured at " + str(p.get("commit", "an unrecorded commit"))[:12])' "$committed_probe" 2>/dev/null || echo "its stamp unreadable")," \
      "and says so; make probe measures this machine's interpreters, DC_DOCS_PROBE=1 runs it first)"
  else
    [ -f "$committed_probe" ] || say "$committed_probe is missing too: the probe must run"
    say "$stale: running the probe on every interpreter (python3 tools/matrix.py probe)"
    # The probe exits 1 when a measurement differs from the expected table;
    # the version page then shows the difference in bold, so go on as long as
    # it wrote a fresh probe.json.
    before=$(stat -c %Y "$probe_json" 2>/dev/null || echo 0)
    rc=0
    python3 tools/matrix.py probe || rc=$?
    after=$(stat -c %Y "$probe_json" 2>/dev/null || echo 0)
    if [ "$rc" != 0 ]; then
      if [ "$after" -gt "$before" ] || { [ "$before" = 0 ] && [ -f "$probe_json" ]; }; then
        say "the probe exited $rc (a measurement differs from the expected table); the version page shows it"
      else
        say "the probe exited $rc and wrote no $probe_json"
        exit "$rc"
      fi
    fi
  fi
else
  say "$probe_json is up to date"
fi

# ------------------------------------------------------------ 3. the hardware evidence
if [ "${DC_DOCS_NO_EVIDENCE:-0}" = 1 ]; then
  say "DC_DOCS_NO_EVIDENCE=1: the lost-wakeup page shows the committed notes/lost-wakeup/"
elif python3 tools/provenance.py check build/evidence/lost-wakeup.json >/dev/null 2>&1 \
   && python3 tools/provenance.py check build/evidence/gate-sb.json >/dev/null 2>&1 \
   && python3 tools/provenance.py check build/evidence/disasm-ours.txt >/dev/null 2>&1 \
   && python3 tools/provenance.py check build/evidence/disasm-gate-sb.txt >/dev/null 2>&1; then
  say "build/evidence is current (no source it measured changed)"
else
  say "re-measuring the lost wakeup and the gate on this CPU (tools/evidence.py, log: build/logs/evidence.log)"
  mkdir -p build/logs
  python3 tools/evidence.py --iterations "${DC_EVIDENCE_N:-200000}" \
    --gate-iterations "${DC_GATE_N:-200000}" >build/logs/evidence.log 2>&1 \
    || { tail -40 build/logs/evidence.log; exit 1; }
fi

# ------------------------------------------------------------ 4. Sphinx
mkdir -p build/docs
stamp=build/docs/.built-ok
if [ "${DC_DOCS_FORCE:-0}" != 1 ] && [ -f "$stamp" ] && [ -f build/docs/html/index.html ] \
   && [ -z "$(find docs include reference notes tools tests/cpp build/evidence "$probe_json" -name __pycache__ -prune -o -newer "$stamp" -print -quit 2>/dev/null)" ]; then
  say "site is up to date (nothing changed since the last successful build): build/docs/html/index.html"
  exit 0
fi
rm -f "$stamp"
say "sphinx-build -b html -W --keep-going -n -E docs build/docs/html (docs environment; Doxygen runs first)"
# shellcheck disable=SC2016  # $PY is expanded by tools/matrix.py run
python3 tools/matrix.py run docs -- bash -c \
  '$PY -m sphinx -b html -W --keep-going -n -E -q -d build/docs/doctrees -w build/docs/warnings.log docs build/docs/html'
touch "$stamp"
say "site: build/docs/html/index.html"
