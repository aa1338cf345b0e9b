#!/usr/bin/env python3
"""check_doc_commands.py BIN_DIR SOURCE_DIR

Every command the README, docs/ and the READMEs beside the code show for
the tools, checked against the built tools, so that a documented command that no longer works fails here:

- sdp-train commands have their flags parsed and the whole config validated
  (`--print-config` appended: every flag, its range and the cross-field
  checks; nothing trains, no data is read);
- sdp-plan and sdp-pipeline commands run as written (dry runs and
  simulations, seconds at most), except those that read a file the docs
  only name (`--calibrate FILE`) or a budget search of about 20 s
  (`--fit` on the paper's 1B model): every flag they name must be one
  the tool's --help lists;
- sdp-export commands (they need a checkpoint) the same way.

A command is taken from a code block: continuation lines joined, a
launcher in front (`mpirun ...`, `srun ...`) and a trailing `# comment`
dropped, `...` and optional `[--flag ...]` groups removed. It runs in a
fresh temporary directory where every `--config FILE` it names exists (an
empty JSON object) and its outputs land. Exits 1 naming each failure.
"""
import glob
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

TOOLS = ("sdp-train", "sdp-plan", "sdp-pipeline", "sdp-export")
BINARY = re.compile(r"(?:\./)?build[^ ]*/bin/(sdp-[a-z]+)")


def doc_files(source):
    """The README, docs/ and the READMEs beside the code."""
    files = [os.path.join(source, "README.md")]
    # (bench/RESULTS.md is a record of what ran then, not instructions.)
    for pattern in ("docs/*.md", "apps/*/README.md", "engine/*/README.md"):
        files += sorted(glob.glob(os.path.join(source, pattern)))
    return files


def commands(path):
    """(line number, command text) of every tool command in the fenced blocks."""
    out, fence, pending, start = [], False, "", 0
    for number, line in enumerate(open(path, encoding="utf-8"), 1):
        line = line.rstrip("\n")
        if line.startswith("```"):
            fence, pending = not fence, ""
            continue
        # Fenced blocks, and Markdown's indented ones.
        if not fence and not line.startswith("    ") and not pending:
            continue
        if not pending:
            start = number
        text = (pending + " " + line.strip()) if pending else line
        if text.rstrip().endswith("\\"):
            pending = text.rstrip()[:-1]
            continue
        pending = ""
        if BINARY.search(text):
            out.append((start, text.strip()))
    return out


def normalize(text):
    """[tool, args...] with the launcher, comments, '...' and [optional] groups removed."""
    text = re.sub(r"\s#.*$", "", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = text.replace("...", " ")
    match = BINARY.search(text)
    tool = match.group(1)
    return [tool] + shlex.split(text[match.end():])


def known_flags(binary):
    """The long flags a tool's --help lists."""
    text = subprocess.run([binary, "--help"], stdout=subprocess.PIPE, text=True).stdout
    return set(re.findall(r"--[a-z][a-z0-9-]*", text))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    bin_dir, source = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    failures, checked = [], 0
    for path in doc_files(source):
        for number, text in commands(path):
            where = f"{os.path.relpath(path, source)}:{number}"
            args = normalize(text)
            tool, rest = args[0], args[1:]
            if tool not in TOOLS:
                failures.append(f"{where}: unknown tool {tool}")
                continue
            with tempfile.TemporaryDirectory() as work:
                for i, arg in enumerate(rest[:-1]):
                    if arg == "--config":
                        with open(os.path.join(work, rest[i + 1]), "w") as f:
                            json.dump({}, f)
                if tool == "sdp-train":
                    if not {"--help", "--list-models", "--print-config"} & set(rest):
                        rest = rest + ["--print-config"]
                elif tool == "sdp-export" or "--calibrate" in rest or "--fit" in rest:
                    # Not run: every flag it names must be one the tool has.
                    unknown = sorted(set(f.split("=")[0] for f in rest if f.startswith("--"))
                                     - known_flags(os.path.join(bin_dir, tool)))
                    if unknown:
                        failures.append(f"{where}: `{text}`: {tool} has no {', '.join(unknown)}")
                    checked += 1
                    continue
                # Data paths the docs name relative to the repository.
                rest = [a.replace("text:docs/", "text:" + os.path.join(source, "docs") + "/")
                        for a in rest]
                done = subprocess.run([os.path.join(bin_dir, tool), *rest], cwd=work,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      timeout=120)
            checked += 1
            if done.returncode != 0:
                failures.append(f"{where}: `{text}` exited {done.returncode}: "
                                f"{done.stderr.strip()[:400]}")
    for f in failures:
        print("FAIL:", f)
    if checked == 0:
        failures.append("no documented command found")
        print("FAIL: no documented command found")
    if failures:
        sys.exit(1)
    print(f"{checked} documented commands work")


if __name__ == "__main__":
    main()
