"""Minimal safetensors reader (and a writer for self-tests), numpy + stdlib only.

File layout: u64 little-endian header size N, N bytes of JSON header, then the
raw tensor bytes.  Each header entry is
    name -> {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}
with offsets relative to the first byte after the header.  The optional
"__metadata__" entry holds string -> string pairs and is not a tensor.

The real `safetensors` package is not available in our environment; this file
exists so the torch reference can read the engine's exported checkpoints.
"""

import json
import os
import struct

import numpy as np

# All safetensors data is little-endian, so spell the byte order out: a
# big-endian host must not reinterpret the bytes natively.
_DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),  # raw bits; widened to float32 after reading
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "U16": np.dtype("<u2"),
}

# A header larger than this is almost certainly a corrupt size field, and
# reading it would allocate the garbage amount.
_MAX_HEADER_BYTES = 100 * 1024 * 1024


class SafetensorsError(ValueError):
    pass


def bf16_bits_to_float32(bits):
    """BF16 is the top half of an IEEE float32, so widening is a shift."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def float32_to_bf16_bits(x):
    """Round-to-nearest-even float32 -> bf16 bits (NaN kept quiet)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    rounded = np.where(nan, (u >> 16) | 0x40, rounded)
    return rounded.astype(np.uint16)


def read_header(path):
    """Return (header dict without __metadata__, metadata dict, data start)."""
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise SafetensorsError(f"{path}: file shorter than the 8-byte header size")
        (n,) = struct.unpack("<Q", raw)
        if n > _MAX_HEADER_BYTES:
            raise SafetensorsError(f"{path}: implausible header size {n}")
        header_bytes = f.read(n)
        if len(header_bytes) != n:
            raise SafetensorsError(f"{path}: truncated header ({len(header_bytes)} of {n} bytes)")
    try:
        header = json.loads(header_bytes.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SafetensorsError(f"{path}: header is not valid JSON: {e}") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path}: header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    return header, metadata, 8 + n


def load_file(path):
    """Read every tensor of a .safetensors file into a dict name -> numpy array.

    BF16 tensors come back as float32; everything else keeps its dtype.  The
    arrays are copies, so they stay valid and writable after the file closes.
    """
    header, _, data_start = read_header(path)
    with open(path, "rb") as f:
        f.seek(data_start)
        data = f.read()

    out = {}
    for name, info in header.items():
        try:
            dtype_name = info["dtype"]
            shape = [int(s) for s in info["shape"]]
            begin, end = (int(o) for o in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise SafetensorsError(f"{path}: malformed header entry for {name!r}: {info!r}") from None
        if dtype_name not in _DTYPES:
            raise SafetensorsError(
                f"{path}: tensor {name!r} has unsupported dtype {dtype_name} "
                f"(supported: {', '.join(sorted(_DTYPES))})")
        dt = _DTYPES[dtype_name]
        count = int(np.prod(shape, dtype=np.int64))
        if not (0 <= begin <= end <= len(data)):
            raise SafetensorsError(
                f"{path}: tensor {name!r} offsets [{begin}, {end}) outside data of {len(data)} bytes")
        if end - begin != count * dt.itemsize:
            raise SafetensorsError(
                f"{path}: tensor {name!r} spans {end - begin} bytes but {dtype_name}{shape} "
                f"needs {count * dt.itemsize}")
        arr = np.frombuffer(data, dtype=dt, count=count, offset=begin).reshape(shape)
        if dtype_name == "BF16":
            arr = bf16_bits_to_float32(arr)
        # Convert to native byte order so torch.from_numpy accepts it.
        out[name] = arr.astype(dt.newbyteorder("="), copy=True) if dtype_name != "BF16" else arr
    return out


def load_collection(dirname, base="model"):
    """Every tensor stored under `base` in a checkpoint directory, in either
    form transformers writes: <base>.safetensors, or the shards listed by
    <base>.safetensors.index.json ({"weight_map": {name: shard file}}).
    """
    single = os.path.join(dirname, base + ".safetensors")
    index = single + ".index.json"
    if os.path.exists(single) and os.path.exists(index):
        raise SafetensorsError(f"{dirname}: both {base}.safetensors and its index exist")
    if os.path.exists(single):
        return load_file(single)
    if not os.path.exists(index):
        raise SafetensorsError(f"{dirname}: neither {base}.safetensors nor "
                               f"{base}.safetensors.index.json exists")
    with open(index, "r", encoding="utf-8") as f:
        weight_map = json.load(f).get("weight_map")
    if not isinstance(weight_map, dict):
        raise SafetensorsError(f"{index}: no \"weight_map\" object")
    out = {}
    for shard in sorted(set(weight_map.values())):
        path = os.path.join(dirname, shard)
        if not os.path.exists(path):
            raise SafetensorsError(f"{index} names shard {shard}, which does not exist")
        for name, arr in load_file(path).items():
            if name in out:
                raise SafetensorsError(f"{index}: tensor {name!r} is in two shards")
            out[name] = arr
    missing = sorted(set(weight_map) - set(out))
    if missing:
        raise SafetensorsError(f"{index} lists tensors no shard holds: {missing[:5]}")
    return out


_WRITE_DTYPES = {
    np.dtype(np.float64): "F64",
    np.dtype(np.float32): "F32",
    np.dtype(np.float16): "F16",
    np.dtype(np.int64): "I64",
    np.dtype(np.int32): "I32",
    np.dtype(np.uint16): "U16",
}


def save_file(path, tensors, metadata=None, bf16=()):
    """Write a dict name -> numpy array as safetensors (used by self-tests only).

    Names listed in `bf16` are rounded from float32 to BF16 on the way out, so
    the reader's BF16 path can be exercised without torch.
    """
    header = {}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        arr = np.asarray(tensors[name])
        if name in bf16:
            dtype_name = "BF16"
            payload = float32_to_bf16_bits(arr).astype("<u2").tobytes()
        else:
            if arr.dtype.newbyteorder("=") not in _WRITE_DTYPES:
                raise SafetensorsError(f"cannot write {name!r}: unsupported dtype {arr.dtype}")
            dtype_name = _WRITE_DTYPES[arr.dtype.newbyteorder("=")]
            payload = np.ascontiguousarray(arr, dtype=_DTYPES[dtype_name]).tobytes()
        header[name] = {"dtype": dtype_name, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(payload)]}
        blobs.append(payload)
        offset += len(payload)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    header_bytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    # Pad with spaces so the data section starts 8-byte aligned, as the
    # reference writer does; readers may rely on it for zero-copy mapping.
    header_bytes += b" " * (-(8 + len(header_bytes)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)))
        f.write(header_bytes)
        for blob in blobs:
            f.write(blob)
