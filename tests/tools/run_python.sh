#!/usr/bin/env bash
# Runs a Python script with an interpreter that has numpy (Debian's python3 first,
# since python3 on the PATH may be another installation). Exits 77 (skip) if none.
set -u
for py in /usr/bin/python3 python3 python; do
  if command -v "$py" >/dev/null 2>&1 && "$py" -c "import numpy" >/dev/null 2>&1; then
    exec "$py" "$@"
  fi
done
echo "no Python interpreter with numpy found; skipping" >&2
exit 77
