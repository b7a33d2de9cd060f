/* edgekit UART protocol codec: see ek_proto.h and PROTOCOL.md. */
#include "ek_proto.h"

#include <string.h>

/* CRC-32/ISO-HDLC, reflected polynomial 0xEDB88320 (zlib.crc32). */
static const uint32_t crc32_table[256] = {
  0x00000000u, 0x77073096u, 0xEE0E612Cu, 0x990951BAu, 0x076DC419u, 0x706AF48Fu,
  0xE963A535u, 0x9E6495A3u, 0x0EDB8832u, 0x79DCB8A4u, 0xE0D5E91Eu, 0x97D2D988u,
  0x09B64C2Bu, 0x7EB17CBDu, 0xE7B82D07u, 0x90BF1D91u, 0x1DB71064u, 0x6AB020F2u,
  0xF3B97148u, 0x84BE41DEu, 0x1ADAD47Du, 0x6DDDE4EBu, 0xF4D4B551u, 0x83D385C7u,
  0x136C9856u, 0x646BA8C0u, 0xFD62F97Au, 0x8A65C9ECu, 0x14015C4Fu, 0x63066CD9u,
  0xFA0F3D63u, 0x8D080DF5u, 0x3B6E20C8u, 0x4C69105Eu, 0xD56041E4u, 0xA2677172u,
  0x3C03E4D1u, 0x4B04D447u, 0xD20D85FDu, 0xA50AB56Bu, 0x35B5A8FAu, 0x42B2986Cu,
  0xDBBBC9D6u, 0xACBCF940u, 0x32D86CE3u, 0x45DF5C75u, 0xDCD60DCFu, 0xABD13D59u,
  0x26D930ACu, 0x51DE003Au, 0xC8D75180u, 0xBFD06116u, 0x21B4F4B5u, 0x56B3C423u,
  0xCFBA9599u, 0xB8BDA50Fu, 0x2802B89Eu, 0x5F058808u, 0xC60CD9B2u, 0xB10BE924u,
  0x2F6F7C87u, 0x58684C11u, 0xC1611DABu, 0xB6662D3Du, 0x76DC4190u, 0x01DB7106u,
  0x98D220BCu, 0xEFD5102Au, 0x71B18589u, 0x06B6B51Fu, 0x9FBFE4A5u, 0xE8B8D433u,
  0x7807C9A2u, 0x0F00F934u, 0x9609A88Eu, 0xE10E9818u, 0x7F6A0DBBu, 0x086D3D2Du,
  0x91646C97u, 0xE6635C01u, 0x6B6B51F4u, 0x1C6C6162u, 0x856530D8u, 0xF262004Eu,
  0x6C0695EDu, 0x1B01A57Bu, 0x8208F4C1u, 0xF50FC457u, 0x65B0D9C6u, 0x12B7E950u,
  0x8BBEB8EAu, 0xFCB9887Cu, 0x62DD1DDFu, 0x15DA2D49u, 0x8CD37CF3u, 0xFBD44C65u,
  0x4DB26158u, 0x3AB551CEu, 0xA3BC0074u, 0xD4BB30E2u, 0x4ADFA541u, 0x3DD895D7u,
  0xA4D1C46Du, 0xD3D6F4FBu, 0x4369E96Au, 0x346ED9FCu, 0xAD678846u, 0xDA60B8D0u,
  0x44042D73u, 0x33031DE5u, 0xAA0A4C5Fu, 0xDD0D7CC9u, 0x5005713Cu, 0x270241AAu,
  0xBE0B1010u, 0xC90C2086u, 0x5768B525u, 0x206F85B3u, 0xB966D409u, 0xCE61E49Fu,
  0x5EDEF90Eu, 0x29D9C998u, 0xB0D09822u, 0xC7D7A8B4u, 0x59B33D17u, 0x2EB40D81u,
  0xB7BD5C3Bu, 0xC0BA6CADu, 0xEDB88320u, 0x9ABFB3B6u, 0x03B6E20Cu, 0x74B1D29Au,
  0xEAD54739u, 0x9DD277AFu, 0x04DB2615u, 0x73DC1683u, 0xE3630B12u, 0x94643B84u,
  0x0D6D6A3Eu, 0x7A6A5AA8u, 0xE40ECF0Bu, 0x9309FF9Du, 0x0A00AE27u, 0x7D079EB1u,
  0xF00F9344u, 0x8708A3D2u, 0x1E01F268u, 0x6906C2FEu, 0xF762575Du, 0x806567CBu,
  0x196C3671u, 0x6E6B06E7u, 0xFED41B76u, 0x89D32BE0u, 0x10DA7A5Au, 0x67DD4ACCu,
  0xF9B9DF6Fu, 0x8EBEEFF9u, 0x17B7BE43u, 0x60B08ED5u, 0xD6D6A3E8u, 0xA1D1937Eu,
  0x38D8C2C4u, 0x4FDFF252u, 0xD1BB67F1u, 0xA6BC5767u, 0x3FB506DDu, 0x48B2364Bu,
  0xD80D2BDAu, 0xAF0A1B4Cu, 0x36034AF6u, 0x41047A60u, 0xDF60EFC3u, 0xA867DF55u,
  0x316E8EEFu, 0x4669BE79u, 0xCB61B38Cu, 0xBC66831Au, 0x256FD2A0u, 0x5268E236u,
  0xCC0C7795u, 0xBB0B4703u, 0x220216B9u, 0x5505262Fu, 0xC5BA3BBEu, 0xB2BD0B28u,
  0x2BB45A92u, 0x5CB36A04u, 0xC2D7FFA7u, 0xB5D0CF31u, 0x2CD99E8Bu, 0x5BDEAE1Du,
  0x9B64C2B0u, 0xEC63F226u, 0x756AA39Cu, 0x026D930Au, 0x9C0906A9u, 0xEB0E363Fu,
  0x72076785u, 0x05005713u, 0x95BF4A82u, 0xE2B87A14u, 0x7BB12BAEu, 0x0CB61B38u,
  0x92D28E9Bu, 0xE5D5BE0Du, 0x7CDCEFB7u, 0x0BDBDF21u, 0x86D3D2D4u, 0xF1D4E242u,
  0x68DDB3F8u, 0x1FDA836Eu, 0x81BE16CDu, 0xF6B9265Bu, 0x6FB077E1u, 0x18B74777u,
  0x88085AE6u, 0xFF0F6A70u, 0x66063BCAu, 0x11010B5Cu, 0x8F659EFFu, 0xF862AE69u,
  0x616BFFD3u, 0x166CCF45u, 0xA00AE278u, 0xD70DD2EEu, 0x4E048354u, 0x3903B3C2u,
  0xA7672661u, 0xD06016F7u, 0x4969474Du, 0x3E6E77DBu, 0xAED16A4Au, 0xD9D65ADCu,
  0x40DF0B66u, 0x37D83BF0u, 0xA9BCAE53u, 0xDEBB9EC5u, 0x47B2CF7Fu, 0x30B5FFE9u,
  0xBDBDF21Cu, 0xCABAC28Au, 0x53B39330u, 0x24B4A3A6u, 0xBAD03605u, 0xCDD70693u,
  0x54DE5729u, 0x23D967BFu, 0xB3667A2Eu, 0xC4614AB8u, 0x5D681B02u, 0x2A6F2B94u,
  0xB40BBE37u, 0xC30C8EA1u, 0x5A05DF1Bu, 0x2D02EF8Du,
};

