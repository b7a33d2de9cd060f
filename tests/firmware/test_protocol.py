"""The UART protocol codec: Python (edgekit.firmware.protocol) and C (firmware/protocol/ek_proto.c compiled
for this host with gcc) fed the same byte streams, including garbage, damaged and truncated frames."""
from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

from edgekit.errors import DeviceError, UserError
from edgekit.firmware import protocol as P

REPO = Path(__file__).resolve().parents[2]
PROTO_DIR = REPO / "firmware" / "protocol"

# Host harness around the C codec. Commands (argv[1]):
#   decode       : stdin bytes -> one line per receiver event: FRAME t s len hex | BAD_HEADER | BAD_CRC t s len |
#                  REJECTED t s len; payloads of type 0x02 are scattered over 3 buffers (5, 7, rest) to test the sink;
#                  type 0x7E is always rejected; then "SKIPPED n".
#   encode T S   : payload on stdin -> frame hex from ek_proto_encode
#   stream T S   : payload on stdin -> frame hex from tx_begin / tx_bytes (3-byte chunks) / tx_end
#   error S C D M: ERROR frame hex from ek_proto_send_error
HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ek_proto.h"

static uint8_t big[1 << 20];
static uint8_t part_a[5], part_b[7];

static uint8_t *sink(void *user, uint8_t type, uint32_t len, uint32_t offset, uint32_t *avail) {
  (void)user;
  if (type == 0x7E || len > sizeof big) return NULL;
  if (type == 0x02) {
    if (offset < 5) { *avail = 5 - offset; return part_a + offset; }
    if (offset < 12) { *avail = 12 - offset; return part_b + (offset - 5); }
    *avail = (uint32_t)sizeof big - (offset - 12); return big + (offset - 12);
  }
  *avail = (uint32_t)sizeof big - offset;
  return big + offset;
}

static void hex(const uint8_t *p, size_t n) { for (size_t i = 0; i < n; ++i) printf("%02x", p[i]); }

static uint8_t out_frame[1 << 21];
static size_t out_len;
static void collect(void *user, const uint8_t *data, size_t n) { (void)user; memcpy(out_frame + out_len, data, n); out_len += n; }

static size_t read_stdin(uint8_t *buf, size_t cap) { size_t n = 0, r; while ((r = fread(buf + n, 1, cap - n, stdin)) > 0) n += r; return n; }

