#!/usr/bin/env bash
# Usage: scripts/setup-python-ref.sh [BUILD_DIR]        (default: build)
#
# Sets up BUILD_DIR/pyref, the Python environment of the Hugging Face checks
# (the hf tests, scripts/prepare_text_data.py): a virtualenv over Debian's
# python3 that sees its site packages (so Debian's PyTorch 1.13, torchvision
# and numpy) with pinned versions of transformers, tokenizers, safetensors
# and timm (the Swin reference) that work with that torch. Idempotent: when
# the environment holds exactly these pins it returns at once. Exit 0 when ready, 1 when it could not be set up
# (no python3-venv, PyPI unreachable); the hf tests then skip, saying so.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
venv=$build/pyref
python=${SDP_PYREF_PYTHON:-/usr/bin/python3}
pins=(transformers==4.44.2 tokenizers==0.19.1 safetensors==0.8.0 huggingface-hub==0.36.2 timm==1.0.9)
stamp=$venv/sdp-pins.txt

if [[ -x $venv/bin/python && -f $stamp && "$(cat "$stamp")" == "${pins[*]}" ]]; then
  echo "setup-python-ref: $venv is ready (${pins[*]})"
  exit 0
fi

give_up() {
  echo "setup-python-ref: $1; the Hugging Face tests (ctest -L hf) will be skipped" >&2
  exit 1
}
[[ -x $python ]] || give_up "$python not found (Debian's python3 with python3-torch is needed)"
"$python" -c "import torch, torchvision, numpy" 2>/dev/null ||
  give_up "$python has no torch/torchvision/numpy (install python3-torch python3-torchvision python3-numpy)"

echo "setup-python-ref: creating $venv (${pins[*]})"
rm -f "$stamp"
mkdir -p "$build"
"$python" -m venv --system-site-packages "$venv" ||
  give_up "'$python -m venv' failed (install python3-venv)"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${pins[@]}" ||
  give_up "pip could not install ${pins[*]} (is PyPI reachable?)"
"$venv/bin/python" -c "import torch, transformers, tokenizers, safetensors, timm" ||
  give_up "the installed packages do not import"
echo "${pins[*]}" > "$stamp"
echo "setup-python-ref: $venv is ready"
