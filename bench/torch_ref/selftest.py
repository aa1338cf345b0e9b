#!/usr/bin/python3
"""Self-test of the torch reference tools (not part of the C++ test suite).

Checks, on tiny random models:
  * safetensors_np round-trips every supported dtype (incl. BF16) and metadata;
  * llama_torch agrees with an independent, loop-heavy numpy forward (GQA,
    rotate-half RoPE, RMSNorm, SwiGLU, tied and untied heads);
  * the sdpa and explicit attention paths agree;
  * check_logits.py passes on logits the module itself produced in float32,
    fails (exit 1) on perturbed logits or a perturbed weight, and rejects
    (exit 2) missing, extra and mis-shaped tensors.
Run: /usr/bin/python3 bench/torch_ref/selftest.py   (prints OK, exit 0)
"""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import safetensors_np  # noqa: E402
from llama_torch import Llama, LlamaConfig, load_hf_tensors  # noqa: E402

PY = "/usr/bin/python3"


def numpy_forward(cfg, w, tokens):
    """Deliberately different formulation of the same math, float64 throughout."""
    d, hq, hkv, dh = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    half = dh // 2
    w = {k: v.astype(np.float64) for k, v in w.items()}

    def rms(x, g):
        return x / np.sqrt((x * x).sum(-1, keepdims=True) / d + cfg.rms_norm_eps) * g

    def rope(x, pos):  # x [T, Dh]; rotate pair (j, j + Dh/2) by pos * theta^(-2j/Dh)
        out = np.empty_like(x)
        for j in range(half):
            ang = pos * cfg.rope_theta ** (-2.0 * j / dh)
            c, s = np.cos(ang), np.sin(ang)
            out[:, j] = x[:, j] * c - x[:, j + half] * s
            out[:, j + half] = x[:, j + half] * c + x[:, j] * s
        return out

    b, t = tokens.shape
    pos = np.arange(t, dtype=np.float64)
    logits = np.zeros((b, t, cfg.vocab_size))
    for bi in range(b):
        x = w["model.embed_tokens.weight"][tokens[bi]]
        for i in range(cfg.num_hidden_layers):
            p = f"model.layers.{i}."
            h = rms(x, w[p + "input_layernorm.weight"])
            q = h @ w[p + "self_attn.q_proj.weight"].T
            k = h @ w[p + "self_attn.k_proj.weight"].T
            v = h @ w[p + "self_attn.v_proj.weight"].T
            heads = []
            for hh in range(hq):
                g = hh // (hq // hkv)
                qh = rope(q[:, hh * dh:(hh + 1) * dh], pos)
                kh = rope(k[:, g * dh:(g + 1) * dh], pos)
                vh = v[:, g * dh:(g + 1) * dh]
                o = np.zeros((t, dh))
                for ti in range(t):
                    s = kh[:ti + 1] @ qh[ti] / np.sqrt(dh)
                    e = np.exp(s - s.max())
                    o[ti] = (e / e.sum()) @ vh[:ti + 1]
                heads.append(o)
            x = x + np.concatenate(heads, axis=1) @ w[p + "self_attn.o_proj.weight"].T
            h = rms(x, w[p + "post_attention_layernorm.weight"])
            gate = h @ w[p + "mlp.gate_proj.weight"].T
            up = h @ w[p + "mlp.up_proj.weight"].T
            x = x + (gate / (1 + np.exp(-gate)) * up) @ w[p + "mlp.down_proj.weight"].T
        x = rms(x, w["model.norm.weight"])
        head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
        logits[bi] = x @ head.T
    return logits


def random_model(cfg, seed):
    torch.manual_seed(seed)
    m = Llama(cfg)
    with torch.no_grad():
        # Non-unit norm weights, larger scale: a loader that skipped a tensor
        # or swapped two would show up in the logits.
        for name, p in m.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.2 * torch.randn_like(p))
            else:
                p.normal_(0, 0.15)
    return m


def write_checkpoint(dirname, cfg, tensors, bf16=()):
    import json
    os.makedirs(dirname, exist_ok=True)
    with open(os.path.join(dirname, "config.json"), "w") as f:
        json.dump(cfg.to_hf_dict(), f, indent=2)
    safetensors_np.save_file(os.path.join(dirname, "model.safetensors"), tensors,
                             metadata={"format": "pt"}, bf16=bf16)


