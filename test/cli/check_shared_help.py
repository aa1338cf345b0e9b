#!/usr/bin/env python3
"""check_shared_help.py SOURCE_DIR SDP_TRAIN SDP_PLAN SDP_PIPELINE

The flags of config fields that several apps take are declared once
(apps/training_options.cpp, kSharedFlags). Reads that table and checks each
app's --help against it: sdp-train shows every shared flag with the table's
text; a shared flag that another app shows has exactly the table's text
there too (so no app describes a field its own way), unless it is one of
that app's own flags listed below; and every shared flag is taken by at
least two apps (else it belongs to its one app).
"""
import ast
import re
import subprocess
import sys

# Flags an app keeps as its own on purpose, though a shared flag has the
# name: sdp-pipeline's describe its cost model (--model picks the costs'
# source, --seq is a ResNet's image side, --batch is bounded by the cost
# counter, --dtype takes f32 or bf16, --schedule is the reference schedule,
# --micro-batches is the simulated M with its own bound).
OWN_FLAGS = {"sdp-pipeline": {"--model", "--batch", "--seq", "--dtype", "--schedule",
                              "--micro-batches"}}

TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}]')


def shared_flags(source):
    text = open(source, encoding="utf-8").read()
    start = text.index("kSharedFlags[] = {")
    end = text.index("\n};", start)
    entries, depth, literals = [], 0, None
    for token in TOKEN.findall(text[start + len("kSharedFlags[] = "):end + 3]):
        if token == "{":
            depth += 1
            if depth == 2:
                literals = []
        elif token == "}":
            if depth == 2:
                field, names, *help_parts = literals
                entries.append((field, names.split(","), "".join(help_parts)))
            depth -= 1
        elif depth == 2:
            literals.append(ast.literal_eval(token))
    if not entries:
        sys.exit(f"FAIL: no shared flags read from {source}")
    return entries


def help_texts(binary):
    """{flag name: its description} of every option line of `binary --help`.

    CLI11 writes "--name TYPE:[lo, hi]=default" in a column of fixed width
    and the description after it; a name too long for the column puts the
    description alone on the next line, indented to the column."""
    out = subprocess.run([binary, "--help"], check=True, capture_output=True, text=True).stdout
    lines = out.splitlines()
    continued = [len(l) - len(l.lstrip()) for l in lines
                 if l.startswith("    ") and not l.lstrip().startswith("-")]
    if not continued:
        sys.exit(f"FAIL: {binary} --help has no description on a line of its own "
                 "(cannot find the description column)")
    column = min(continued)
    texts = {}
    for i, line in enumerate(lines):
        if not line.lstrip().startswith("--"):
            continue
        following = lines[i + 1] if i + 1 < len(lines) else ""
        if following[:column].strip() == "" and following[column:column + 1].strip():
            description = following.strip()
        else:
            description = line[column:].strip()
        for name in line.split()[0].split(","):
            texts[name] = description
    return texts


def main():
    source, train, plan, pipeline = sys.argv[1:5]
    apps = {"sdp-train": help_texts(train), "sdp-plan": help_texts(plan),
            "sdp-pipeline": help_texts(pipeline)}
    failures = []
    for field, names, text in shared_flags(source):
        takers = []
        for app, texts in apps.items():
            shown = [n for n in names if n in texts and n not in OWN_FLAGS.get(app, set())]
            if not shown:
                if app == "sdp-train":
                    failures.append(f"sdp-train --help lacks {names[0]} ({field})")
                continue
            takers.append(app)
            for n in shown:
                if texts[n] != text:
                    failures.append(f"{app} {n}: {texts[n]!r}\n  shared text ({field}): {text!r}")
        if len(takers) < 2:
            failures.append(f"{names[0]} ({field}) is taken by {takers} only: not shared")
        print(f"{names[0]}: {', '.join(takers)}")
    if failures:
        sys.exit("FAIL:\n" + "\n".join(failures))
    print("ok: every shared flag has one help text")


if __name__ == "__main__":
    main()
