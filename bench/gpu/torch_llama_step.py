#!/usr/bin/env python3
"""Time PyTorch training steps of the sdp-engine's named LLaMA models on a GPU.

The reference the GPU engine is measured against: the same model shapes
(models/llama/llama_config.cpp), the same unit of work per step (forward,
mean cross entropy over batch x seq tokens, backward, AdamW step with
zero_grad(set_to_none=True)), random tokens from one fixed batch.

    python3 bench/gpu/torch_llama_step.py --model llama-134m --batch 16 --seq 1024 \
        --mode eager --json out.json
    /usr/bin/python3 bench/gpu/torch_llama_step.py --model tiny --device cpu   # a quick test

Precision (--precision):
  autocast (default): fp32 parameters, gradients and AdamW state, matmuls and
      attention in bf16 under torch.autocast; the residual stream, norms and
      the loss stay fp32. The closest torch idiom to the engine, which keeps
      bf16 parameters and activations beside fp32 master weights and AdamW
      state: torch has no separate master copy (its fp32 parameters are the
      master) but re-casts each weight to bf16 in every forward, and its
      activations between matmuls are fp32 where ours are bf16.
  bf16: parameters, gradients and AdamW state all bf16 (no fp32 master):
      less memory and traffic than the engine, for a lower bound.
  f32: plain fp32 (CPU tests).

The model is bench/torch_ref/llama_torch.py (Hugging Face LlamaForCausalLM
semantics, checked against the engine's logits by check_logits.py), with
F.scaled_dot_product_attention(is_causal=True); --mode compile runs the loss
(forward + cross entropy) through torch.compile, whose backward AOTAutograd
compiles too; AdamW is the fused one on CUDA.

FLOPs per step (the same formula as bench/gpu/summarize.py uses for every
implementation): 6 x (matmul weights) x tokens + attention, where matmul
weights are q, k, v, o, gate, up, down of every block and the LM head (the
embedding is a lookup) and attention is 12 x batch x layers x heads x
head_dim x seq (seq + 1) / 2 (QK^T and PV over the causal pairs: 2 products
x 2 flops forward, twice that backward).

Prints one JSON object (and writes it to --json): tokens_per_s, step_ms
(median of the timed steps), max_memory_allocated / max_memory_reserved
(bytes, CUDA only), params, flops_per_step, losses, versions.
"""

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "torch_ref"))

# As models/llama/llama_config.cpp: (dim, layers, heads, kv_heads, ffn, vocab,
# max_seq); norm_eps 1e-5, rope_theta 10000, untied embeddings everywhere.
MODELS = {
    "tiny": (64, 2, 4, 2, 176, 256, 256),
    "mini": (96, 4, 4, 4, 256, 256, 256),
    "small": (256, 4, 8, 8, 688, 256, 1024),
    "small-32k": (256, 4, 8, 8, 688, 32000, 1024),
    "llama-134m": (768, 12, 12, 12, 2048, 32000, 1024),
    "llama-500m": (1280, 20, 20, 20, 3840, 32000, 1024),
    "llama-1b": (2048, 16, 16, 16, 6144, 32000, 1024),
}
NORM_EPS = 1e-5
ROPE_THETA = 10000.0


def matmul_weights(dim, layers, heads, kv_heads, ffn, vocab):
    """Weights that take part in a matmul: the blocks' projections and the LM head."""
    head_dim = dim // heads
    attention = dim * heads * head_dim * 2 + dim * kv_heads * head_dim * 2
    mlp = 3 * dim * ffn
    return layers * (attention + mlp) + vocab * dim


def step_flops(dim, layers, heads, kv_heads, ffn, vocab, batch, seq):
    """Model FLOPs of one training step (forward + backward), as the module doc says."""
    tokens = batch * seq
    dense = 6 * matmul_weights(dim, layers, heads, kv_heads, ffn, vocab) * tokens
    attention = 12 * batch * layers * heads * (dim // heads) * seq * (seq + 1) // 2
    return dense + attention


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=sorted(MODELS), default="llama-134m")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--steps", type=int, default=20, help="timed steps")
    p.add_argument("--warmup", type=int, default=5,
                   help="untimed steps first (compilation happens in the first)")
    p.add_argument("--mode", choices=("eager", "compile"), default="eager")
    p.add_argument("--precision", choices=("autocast", "bf16", "f32"), default=None,
                   help="default: autocast on cuda, f32 on cpu")
    p.add_argument("--device", default="cuda", help="cuda or cpu")
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="CPU threads (cpu device); 0 = torch's")
    p.add_argument("--json", default=None, help="also write the result object to this file")
    args = p.parse_args(argv)
    if args.steps < 1 or args.warmup < 0 or args.batch < 1 or args.seq < 1:
        p.error("--steps, --batch and --seq must be >= 1 and --warmup >= 0")
    if args.seq > MODELS[args.model][6]:
        p.error(f"--seq {args.seq} exceeds model {args.model}'s max_seq {MODELS[args.model][6]}")
    if args.precision is None:
        args.precision = "autocast" if args.device.startswith("cuda") else "f32"
    return args


