"""check_plan.py SDP_PLAN MODEL WORLD: runs `SDP_PLAN --model MODEL --world
WORLD --format json` over DDP and the four SDP variants at C = 0.5 and checks
the report against what the plan predicts:
- DDP: every rank sends the ring all-reduce of all gradients plus the
  trainer's control all-reduce (loss and gradient square share, two f64):
  2(N-1)/N x parameter bytes + 2(N-1)/N x 16;
- forward masking (B-SDP, N-SDP): the highest peak is below DDP's;
- backward masking (Bb-SDP, Nb-SDP): every rank holds all parameters (DDP's
  parameter bytes, up to the 512-byte rounding of each extra storage group)
  but fewer gradient and optimizer-state bytes than DDP.
Standard library only."""
import json
import subprocess
import sys

BLOCK = 512  # the meta allocator's granularity (a CUDA caching allocator's)


def fail(msg):
    sys.exit("FAIL: " + msg)


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    binary, model, world = sys.argv[1], sys.argv[2], int(sys.argv[3])
    cmd = [binary, "--model", model, "--world", str(world), "--format", "json",
           "--strategies", "ddp,b-sdp:0.5,n-sdp:0.5,bb-sdp:0.5,nb-sdp:0.5"]
    print(" ".join(cmd))
    run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if run.returncode != 0:
        fail(f"exit status {run.returncode}: {run.stderr}")
    report = json.loads(run.stdout)
    strategies = {s["strategy"]: s for s in report["strategies"]}
    if sorted(strategies) != ["b-sdp", "bb-sdp", "ddp", "n-sdp", "nb-sdp"]:
        fail(f"strategies {sorted(strategies)}")
    for s in strategies.values():
        if len(s["ranks"]) != world:
            fail(f"{s['strategy']}: {len(s['ranks'])} ranks, expected {world}")
    n = world
    bytes_per_param = {"f32": 4, "f64": 8}[report["dtype"]]
    param_bytes = report["parameters"] * bytes_per_param

    ddp = strategies["ddp"]
    expected = 2 * (n - 1) / n * param_bytes + 2 * (n - 1) / n * 16
    for r in ddp["ranks"]:
        sent = r["comm"]["sent_bytes"]
        if abs(sent - expected) > 1e-9 * expected:
            fail(f"DDP rank {r['rank']} sends {sent} bytes, expected {expected}")
    print(f"ok: DDP sends {expected:.0f} bytes per rank = 2(N-1)/N x ({param_bytes} + 16)")

    ddp_cat = ddp["ranks"][0]["memory"]["peak"]["by_category"]
    for name in ("b-sdp", "n-sdp"):
        s = strategies[name]
        if s["masking"] != "forward":
            fail(f"{name}: masking {s['masking']}, expected forward")
        if not s["peak_bytes"]["max"] < ddp["peak_bytes"]["max"]:
            fail(f"{name}: max peak {s['peak_bytes']['max']} not below DDP's "
                 f"{ddp['peak_bytes']['max']}")
        print(f"ok: {name} max peak {s['peak_bytes']['max']} < DDP {ddp['peak_bytes']['max']}")

    for name in ("bb-sdp", "nb-sdp"):
        s = strategies[name]
        if s["masking"] != "backward":
            fail(f"{name}: masking {s['masking']}, expected backward")
        slack = BLOCK * (s["components"] + 1)  # one rounding per storage group at most
        for r in s["ranks"]:
            cat = r["memory"]["peak"]["by_category"]
            if not (param_bytes <= cat["param"] <= ddp_cat["param"] + slack):
                fail(f"{name} rank {r['rank']}: param {cat['param']} bytes, expected all "
                     f"parameters ({param_bytes} to {ddp_cat['param'] + slack})")
            for c in ("grad", "optim"):
                if not cat[c] < ddp_cat[c]:
                    fail(f"{name} rank {r['rank']}: {c} {cat[c]} bytes, not below DDP's "
                         f"{ddp_cat[c]}")
        print(f"ok: {name} holds every parameter, fewer grad and optim bytes on every rank")


if __name__ == "__main__":
    main()
