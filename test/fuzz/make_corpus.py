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



def crc32c_hex(data):
    """CRC-32C as the engine records it (sdp.crc32c.<tensor> metadata)."""
    c = 0xFFFFFFFF
    for byte in data:
        c ^= byte
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return "%08x" % (c ^ 0xFFFFFFFF)


# Checkpoint files with recorded checksums: intact, a flipped byte in the
# data, a checksum that is no hex, and one for a tensor the file lacks.
flipped = bytearray(f32)
flipped[5] ^= 0x10
checked = {"format": "pt", "sdp.crc32c.w": crc32c_hex(f32)}
write("safetensors", "checksum_valid", safetensors(
    {"__metadata__": checked, "w": st_entry("F32", [2, 3], 0, 24)}, f32))
write("safetensors", "checksum_flipped_byte", safetensors(
    {"__metadata__": checked, "w": st_entry("F32", [2, 3], 0, 24)}, bytes(flipped)))
write("safetensors", "checksum_not_hex", safetensors(
    {"__metadata__": {"sdp.crc32c.w": "zz\u0000"}, "w": st_entry("F32", [2, 3], 0, 24)}, f32))
write("safetensors", "checksum_of_absent_tensor", safetensors(
    {"__metadata__": {"sdp.crc32c.q": "00000000"}, "w": st_entry("F32", [3, 2], 0, 24)}, f32))

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
# Integers as written (JSON cases of the integer readers), and a weighted
# plan whose repeat counts name 104857601 ranks (refused before expanding).
write("json_config", "threads_beyond_int", '{"threads": 2147483648}')
write("json_config", "whole_float_for_integer", '{"batch": 4.0, "steps": null}')
write("json_config", "weighted_plan_total",
      json.dumps({"strategy": "b-sdp", "plan": "weighted:" + "1x1048576," * 100 + "1"}))

# ---- pipeline schedules and timelines (sdp-train schedule = file:PATH,
# sdp-pipeline --schedule, --timeline)
write("schedule", "valid_1f1b", json.dumps(
    {"microbatches": 2, "stages": [["F0", "F1", "B0", "B1"], ["F0", "B0", "F1", "B1"]]}))
write("schedule", "valid_split_backward", json.dumps(
    {"microbatches": 2, "stages": [["F0", "F1", "I0", "I1", "W0", "W1"],
                                   ["F0", "I0", "F1", "I1", "W0", "W1"]]}))
write("schedule", "explicit_sends", json.dumps(
    {"microbatches": 1, "stages": [["F0", "SEND_F0", "RECV_B0", "B0"],
                                   ["RECV_F0", "F0", "B0", "SEND_B0"]]}))
write("schedule", "deadlock", json.dumps(
    {"microbatches": 1, "stages": [["RECV_B0", "F0", "SEND_F0", "B0"],
                                   ["RECV_F0", "F0", "B0", "SEND_B0"]]}))
write("schedule", "out_of_order_neighbours", json.dumps(
    {"microbatches": 2, "stages": [["F0", "F1", "B0", "B1"], ["F1", "F0", "B1", "B0"]]}))
write("schedule", "microbatches_beyond_int",
      '{"microbatches": 4294967298, "stages": [["F0", "B0"]]}')
for name, value in (("microbatches_float", "2.0"), ("microbatches_null", "null"),
                    ("microbatches_string", '"2"'), ("microbatches_negative", "-1")):
    write("schedule", name, '{"microbatches": %s, "stages": [["F0", "B0"]]}' % value)
write("schedule", "timeline_valid", json.dumps(
    {"microbatches": 1, "stages": [
        [{"action": "F0", "start": 0.0, "end": 1.0}, {"action": "B0", "start": 3.0, "end": 5.0}],
        [{"action": "F0", "start": 1.0, "end": 2.0}, {"action": "B0", "start": 2.0, "end": 3.0}]]}))
write("schedule", "timeline_microbatches_beyond_int", json.dumps(
    {"microbatches": 2147483648, "stages": [[{"action": "F0", "start": 0, "end": 1},
                                              {"action": "B0", "start": 1, "end": 2}]]}))

# ---- subnet plans: byte 0 even = rank weights (the rest), odd = a plan file
# (byte 1 picks ranks = b % 8 + 1 and components = b / 8 % 16 + 1)
write("plan", "weights_sizes", b"\x00" + b"80GiBx2,40GiBx2")
write("plan", "weights_numbers", b"\x00" + b"2,2,1,1.5")
write("plan", "weights_total_beyond_world", b"\x00" + b"1x1048576," * 100 + b"1")
write("plan", "weights_bad_items", b"\x00" + b"2,,0,-1,1e-400,3x0")
write("plan", "file_valid", b"\x01\x11" + json.dumps({"matrix": ["110", "011"]}).encode())
write("plan", "file_bad_bit", b"\x01\x11" + json.dumps({"matrix": ["120", "011"]}).encode())
write("plan", "file_wrong_rows", b"\x01\x11" + json.dumps({"matrix": ["110"]}).encode())
write("plan", "file_not_object", b"\x01\x00" + b"[[1, 0]]")


# ---- calibration: sdp-train metrics files (sdp-plan --calibrate) and the
# costs files of a measured pipeline run (sdp-pipeline --calibrate, --costs)
def step(n, **fields):
    record = {"step": n, "seconds": 0.01, "flops": 1e9,
              "comm": {"wait_seconds": 0.001, "sent_bytes": 1e6, "latency_steps": 4}}
    for key, value in fields.items():
        (record["comm"] if key in record["comm"] else record)[key] = value
    return json.dumps(record)


def metrics(*lines, tail="\n"):
    return "\n".join(lines) + tail


summary = json.dumps({"summary": True, "steps": 3})
write("calibration", "metrics_valid", metrics(step(1), step(2, sent_bytes=2e6), step(3), summary))
write("calibration", "metrics_null_field", metrics(step(1), step(2, seconds=None), summary))
write("calibration", "metrics_absurd_flops", metrics(step(1), step(2, flops=1e308)))
write("calibration", "metrics_zero_seconds", metrics(step(1), step(2, seconds=0)))
write("calibration", "metrics_negative_wait", metrics(step(1), step(2, wait_seconds=-1)))
write("calibration", "metrics_step_beyond_int64",
      metrics(step(1), step(2).replace('"step": 2', '"step": 18446744073709551615')))
write("calibration", "metrics_cut_last_line", metrics(step(1), step(2), step(3)[:30], tail=""))
write("calibration", "metrics_cut_middle_line", metrics(step(1), step(2)[:30], step(3)))
stage = {"forward": 3e-6, "backward": 6e-6, "input_grad": 3e-6, "weight_grad": 3e-6,
         "activation_bytes": 134656, "weight_grad_bytes": 220672}
write("calibration", "costs_valid", json.dumps(
    {"stages": [stage, stage], "boundary_bytes": [8192],
     "link": {"latency": 1e-6, "bandwidth": 1e10}}))
write("calibration", "costs_null_time", json.dumps({"stages": [dict(stage, forward=None)]}))
write("calibration", "costs_bytes_beyond_int64",
      '{"stages": [{}, {}], "boundary_bytes": [18446744073709551615]}')
write("calibration", "costs_float_bytes", '{"boundary_bytes": [1e9], "link": {"latency": 1e308}}')
