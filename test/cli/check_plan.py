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
Then a second run over sharded and recomputed compositions checks the
planner's compute and sharding fields:
- `recompute_flops` is > 0 exactly for the +ac items and equals the forward
  FLOPs of the checkpointed blocks a rank runs (a LLaMA block's forward:
  2 x tokens x its matmul weights + the causal attention products), and
  `flops` of an +ac item is the same item without +ac plus `recompute_flops`;
- `gathered_peak_bytes` is > 0 exactly for fully sharded items;
- `shard` and `activation_checkpointing` name each item's levels, and the CSV
  carries the same fields by name.
Standard library only."""
import csv
import io
import json
import subprocess
import sys

BLOCK = 512  # the meta allocator's granularity (a CUDA caching allocator's)


def fail(msg):
    sys.exit("FAIL: " + msg)


def run_plan(binary, model, world, strategies, fmt="json"):
    cmd = [binary, "--model", model, "--world", str(world), "--format", fmt,
           "--strategies", strategies]
    print(" ".join(cmd))
    run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if run.returncode != 0:
        fail(f"exit status {run.returncode}: {run.stderr}")
    return run.stdout


def block_forward_flops(report):
    """FLOPs of one whole LLaMA block's forward on a rank's batch, as the
    kernels count them (kernels/flop_count.h)."""
    m = report["model_config"]
    d, hq, hkv, f = (m["hidden_size"], m["num_attention_heads"], m["num_key_value_heads"],
                     m["intermediate_size"])
    hd = m["head_dim"]
    if report["grad_accum"] != 1:
        fail("the FLOPs formula assumes grad_accum 1")
    b, t = report["batch"], report["seq"]
    weights = d * hq * hd + 2 * d * hkv * hd + hq * hd * d + 3 * d * f  # q, k, v, o, FFN
    return 2 * b * t * weights + 2 * 2 * b * hq * hd * t * (t + 1) / 2  # Q K^T and P V


# item: (shard, activation_checkpointing) the report must name.
COMPOSED = {
    "fsdp": ("full", "none"),
    "fsdp+ac": ("full", "block"),
    "ddp+ac:2": ("none", "every:2"),
    "b-sdp:0.5+ac": ("none", "block"),
    "b-sdp:0.5+fsdp": ("full", "none"),
    "b-sdp:0.5+fsdp+ac": ("full", "block"),
    "n-sdp:0.5+zero2+ac": ("grad", "block"),
    "bb-sdp:0.5+zero2+ac": ("grad", "block"),
    "nb-sdp:0.5+zero1": ("optimizer", "none"),
}


def check_composed(binary, model, world):
    items = ",".join(["ddp"] + list(COMPOSED))
    report = json.loads(run_plan(binary, model, world, items))
    by_label = {}
    items_order = ["ddp"] + list(COMPOSED)
    if len(report["strategies"]) != len(items_order):
        fail(f"{len(report['strategies'])} strategies, expected {len(items_order)}")
    blk = block_forward_flops(report)
    layers = report["model_config"]["num_hidden_layers"]
    for item, s in zip(items_order, report["strategies"]):
        by_label[item] = s
        shard, ac = COMPOSED.get(item, ("none", "none"))
        if (s["shard"], s["activation_checkpointing"]) != (shard, ac):
            fail(f"{item}: shard {s['shard']}, activation_checkpointing "
                 f"{s['activation_checkpointing']}; expected {shard}, {ac}")
        gathered = s["gathered_peak_bytes"]["max"]
        if (gathered > 0) != (shard == "full"):
            fail(f"{item}: peak gathered {gathered} bytes (> 0 exactly when fully sharded)")
        for r in s["ranks"]:
            rec = r["recompute_flops"]
            if not r["flops"] > 0:
                fail(f"{item} rank {r['rank']}: flops {r['flops']}")
            if (rec > 0) != (ac != "none"):
                fail(f"{item} rank {r['rank']}: recompute_flops {rec} (> 0 exactly with +ac)")
            if ac == "none":
                continue
            # Forward masking runs only the owned blocks: a whole number of
            # blocks per rank (B-SDP), or of groups (N-SDP, checked on the mean).
            every = 1 if ac == "block" else int(ac.split(":")[1])
            if s["masking"] == "backward" or s["strategy"] in ("ddp", "fsdp"):
                expected = len(range(0, layers, every)) * blk
                if abs(rec - expected) > 1e-12 * expected:
                    fail(f"{item} rank {r['rank']}: recompute_flops {rec}, expected "
                         f"{expected} (forward of the checkpointed blocks)")
            elif s["granularity"] == "block" and abs(rec / blk - round(rec / blk)) > 1e-12:
                fail(f"{item} rank {r['rank']}: recompute_flops {rec} is not a whole number "
                     f"of block forwards ({blk})")
        if ac != "none" and s["masking"] == "forward" and ac == "block":
            # Every component is recomputed on each of its owners: a rank
            # recomputes the fraction of the blocks it holds, on the mean.
            expected = s["effective_active_fraction"] * layers * blk
            mean = s["recompute_flops"]["mean"]
            if abs(mean - expected) > 1e-12 * expected:
                fail(f"{item}: mean recompute_flops {mean}, expected (held C) L x block forward "
                     f"= {expected}")
    print(f"ok: recompute_flops > 0 exactly for +ac items and = the checkpointed blocks' "
          f"forward FLOPs ({blk:.0f} per whole block); peak gathered > 0 exactly for FSDP")
    # The same item with and without recomputation differ by recompute_flops.
    for with_ac, without in (("fsdp+ac", "fsdp"), ("b-sdp:0.5+fsdp+ac", "b-sdp:0.5+fsdp")):
        for a, b in zip(by_label[with_ac]["ranks"], by_label[without]["ranks"]):
            if abs(a["flops"] - b["flops"] - a["recompute_flops"]) > 1e-12 * a["flops"]:
                fail(f"{with_ac} rank {a['rank']}: flops {a['flops']} - {without}'s "
                     f"{b['flops']} != recompute_flops {a['recompute_flops']}")
    print("ok: flops of an +ac item = the item without +ac + recompute_flops, on every rank")

    rows = list(csv.DictReader(io.StringIO(run_plan(binary, model, world, items, "csv"))))
    for item, row in zip(items_order, rows):
        s = by_label[item]
        for key, want in (("shard", s["shard"]),
                          ("activation_checkpointing", s["activation_checkpointing"]),
                          ("gathered_peak_bytes", s["gathered_peak_bytes"]["max"]),
                          ("flops_mean", s["flops"]["mean"]),
                          ("recompute_flops_mean", s["recompute_flops"]["mean"]),
                          ("recompute_flops_max", s["recompute_flops"]["max"])):
            got = row.get(key)
            ok = got == want if isinstance(want, str) else (
                got not in (None, "") and abs(float(got) - want) <= 1e-12 * max(1, abs(want)))
            if not ok:
                fail(f"csv {item}: {key} = {got!r}, JSON says {want!r}")
    print("ok: the CSV carries shard, activation_checkpointing, gathered_peak_bytes, flops and "
          "recompute_flops as the JSON does")


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

    check_composed(binary, model, world)


if __name__ == "__main__":
    main()