uint32_t ek_crc32(uint32_t crc, const void *data, size_t n) {
  const uint8_t *p = (const uint8_t *)data;
  crc = ~crc;
  while (n--) crc = crc32_table[(crc ^ *p++) & 0xFFu] ^ (crc >> 8);
  return ~crc;
}

/* Raw (non-inverted) update used while streaming; finalise with ~. */
static uint32_t crc32_raw(uint32_t state, uint8_t byte) {
  return crc32_table[(state ^ byte) & 0xFFu] ^ (state >> 8);
}

uint8_t ek_crc8(uint8_t crc, const void *data, size_t n) {
  const uint8_t *p = (const uint8_t *)data;
  while (n--) {
    crc ^= *p++;
    for (int bit = 0; bit < 8; ++bit) crc = (uint8_t)((crc & 0x80u) ? ((unsigned)crc << 1) ^ 0x07u : ((unsigned)crc << 1));
  }
  return crc;
}

uint8_t *ek_put_u8(uint8_t *p, uint8_t v) {
  *p = v;
  return p + 1;
}

uint8_t *ek_put_u16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  return p + 2;
}

uint8_t *ek_put_u32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
  return p + 4;
}

uint8_t *ek_put_f32(uint8_t *p, float v) {
  uint32_t bits;
  memcpy(&bits, &v, sizeof bits);
  return ek_put_u32(p, bits);
}

