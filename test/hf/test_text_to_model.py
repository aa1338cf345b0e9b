"""From text to a Hugging Face model and back: the documented sequence
(docs/checkpoints-and-hf.md).

    test_text_to_model.py --sdp-train BIN --prepare scripts/prepare_text_data.py TEXT [TEXT ...]

1. prepare_text_data.py trains a byte-level BPE (vocab 1000) on the text
   files and writes llm.c shards, tokenizer.json and data.json.
2. sdp-train trains small-32k (vocab 32000 >= the tokenizer's) a few steps on
   `--data llmc:DIR/*.bin` and saves a checkpoint; it takes the vocabulary
   and the special tokens from data.json and puts the tokenizer beside the
   weights.
3. transformers: AutoTokenizer and AutoModelForCausalLM load the checkpoint
   directory (no missing or unexpected keys); the tokenizer's and the
   generation config's bos/eos/pad ids are data.json's; a prompt is
   tokenized, 8 tokens are generated greedily and decoded; and the model's
   loss on the engine's validation batches is the engine's eval_loss.

With --custom-config, step 2 trains instead a model of the user's own: a
small LLaMA config.json written here with data.json's vocabulary (--model
config:PATH), which transformers then loads the same way.

The run is float32, as a user would train. Tolerance of the loss: 1e-6
relative. Both sides round in float32 (6e-8 a step) through 4 layers and a
32000-way softmax, in different orders; measured 1.3e-8 relative here.
"""
import argparse
import json
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_check  # noqa: E402

STEPS, BATCH, SEQ, EVAL_BATCHES = 3, 4, 64, 2
PROMPT = "Subnetwork Data Parallelism trains"
NEW_TOKENS = 8


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sdp-train", required=True)
    p.add_argument("--prepare", required=True)
    p.add_argument("--custom-config", action="store_true",
                   help="train a small LLaMA given as a config.json instead of small-32k")
    p.add_argument("texts", nargs="+")
    args = p.parse_args()

    with tempfile.TemporaryDirectory(prefix="sdp_hf_text-") as work:
        data = os.path.join(work, "data")
        hf_check.run([sys.executable, args.prepare, "--out", data, "--vocab-size", "1000",
                      *args.texts])
        with open(os.path.join(data, "data.json")) as f:
            meta = json.load(f)

        model = "small-32k"
        if args.custom_config:
            config = os.path.join(work, "config.json")
            with open(config, "w") as f:
                json.dump({"model_type": "llama", "architectures": ["LlamaForCausalLM"],
                           "hidden_size": 64, "intermediate_size": 176,
                           "num_hidden_layers": 2, "num_attention_heads": 4,
                           "num_key_value_heads": 2, "vocab_size": meta["vocab_size"],
                           "max_position_embeddings": 256, "rope_theta": 10000.0,
                           "tie_word_embeddings": False}, f)
            model = f"config:{config}"

        save_dir = os.path.join(work, "ckpt")
        metrics = os.path.join(work, "metrics.jsonl")
        hf_check.run([args.sdp_train, "--model", model, "--data",
                      f"llmc:{data}/*.bin", "--steps", STEPS, "--batch", BATCH, "--seq", SEQ,
                      "--lr", "3e-3", "--warmup", "0", "--eval-every", STEPS, "--eval-batches",
                      EVAL_BATCHES, "--save-dir", save_dir, "--metrics", metrics,
                      "--progress", "false"])
        checkpoint = os.path.join(save_dir, f"step-{STEPS:06d}")
        print(f"checkpoint files: {sorted(os.listdir(checkpoint))}")

        from transformers import AutoTokenizer, GenerationConfig
        tokenizer = AutoTokenizer.from_pretrained(checkpoint)
        model = hf_check.load_causal_lm(checkpoint, torch.float32)
        generation = GenerationConfig.from_pretrained(checkpoint)

        failures = []
        for role in ("bos", "eos", "pad"):
            want = meta[f"{role}_token_id"]
            got_tok = getattr(tokenizer, f"{role}_token_id")
            got_gen = getattr(generation, f"{role}_token_id")
            print(f"{role}: data.json {want}, tokenizer {got_tok}, generation_config {got_gen}")
            if got_tok != want or got_gen != want:
                failures.append(f"{role}_token_id: data.json {want}, tokenizer {got_tok}, "
                                f"generation_config {got_gen}")
        if len(tokenizer) != meta["vocab_size"]:
            failures.append(f"tokenizer has {len(tokenizer)} entries, data.json says "
                            f"{meta['vocab_size']}")

        ids = tokenizer(PROMPT, return_tensors="pt").input_ids
        if tokenizer.decode(ids[0]) != PROMPT:
            failures.append(f"the prompt does not round-trip: {tokenizer.decode(ids[0])!r}")
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                                 do_sample=False, pad_token_id=tokenizer.pad_token_id)
        if out.shape != (1, ids.shape[1] + NEW_TOKENS) or not torch.equal(out[0, :ids.shape[1]],
                                                                         ids[0]):
            failures.append(f"generate returned {out.tolist()} for the prompt {ids.tolist()}")
        text = tokenizer.decode(out[0])
        print(f"generated: {text!r}")
        if not text.startswith(PROMPT):
            failures.append(f"the decoded generation {text!r} does not start with the prompt")

        engine = hf_check.final_eval_loss(metrics, STEPS)
        windows = hf_check.eval_windows(hf_check.llmc_val_tokens(data), BATCH, SEQ, EVAL_BATCHES)
        loss = hf_check.mean_loss(model, windows, BATCH)
        rel = (loss - engine) / engine
        print(f"engine eval_loss {engine:.9g}, transformers {loss:.9g}, rel diff {rel:.3g}")
        if not abs(rel) <= 1e-6:
            failures.append(f"loss differs from the engine's by {rel:.3g} relative (> 1e-6)")

    for f in failures:
        print(f"FAIL: {f}")
    if failures:
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
