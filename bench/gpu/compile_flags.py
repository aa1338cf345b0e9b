#!/usr/bin/env python3
"""Print, one per line, the include, define and standard flags CMake compiled a source with.

    python3 bench/gpu/compile_flags.py BUILD/compile_commands.json comm/make_world.cpp

check.sh compiles nccl_smoke.cpp with the flags of comm/make_world.cpp, so
that it sees the headers and definitions (SDP_HAVE_NCCL, NCCL's and CUDA's
include folders) exactly as the engine's own comm library did.
"""

import json
import shlex
import sys


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: compile_flags.py compile_commands.json SOURCE_SUFFIX")
    with open(argv[1], encoding="utf-8") as f:
        entries = json.load(f)
    entry = next((e for e in entries if e["file"].endswith(argv[2])), None)
    if entry is None:
        sys.exit(f"compile_flags: no entry for {argv[2]} in {argv[1]}")
    tokens = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    keep, take_next = [], False
    for token in tokens:
        if take_next:
            keep.append(token)
            take_next = False
        elif token in ("-I", "-isystem", "-D"):
            keep.append(token)
            take_next = True
        elif token.startswith(("-I", "-isystem", "-D", "-std=")):
            keep.append(token)
    print("\n".join(keep))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
