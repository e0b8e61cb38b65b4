"""Writes a .npy file of float32 values drawn uniformly from [-1, 1), with
the standard library alone (the install test runs where NumPy may not be).
Usage: random_npy.py OUT.npy DIMxDIMx...
"""
import random
import struct
import sys


def main() -> None:
    path, shape_text = sys.argv[1], sys.argv[2]
    shape = tuple(int(d) for d in shape_text.split("x"))
    count = 1
    for d in shape:
        count *= d
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % (
        ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else ""))
    # Magic, version 1.0, header length; the header padded to 64 bytes.
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * pad + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(struct.pack("<%df" % count, *(random.uniform(-1, 1) for _ in range(count))))


if __name__ == "__main__":
    main()