static uint32_t get_u32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static void build_header(uint8_t hdr[EK_PROTO_HEADER_BYTES], uint8_t type, uint8_t seq, uint32_t len) {
  hdr[0] = EK_PROTO_SYNC0;
  hdr[1] = EK_PROTO_SYNC1;
  hdr[2] = type;
  hdr[3] = seq;
  ek_put_u32(hdr + 4, len);
  hdr[8] = ek_crc8(0, hdr + 2, 6);
}

/* ---------------------------------------------------------------- receiver */

void ek_proto_rx_init(ek_proto_rx *rx, ek_proto_sink sink, void *user) {
  memset(rx, 0, sizeof *rx);
  rx->sink = sink;
  rx->user = user;
}

/* Drop hdr[0] and everything up to the next plausible frame start (SYNC0 followed by SYNC1,
   or SYNC0 as the last held byte). */
static void resync_header(ek_proto_rx *rx) {
  uint32_t i = 1;
  while (i < rx->hdr_n) {
    if (rx->hdr[i] == EK_PROTO_SYNC0 && (i + 1 == rx->hdr_n || rx->hdr[i + 1] == EK_PROTO_SYNC1)) break;
    ++i;
  }
  rx->skipped_bytes += i;
  memmove(rx->hdr, rx->hdr + i, rx->hdr_n - i);
  rx->hdr_n -= i;
}

static void ask_sink(ek_proto_rx *rx) {
  uint32_t avail = 0;
  uint8_t *dest = rx->sink ? rx->sink(rx->user, rx->type, rx->len, rx->pos, &avail) : NULL;
  if (!dest || avail == 0) {
    rx->rejected_frame = 1;
    rx->dest = NULL;
    rx->avail = 0;
  } else {
    rx->dest = dest;
    rx->avail = avail;
  }
}

static ek_rx_result accept_header(ek_proto_rx *rx) {
  uint32_t len = get_u32(rx->hdr + 4);
  if (ek_crc8(0, rx->hdr + 2, 6) != rx->hdr[8] || len > EK_PROTO_MAX_PAYLOAD) {
    rx->bad_headers++;
    resync_header(rx);
    return EK_RX_BAD_HEADER;
  }
  rx->type = rx->hdr[2];
  rx->seq = rx->hdr[3];
  rx->len = len;
  rx->pos = 0;
  rx->rejected_frame = 0;
  rx->crc = 0xFFFFFFFFu;
  for (uint32_t i = 2; i < EK_PROTO_HEADER_BYTES; ++i) rx->crc = crc32_raw(rx->crc, rx->hdr[i]);
  ask_sink(rx);
  return EK_RX_NONE;
}

ek_rx_result ek_proto_rx_byte(ek_proto_rx *rx, uint8_t byte) {
  if (rx->hdr_n < EK_PROTO_HEADER_BYTES) {
    if (rx->hdr_n == 0 && byte != EK_PROTO_SYNC0) {
      rx->skipped_bytes++;
      return EK_RX_NONE;
    }
    if (rx->hdr_n == 1 && byte != EK_PROTO_SYNC1) {
      rx->skipped_bytes++; /* the lone SYNC0 */
      if (byte == EK_PROTO_SYNC0) return EK_RX_NONE;
      rx->hdr_n = 0;
      rx->skipped_bytes++;
      return EK_RX_NONE;
    }
    rx->hdr[rx->hdr_n++] = byte;
    if (rx->hdr_n < EK_PROTO_HEADER_BYTES) return EK_RX_NONE;
    return accept_header(rx);
  }

  if (rx->pos < rx->len) {
    rx->crc = crc32_raw(rx->crc, byte);
    if (!rx->rejected_frame) {
      *rx->dest++ = byte;
      rx->avail--;
    }
    rx->pos++;
    if (!rx->rejected_frame && rx->avail == 0 && rx->pos < rx->len) ask_sink(rx);
    return EK_RX_NONE;
  }

  rx->trailer[rx->pos - rx->len] = byte;
  rx->pos++;
  if (rx->pos < rx->len + EK_PROTO_TRAILER_BYTES) return EK_RX_NONE;

  rx->hdr_n = 0; /* ready for the next frame */
  if (rx->rejected_frame) {
    rx->rejected++;
    return EK_RX_REJECTED;
  }
  if (get_u32(rx->trailer) != ~rx->crc) {
    rx->bad_crcs++;
    return EK_RX_BAD_CRC;
  }
  rx->frames++;
  return EK_RX_FRAME;
}

