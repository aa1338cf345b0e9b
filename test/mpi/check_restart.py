#!/usr/bin/env python3
"""Restarts of a 2-rank sdp-train job by scripts/sdp-run.

    check_restart.py CASE --sdp-run PATH --sdp-train PATH --mpiexec PATH
                     [--mpiexec-args "..."] --work DIR

CASE:
  kill_resumes_identically  rank 1 is killed (SIGKILL, sdp-train's
      SDP_TEST_KILL test hook, once) after step 6 of 12, checkpoints every 4
      steps; sdp-run restarts the job from step 4. Every step's loss, grad
      norm, lr and eval loss in the metrics file, and the summary's final
      losses, must equal those of an uninterrupted run bit for bit, with each
      step 1..12 recorded exactly once.
  min_ranks_and_give_up  a job that dies before its first checkpoint restarts
      with one rank fewer (--min-ranks 1) and finishes; a job that dies at
      the same step on every attempt stops after --max-restarts with a
      non-zero exit and says so.
  permanent_error_not_retried  a save directory that cannot be created (its
      parent is a regular file, which stops root too) ends the first attempt
      at start-up with sdp-train's permanent-error exit code 3; sdp-run
      says that it does not restart, neither at the same size nor with fewer
      ranks, and exits 3.

DIR is emptied first. Every wait is bounded; standard library only.
"""
import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys

TRAIN = ["--model", "tiny", "--batch", "2", "--seq", "16", "--steps", "12", "--eval-every", "4",
         "--save-every", "4", "--progress", "false", "--comm-timeout", "30"]
LIMIT_S = 90  # per job: far above the few seconds these take


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def run(command, env_extra=None, cwd=None):
    env = dict(os.environ)
    env.update(env_extra or {})
    print("+ " + shlex.join(command), flush=True)
    try:
        done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True,
                              timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        fail(f"did not finish within {LIMIT_S} s: {shlex.join(command)}")
    print(done.stdout + done.stderr, flush=True)
    return done.returncode, done.stdout + done.stderr


def read_metrics(path):
    steps, summary = [], None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.endswith("\n"):
                fail(f"{path} line {n} has no newline (cut off)")
            record = json.loads(line)
            if record.get("summary"):
                summary = record
            else:
                steps.append(record)
    if summary is None:
        fail(f"{path} has no summary line")
    return steps, summary


def sdp_run(a, flags, train, env_extra):
    command = ([sys.executable, a.sdp_run, "--sdp-train", a.sdp_train, "--launcher", a.mpiexec,
                "--restart-delay", "0", "--attempt-timeout", "60"]
               + (["--launcher-args", a.mpiexec_args] if a.mpiexec_args else []) + flags
               + ["--"] + train)
    return run(command, env_extra, cwd=a.work)


def expect(text, output, what):
    if text not in output:
        fail(f"{what}: the output does not say {text!r}")


def kill_resumes_identically(a):
    reference_train = TRAIN + ["--save-dir", "ref_ck", "--metrics", "ref.jsonl"]
    rc, _ = run([a.mpiexec, "-np", "2"] + shlex.split(a.mpiexec_args) + [a.sdp_train]
                + reference_train, cwd=a.work)
    if rc != 0:
        fail(f"the uninterrupted run failed with exit code {rc}")
    hook = {"SDP_TEST_KILL": f"rank=1,step=6,once={os.path.join(a.work, 'killed')}"}
    rc, out = sdp_run(a, ["--np", "2", "--max-restarts", "2"],
                      TRAIN + ["--save-dir", "ck", "--metrics", "run.jsonl"], hook)
    if rc != 0:
        fail(f"sdp-run failed with exit code {rc}")
    if not os.path.exists(os.path.join(a.work, "killed")):
        fail("the kill hook never fired: the test did not interrupt anything")
    expect("failed after", out, "the failure")
    expect("SIGKILL", out, "the failure's cause")
    expect("it had reached step 6", out, "the step reached")
    expect("restarting from ck/step-000004 (step 4)", out, "the checkpoint resumed")
    expect("restart 1 of 2", out, "the restart")
    expect("the job finished after 1 restart", out, "the end")

    ref_steps, ref_summary = read_metrics(os.path.join(a.work, "ref.jsonl"))
    steps, summary = read_metrics(os.path.join(a.work, "run.jsonl"))
    numbers = [s["step"] for s in steps]
    if numbers != list(range(1, 13)):
        fail(f"steps in the restarted run's metrics: {numbers}, expected 1..12 once each")
    for ref, got in zip(ref_steps, steps):
        for key in ("loss", "grad_norm", "lr", "eval_loss"):
            if ref.get(key) != got.get(key):
                fail(f"step {ref['step']}: {key} {got.get(key)!r} after the restart, "
                     f"{ref.get(key)!r} uninterrupted")
    for key in ("steps", "final_train_loss", "final_eval_loss"):
        if ref_summary[key] != summary[key]:
            fail(f"summary {key}: {summary[key]!r} after the restart, "
                 f"{ref_summary[key]!r} uninterrupted")
    print(f"ok: killed after step 6, resumed from step 4; 12 steps equal bit for bit "
          f"(final train loss {summary['final_train_loss']!r}, "
          f"eval loss {summary['final_eval_loss']!r})")


