# shellcheck shell=bash
# One way to keep a pinned virtualenv, shared by oracle_venv.sh and diff_venv.sh: a stamp in the
# venv records what was installed (the pins and the interpreter) and is written only once the
# imports worked, so a matching stamp means nothing runs and checking it imports nothing; a venv
# installed fresh is rebuilt whole (a stale or half-installed one is never patched); pip's output
# goes to a log shown (its end) only when a step fails. Sourced, not run.

zero3_venv_log() { printf 'zero3: %s\n' "$*" >&2; }

# zero3_venv_ensure LABEL VENV STAMP WANTED MODE INSTALL WORKS EXPLAIN
#   LABEL    what the messages call it ("the oracle venv")
#   MODE     fresh: VENV is removed and INSTALL creates it; layer: INSTALL adds packages to VENV
#            as it is (a second stamp; the venv's own is left alone)
#   INSTALL  a function called with a log file: creates and fills the venv, its output appended
#            to the log; nonzero when a step fails
#   WORKS    a function: 0 when what the venv is for imports and runs
#   EXPLAIN  a function that shows on stderr why WORKS failed (the import's own traceback)
# Returns 1, having said why, when the venv cannot be made to work.
zero3_venv_ensure() {
  local label=$1 venv=$2 stamp=$3 wanted=$4 mode=$5 install=$6 works=$7 explain=$8
  local log
  log="$venv.$(basename "$stamp" .stamp).log"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ] && [ -x "$venv/bin/python" ]; then
    return 0
  fi
  if [ "$mode" = fresh ]; then
    if [ -e "$venv" ] && [ ! -f "$venv/pyvenv.cfg" ]; then
      zero3_venv_log "$venv exists and is not a virtualenv; remove it, or name another place for $label"
      return 1
    fi
    mkdir -p "$(dirname "$venv")"
    rm -rf "$venv"
  fi
  : >"$log"
  if ! "$install" "$log"; then
    tail -20 "$log" >&2
    zero3_venv_log "installing $label ($venv) failed; full log: $log"
    [ "$mode" = fresh ] && rm -rf "$venv"
    return 1
  fi
  if ! "$works"; then
    "$explain" >&2
    zero3_venv_log "$label ($venv) was installed, but what it is for does not import"
    return 1
  fi
  echo "$wanted" >"$stamp"
  rm -f "$log"
}
