# Shared by tools/zero3 and tools/test: install what is missing, then configure and build.
# Sourced, not run. Sets ZERO3_BUILD_DIR.

ZERO3_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# ZERO3_SANITIZE (e.g. address,undefined; tools/test --sanitize sets it) builds an instrumented
# second tree, build-asan, without the CUDA backend (nvcc does not take the sanitizer flags).
ZERO3_SANITIZE=${ZERO3_SANITIZE:-}
if [ -n "$ZERO3_SANITIZE" ]; then
  ZERO3_BUILD_DIR=${ZERO3_BUILD_DIR:-$ZERO3_ROOT/build-asan}
else
  ZERO3_BUILD_DIR=${ZERO3_BUILD_DIR:-$ZERO3_ROOT/build}
fi

# Debian packages the build and `zero3 demo` need; the CUDA toolkit and NCCL are optional and never
# installed here.
ZERO3_PACKAGES=(cmake ninja-build g++ ccache googletest libgtest-dev librapidcheck-dev nlohmann-json3-dev
                libcli11-dev libopenblas-dev libopenblas0-openmp libboost-context-dev openmpi-bin libopenmpi-dev python3)
# And what only the test suite needs (tools/test sets ZERO3_TEST_PACKAGES=1): Debian's torch for the
# outside oracle and the recorder's test, which brings opencv, gdal and qt5 with it, and what the
# venvs build on. The demo never pays for them.
if [ -n "${ZERO3_TEST_PACKAGES:-}" ]; then
  ZERO3_PACKAGES+=(python3-torch python3-venv python3-numpy python3-requests python3-yaml python3-typing-extensions)
fi

zero3_log() { printf 'zero3: %s\n' "$*" >&2; }

zero3_install_missing_packages() {
  local missing=()
  for package in "${ZERO3_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    zero3_log "missing Debian packages: ${missing[*]}"
    zero3_log "install them with: sudo apt-get install ${missing[*]}"
    exit 1
  fi
  # apt and dpkg print thousands of lines even with -qq: they go to a log, named here and shown
  # (its end) only when a step fails.
  local log="${TMPDIR:-/tmp}/zero3-apt.log"
  zero3_log "installing ${#missing[@]} Debian packages: ${missing[*]} (apt's output: $log)"
  export DEBIAN_FRONTEND=noninteractive
  zero3_log "apt-get update"
  apt-get update -qq >"$log" 2>&1 || { tail -n 20 "$log" >&2; zero3_log "apt-get update failed; full log: $log"; exit 1; }
  zero3_log "apt-get install (a few minutes on a fresh machine)"
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >>"$log" 2>&1 ||
    { tail -n 20 "$log" >&2; zero3_log "apt-get install failed; full log: $log"; exit 1; }
  zero3_log "installed"
}

# Reads the build's output: all of it to the log $1, and to the terminal "building: N of M steps
# (S s)" each time another tenth of the steps is done, when there are at least 20.
zero3_build_progress() {
  local log=$1 line shown=-1 start=$SECONDS
  : >"$log"
  while IFS= read -r line; do
    printf '%s\n' "$line" >>"$log"
    if [[ $line =~ ^\[([0-9]+)/([0-9]+)\] ]]; then
      local tenth=$((BASH_REMATCH[1] * 10 / BASH_REMATCH[2]))
      # A rebuild of a few files stays quiet.
      if [ "$tenth" -ne "$shown" ] && [ "${BASH_REMATCH[2]}" -ge 20 ]; then
        shown=$tenth
        zero3_log "building: ${BASH_REMATCH[1]} of ${BASH_REMATCH[2]} steps ($((SECONDS - start)) s)"
      fi
    fi
  done
}

zero3_build() {
  # Cache hits across clones: paths under the checkout are hashed relative to it, and the build
  # folder's own path is left out, so CI's fresh clone reuses what a developer's tree compiled.
  export CCACHE_BASEDIR="$ZERO3_ROOT" CCACHE_NOHASHDIR=true
  local jobs
  jobs=$(nproc 2>/dev/null || echo 2)
  local werror=OFF
  [ -n "${CI:-}" ] && werror=ON
  # -g1 (line tables and function names: backtraces and sanitizer stacks name their lines) instead
  # of -g compiles a third faster (tools/cli/replay_command.cc: 14.2 s with -g, 10.5 s with -g1); a
  # debugger session wants -DCMAKE_BUILD_TYPE=Debug in a build folder of its own.
  local flags=(-DZERO3_WERROR=$werror "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG")
  # -O1 -g1: the usual sanitizer build, half the compile time of -O2 -g, still fast enough to test.
  [ -n "$ZERO3_SANITIZE" ] && flags=(-DZERO3_WERROR=$werror -DZERO3_SANITIZE="$ZERO3_SANITIZE" -DZERO3_CUDA=OFF
                                     "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1")
  if [ ! -f "$ZERO3_BUILD_DIR/build.ninja" ]; then
    zero3_log "configuring $ZERO3_BUILD_DIR"
    cmake -S "$ZERO3_ROOT" -B "$ZERO3_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      "${flags[@]}" >"$ZERO3_BUILD_DIR.configure.log" 2>&1 ||
      { cat "$ZERO3_BUILD_DIR.configure.log" >&2; zero3_log "configure failed"; exit 1; }
  fi
  # A line per tenth of the build's steps while it compiles (ninja's own lines go to the log); the
  # full compiler output on failure. With targets, only those are built (the demo needs the CLI
  # alone: 185 of the 295 objects).
  local targets=()
  [ $# -gt 0 ] && targets=(--target "$@")
  # In the condition, so that `set -e` (and pipefail) leave the failure to be reported here.
  if cmake --build "$ZERO3_BUILD_DIR" -j "$jobs" "${targets[@]}" 2>&1 |
       zero3_build_progress "$ZERO3_BUILD_DIR.build.log"; [ "${PIPESTATUS[0]}" -ne 0 ]; then
    grep -E 'error|Error|FAILED' -A5 "$ZERO3_BUILD_DIR.build.log" | head -200 >&2
    zero3_log "build failed; full log: $ZERO3_BUILD_DIR.build.log"
    exit 1
  fi
}

# zero3_install_oracle_venv and zero3_install_diff_venv, which tools/test runs: the outside
# oracle's Python side, and torch 2.15 with DeepSpeed for the differential runners.
# shellcheck source=tools/lib/oracle_venv.sh
source "$ZERO3_ROOT/tools/lib/oracle_venv.sh"
# shellcheck source=tools/lib/diff_venv.sh
source "$ZERO3_ROOT/tools/lib/diff_venv.sh"

zero3_install_missing_packages
# tools/gpu-bundle builds its own configuration: it wants the packages, not this build.
# ZERO3_BUILD_TARGETS (tools/zero3 sets it to the CLI): build only those; unset builds everything.
# shellcheck disable=SC2086  # a list of target names
[ -n "${ZERO3_PACKAGES_ONLY:-}" ] || zero3_build ${ZERO3_BUILD_TARGETS:-}
