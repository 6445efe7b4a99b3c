# Shared by scripts/test.sh and scripts/train.sh (sourced, not run). Both configure the default
# build in build/default with exactly the same arguments, so neither invalidates the other.

CAVS_JOBS="${CAVS_JOBS:-2}"

# ccache keys on absolute paths: the -I and source paths CMake writes, and with -g the working
# directory. So a second checkout of the same commit in another folder (a CI clone beside a
# developer's tree, on one machine) would miss every object the first one cached and build cold.
# With the checkout as the base directory, paths under it are hashed relative to the build
# folder, and the working directory is left out of the hash; the objects' debug information then
# names the folder of whichever checkout compiled them first. Set either variable to override.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"

# cavs_configure <build dir> [extra cmake args...]: configures with Ninja (and ccache if present).
cavs_configure() {
  local dir="$1"
  shift
  local args=(-S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release)
  if command -v ccache >/dev/null; then
    args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    # The CUDA launcher only for builds that may compile CUDA (CMake warns about unused ones).
    if [[ " $* " != *" -DCAVS_WITH_CUDA=OFF "* ]]; then
      args+=(-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
    fi
  fi
  # A build dir made by another generator cannot be reused; start it afresh.
  if [[ -f "$dir/CMakeCache.txt" ]] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' \
    "$dir/CMakeCache.txt"; then
    echo "configure: $dir was made by another generator; removing it"
    rm -rf "$dir"
  fi
  cmake "${args[@]}" "$@"
}

# cavs_configure_default: the default configuration (CUDA, MPI, NCCL wherever found).
cavs_configure_default() {
  cavs_configure build/default "$@"
}

# cavs_elapsed <start seconds>: "1m23s" since then.
cavs_elapsed() {
  local s=$((SECONDS - $1))
  printf '%dm%02ds' $((s / 60)) $((s % 60))
}