/* ---------------------------------------------------------------- sender */

void ek_proto_tx_init(ek_proto_tx *tx, ek_proto_write write, void *user) {
  memset(tx, 0, sizeof *tx);
  tx->write = write;
  tx->user = user;
}

void ek_proto_tx_begin(ek_proto_tx *tx, uint8_t type, uint8_t seq, uint32_t len) {
  uint8_t hdr[EK_PROTO_HEADER_BYTES];
  build_header(hdr, type, seq, len);
  tx->crc = 0xFFFFFFFFu;
  for (uint32_t i = 2; i < EK_PROTO_HEADER_BYTES; ++i) tx->crc = crc32_raw(tx->crc, hdr[i]);
  tx->remaining = len;
  tx->write(tx->user, hdr, sizeof hdr);
}

void ek_proto_tx_bytes(ek_proto_tx *tx, const void *data, size_t n) {
  const uint8_t *p = (const uint8_t *)data;
  if (n > tx->remaining) n = tx->remaining; /* never send more than announced */
  for (size_t i = 0; i < n; ++i) tx->crc = crc32_raw(tx->crc, p[i]);
  tx->remaining -= (uint32_t)n;
  if (n) tx->write(tx->user, p, n);
}

void ek_proto_tx_end(ek_proto_tx *tx) {
  static const uint8_t zeros[16] = {0};
  uint8_t trailer[EK_PROTO_TRAILER_BYTES];
  while (tx->remaining) {
    uint32_t n = tx->remaining < sizeof zeros ? tx->remaining : (uint32_t)sizeof zeros;
    ek_proto_tx_bytes(tx, zeros, n);
  }
  ek_put_u32(trailer, ~tx->crc);
  tx->write(tx->user, trailer, sizeof trailer);
}

void ek_proto_send(ek_proto_tx *tx, uint8_t type, uint8_t seq, const void *payload, uint32_t len) {
  ek_proto_tx_begin(tx, type, seq, len);
  ek_proto_tx_bytes(tx, payload, len);
  ek_proto_tx_end(tx);
}

void ek_proto_send_error(ek_proto_tx *tx, uint8_t seq, uint16_t code, int32_t detail, const char *message) {
  uint8_t head[8];
  size_t msg_len = message ? strlen(message) : 0;
  if (msg_len > 1024) msg_len = 1024;
  uint8_t *p = ek_put_u16(head, code);
  p = ek_put_u32(p, (uint32_t)detail);
  ek_put_u16(p, (uint16_t)msg_len);
  ek_proto_tx_begin(tx, EK_MSG_ERROR, seq, (uint32_t)(sizeof head + msg_len));
  ek_proto_tx_bytes(tx, head, sizeof head);
  ek_proto_tx_bytes(tx, message, msg_len);
  ek_proto_tx_end(tx);
}

size_t ek_proto_encode(uint8_t *out, size_t cap, uint8_t type, uint8_t seq, const void *payload, uint32_t len) {
  size_t total = (size_t)EK_PROTO_HEADER_BYTES + len + EK_PROTO_TRAILER_BYTES;
  if (cap < total || len > EK_PROTO_MAX_PAYLOAD) return 0;
  build_header(out, type, seq, len);
  if (len) memcpy(out + EK_PROTO_HEADER_BYTES, payload, len);
  ek_put_u32(out + EK_PROTO_HEADER_BYTES + len, ek_crc32(0, out + 2, EK_PROTO_HEADER_BYTES - 2 + len));
  return total;
}