def min_ranks_and_give_up(a):
    # Dies after step 2, before the first checkpoint (step 4), on every
    # 2-rank attempt; a 1-rank job has no rank 1 to kill and runs through.
    rc, out = sdp_run(a, ["--np", "2", "--max-restarts", "1", "--min-ranks", "1"],
                      TRAIN + ["--save-dir", "small_ck", "--metrics", "small.jsonl"],
                      {"SDP_TEST_KILL": "rank=1,step=2"})
    if rc != 0:
        fail(f"the job with --min-ranks 1 failed with exit code {rc}")
    expect("it had reached step 2", out, "the step reached")
    expect("dropping to 1 (--min-ranks 1)", out, "the smaller world")
    expect("warning: the global batch", out, "the batch warning")
    expect("restarting from the beginning", out, "the restart without a checkpoint")
    expect("restart 1 of 1: 1 rank:", out, "the 1-rank restart")
    steps, _ = read_metrics(os.path.join(a.work, "small.jsonl"))
    if [s["step"] for s in steps] != list(range(1, 13)):
        fail("the 1-rank restart's metrics do not hold steps 1..12 once each")

    # Dies after step 6 on every attempt: the restart from step 4 dies too.
    rc, out = sdp_run(a, ["--np", "2", "--max-restarts", "1"],
                      TRAIN + ["--save-dir", "give_up_ck"], {"SDP_TEST_KILL": "rank=1,step=6"})
    if rc == 0:
        fail("sdp-run succeeded although every attempt was killed")
    expect("the step it reached is unknown (no --metrics)", out, "the unknown step")
    expect("restarting from give_up_ck/step-000004 (step 4)", out, "the restart")
    expect("giving up: 1 restart used (--max-restarts); the latest complete checkpoint is "
           "give_up_ck/step-000004 (step 4)", out, "giving up")
    print(f"ok: dropped to 1 rank after a failure without a checkpoint; gave up with exit {rc}")


def permanent_error_not_retried(a):
    with open(os.path.join(a.work, "file"), "w", encoding="utf-8") as f:
        f.write("a regular file, not a directory\n")
    rc, out = sdp_run(a, ["--np", "2", "--max-restarts", "2", "--min-ranks", "1"],
                      TRAIN + ["--save-dir", "file/ck"], {})
    if rc != 3:
        fail(f"sdp-run exited {rc}, expected 3 (the permanent error's exit code)")
    expect("cannot create save directory 'file/ck'", out, "sdp-train's message")
    expect("exit code 3 is a permanent error", out, "the permanent error")
    expect("sdp-run does not restart it", out, "the refusal to restart")
    for text in ("restart 1 of", "dropping to", "step 1/"):
        if text in out:
            fail(f"the output says {text!r}: the job was restarted or trained")
    print("ok: a permanent error at start-up ended sdp-run after one attempt with exit 3")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("case", choices=["kill_resumes_identically", "min_ranks_and_give_up",
                                    "permanent_error_not_retried"])
    p.add_argument("--sdp-run", required=True)
    p.add_argument("--sdp-train", required=True)
    p.add_argument("--mpiexec", required=True)
    p.add_argument("--mpiexec-args", default="")
    p.add_argument("--work", required=True)
    a = p.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    {"kill_resumes_identically": kill_resumes_identically,
     "min_ranks_and_give_up": min_ranks_and_give_up,
     "permanent_error_not_retried": permanent_error_not_retried}[a.case](a)


if __name__ == "__main__":
    main()
