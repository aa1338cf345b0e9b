"""Plain-PyTorch twin of the sdp-engine CIFAR ResNets (models/resnet/*).

Same architecture, parameter names (torchvision's) and buffers as the
engine, so an engine checkpoint (model.safetensors) loads strictly:

    stem     conv1 (3x3, stride 1, no bias) -> bn1 -> ReLU; no max pooling
    layerS   S = 1..4, blocks[S-1] basic blocks of widths[S-1] channels;
             block I: conv1 (3x3, stride s) -> bn1 -> ReLU -> conv2 (3x3)
             -> bn2, plus the shortcut, then ReLU. s = 2 in the first block
             of stages 2-4; a block whose shape changes has the projection
             shortcut downsample.0 (1x1 conv, stride s, no bias) ->
             downsample.1 (BatchNorm), every other one the identity
    head     global average pooling -> fc (with bias)

BatchNorm: eps 1e-5, momentum 0.1 (PyTorch's defaults, the engine's too).
Initialization follows models/resnet/resnet_model.cpp (Kaiming normal,
fan_out, for convolutions; a normal of std 1/sqrt(3 fan_in) for fc.weight,
the variance of PyTorch's uniform default; zeros for fc.bias; BatchNorm
weight 1, bias 0) so that fresh models of both start alike in distribution
(not bit for bit: the random streams differ).

    cfg = ResNetConfig.named("resnet18", num_classes=10)   # or from_json(path)
    model = CifarResNet(cfg)
    load_tensors(model, safetensors_np.load_file("ckpt/model.safetensors"))
"""

import json
import math
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

# As ResNetConfig::named in models/resnet/resnet_config.cpp: (widths, blocks).
NAMED = {
    "resnet-tiny": ((4, 8, 8, 16), (2, 1, 1, 1)),
    "resnet-mini": ((16, 32, 64, 128), (2, 2, 2, 2)),
    "resnet18": ((64, 128, 256, 512), (2, 2, 2, 2)),
    "wrn18": ((128, 256, 512, 1024), (2, 2, 2, 2)),
}


@dataclass
class ResNetConfig:
    name: str = "custom"
    widths: tuple = (64, 128, 256, 512)
    blocks: tuple = (2, 2, 2, 2)
    in_channels: int = 3
    num_classes: int = 10
    bn_eps: float = 1e-5
    bn_momentum: float = 0.1
    extra: dict = field(default_factory=dict)

    @staticmethod
    def named(name, num_classes=10):
        if name not in NAMED:
            raise ValueError(f"unknown ResNet '{name}' (valid: {', '.join(NAMED)})")
        widths, blocks = NAMED[name]
        return ResNetConfig(name=name, widths=widths, blocks=blocks, num_classes=num_classes)

    @staticmethod
    def from_json(path_or_dict):
        """The engine's config.json (model_type sdp-cifar-resnet)."""
        if isinstance(path_or_dict, dict):
            j = path_or_dict
        else:
            with open(path_or_dict, encoding="utf-8") as f:
                j = json.load(f)
        if j.get("model_type") != "sdp-cifar-resnet":
            raise ValueError(f"config.json: model_type {j.get('model_type')!r} is not a CIFAR "
                             "ResNet (expected sdp-cifar-resnet)")
        return ResNetConfig(name=j["name"], widths=tuple(j["widths"]), blocks=tuple(j["blocks"]),
                            in_channels=j["in_channels"], num_classes=j["num_classes"],
                            bn_eps=j["bn_eps"], bn_momentum=j["bn_momentum"])

    def parameter_count(self):
        """Trainable parameters, as ResNetConfig::parameter_count (running stats excluded)."""
        n = self.widths[0] * self.in_channels * 9 + 2 * self.widths[0]
        cin = self.widths[0]
        for s, (w, nb) in enumerate(zip(self.widths, self.blocks)):
            for b in range(nb):
                n += w * cin * 9 + 2 * w + w * w * 9 + 2 * w
                if b == 0 and (s > 0 or cin != w):
                    n += w * cin + 2 * w
                cin = w
        return n + self.num_classes * cin + self.num_classes


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride, eps, momentum):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout, eps=eps, momentum=momentum)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout, eps=eps, momentum=momentum)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, 0, bias=False),
                                            nn.BatchNorm2d(cout, eps=eps, momentum=momentum))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        shortcut = x if self.downsample is None else self.downsample(x)
        return F.relu(out + shortcut)


class CifarResNet(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        eps, mom = cfg.bn_eps, cfg.bn_momentum
        self.conv1 = nn.Conv2d(cfg.in_channels, cfg.widths[0], 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cfg.widths[0], eps=eps, momentum=mom)
        cin = cfg.widths[0]
        for s, (w, nb) in enumerate(zip(cfg.widths, cfg.blocks)):
            blocks = []
            for b in range(nb):
                blocks.append(BasicBlock(cin, w, 2 if (s > 0 and b == 0) else 1, eps, mom))
                cin = w
            setattr(self, f"layer{s + 1}", nn.Sequential(*blocks))
        self.fc = nn.Linear(cin, cfg.num_classes)
        self.reset_parameters()

    def reset_parameters(self):
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                fan_out = m.out_channels * m.kernel_size[0] * m.kernel_size[1]
                nn.init.normal_(m.weight, 0.0, math.sqrt(2.0 / fan_out))
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        nn.init.normal_(self.fc.weight, 0.0, 1.0 / math.sqrt(3.0 * self.fc.in_features))
        nn.init.zeros_(self.fc.bias)

    def forward(self, images):
        """images [B, C, H, W] -> logits [B, num_classes]."""
        x = F.relu(self.bn1(self.conv1(images)))
        for s in range(4):
            x = getattr(self, f"layer{s + 1}")(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))

    def decay_groups(self, weight_decay):
        """AdamW parameter groups as the engine's: decay only on >= 2-D parameters."""
        decay = [p for p in self.parameters() if p.ndim >= 2]
        no_decay = [p for p in self.parameters() if p.ndim < 2]
        return [{"params": decay, "weight_decay": weight_decay},
                {"params": no_decay, "weight_decay": 0.0}]


class CheckpointMismatch(ValueError):
    pass


def load_tensors(model, tensors, dtype=torch.float32):
    """Copies name -> numpy array into the model's parameters and buffers, strictly.

    Every parameter and running statistic must be present with its shape;
    num_batches_tracked (PyTorch-only, unused with a fixed momentum) is left
    alone; any other name is an error.
    """
    model.to(dtype)  # first: to() may replace the tensors state_dict() would return
    state = model.state_dict()
    wanted = {k for k in state if not k.endswith("num_batches_tracked")}
    missing = sorted(wanted - set(tensors))
    unexpected = sorted(set(tensors) - wanted)
    if missing or unexpected:
        raise CheckpointMismatch(f"checkpoint does not match the model: missing {missing[:6]}"
                                 f"{' ...' if len(missing) > 6 else ''}, unexpected "
                                 f"{unexpected[:6]}{' ...' if len(unexpected) > 6 else ''}")
    with torch.no_grad():
        for name in wanted:
            value = torch.from_numpy(tensors[name])
            if tuple(value.shape) != tuple(state[name].shape):
                raise CheckpointMismatch(f"{name}: checkpoint shape {tuple(value.shape)}, model "
                                         f"{tuple(state[name].shape)}")
            state[name].copy_(value.to(dtype))
    return model
