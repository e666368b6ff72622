#!/usr/bin/env bash
# Runs a plots/ script with a Python that has numpy and matplotlib: Debian's python3
# first (python3 on the PATH may be another installation); installs
# python3-matplotlib with apt if none has them.
set -euo pipefail
find_python() {
  for py in /usr/bin/python3 python3 python; do
    if command -v "$py" >/dev/null 2>&1 && "$py" -c "import numpy, matplotlib" >/dev/null 2>&1; then
      echo "$py"
      return 0
    fi
  done
  return 1
}
py=$(find_python) || {
  echo "plots: no Python with matplotlib; installing python3-matplotlib" >&2
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get install -y -qq python3-matplotlib python3-numpy >&2
  py=$(find_python)
}
exec "$py" "$@"