def emit(result, path):
    text = json.dumps(result, sort_keys=True)
    print(text, flush=True)
    if path:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text + "\n")


def main(argv=None):
    args = parse_args(argv)
    import torch
    import torch.nn.functional as F
    from llama_torch import Llama, LlamaConfig, sdpa_backend_name

    dim, layers, heads, kv_heads, ffn, vocab, max_seq = MODELS[args.model]
    result = {
        "impl": f"torch-{args.mode}", "model": args.model, "batch": args.batch, "seq": args.seq,
        "precision": args.precision, "device": args.device, "torch_version": torch.__version__,
        "steps": args.steps, "warmup": args.warmup,
        "flops_per_step": step_flops(dim, layers, heads, kv_heads, ffn, vocab, args.batch,
                                     args.seq),
        "matmul_weights": matmul_weights(dim, layers, heads, kv_heads, ffn, vocab),
    }
    on_cuda = args.device.startswith("cuda")
    if on_cuda and not torch.cuda.is_available():
        result.update(status="skipped", reason="torch sees no CUDA device")
        emit(result, args.json)
        return 0
    if args.mode == "compile" and not hasattr(torch, "compile"):
        result.update(status="skipped", reason=f"torch {torch.__version__} has no torch.compile")
        emit(result, args.json)
        return 0
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    device = torch.device(args.device)
    if on_cuda:
        torch.cuda.set_device(device)
        result["device_name"] = torch.cuda.get_device_name(device)
        # Plain fp32 matmuls (the loss's, none else under autocast) stay fp32.
        torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(args.seed)
    cfg = LlamaConfig(hidden_size=dim, intermediate_size=ffn, num_hidden_layers=layers,
                      num_attention_heads=heads, num_key_value_heads=kv_heads, vocab_size=vocab,
                      rms_norm_eps=NORM_EPS, rope_theta=ROPE_THETA,
                      max_position_embeddings=max_seq, tie_word_embeddings=False)
    model = Llama(cfg, attn_impl="sdpa")
    if args.precision == "bf16":
        model = model.to(torch.bfloat16)
    model = model.to(device).train()
    result["params"] = sum(p.numel() for p in model.parameters())
    result["attention"] = sdpa_backend_name()

    # The rotary tables are made once, outside what torch.compile traces: the
    # residual stream's dtype (fp32 under autocast) decides theirs.
    stream_dtype = torch.bfloat16 if args.precision == "bf16" else torch.float32
    cos, sin = model.rope.get(args.seq, stream_dtype, device)

    def loss_of(tokens, targets):
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16,
                            enabled=args.precision == "autocast"):
            x = model.model.embed_tokens(tokens)
            for layer in model.model.layers:
                x = layer(x, cos, sin, "sdpa")
            logits = model.lm_head(model.model.norm(x))
            return F.cross_entropy(logits.reshape(-1, vocab).float(), targets.reshape(-1))

    forward = torch.compile(loss_of) if args.mode == "compile" else loss_of
    fused = {"fused": True} if on_cuda else {}
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=0.1, **fused)

    generator = torch.Generator().manual_seed(args.seed + 1)
    data = torch.randint(0, vocab, (args.batch, args.seq + 1), generator=generator)
    tokens = data[:, :-1].contiguous().to(device)
    targets = data[:, 1:].contiguous().to(device)

    def sync():
        if on_cuda:
            torch.cuda.synchronize(device)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = forward(tokens, targets)
        loss.backward()
        opt.step()
        return loss

    losses = []
    t0 = time.perf_counter()
    for _ in range(args.warmup):
        losses.append(step().item())
    sync()
    result["warmup_s"] = round(time.perf_counter() - t0, 3)

    times = []
    for _ in range(args.steps):
        sync()
        start = time.perf_counter()
        loss = step()
        sync()
        times.append(time.perf_counter() - start)
        losses.append(loss.item())

    step_s = statistics.median(times)
    result.update(
        status="ok",
        step_ms=round(step_s * 1e3, 3),
        step_ms_min=round(min(times) * 1e3, 3),
        tokens_per_s=round(args.batch * args.seq / step_s, 1),
        achieved_tflops=round(result["flops_per_step"] / step_s / 1e12, 2),
        loss_first=round(losses[0], 4),
        loss_last=round(losses[-1], 4),
    )
    if on_cuda:
        result["max_memory_allocated"] = torch.cuda.max_memory_allocated(device)
        result["max_memory_reserved"] = torch.cuda.max_memory_reserved(device)
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
