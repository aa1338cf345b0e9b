#!/usr/bin/env python3
"""Unpack a .deb's files into a folder, like `dpkg -x DEB DIR`, with the standard library only.

    python3 bench/gpu/deb_extract.py DEB DIR

check.sh's last resort on a machine with neither dpkg nor ar. A .deb is an
ar archive holding debian-binary, control.tar.* and data.tar.* (gz, xz, bz2
or uncompressed; zstd is refused with a message: Python cannot read it).
Members whose path would leave DIR are refused.
"""

import io
import os
import sys
import tarfile


def ar_members(blob):
    """(name, bytes) of each member of an ar archive."""
    if not blob.startswith(b"!<arch>\n"):
        raise ValueError("not an ar archive (no !<arch> magic)")
    pos = 8
    while pos + 60 <= len(blob):
        header = blob[pos:pos + 60]
        name = header[0:16].decode("ascii").strip().rstrip("/")
        size = int(header[48:58].decode("ascii").strip())
        start = pos + 60
        yield name, blob[start:start + size]
        pos = start + size + (size & 1)  # members are 2-byte aligned


def inside(root, member_name):
    target = os.path.realpath(os.path.join(root, member_name))
    return target == root or target.startswith(root + os.sep)


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: deb_extract.py DEB DIR")
    deb, dest = argv[1], os.path.realpath(argv[2])
    with open(deb, "rb") as f:
        blob = f.read()
    data = [(n, b) for n, b in ar_members(blob) if n.startswith("data.tar")]
    if not data:
        sys.exit(f"deb_extract: {deb} has no data.tar member")
    name, payload = data[0]
    if name.endswith(".zst"):
        sys.exit(f"deb_extract: {deb}: {name} is zstd-compressed, which Python cannot read")
    os.makedirs(dest, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(payload), mode="r:*") as tar:
        members = tar.getmembers()
        for m in members:
            if not inside(dest, m.name):
                sys.exit(f"deb_extract: {deb}: member {m.name!r} would land outside {dest}")
        # "tar" keeps the packages' relative symlinks (libopenblas.so ->
        # libopenblasp-r0.3.21.so) that the stricter "data" filter may refuse.
        options = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}
        tar.extractall(dest, members=members, **options)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
