#!/usr/bin/env python3
"""Damages a checkpoint the way the checkpoint integrity tests need.

  flip FILE                       flips one byte in FILE's tensor data
  set FILE TENSOR INDEX VALUE     sets element INDEX of an f32 TENSOR and drops
                                  its recorded checksum (as in a checkpoint
                                  written before checksums)
  reshape FILE TENSOR SHAPE       rewrites TENSOR's header shape (JSON list)
  index DIR FIELD VALUE           sets a top-level field of DIR/sdp_shards.json
                                  (VALUE is JSON)
  chunk DIR FIELD VALUE           sets FIELD of the first chunk in the index
"""
import json
import struct
import sys

CHECKSUM_PREFIX = "sdp.crc32c."


def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    return json.loads(blob[8:8 + n]), blob[8 + n:]


def write(path, header, data):
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def edit_index(directory, edit):
    path = directory + "/sdp_shards.json"
    with open(path) as f:
        index = json.load(f)
    edit(index)
    with open(path, "w") as f:
        json.dump(index, f)


def main(argv):
    cmd = argv[1]
    if cmd == "flip":
        header, data = read(argv[2])
        with open(argv[2], "r+b") as f:
            at = f.seek(0, 2) - len(data) + len(data) // 2
            f.seek(at)
            byte = f.read(1)[0]
            f.seek(at)
            f.write(bytes([byte ^ 0x10]))
    elif cmd == "set":
        path, name, index, value = argv[2], argv[3], int(argv[4]), float(argv[5])
        header, data = read(path)
        begin = header[name]["data_offsets"][0] + 4 * index
        data = data[:begin] + struct.pack("<f", value) + data[begin + 4:]
        header.get("__metadata__", {}).pop(CHECKSUM_PREFIX + name, None)
        write(path, header, data)
    elif cmd == "reshape":
        path, name = argv[2], argv[3]
        header, data = read(path)
        header[name]["shape"] = json.loads(argv[4])
        write(path, header, data)
    elif cmd == "index":
        value = json.loads(argv[4])
        edit_index(argv[2], lambda index: index.__setitem__(argv[3], value))
    elif cmd == "chunk":
        value = json.loads(argv[4])
        edit_index(argv[2], lambda index: index["chunks"][0].__setitem__(argv[3], value))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
