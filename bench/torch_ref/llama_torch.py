"""PyTorch reference of the sdp-engine LLaMA model (Hugging Face LlamaForCausalLM semantics).

Written from the architecture description, not from transformers' source.
Submodules are named so that `Llama.state_dict()` keys are exactly the HF
checkpoint names (model.embed_tokens.weight, model.layers.0.self_attn.q_proj.weight,
..., lm_head.weight), which lets an engine-exported safetensors file be loaded
with no renaming table.

Two attention paths:
  * "sdpa":     torch's fused scaled-dot-product attention, for the speed benchmark;
  * "explicit": plain matmul + masked softmax, for the logits check, where we
                want nothing clever between us and the math (and float64 support).
"""

import json
import math
import os
from dataclasses import asdict, dataclass, fields
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F


def _torch_version():
    parts = torch.__version__.split("+")[0].split(".")
    return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or 0)


# enable_gqa appeared in torch 2.5; the public SDPA in 2.0.  Torch 1.13 (Debian
# bookworm) only has the private _scaled_dot_product_attention, which returns
# (output, weights).
_HAS_SDPA = hasattr(F, "scaled_dot_product_attention")
_HAS_SDPA_GQA = _HAS_SDPA and _torch_version() >= (2, 5)
_HAS_PRIVATE_SDPA = hasattr(F, "_scaled_dot_product_attention")


def sdpa_backend_name():
    if _HAS_SDPA:
        return "F.scaled_dot_product_attention" + ("(enable_gqa)" if _HAS_SDPA_GQA else "")
    if _HAS_PRIVATE_SDPA:
        return "F._scaled_dot_product_attention"
    return "explicit"


@dataclass
class LlamaConfig:
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    max_position_embeddings: int = 2048
    tie_word_embeddings: bool = False
    head_dim: Optional[int] = None

    _REQUIRED = ("hidden_size", "intermediate_size", "num_hidden_layers",
                 "num_attention_heads", "vocab_size")

    def __post_init__(self):
        if self.head_dim is None:
            if self.hidden_size % self.num_attention_heads:
                raise ValueError("hidden_size must be divisible by num_attention_heads "
                                 "when head_dim is not given")
            self.head_dim = self.hidden_size // self.num_attention_heads
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"num_attention_heads ({self.num_attention_heads}) must be a multiple "
                             f"of num_key_value_heads ({self.num_key_value_heads})")
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even for rotate-half RoPE, got {self.head_dim}")

    @classmethod
    def from_json(cls, src):
        """Build from a dict, a config.json path, or a directory containing config.json.

        Unknown HF keys (architectures, model_type, torch_dtype, ...) are ignored.
        """
        if isinstance(src, dict):
            d = src
        else:
            path = os.path.join(src, "config.json") if os.path.isdir(src) else src
            with open(path, "r", encoding="utf-8") as f:
                d = json.load(f)
        missing = [k for k in cls._REQUIRED if k not in d]
        if missing:
            raise ValueError(f"config is missing required keys: {', '.join(missing)}")
        # Variants this reference does not implement must not be silently ignored.
        unsupported = [k for k, ok in (("rope_scaling", None), ("attention_bias", False),
                                       ("mlp_bias", False), ("hidden_act", "silu"))
                       if d.get(k, ok) != ok]
        if unsupported:
            raise ValueError("config uses features the reference does not implement: "
                             + ", ".join(f"{k}={d[k]!r}" for k in unsupported))
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in d.items() if k in known}
        # HF's convention: absent num_key_value_heads means plain multi-head attention.
        kwargs.setdefault("num_key_value_heads", d["num_attention_heads"])
        return cls(**kwargs)

    def to_hf_dict(self):
        d = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
             "torch_dtype": "float32"}
        d.update(asdict(self))
        return d


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        # Normalise in at least float32 (HF semantics for half inputs); a
        # float64 model stays float64 so the logits check keeps its precision.
        compute = torch.promote_types(x.dtype, torch.float32)
        h = x.to(compute)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class RotaryCache:
    """cos/sin tables for positions 0..T-1, built in float64 and cast once per dtype.

    Building in float64 keeps position*inv_freq exact enough at long positions
    that the float64 logits check measures the engine, not our table.
    """

    def __init__(self, head_dim, theta):
        self.head_dim = head_dim
        self.theta = theta
        self._cache = {}

    def get(self, seq_len, dtype, device):
        key = (seq_len, dtype, device)
        if key not in self._cache:
            exponents = torch.arange(0, self.head_dim, 2, dtype=torch.float64) / self.head_dim
            inv_freq = 1.0 / (self.theta ** exponents)
            angles = torch.outer(torch.arange(seq_len, dtype=torch.float64), inv_freq)
            # Rotate-half pairs dim j with j + Dh/2, so each frequency appears in both halves.
            angles = torch.cat((angles, angles), dim=-1)
            self._cache[key] = (angles.cos().to(dtype=dtype, device=device),
                                angles.sin().to(dtype=dtype, device=device))
        return self._cache[key]


def apply_rope(x, cos, sin):
    return x * cos + rotate_half(x) * sin


