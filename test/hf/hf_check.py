"""Shared pieces of the Hugging Face tests: the engine's validation batches
rebuilt from its data, a checkpoint loaded into transformers with every key
accounted for, and the loss of that model computed without transformers'
own float32 steps (so a float64 checkpoint is compared in float64).

Run with the Python of scripts/setup-python-ref.sh.
"""
import contextlib
import glob
import json
import os
import subprocess
import sys

import numpy as np
import torch


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def run(cmd, **kwargs):
    """Runs cmd; on a non-zero exit prints its output and fails."""
    print("+ " + " ".join(str(c) for c in cmd), flush=True)
    p = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, **kwargs)
    if p.returncode != 0:
        print(p.stdout)
        fail(f"exit {p.returncode}: {' '.join(str(c) for c in cmd)}")
    return p.stdout


# ---- the engine's data (engine/data/*.cpp) ----

def text_val_tokens(path):
    """text:PATH: bytes are tokens, val is the last n // 20 bytes (at least one)."""
    data = np.fromfile(path, dtype=np.uint8).astype(np.int64)
    n = len(data)
    cut = n - n // 20
    if cut == n and n >= 2:
        cut = n - 1
    return data[cut:]


def llmc_tokens(paths):
    """The tokens of llm.c shards, concatenated in sorted path order."""
    parts = []
    for path in sorted(paths):
        header = np.fromfile(path, dtype="<i4", count=256)
        dtype = {20240520: "<u2", 20240801: "<u4"}[int(header[0])]
        parts.append(np.fromfile(path, dtype=dtype, offset=1024).astype(np.int64))
        if len(parts[-1]) != header[2]:
            fail(f"{path}: {len(parts[-1])} tokens, header says {header[2]}")
    return np.concatenate(parts)


def llmc_val_tokens(directory):
    return llmc_tokens(glob.glob(os.path.join(directory, "*_val_*.bin")))


def eval_windows(tokens, batch, seq, eval_batches):
    """The windows Trainer::mean_loss feeds the model: a fresh, unsplit stream
    of the val split (sequential_source.cpp) read as a ring, window k starting
    k * seq tokens in, eval_batches batches of batch windows of seq + 1."""
    length = len(tokens)
    windows = []
    for k in range(eval_batches * batch):
        start = (k * seq) % length
        idx = (start + np.arange(seq + 1)) % length
        windows.append(tokens[idx])
    return np.stack(windows)  # [eval_batches * batch, seq + 1]


def metrics_records(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def final_eval_loss(metrics_path, step):
    """The eval_loss the engine logged at `step` (the step of the checkpoint)."""
    for r in metrics_records(metrics_path):
        if not r.get("summary") and r.get("step") == step and "eval_loss" in r:
            return float(r["eval_loss"])
    fail(f"{metrics_path} has no eval_loss at step {step}")


# ---- transformers ----

def load_causal_lm(checkpoint, dtype):
    """LlamaForCausalLM from the checkpoint directory; fails unless every tensor
    of the file is a parameter of the model and every parameter is in the file."""
    from transformers import AutoModelForCausalLM
    model, info = AutoModelForCausalLM.from_pretrained(checkpoint, torch_dtype=dtype,
                                                       output_loading_info=True)
    for kind in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        if info.get(kind):
            fail(f"loading {checkpoint}: {kind} {info[kind]}")
    if type(model).__name__ != "LlamaForCausalLM":
        fail(f"{checkpoint} loads as {type(model).__name__}, expected LlamaForCausalLM")
    model.eval()
    return model


@contextlib.contextmanager
def without_float32_steps():
    """transformers 4.44's LLaMA computes three things in float32 whatever the
    model's dtype: RMSNorm (casts its input to float32 and back), the rotary
    tables (float32 inverse frequencies and angles) and the attention softmax
    (dtype=torch.float32). In float64 those steps alone cost ~1e-9 relative in the loss;
    here they run in the input's dtype, the same formulas otherwise."""
    from transformers.models.llama import modeling_llama as ml
    saved = (ml.LlamaRMSNorm.forward, ml.LlamaRotaryEmbedding.forward,
             torch.nn.functional.softmax)

    def rmsnorm(self, hidden_states):
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))

    @torch.no_grad()
    def rotary(self, x, position_ids):
        dim = 2 * self.inv_freq.shape[0]
        inv_freq = 1.0 / (self.config.rope_theta **
                          (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
        freqs = position_ids[:, :, None].to(torch.float64) * inv_freq[None, None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return ((emb.cos() * self.attention_scaling).to(x.dtype),
                (emb.sin() * self.attention_scaling).to(x.dtype))

    softmax = saved[2]

    def softmax_keeping_dtype(input, dim=None, _stacklevel=3, dtype=None):
        if dtype is torch.float32 and input.dtype == torch.float64:
            dtype = None
        return softmax(input, dim=dim, _stacklevel=_stacklevel, dtype=dtype)

    ml.LlamaRMSNorm.forward = rmsnorm
    ml.LlamaRotaryEmbedding.forward = rotary
    torch.nn.functional.softmax = softmax_keeping_dtype
    try:
        yield
    finally:
        ml.LlamaRMSNorm.forward, ml.LlamaRotaryEmbedding.forward = saved[:2]
        torch.nn.functional.softmax = softmax


@torch.no_grad()
def mean_loss(model, windows, batch):
    """Mean next-token cross-entropy over the windows, batch rows at a time,
    as the engine sums it (per token, then divided by the token count). The
    logits come from the model's own modules in its dtype (LlamaForCausalLM's
    forward would cast them to float32 first)."""
    total, count = 0.0, 0
    for b in range(0, len(windows), batch):
        rows = torch.from_numpy(windows[b:b + batch])
        inputs, targets = rows[:, :-1], rows[:, 1:]
        hidden = model.model(input_ids=inputs, use_cache=False).last_hidden_state
        logits = model.lm_head(hidden)
        losses = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none")
        total += float(losses.sum())
        count += losses.numel()
    return total / count
