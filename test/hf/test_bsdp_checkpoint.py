"""A B-SDP checkpoint of a 4-rank float64 run (one file, or with
--max-shard-size shards and their index) loads into transformers'
LlamaForCausalLM with no missing or unexpected keys, and that model's loss on
the engine's validation batches is the engine's eval_loss.

    test_bsdp_checkpoint.py --sdp-train BIN --text FILE [--max-shard-size S] [--device cuda]
                            -- MPIEXEC -n 4 ...

--device cuda (the emulated CUDA build's check) trains in float32 on the
device instead: the checkpoint the device job wrote loads the same way, and
both transformers losses are held to 1e-5 relative, float32 rounding of the
engine's own loss over two layers.

Tolerances: with transformers' float32 steps taken out (hf_check.without_float32_steps)
both sides compute the same float64 formulas in another order, so they agree
to rounding: measured 8.9e-16 on this run. The bound 1e-10 leaves room for
another BLAS's summation order and still catches any float32 step:
transformers as shipped (float32 RMSNorm, rotary tables and softmax) is off
by 1.2e-8 here (2.8e-9 relative). That one is held to 1e-6 relative, float32
rounding over two layers with a wide margin.
"""
import argparse
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_check  # noqa: E402

STEPS, BATCH, SEQ, EVAL_BATCHES = 4, 4, 32, 3


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        hf_check.fail("usage: test_bsdp_checkpoint.py ... -- MPIEXEC_COMMAND")
    split = argv.index("--")
    p = argparse.ArgumentParser()
    p.add_argument("--sdp-train", required=True)
    p.add_argument("--text", required=True)
    p.add_argument("--max-shard-size", default=None)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = p.parse_args(argv[:split])
    launcher = argv[split + 1:]

    with tempfile.TemporaryDirectory(prefix="sdp_hf_bsdp-") as work:
        save_dir = os.path.join(work, "ckpt")
        metrics = os.path.join(work, "metrics.jsonl")
        cmd = launcher + [args.sdp_train, "--model", "tiny", "--data", f"text:{args.text}",
                          "--strategy", "b-sdp", "--active-fraction", "0.5",
                          "--device", args.device,
                          "--dtype", "f64" if args.device == "cpu" else "f32",
                          "--steps", STEPS, "--batch", BATCH, "--seq", SEQ, "--lr", "1e-2",
                          "--warmup", "0", "--eval-every", STEPS, "--eval-batches",
                          EVAL_BATCHES, "--save-dir", save_dir, "--metrics", metrics,
                          "--progress", "false"]
        if args.max_shard_size:
            cmd += ["--max-shard-size", args.max_shard_size]
        hf_check.run(cmd)
        checkpoint = os.path.join(save_dir, f"step-{STEPS:06d}")
        files = sorted(os.listdir(checkpoint))
        print(f"checkpoint files: {files}")
        if args.max_shard_size:
            shards = [f for f in files if f.startswith("model-") and f.endswith(".safetensors")]
            # A whole model.safetensors beside the shards would be what loads.
            if ("model.safetensors.index.json" not in files or len(shards) < 2
                    or "model.safetensors" in files):
                hf_check.fail(f"--max-shard-size {args.max_shard_size}: expected an index and "
                              f"several model-*-of-*.safetensors, got {files}")

        engine = hf_check.final_eval_loss(metrics, STEPS)
        windows = hf_check.eval_windows(hf_check.text_val_tokens(args.text), BATCH, SEQ,
                                        EVAL_BATCHES)
        model = hf_check.load_causal_lm(checkpoint, torch.float64)
        dtypes = {p.dtype for p in model.parameters()}
        if dtypes != {torch.float64}:
            hf_check.fail(f"parameters load as {dtypes}, expected float64")
        shipped = hf_check.mean_loss(model, windows, BATCH)
        with hf_check.without_float32_steps():
            exact = hf_check.mean_loss(model, windows, BATCH)

    print(f"engine eval_loss          {engine:.17g}")
    print(f"transformers, float64     {exact:.17g}  diff {exact - engine:.3g}")
    print(f"transformers as shipped   {shipped:.17g}  rel diff {(shipped - engine) / engine:.3g}")
    ok = True
    exact_bound = 1e-10 if args.device == "cpu" else 1e-5 * abs(engine)
    shipped_bound = 1e-6 if args.device == "cpu" else 1e-5
    if not abs(exact - engine) <= exact_bound:
        print(f"FAIL: float64 loss differs from the engine's by {exact - engine:.3g} "
              f"(> {exact_bound:.3g})")
        ok = False
    if not abs(shipped - engine) <= shipped_bound * abs(engine):
        print(f"FAIL: shipped loss differs from the engine's by "
              f"{(shipped - engine) / engine:.3g} relative (> {shipped_bound:g})")
        ok = False
    if not ok:
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