def causal_attention_explicit(q, k, v):
    """q [B,H,T,Dh], k/v [B,H,T,Dh] (kv already expanded to H heads)."""
    t = q.shape[-2]
    scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
    mask = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
    scores = scores.masked_fill(mask, float("-inf"))
    compute = torch.promote_types(scores.dtype, torch.float32)
    probs = torch.softmax(scores.to(compute), dim=-1).to(q.dtype)
    return probs @ v


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.n_heads = cfg.num_attention_heads
        self.n_kv_heads = cfg.num_key_value_heads
        self.head_dim = cfg.head_dim
        d = cfg.hidden_size
        self.q_proj = nn.Linear(d, self.n_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(d, self.n_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(d, self.n_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, d, bias=False)

    def forward(self, x, cos, sin, impl):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.n_kv_heads, self.head_dim).transpose(1, 2)
        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)

        rep = self.n_heads // self.n_kv_heads
        if impl == "sdpa" and _HAS_SDPA_GQA:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=rep > 1)
        else:
            if rep > 1:
                # repeat_interleave gives [kv0]*rep + [kv1]*rep + ..., i.e. query
                # head h reads kv head h // rep, the HF grouping.
                k = k.repeat_interleave(rep, dim=1)
                v = v.repeat_interleave(rep, dim=1)
            if impl == "sdpa" and _HAS_SDPA:
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            elif impl == "sdpa" and _HAS_PRIVATE_SDPA:
                out = F._scaled_dot_product_attention(q, k, v, None, 0.0, False, True)[0]
            else:
                out = causal_attention_explicit(q, k, v)
        out = out.transpose(1, 2).reshape(b, t, self.n_heads * self.head_dim)
        return self.o_proj(out)


class MLP(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        d, f = cfg.hidden_size, cfg.intermediate_size
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin, impl):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, impl)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaBody(nn.Module):
    """The `model.` prefix of the HF names."""

    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class Llama(nn.Module):
    def __init__(self, cfg: LlamaConfig, attn_impl="sdpa"):
        super().__init__()
        if attn_impl not in ("sdpa", "explicit"):
            raise ValueError(f"attn_impl must be 'sdpa' or 'explicit', got {attn_impl!r}")
        self.cfg = cfg
        self.attn_impl = attn_impl
        self.model = LlamaBody(cfg)
        # Tied: no lm_head parameter at all, so state_dict() matches an HF
        # checkpoint that omits lm_head.weight.
        self.lm_head = None if cfg.tie_word_embeddings else nn.Linear(
            cfg.hidden_size, cfg.vocab_size, bias=False)
        self.rope = RotaryCache(cfg.head_dim, cfg.rope_theta)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self, std=0.02):
        for name, p in self.named_parameters():
            if name.endswith("layernorm.weight") or name == "model.norm.weight":
                p.fill_(1.0)
            else:
                p.normal_(0.0, std)

    def expected_shapes(self):
        """HF tensor name -> shape that a checkpoint for this config must contain."""
        return {name: tuple(t.shape) for name, t in self.state_dict().items()}

    def forward(self, tokens):
        """tokens [B,T] int64 -> logits [B,T,V]."""
        t = tokens.shape[1]
        if t > self.cfg.max_position_embeddings:
            raise ValueError(f"sequence length {t} exceeds max_position_embeddings "
                             f"{self.cfg.max_position_embeddings}")
        x = self.model.embed_tokens(tokens)
        cos, sin = self.rope.get(t, x.dtype, x.device)
        for layer in self.model.layers:
            x = layer(x, cos, sin, self.attn_impl)
        x = self.model.norm(x)
        head = self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        return F.linear(x, head)

    def loss(self, tokens, targets):
        """Mean cross entropy over all B*T positions."""
        logits = self.forward(tokens)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


class CheckpointMismatch(ValueError):
    pass


@torch.no_grad()
def load_hf_tensors(model: Llama, tensors, dtype=None):
    """Strictly copy a dict HF name -> numpy array / tensor into `model`.

    Every expected tensor must be present with the right shape and nothing
    extra may be there; all problems are reported together.
    """
    expected = model.expected_shapes()
    missing = sorted(set(expected) - set(tensors))
    extra = sorted(set(tensors) - set(expected))
    bad_shape = sorted(f"{n}: checkpoint {tuple(tensors[n].shape)}, config expects {expected[n]}"
                       for n in expected if n in tensors and tuple(tensors[n].shape) != expected[n])
    problems = []
    if missing:
        problems.append("missing tensors:\n  " + "\n  ".join(missing))
    if extra:
        hint = ""
        if "lm_head.weight" in extra and model.cfg.tie_word_embeddings:
            hint = "\n  (config has tie_word_embeddings=true, so lm_head.weight must be absent)"
        problems.append("unexpected tensors:\n  " + "\n  ".join(extra) + hint)
    if bad_shape:
        problems.append("shape mismatches:\n  " + "\n  ".join(bad_shape))
    if problems:
        raise CheckpointMismatch("checkpoint does not match config:\n" + "\n".join(problems))

    state = model.state_dict()
    for name, value in tensors.items():
        src = torch.as_tensor(value)
        if not src.is_floating_point():
            raise CheckpointMismatch(f"{name}: expected a floating-point tensor, got {src.dtype}")
        state[name].copy_(src)
    if dtype is not None:
        model.to(dtype)
    return model
