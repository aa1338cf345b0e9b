#!/usr/bin/env python3
"""check_plan_pipeline.py SDP_PLAN MODEL STAGES MICRO_BATCHES

Plans a LLaMA model on P pipeline stages x 1 replica with 1f1b and with
1f1b-2bp (sdp-plan --format json) and checks, for both:
  - every rank reports its stage (rank r is stage r with one replica);
  - stage s < P-1 sends M boundary activations to the next stage and stage
    s > 0 sends M boundary gradients to the previous one, M x B*T*D*4 bytes
    for f32 (nothing the other way at either end);
and that 1f1b-2bp's stage-0 activation peak exceeds 1f1b's: its deferred
weight gradients keep their inputs after I until W runs. Then, on P stages x
D = 2 replicas with DDP, that what each rank sends among its stage's
replicas is the all-reduce of its stage's gradients (2 (D-1)/D S = S, S
within the 512-byte blocks of its gradient memory) plus the step's loss
all-reduce of two f64 over the world (2 (N-1)/N 16 bytes).
Exits 1 naming the first figure that does not hold.
"""
import json
import subprocess
import sys


def plan(sdp_plan, model, stages, micro, schedule, batch, seq, replicas=1):
    cmd = [sdp_plan, "--model", model, "--world", str(stages * replicas), "--strategies", "ddp",
           "--pipeline-stages", str(stages), "--micro-batches", str(micro),
           "--schedule", schedule, "--batch", str(batch), "--seq", str(seq),
           "--format", "json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    sdp_plan, model = sys.argv[1], sys.argv[2]
    stages, micro = int(sys.argv[3]), int(sys.argv[4])
    batch, seq = 2, 32
    failures = []
    stage0_activation = {}
    for schedule in ("1f1b", "1f1b-2bp"):
        rep = plan(sdp_plan, model, stages, micro, schedule, batch, seq)
        pipe = rep["pipeline"]
        if pipe is None or pipe["stages"] != stages or pipe["micro_batches"] != micro:
            failures.append(f"{schedule}: the report's pipeline is {pipe}")
            continue
        hidden = rep["model_config"]["hidden_size"]
        boundary = batch * seq * hidden * 4  # one f32 [B, T, D] activation
        ranks = rep["strategies"][0]["ranks"]
        if len(ranks) != stages:
            failures.append(f"{schedule}: {len(ranks)} ranks reported, expected {stages}")
            continue
        for r in ranks:
            s = r["stage"]
            if s != r["rank"]:
                failures.append(f"{schedule}: rank {r['rank']} reports stage {s}")
            want_act = micro * boundary if s < stages - 1 else 0
            want_grad = micro * boundary if s > 0 else 0
            for key, want in (("activation_bytes_sent", want_act),
                              ("gradient_bytes_sent", want_grad)):
                if r[key] != want:
                    failures.append(f"{schedule}: stage {s} {key} = {r[key]}, expected {want} "
                                    f"(M = {micro} x B*T*D*4 = {boundary})")
            print(f"{schedule} stage {s}: activation peak {r['activation_peak_bytes']:.0f} B, "
                  f"sent {r['activation_bytes_sent']:.0f} B forward, "
                  f"{r['gradient_bytes_sent']:.0f} B backward, "
                  f"{r['replica_bytes_sent']:.0f} B among replicas")
        stage0_activation[schedule] = ranks[0]["activation_peak_bytes"]
    if len(stage0_activation) == 2 and not stage0_activation["1f1b-2bp"] > stage0_activation["1f1b"]:
        failures.append(f"stage 0 activation peak: 1f1b-2bp {stage0_activation['1f1b-2bp']} is not "
                        f"above 1f1b {stage0_activation['1f1b']}")
    world = 2 * stages
    rep = plan(sdp_plan, model, stages, micro, "1f1b", batch, seq, replicas=2)
    loss_bytes = 2 * (world - 1) / world * 16
    for r in rep["strategies"][0]["ranks"]:
        grads = r["memory"]["peak"]["by_category"]["grad"]
        gradient_sum = r["replica_bytes_sent"] - loss_bytes
        # A stage's groups are few; each allocation rounds up to 512 bytes.
        if not grads - 8 * 512 < gradient_sum <= grads:
            failures.append(f"D = 2: rank {r['rank']} sends {r['replica_bytes_sent']} bytes among "
                            f"replicas, expected its gradients ({grads} bytes allocated) + "
                            f"{loss_bytes}")
        print(f"D = 2 rank {r['rank']} (stage {r['stage']}): {r['replica_bytes_sent']:.0f} B among "
              f"replicas, gradient memory {grads:.0f} B")
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    if failures:
        sys.exit(1)
    print(f"ok: {model}, P = {stages}, M = {micro}")


if __name__ == "__main__":
    main()
