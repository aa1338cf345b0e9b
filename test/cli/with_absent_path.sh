#!/bin/sh
# with_absent_path.sh PATH COMMAND [ARGS...]
# Removes PATH (a path under the build tree that belongs to one test), makes
# sure it is gone, then runs COMMAND: a test of a missing file or directory
# holds wherever it runs, whatever else exists on the machine.
if [ $# -lt 2 ]; then
  echo "usage: $0 PATH COMMAND [ARGS...]" >&2
  exit 2
fi
path=$1
shift
rm -rf -- "$path"
if [ -e "$path" ] || [ -L "$path" ]; then
  echo "FAIL: cannot remove '$path' before the test" >&2
  exit 2
fi
exec "$@"