def run_check(ckpt, tok_path, logit_path, b, t, tol=1e-4):
    r = subprocess.run([PY, os.path.join(HERE, "check_logits.py"), "--checkpoint", ckpt,
                        "--tokens", tok_path, "--logits", logit_path,
                        "--batch", str(b), "--seq", str(t), "--tol", str(tol)],
                       capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def expect(cond, msg):
    if not cond:
        raise AssertionError(msg)
    print("  ok:", msg)


def test_safetensors(tmp):
    print("safetensors round trip")
    rng = np.random.default_rng(0)
    t = {"f32": rng.standard_normal((3, 5)).astype(np.float32),
         "f64": rng.standard_normal((2, 2, 2)),
         "i32": rng.integers(-9, 9, (7,)).astype(np.int32),
         "u16": rng.integers(0, 60000, (4, 1)).astype(np.uint16),
         "bf": rng.standard_normal((6,)).astype(np.float32),
         "scalar": np.array(1.5, dtype=np.float32)}
    path = os.path.join(tmp, "rt.safetensors")
    safetensors_np.save_file(path, t, metadata={"k": "v"}, bf16={"bf"})
    back = safetensors_np.load_file(path)
    expect(sorted(back) == sorted(t), "same names, __metadata__ skipped")
    for k in ("f32", "f64", "i32", "u16", "scalar"):
        expect(back[k].dtype == t[k].dtype and np.array_equal(back[k], t[k]), f"{k} exact")
    expect(back["bf"].dtype == np.float32 and np.allclose(back["bf"], t["bf"], rtol=2 ** -8),
           "bf16 widened to float32 within bf16 precision")
    # Representable values survive; ties round to even (1+2^-8 -> 1, 1+3*2^-8 -> 1+2^-6).
    src = np.array([1.0, -2.5, 0.0, 65536.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8], np.float32)
    want = np.array([1.0, -2.5, 0.0, 65536.0, 1.0, 1 + 2 ** -6], np.float32)
    got = safetensors_np.bf16_bits_to_float32(safetensors_np.float32_to_bf16_bits(src))
    expect(np.array_equal(got, want), "bf16 rounding is round-to-nearest-even")
    _, _, start = safetensors_np.read_header(path)
    expect(start % 8 == 0, "data section 8-byte aligned")


def test_sharded_collection(tmp):
    print("sharded safetensors (index + shards) read like one file")
    rng = np.random.default_rng(1)
    t = {"a": rng.standard_normal((3, 2)).astype(np.float32),
         "b": rng.standard_normal((4,)).astype(np.float32),
         "c": rng.standard_normal((2, 2)).astype(np.float32)}
    d = os.path.join(tmp, "sharded")
    os.makedirs(d)
    shards = {"m-00001-of-00002.safetensors": ["a", "b"], "m-00002-of-00002.safetensors": ["c"]}
    for shard, names in shards.items():
        safetensors_np.save_file(os.path.join(d, shard), {n: t[n] for n in names})
    weight_map = {n: shard for shard, names in shards.items() for n in names}
    with open(os.path.join(d, "m.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 56}, "weight_map": weight_map}, f)
    back = safetensors_np.load_collection(d, "m")
    expect(sorted(back) == sorted(t) and all(np.array_equal(back[k], t[k]) for k in t),
           "every tensor of every shard, exact")
    os.remove(os.path.join(d, "m-00002-of-00002.safetensors"))
    try:
        safetensors_np.load_collection(d, "m")
        expect(False, "a missing shard is an error")
    except safetensors_np.SafetensorsError as e:
        expect("m-00002-of-00002.safetensors" in str(e), "the error names the missing shard")


def test_model_math():
    print("module vs independent numpy forward")
    for tie in (False, True):
        cfg = LlamaConfig(hidden_size=32, intermediate_size=40, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, vocab_size=50,
                          rope_theta=500.0, rms_norm_eps=1e-5, tie_word_embeddings=tie)
        m = random_model(cfg, seed=1 + tie)
        keys = set(m.state_dict())
        expect(("lm_head.weight" in keys) != tie, f"lm_head present iff untied (tie={tie})")
        expect("model.layers.1.self_attn.k_proj.weight" in keys and
               m.state_dict()["model.layers.1.self_attn.k_proj.weight"].shape == (16, 32),
               "HF names and [out,in] GQA shapes")
        tokens = np.random.default_rng(3).integers(0, 50, (2, 9))
        w = {k: v.numpy() for k, v in m.state_dict().items()}
        ref = numpy_forward(cfg, w, tokens)
        m64 = random_model(cfg, seed=0).double()
        load_hf_tensors(m64, w, dtype=torch.float64)
        for impl in ("explicit", "sdpa"):
            m64.attn_impl = impl
            with torch.no_grad():
                got = m64(torch.from_numpy(tokens)).numpy()
            err = np.abs(got - ref).max() / np.abs(ref).max()
            expect(err < 1e-10, f"fp64 {impl} vs numpy (tie={tie}): rel err {err:.2e}")
        m32 = m.float()
        with torch.no_grad():
            a = m32(torch.from_numpy(tokens)).numpy()
            m32.attn_impl = "explicit"
            e = m32(torch.from_numpy(tokens)).numpy()
        expect(np.abs(a - e).max() / np.abs(e).max() < 1e-5, "fp32 sdpa matches explicit")
        # Loss is the mean token cross entropy.
        tgt = torch.from_numpy(np.random.default_rng(4).integers(0, 50, (2, 9)))
        lse = torch.logsumexp(torch.from_numpy(ref), -1)
        manual = (lse - torch.from_numpy(ref).gather(-1, tgt[..., None])[..., 0]).mean()
        m64.attn_impl = "explicit"
        with torch.no_grad():
            expect(abs(m64.loss(torch.from_numpy(tokens), tgt).item() - manual.item()) < 1e-10,
                   "loss = mean cross entropy")


def test_check_logits(tmp):
    print("check_logits.py")
    b, t = 2, 16
    for tie in (False, True):
        cfg = LlamaConfig(hidden_size=48, intermediate_size=72, num_hidden_layers=2,
                          num_attention_heads=6, num_key_value_heads=2, vocab_size=97,
                          max_position_embeddings=64, tie_word_embeddings=tie)
        m = random_model(cfg, seed=10 + tie)
        w = {k: v.numpy().copy() for k, v in m.state_dict().items()}
        ckpt = os.path.join(tmp, f"ckpt_tie{int(tie)}")
        write_checkpoint(ckpt, cfg, w)
        tokens = np.random.default_rng(5).integers(0, cfg.vocab_size, (b, t)).astype("<i4")
        tok_path = os.path.join(tmp, "tokens.i32")
        tokens.tofile(tok_path)
        # "Engine" logits: the module itself in float32 with the fast path.
        with torch.no_grad():
            logits = m(torch.from_numpy(tokens.astype(np.int64))).numpy().astype("<f4")
        lp = os.path.join(tmp, "logits.f32")
        logits.tofile(lp)
        rc, out = run_check(ckpt, tok_path, lp, b, t)
        expect(rc == 0, f"fp32 logits pass (tie={tie}): "
               + [ln for ln in out.splitlines() if "rel" in ln][0])

        bad = logits.copy()
        bad[1, 7, 3] += 1e-3 * np.abs(logits).max()
        bad.tofile(lp)
        rc, out = run_check(ckpt, tok_path, lp, b, t)
        expect(rc == 1 and "t=7, v=3" in out, "perturbed logit fails and is located")
        logits.tofile(lp)

        pert = dict(w)
        pert["model.layers.1.mlp.up_proj.weight"] = w["model.layers.1.mlp.up_proj.weight"] * 1.01
        write_checkpoint(os.path.join(tmp, "pert"), cfg, pert)
        rc, _ = run_check(os.path.join(tmp, "pert"), tok_path, lp, b, t)
        expect(rc == 1, "perturbed weight fails")

        missing = {k: v for k, v in w.items() if k != "model.layers.0.post_attention_layernorm.weight"}
        write_checkpoint(os.path.join(tmp, "miss"), cfg, missing)
        rc, out = run_check(os.path.join(tmp, "miss"), tok_path, lp, b, t)
        expect(rc == 2 and "missing tensors" in out and "post_attention_layernorm" in out,
               "missing tensor rejected")

        extra = dict(w)
        extra["lm_head.weight" if tie else "model.extra.weight"] = w["model.embed_tokens.weight"]
        write_checkpoint(os.path.join(tmp, "extra"), cfg, extra)
        rc, out = run_check(os.path.join(tmp, "extra"), tok_path, lp, b, t)
        expect(rc == 2 and "unexpected tensors" in out, "extra tensor rejected")

        shaped = dict(w)
        shaped["model.layers.0.self_attn.k_proj.weight"] = np.zeros((48, 48), np.float32)
        write_checkpoint(os.path.join(tmp, "shape"), cfg, shaped)
        rc, out = run_check(os.path.join(tmp, "shape"), tok_path, lp, b, t)
        expect(rc == 2 and "shape mismatches" in out, "wrong shape rejected")

        rc, out = run_check(ckpt, tok_path, lp, b, t + 1)
        expect(rc == 2 and "bytes" in out, "wrong --seq rejected by file size")

    # BF16 checkpoint: the engine would compute from the same rounded weights.
    names = set(w)
    write_checkpoint(os.path.join(tmp, "bf16"), cfg, w, bf16=names)
    wb = safetensors_np.load_file(os.path.join(tmp, "bf16", "model.safetensors"))
    mb = Llama(cfg)
    load_hf_tensors(mb, wb)
    with torch.no_grad():
        mb(torch.from_numpy(tokens.astype(np.int64))).numpy().astype("<f4").tofile(lp)
    rc, out = run_check(os.path.join(tmp, "bf16"), tok_path, lp, b, t)
    expect(rc == 0, "bf16 checkpoint passes against bf16-weight logits")


def main():
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        test_safetensors(tmp)
        test_sharded_collection(tmp)
        test_model_math()
        test_check_logits(tmp)
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
