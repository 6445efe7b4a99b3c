#!/usr/bin/env bash
# Installs the Debian packages cavs builds and tests with. Idempotent: when every package is
# already installed it returns in well under a second without touching apt. Runs as root (CI) or
# through sudo. See docs/build.md for what each dependency is for.
set -euo pipefail

# Needed to build and test; a failure to install one of these is fatal.
REQUIRED=(
  cmake ninja-build g++ pkg-config
  libabsl-dev libopenblas-dev zlib1g-dev
  libcpp-httplib-dev nlohmann-json3-dev
  libopenmpi-dev openmpi-bin
  libgtest-dev googletest libgmock-dev libbenchmark-dev
  clang-format
  iproute2 iptables libnetfilter-queue-dev
)
# Useful but not needed for a passing build: a failure here is a warning.
#   ccache: cheap rebuilds; gnuplot-nox: learning-curve plots; clang + libclang-rt: libFuzzer,
#   which scripts/test.sh's fuzz step needs (it fails saying so, or skips with
#   CAVS_FUZZ_SECONDS=0); training never does, and scripts/train.sh runs this setup too;
#   iperf3: `scripts/cluster.sh check` measures the emulated links with it.
OPTIONAL=(ccache gnuplot-nox clang libclang-rt-14-dev iperf3)

log() { echo "setup: $*"; }

missing_from() {
  local pkg
  for pkg in "$@"; do
    if [[ "$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null)" != "installed" ]]; then
      echo "$pkg"
    fi
  done
}

mapfile -t missing < <(missing_from "${REQUIRED[@]}" "${OPTIONAL[@]}")
if ((${#missing[@]} == 0)); then
  log "all $((${#REQUIRED[@]} + ${#OPTIONAL[@]})) packages present"
  exit 0
fi
log "missing: ${missing[*]}"

SUDO=()
if ((EUID != 0)); then
  if command -v sudo >/dev/null; then
    SUDO=(sudo)
  else
    log "not root and no sudo: install these packages by hand: ${missing[*]}" >&2
    exit 1
  fi
fi

export DEBIAN_FRONTEND=noninteractive
updated=0
apt_update() {
  if ((updated == 0)); then
    log "apt-get update"
    "${SUDO[@]}" apt-get update -qq
    updated=1
  fi
}
apt_install() {
  "${SUDO[@]}" apt-get install -y -qq --no-install-recommends -o Dpkg::Use-Pty=0 "$@"
}

# Refresh the package lists only when apt does not know a missing package (fresh image, empty
# lists) -- or, below, when an install fails on stale lists.
for pkg in "${missing[@]}"; do
  if ! apt-cache show "$pkg" >/dev/null 2>&1; then
    apt_update
    break
  fi
done

if ! apt_install "${missing[@]}"; then
  apt_update
  if ! apt_install "${missing[@]}"; then
    mapfile -t missing_required < <(missing_from "${REQUIRED[@]}")
    if ((${#missing_required[@]} > 0)); then
      apt_install "${missing_required[@]}" || {
        log "could not install required packages: ${missing_required[*]}" >&2
        exit 1
      }
    fi
  fi
fi

mapfile -t still_missing < <(missing_from "${REQUIRED[@]}" "${OPTIONAL[@]}")
for pkg in "${still_missing[@]}"; do
  log "warning: optional package $pkg is not installed"
done
mapfile -t still_required < <(missing_from "${REQUIRED[@]}")
if ((${#still_required[@]} > 0)); then
  log "required packages still missing: ${still_required[*]}" >&2
  exit 1
fi
log "done"