int main(int argc, char **argv) {
  static uint8_t input[1 << 21];
  if (argc >= 2 && strcmp(argv[1], "decode") == 0) {
    ek_proto_rx rx;
    ek_proto_rx_init(&rx, sink, NULL);
    size_t n = read_stdin(input, sizeof input);
    for (size_t i = 0; i < n; ++i) {
      switch (ek_proto_rx_byte(&rx, input[i])) {
        case EK_RX_FRAME:
          printf("FRAME %u %u %u ", rx.type, rx.seq, rx.len);
          if (rx.type == 0x02) {
            uint8_t whole[1 << 20];
            memcpy(whole, part_a, 5); memcpy(whole + 5, part_b, 7); memcpy(whole + 12, big, rx.len > 12 ? rx.len - 12 : 0);
            hex(whole, rx.len);
          } else hex(big, rx.len);
          printf("\n"); break;
        case EK_RX_BAD_HEADER: printf("BAD_HEADER\n"); break;
        case EK_RX_BAD_CRC: printf("BAD_CRC %u %u %u\n", rx.type, rx.seq, rx.len); break;
        case EK_RX_REJECTED: printf("REJECTED %u %u %u\n", rx.type, rx.seq, rx.len); break;
        default: break;
      }
    }
    printf("SKIPPED %u\n", rx.skipped_bytes);
    return 0;
  }
  if (argc >= 4 && (strcmp(argv[1], "encode") == 0 || strcmp(argv[1], "stream") == 0)) {
    uint8_t type = (uint8_t)strtoul(argv[2], NULL, 0), seq = (uint8_t)strtoul(argv[3], NULL, 0);
    size_t n = read_stdin(input, sizeof input);
    if (strcmp(argv[1], "encode") == 0) {
      size_t len = ek_proto_encode(out_frame, sizeof out_frame, type, seq, input, (uint32_t)n);
      hex(out_frame, len);
    } else {
      ek_proto_tx tx;
      ek_proto_tx_init(&tx, collect, NULL);
      ek_proto_tx_begin(&tx, type, seq, (uint32_t)n);
      for (size_t i = 0; i < n; i += 3) ek_proto_tx_bytes(&tx, input + i, n - i < 3 ? n - i : 3);
      ek_proto_tx_end(&tx);
      hex(out_frame, out_len);
    }
    printf("\n");
    return 0;
  }
  if (argc >= 6 && strcmp(argv[1], "error") == 0) {
    ek_proto_tx tx;
    ek_proto_tx_init(&tx, collect, NULL);
    ek_proto_send_error(&tx, (uint8_t)atoi(argv[2]), (uint16_t)atoi(argv[3]), atoi(argv[4]), argv[5]);
    hex(out_frame, out_len);
    printf("\n");
    return 0;
  }
  return 2;
}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory) -> Path:
    if not shutil.which("gcc"):
        pytest.skip("host gcc is not installed")
    folder = tmp_path_factory.mktemp("proto")
    source = folder / "harness.c"
    source.write_text(HARNESS)
    exe = folder / "harness"
    subprocess.run(["gcc", "-std=c99", "-O1", "-Wall", "-Wextra", "-Werror", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=all", f"-I{PROTO_DIR}", str(source), str(PROTO_DIR / "ek_proto.c"),
                    "-o", str(exe)], check=True, capture_output=True, timeout=120)
    return exe


