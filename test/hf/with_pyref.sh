#!/bin/sh
# Usage: with_pyref.sh VENV SCRIPT [ARGS...]
# Runs SCRIPT with the Python of VENV (scripts/setup-python-ref.sh). Where
# that environment is missing or incomplete the test is skipped (exit 77,
# ctest's SKIP_RETURN_CODE) with a line that says why and how to set it up.
venv=$1
shift
python=$venv/bin/python
if [ ! -x "$python" ]; then
  echo "SKIP: no Python environment at $venv: run scripts/setup-python-ref.sh <build dir> (needs python3-venv and PyPI)"
  exit 77
fi
if ! why=$("$python" -c "import torch, numpy, tokenizers, safetensors, transformers, timm" 2>&1); then
  echo "SKIP: the Python environment at $venv is incomplete ($why): rerun scripts/setup-python-ref.sh <build dir>"
  exit 77
fi
exec "$python" "$@"
