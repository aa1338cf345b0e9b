"""The engine's named Swin Transformers (models/swin) as timm SwinTransformer modules.

The engine's parameter names are timm's, so an engine checkpoint loads into
these with strict=True. timm comes from the reference environment
(scripts/setup-python-ref.sh: a pinned timm over Debian's torch 1.13).
"""

# name -> SwinTransformer arguments; the engine's swin_config.cpp defines the same networks.
NAMED = {
    "swin-t": dict(img_size=32, patch_size=2, embed_dim=96, depths=(2, 2, 6, 2),
                   num_heads=(3, 6, 12, 24), window_size=4),
    "swin-mini": dict(img_size=32, patch_size=2, embed_dim=32, depths=(2, 2, 2, 2),
                      num_heads=(2, 4, 8, 16), window_size=4),
    "swin-micro": dict(img_size=16, patch_size=2, embed_dim=8, depths=(2, 2),
                       num_heads=(2, 4), window_size=4),
}


def is_swin(name):
    return name in NAMED


def make(name, num_classes=10, drop_path=0.0):
    """timm's SwinTransformer for the engine's model `name`, MLP ratio 4, qkv bias, no dropout."""
    from timm.models.swin_transformer import SwinTransformer

    if name not in NAMED:
        raise ValueError(f"unknown Swin {name!r} (valid: {', '.join(NAMED)})")
    return SwinTransformer(in_chans=3, num_classes=num_classes, mlp_ratio=4.0, qkv_bias=True,
                           drop_rate=0.0, attn_drop_rate=0.0, drop_path_rate=drop_path,
                           **NAMED[name])
