/* edgekit host<->device UART protocol: framing codec (C99, no allocation, no libc beyond string.h).
 *
 * Frame (all multi-byte fields little-endian; full spec in PROTOCOL.md):
 *
 *   0      1      2     3     4..7        8      9 .. 9+len-1   9+len .. 9+len+3
 *   0xEB   0x90   type  seq   len (u32)   hcrc   payload        crc32
 *
 *   hcrc  = CRC-8 (poly 0x07, init 0x00) over bytes 2..7 (type, seq, len): a corrupt length is
 *           rejected before any payload byte is consumed.
 *   crc32 = CRC-32/ISO-HDLC (zlib.crc32) over bytes 2 .. 9+len-1 (header after the sync, hcrc, payload).
 *
 * The receiver is a byte-at-a-time state machine: it skips garbage until a valid header, asks the
 * caller where to put the payload (so an INFER payload lands directly in the input tensor), checks
 * the CRC and reports the frame or the error. After a bad header it rescans the header bytes it
 * already holds for the next sync, so it resynchronises without losing a frame that follows garbage.
 *
 * The sender streams: begin (header) -> bytes (any number of chunks) -> end (CRC); no frame buffer.
 */
#ifndef EK_PROTO_H
#define EK_PROTO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EK_PROTO_VERSION 1
#define EK_PROTO_SYNC0 0xEBu
#define EK_PROTO_SYNC1 0x90u
#define EK_PROTO_HEADER_BYTES 9u
#define EK_PROTO_TRAILER_BYTES 4u
#define EK_PROTO_MAX_PAYLOAD 0x01000000u /* 16 MiB: a larger length is a corrupt header */

/* Message types. Host -> device below 0x80, device -> host from 0x80. */
enum {
  EK_MSG_HELLO = 0x01,      /* empty -> INFO */
  EK_MSG_INFER = 0x02,      /* input tensors, concatenated -> RESULT or ERROR */
  EK_MSG_ECHO = 0x03,       /* any bytes -> ECHO_REPLY with the same bytes (link test) */
  EK_MSG_RESET = 0x04,      /* empty -> RESET_REPLY: the model's state (resource variables) back to initial */
  EK_MSG_BOOT = 0x80,       /* sent once by the device when it starts serving (u16 version, str8 board) */
  EK_MSG_INFO = 0x81,
  EK_MSG_RESULT = 0x82,
  EK_MSG_ECHO_REPLY = 0x83,
  EK_MSG_RESET_REPLY = 0x84, /* empty */
  EK_MSG_ERROR = 0xFF
};

/* ERROR codes (u16 in the ERROR payload). */
enum {
  EK_PERR_BAD_CRC = 1,       /* payload CRC mismatch */
  EK_PERR_BAD_HEADER = 2,    /* header CRC mismatch or length above the protocol maximum */
  EK_PERR_UNKNOWN_TYPE = 3,  /* message type the device does not handle */
  EK_PERR_BAD_LENGTH = 4,    /* payload length wrong for the message (e.g. INFER != input bytes) */
  EK_PERR_NOT_READY = 5,     /* runtime failed to initialise (detail = ek_status) */
  EK_PERR_INVOKE = 6,        /* inference failed (detail = op index) */
  EK_PERR_FAULT = 7,         /* CPU fault: HardFault etc.; the device halts after sending it */
  EK_PERR_TOO_LONG = 8       /* payload longer than the device can buffer */
};

/* Results of ek_proto_rx_byte. */
typedef enum {
  EK_RX_NONE = 0,       /* need more bytes */
  EK_RX_FRAME = 1,      /* a complete, valid frame: rx->type, rx->seq, rx->len; payload in the sink's buffers */
  EK_RX_BAD_HEADER = 2, /* header check failed; resynchronising (not a frame) */
  EK_RX_BAD_CRC = 3,    /* payload CRC failed: rx->type/seq/len describe the damaged frame */
  EK_RX_REJECTED = 4    /* the sink refused the payload (too long / wrong length); the payload was skipped */
} ek_rx_result;

/* Where to store payload bytes of message `type` (total payload `len`), starting at payload byte
   `offset`: return a buffer and set *avail to how many bytes it takes (>= 1), or return NULL to
   reject the frame (its remaining payload is skipped and EK_RX_REJECTED reported). Called at
   offset 0 (also for len 0, with the answer ignored except NULL) and again whenever the previous
   buffer is full, so a payload can be scattered over several buffers (one per input tensor). */
typedef uint8_t *(*ek_proto_sink)(void *user, uint8_t type, uint32_t len, uint32_t offset, uint32_t *avail);

typedef struct ek_proto_rx {
  ek_proto_sink sink;
  void *user;
  uint8_t hdr[EK_PROTO_HEADER_BYTES];
  uint32_t hdr_n;     /* header bytes held */
  uint8_t type, seq;
  uint32_t len;       /* payload length of the frame being received */
  uint32_t pos;       /* payload + trailer bytes received */
  uint8_t *dest;      /* current payload destination, NULL while skipping a rejected payload */
  uint32_t avail;     /* bytes left in dest */
  uint8_t rejected_frame;
  uint32_t crc;       /* running CRC-32 state */
  uint8_t trailer[EK_PROTO_TRAILER_BYTES];
  /* statistics */
  uint32_t frames, bad_headers, bad_crcs, rejected, skipped_bytes;
} ek_proto_rx;

void ek_proto_rx_init(ek_proto_rx *rx, ek_proto_sink sink, void *user);
ek_rx_result ek_proto_rx_byte(ek_proto_rx *rx, uint8_t byte);

/* Sender: write(user, bytes, n) must send all n bytes. */
typedef void (*ek_proto_write)(void *user, const uint8_t *data, size_t n);

typedef struct ek_proto_tx {
  ek_proto_write write;
  void *user;
  uint32_t crc;
  uint32_t remaining; /* payload bytes still announced by begin */
} ek_proto_tx;

void ek_proto_tx_init(ek_proto_tx *tx, ek_proto_write write, void *user);
void ek_proto_tx_begin(ek_proto_tx *tx, uint8_t type, uint8_t seq, uint32_t len);
void ek_proto_tx_bytes(ek_proto_tx *tx, const void *data, size_t n);
/* Pads with zero bytes if fewer payload bytes than announced were sent, then sends the CRC. */
void ek_proto_tx_end(ek_proto_tx *tx);
void ek_proto_send(ek_proto_tx *tx, uint8_t type, uint8_t seq, const void *payload, uint32_t len);
/* ERROR frame: u16 code, i32 detail, u16 message length, message bytes. */
void ek_proto_send_error(ek_proto_tx *tx, uint8_t seq, uint16_t code, int32_t detail, const char *message);

/* Whole-frame encoder (host tests, small frames). Returns the frame size, or 0 if cap is too small. */
size_t ek_proto_encode(uint8_t *out, size_t cap, uint8_t type, uint8_t seq, const void *payload, uint32_t len);

/* Checksums. ek_crc32 = zlib.crc32 (start with crc = 0). */
uint32_t ek_crc32(uint32_t crc, const void *data, size_t n);
uint8_t ek_crc8(uint8_t crc, const void *data, size_t n);

/* Little-endian writers for building payloads; each returns p advanced past the field. */
uint8_t *ek_put_u8(uint8_t *p, uint8_t v);
uint8_t *ek_put_u16(uint8_t *p, uint16_t v);
uint8_t *ek_put_u32(uint8_t *p, uint32_t v);
uint8_t *ek_put_f32(uint8_t *p, float v);

#ifdef __cplusplus
}
#endif
#endif
