# shellcheck shell=bash
# Sourced (not run) by the bench scripts that plot: bench/convergence.sh,
# bench/resnet_convergence.sh, bench/quality_study.sh.

# sdp_plotting_python ME REPLOT: prints a python3 that has matplotlib: the
# first on PATH, else Debian's /usr/bin/python3 (where python3-matplotlib
# installs), installing that package with apt-get when it is missing.
# Otherwise stops, saying how to install it and to re-plot with REPLOT.
sdp_plotting_python() {
  local me=$1 replot=$2 py
  for py in python3 /usr/bin/python3; do
    if command -v "$py" >/dev/null && "$py" -c "import matplotlib" 2>/dev/null; then
      echo "$py"
      return
    fi
  done
  if command -v apt-get >/dev/null; then
    echo "$me: installing python3-matplotlib (Debian) for the plot" >&2
    local sudo_cmd=()
    [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq \
      --no-install-recommends python3-matplotlib >&2 || true
    if /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
      echo /usr/bin/python3
      return
    fi
  fi
  echo "$me: no python3 with matplotlib: install it (Debian: apt-get install -y" \
       "python3-matplotlib; elsewhere: python3 -m venv v && v/bin/pip install matplotlib," \
       "then run with v/bin on PATH) and re-plot with: $replot" >&2
  exit 1
}
