"""Writers for test inputs: TensorBoard event files built byte by byte (no tensorboard package needed)."""

from __future__ import annotations

import struct
from pathlib import Path

from mixlaw.runs.io import _masked_crc


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num: int, wt: int, payload: bytes | int) -> bytes:
    key = varint((num << 3) | wt)
    if wt == 0:
        assert isinstance(payload, int)
        return key + varint(payload)
    assert isinstance(payload, bytes)
    if wt == 2:
        return key + varint(len(payload)) + payload
    return key + payload


def simple(tag: str, x: float) -> bytes:
    return field(1, 2, tag.encode()) + field(2, 5, struct.pack("<f", x))


def event(step: int, values: list[bytes], wall: float = 1.7e9) -> bytes:
    """An Event at ``step`` (a uint64 varint, as TensorBoard writes a non-negative int64) holding ``values``."""
    summary = b"".join(field(1, 2, v) for v in values)
    return field(1, 1, struct.pack("<d", wall)) + field(2, 0, step) + field(5, 2, summary)


def record(payload: bytes) -> bytes:
    header = struct.pack("<Q", len(payload))
    return header + struct.pack("<I", _masked_crc(header)) + payload + struct.pack("<I", _masked_crc(payload))


def write_events(path: Path, events: list[bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    version = field(1, 1, struct.pack("<d", 1.7e9)) + field(3, 2, b"brain.Event:2")
    path.write_bytes(record(version) + b"".join(record(e) for e in events))
    return path
