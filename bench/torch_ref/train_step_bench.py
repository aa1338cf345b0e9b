#!/usr/bin/python3
"""Time one fp32 training step of the PyTorch reference LLaMA on CPU.

A step is forward + mean cross entropy + backward + AdamW step, with
zero_grad(set_to_none=True) — the same unit of work sdp-engine's CPU
benchmark times, so the two numbers are comparable.  Shapes use the engine's
argument meanings (--ffn is intermediate_size, --kv-heads the GQA kv heads).
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=None, help="default: --heads")
    p.add_argument("--ffn", type=int, default=688, help="intermediate_size")
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--tie", action="store_true", help="tie lm_head to embed_tokens")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    p.add_argument("--attn", choices=("sdpa", "explicit"), default="sdpa")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print one JSON line only")
    args = p.parse_args(argv)
    if args.steps < 1:
        p.error("--steps must be >= 1")

    # Debian's torch calls a generic BLAS (OpenBLAS), which sizes its own
    # thread pool from the environment at load time and ignores
    # torch.set_num_threads; pin it before torch is imported so --threads
    # really bounds the cores used.
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    import torch
    from llama_torch import Llama, LlamaConfig, sdpa_backend_name

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    cfg = LlamaConfig(hidden_size=args.dim, intermediate_size=args.ffn,
                      num_hidden_layers=args.layers, num_attention_heads=args.heads,
                      num_key_value_heads=args.kv_heads or args.heads,
                      vocab_size=args.vocab, max_position_embeddings=max(2048, args.seq),
                      tie_word_embeddings=args.tie)
    model = Llama(cfg, attn_impl=args.attn)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)
    n_params = sum(p.numel() for p in model.parameters())

    # One fixed batch: data loading is not part of what we time.
    data = torch.randint(0, args.vocab, (args.batch, args.seq + 1), dtype=torch.int64)
    inputs, targets = data[:, :-1].contiguous(), data[:, 1:].contiguous()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = model.loss(inputs, targets)
        loss.backward()
        opt.step()
        return loss.item()  # forces completion, keeps the loss honest

    for _ in range(args.warmup):
        step()
    times_ms = []
    cpu_ms = []  # process CPU time: less sensitive than wall time to other load
    loss = float("nan")
    for _ in range(args.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        loss = step()
        times_ms.append((time.perf_counter() - t0) * 1e3)
        cpu_ms.append((time.process_time() - c0) * 1e3)

    ms = statistics.median(times_ms)
    tokens_per_s = args.batch * args.seq / (ms / 1e3)
    attn = sdpa_backend_name() if args.attn == "sdpa" else "explicit"
    if args.json:
        print(json.dumps({
            "impl": "pytorch", "ms_per_step": round(ms, 3),
            "tokens_per_s": round(tokens_per_s, 1), "torch_version": torch.__version__,
            "threads": torch.get_num_threads(), "min_ms": round(min(times_ms), 3),
            "cpu_ms_per_step": round(statistics.median(cpu_ms), 3),
            "steps": args.steps, "attn": attn, "params": n_params,
            "config": {"dim": args.dim, "layers": args.layers, "heads": args.heads,
                       "kv_heads": cfg.num_key_value_heads, "ffn": args.ffn,
                       "vocab": args.vocab, "seq": args.seq, "batch": args.batch,
                       "tie": args.tie},
        }))
    else:
        print(f"pytorch {torch.__version__}, {torch.get_num_threads()} thread(s), attn {attn}")
        print(f"dim {args.dim} layers {args.layers} heads {args.heads}/{cfg.num_key_value_heads} "
              f"ffn {args.ffn} vocab {args.vocab} seq {args.seq} batch {args.batch} "
              f"({n_params / 1e6:.2f}M params)")
        print(f"median {ms:.2f} ms/step (min {min(times_ms):.2f}) over {args.steps} steps, "
              f"{tokens_per_s:.0f} tokens/s, last loss {loss:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