def c_run(exe: Path, args, data: bytes = b"") -> str:
    proc = subprocess.run([str(exe), *map(str, args)], input=data, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


def c_decode(exe: Path, stream: bytes):
    lines = c_run(exe, ["decode"], stream).splitlines()
    events = []
    for line in lines[:-1]:
        parts = line.split()
        if parts[0] == "FRAME":
            payload = bytes.fromhex(parts[4]) if len(parts) > 4 else b""
            events.append(("FRAME", int(parts[1]), int(parts[2]), payload))
        else:
            events.append((parts[0], *map(int, parts[1:])))
    return events, int(lines[-1].split()[1])


def frames_of(events):
    return [(e[1], e[2], e[3]) for e in events if e[0] == "FRAME"]


def py_decode(stream: bytes, chunk: int = 7):
    dec = P.FrameDecoder()
    frames = []
    for i in range(0, len(stream), chunk):
        frames += dec.feed(stream[i : i + chunk])
    return [(f.type, f.seq, f.payload) for f in frames], dec


# ------------------------------------------------------------------ golden values and parity


def test_hello_frame_matches_the_documented_example():
    assert P.encode_frame(P.Msg.HELLO, 1).hex(" ") == "eb 90 01 01 00 00 00 00 4b 77 9f 49 11"
    assert P.crc8(bytes([1, 1, 0, 0, 0, 0])) == 0x4B
    # CRC-8/SMBUS check value and the zlib CRC-32 the frame uses
    assert P.crc8(b"123456789") == 0xF4


@pytest.mark.parametrize("size", [0, 1, 5, 12, 13, 255, 1000, 70000])
def test_c_and_python_encoders_agree(harness, size):
    payload = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    expected = P.encode_frame(0x02, 200, payload).hex()
    assert c_run(harness, ["encode", 2, 200], payload).strip() == expected
    assert c_run(harness, ["stream", 2, 200], payload).strip() == expected


def test_c_error_frame_parses_in_python(harness):
    frame = bytes.fromhex(c_run(harness, ["error", 9, 7, -3, "HardFault pc=0x1"]).strip())
    (decoded,), dec = py_decode(frame)
    assert decoded[0] == P.Msg.ERROR and decoded[1] == 9
    report = P.parse_error(decoded[2])
    assert (report.code_name, report.detail, report.message) == ("FAULT", -3, "HardFault pc=0x1")


def test_round_trip_both_decoders_with_scattered_sink(harness):
    rng = np.random.default_rng(1)
    sent = [(t, s, rng.integers(0, 256, n, dtype=np.uint8).tobytes())
            for t, s, n in [(1, 1, 0), (2, 2, 3), (2, 3, 12), (2, 4, 40), (3, 5, 300), (0x81, 6, 1)]]
    stream = b"".join(P.encode_frame(*f) for f in sent)
    events, skipped = c_decode(harness, stream)
    assert frames_of(events) == sent and skipped == 0
    frames, dec = py_decode(stream)
    assert frames == sent and not dec.issues and dec.skipped_bytes == 0


# ------------------------------------------------------------------ damaged input


def damaged_stream():
    good = [P.encode_frame(3, i, bytes([i] * (i + 1))) for i in range(1, 6)]
    bad_crc = bytearray(P.encode_frame(3, 50, b"payload")); bad_crc[12] ^= 0x01
    bad_header = bytearray(P.encode_frame(3, 51, b"xyz")); bad_header[4] ^= 0x80  # length corrupted
    huge = bytearray(b"\xEB\x90\x03\x34" + struct.pack("<I", 0x02000000)); huge.append(P.crc8(bytes(huge[2:8])))
    truncated = P.encode_frame(3, 52, b"0123456789")[:-6]
    stream = (b"\x00\x13garbage\xEB" + good[0] + bytes(bad_crc) + good[1] + bytes(bad_header) + good[2]
              + b"\xEB\xEB\x90" + bytes(huge) + good[3] + b"\x90\xEB" + good[4])
    return stream, [(3, i, bytes([i] * (i + 1))) for i in range(1, 6)], truncated


def test_garbage_bad_crc_bad_header_and_oversize_are_skipped_by_both(harness):
    stream, expected, _ = damaged_stream()
    events, skipped = c_decode(harness, stream)
    assert frames_of(events) == expected
    kinds = [e[0] for e in events if e[0] != "FRAME"]
    assert kinds.count("BAD_CRC") == 1 and ("BAD_CRC", 3, 50, 7) in events
    assert kinds.count("BAD_HEADER") >= 2 and skipped > 0
    frames, dec = py_decode(stream)
    assert frames == expected
    kinds = [i.kind for i in dec.issues]
    assert "bad_crc" in kinds and kinds.count("bad_header") >= 2


def test_python_decoder_finds_a_frame_hidden_in_a_truncated_one():
    """A device that faults half-way through a RESULT sends an ERROR frame next: the host must find it."""
    head = P.encode_frame(P.Msg.RESULT, 7, bytes(200))[:60]
    error = P.encode_frame(P.Msg.ERROR, 7, struct.pack("<HiH", 7, 3, 9) + b"HardFault")
    dec = P.FrameDecoder()
    assert dec.feed(head + error) == []  # swallowed as the RESULT's payload while it is incomplete
    (frame,) = dec.salvage()
    assert P.parse_error(frame.payload).message == "HardFault"


def test_c_receiver_keeps_working_after_a_truncated_frame_and_rejections(harness):
    _, _, truncated = damaged_stream()
    after = P.encode_frame(3, 9, b"after")
    rejected = P.encode_frame(0x7E, 3, b"nobody takes this")
    # the truncated frame eats bytes of the next frame as payload, then fails its CRC; later frames are intact
    stream = truncated + after + rejected + after + after
    events, _ = c_decode(harness, stream)
    assert ("REJECTED", 0x7E, 3, 17) in events
    assert frames_of(events)[-2:] == [(3, 9, b"after")] * 2
    frames, _ = py_decode(stream)
    assert frames.count((3, 9, b"after")) >= 2 and (0x7E, 3, b"nobody takes this") in frames


def test_random_noise_between_frames_never_yields_a_wrong_frame(harness):
    rng = np.random.default_rng(7)
    sent, stream = [], b""
    for i in range(60):
        noise = rng.integers(0, 256, int(rng.integers(0, 40)), dtype=np.uint8).tobytes()
        payload = rng.integers(0, 256, int(rng.integers(0, 64)), dtype=np.uint8).tobytes()
        sent.append((3, i, payload))
        stream += noise + P.encode_frame(3, i, payload)
    events, _ = c_decode(harness, stream)
    c_frames = frames_of(events)
    py_frames, _ = py_decode(stream, chunk=13)
    # every frame either decoder reports was really sent (CRC-32 makes a false frame practically impossible),
    # and the host decoder, which can rescan, recovers every frame
    assert set(c_frames) <= set(sent) and len(c_frames) >= 55
    assert py_frames == sent


# ------------------------------------------------------------------ payloads


def _info_payload(ready=True):
    tensors = [(9, (1, 4), 0.5, -3, 4), (9, (1, 2), 0.25, 7, 2)]
    out = struct.pack("<HHIIIIIIIIIii", 1, 2 if ready else 0, 25_000_000, 1234, 0xDEADBEEF, 4096, 1000, 512,
                      400, 16384, 600, 0 if ready else 5, 3)
    for text in ("mps2-an386", "edgekit-rt 1", "model", "" if ready else "arena too small"):
        out += bytes([len(text)]) + text.encode()
    out += bytes([1, 1])  # one input, one output
    for t, shape, scale, zp, nbytes in tensors:
        out += struct.pack("<BB", t, len(shape)) + struct.pack(f"<{len(shape)}i", *shape) + struct.pack("<fiI", scale, zp, nbytes)
    return out


def test_info_result_and_inputs_round_trip():
    info = P.parse_info(_info_payload())
    assert info.ready and not info.cycles_available and info.board == "mps2-an386" and info.model_crc32 == 0xDEADBEEF
    assert info.inputs[0].shape == (1, 4) and info.inputs[0].dtype == np.int8 and info.outputs[0].zero_point == 7
    payload = P.pack_inputs([np.arange(4, dtype=np.int8).reshape(1, 4)], info)
    assert payload == bytes([0, 1, 2, 3])
    result = P.parse_result(struct.pack("<iHHII", 0, 1, 2, 1000, 700) + struct.pack("<II", 400, 600) + b"\x05\xfb", info)
    assert result.cycles == 1000 and result.op_cycles == [400, 600] and result.stack_used == 700
    assert result.outputs[0].tolist() == [[5, -5]]
    no_cycles = P.parse_result(struct.pack("<iHHII", 0, 0, 0, 0, 700) + b"\x05\xfb", info)
    assert no_cycles.cycles is None


def test_bad_inputs_and_payloads_give_clear_errors():
    info = P.parse_info(_info_payload())
    with pytest.raises(UserError) as exc:
        P.pack_inputs([np.zeros((1, 4), np.float32), np.zeros(3, np.int8)], info)
    assert "2 input array(s) given" in str(exc.value) and "dtype float32" in str(exc.value)
    with pytest.raises(DeviceError, match="truncated INFO"):
        P.parse_info(_info_payload()[:30])
    with pytest.raises(DeviceError, match="output bytes"):
        P.parse_result(struct.pack("<iHHII", 0, 0, 0, 0, 0) + b"\x01", info)
    with pytest.raises(DeviceError, match="protocol version 9"):
        P.parse_info(struct.pack("<H", 9) + _info_payload()[2:])


def test_decoder_limits_what_it_waits_for():
    dec = P.FrameDecoder(max_payload=100)
    assert dec.feed(P.encode_frame(2, 1, bytes(101)) + P.encode_frame(2, 2, b"ok")) == [P.Frame(2, 2, b"ok")]
    assert dec.issues[0].kind == "oversized"
    assert zlib.crc32(b"") == 0
