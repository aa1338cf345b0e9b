#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (test/fuzz/corpus/<target>/):
a few valid files of each format and a few that are wrong in one way. The
files are committed; rerun this after changing it:  python3 make_corpus.py
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


# ---- safetensors: 8-byte header length, JSON header, data buffer
def safetensors(header, data, pad=True):
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def st_entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


f32 = struct.pack("<6f", *range(6))
i32 = struct.pack("<2i", -1, 7)
write("safetensors", "valid_two_tensors", safetensors(
    {"__metadata__": {"format": "pt"}, "w": st_entry("F32", [2, 3], 0, 24),
     "b": st_entry("I32", [2], 24, 32)}, f32 + i32))
write("safetensors", "valid_dtypes_and_empty", safetensors(
    {"h": st_entry("BF16", [2], 0, 4), "u": st_entry("U16", [1, 1], 4, 6),
     "d": st_entry("F64", [1], 6, 14), "e": st_entry("F32", [0, 4], 14, 14)},
    bytes(range(14))))
write("safetensors", "unsupported_dtype", safetensors(
    {"x": st_entry("F16", [2], 0, 4), "y": st_entry("F32", [1], 4, 8)}, bytes(8)))
write("safetensors", "truncated_data", safetensors({"x": st_entry("F32", [4], 0, 16)}, bytes(9)))
write("safetensors", "overlap", safetensors(
    {"x": st_entry("F32", [2], 0, 8), "y": st_entry("F32", [2], 4, 12)}, bytes(12)))
write("safetensors", "seven_dims", safetensors(
    {"x": st_entry("U16", [1, 1, 1, 1, 1, 1, 1], 0, 2)}, bytes(2)))
write("safetensors", "unpadded_header", safetensors(
    {"x": st_entry("I32", [1], 0, 4)}, bytes(4), pad=False))


# ---- llm.c shards: 256 int32 header (magic, version, count), then tokens
def shard(magic, version, tokens, token_bytes, count=None):
    header = [0] * 256
    header[:3] = [magic, version, len(tokens) if count is None else count]
    fmt = "<%d%s" % (len(tokens), "H" if token_bytes == 2 else "I")
    return struct.pack("<256i", *header) + struct.pack(fmt, *tokens)


write("llmc_shard", "gpt2_valid", shard(20240520, 1, [1, 2, 3, 999, 4, 5, 6, 7, 8, 9], 2))
write("llmc_shard", "gpt2_bad_token", shard(20240520, 1, [1, 2, 50256, 3], 2))
write("llmc_shard", "llama3_valid", shard(20240801, 7, [128000, 5, 7, 9, 11, 13], 4))
write("llmc_shard", "gpt2_empty", shard(20240520, 1, [], 2))
write("llmc_shard", "count_mismatch", shard(20240520, 1, [1, 2, 3], 2, count=5))
write("llmc_shard", "bad_version", shard(20240801, 1, [1, 2], 4))

# ---- CIFAR: selector byte (bit 0: CIFAR-100, bits 1-2: records - 1), then the file
pixels = bytes((i * 7) % 256 for i in range(3072))
write("cifar_binary", "cifar10_one_record", bytes([0, 3]) + pixels)
write("cifar_binary", "cifar100_bad_coarse_label", bytes([1, 20, 5]) + pixels)
write("cifar_binary", "cifar10_truncated", bytes([2, 1]) + pixels[:100])

# ---- JSON: training configs and the `latest` file of a save directory
write("json_config", "config_valid", json.dumps(
    {"model": "tiny", "batch": 4, "seq": 32, "lr": 0.001, "seed": 7, "progress": False,
     "strategy": "b-sdp", "active_fraction": 0.5, "save_dir": "ckpt", "save_every": 10}))
write("json_config", "latest", json.dumps({"checkpoint": "step-000010", "step": 10}))
# `latest` naming a directory outside the save directory (refused).
write("json_config", "latest_outside",
      json.dumps({"checkpoint": "../../other/step-000010", "step": 10}))
write("json_config", "latest_absolute", json.dumps({"checkpoint": "/tmp/step-000010", "step": 10}))
write("json_config", "wrong_type", '{"batch": "four"}')
write("json_config", "unknown_key", '{"bacth": 4}')
write("json_config", "number_overflow", '{"lr": 1e400}')
write("json_config", "fraction_for_integer", '{"batch": 2.5, "threads": 4294967296}')
write("json_config", "negative_unsigned", '{"seed": -1}')
write("json_config", "not_an_object", '[1, 2, {"checkpoint": 3}]')
