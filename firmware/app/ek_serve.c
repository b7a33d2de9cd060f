/* edgekit device protocol server: see ek_serve.h and firmware/protocol/PROTOCOL.md. */
#include "ek_serve.h"

#include <string.h>

#include "ek_board.h"
#include "ek_proto.h"

#define INFO_CAPACITY 2048u
#define ECHO_CAPACITY 512u

static ek_app *g_app;
static ek_proto_tx g_tx;
static uint8_t g_seq;             /* sequence number of the request being served */
static uint8_t g_info[INFO_CAPACITY];
static uint8_t g_echo[ECHO_CAPACITY];
static uint8_t g_empty[1];

static void uart_write(void *user, const uint8_t *data, size_t n) {
  (void)user;
  ek_uart_write(data, n);
}

static uint32_t input_bytes(const ek_app *app) {
  uint32_t total = 0;
  for (int32_t i = 0; i < app->num_inputs; ++i) total += (uint32_t)app->inputs[i]->bytes;
  return total;
}

static uint32_t output_bytes(const ek_app *app) {
  uint32_t total = 0;
  for (int32_t i = 0; i < app->num_outputs; ++i) total += (uint32_t)app->outputs[i]->bytes;
  return total;
}

/* Where payload bytes go: INFER is scattered straight into the input tensors. */
static uint8_t *sink(void *user, uint8_t type, uint32_t len, uint32_t offset, uint32_t *avail) {
  ek_app *app = (ek_app *)user;
  switch (type) {
    case EK_MSG_HELLO:
    case EK_MSG_RESET:
      if (len != 0) return NULL;
      *avail = sizeof g_empty;
      return g_empty;
    case EK_MSG_ECHO:
      if (len > ECHO_CAPACITY) return NULL;
      *avail = ECHO_CAPACITY - offset;
      return g_echo + offset;
    case EK_MSG_INFER: {
      if (app->init_status != 0 || len != input_bytes(app)) return NULL;
      uint32_t start = 0;
      for (int32_t i = 0; i < app->num_inputs; ++i) {
        uint32_t bytes = (uint32_t)app->inputs[i]->bytes;
        if (offset < start + bytes) {
          *avail = bytes - (offset - start);
          return (uint8_t *)app->inputs[i]->data + (offset - start);
        }
        start += bytes;
      }
      return NULL;
    }
    default:
      return NULL;
  }
}

/* ---------------------------------------------------------------- INFO */

typedef struct {
  uint8_t *p, *end;
  int overflow;
} writer;

static void w_bytes(writer *w, const void *data, size_t n) {
  if ((size_t)(w->end - w->p) < n) {
    w->overflow = 1;
    return;
  }
  memcpy(w->p, data, n);
  w->p += n;
}

static void w_u8(writer *w, uint8_t v) { w_bytes(w, &v, 1); }

static void w_u16(writer *w, uint16_t v) {
  uint8_t b[2];
  ek_put_u16(b, v);
  w_bytes(w, b, 2);
}

static void w_u32(writer *w, uint32_t v) {
  uint8_t b[4];
  ek_put_u32(b, v);
  w_bytes(w, b, 4);
}

static void w_f32(writer *w, float v) {
  uint8_t b[4];
  ek_put_f32(b, v);
  w_bytes(w, b, 4);
}

static void w_str8(writer *w, const char *s) {
  size_t n = s ? strlen(s) : 0;
  if (n > 255) n = 255;
  w_u8(w, (uint8_t)n);
  w_bytes(w, s, n);
}

static void w_tensor(writer *w, const ek_tensor *t) {
  int32_t ndim = t->ndim < 0 ? 0 : (t->ndim > EK_MAX_DIMS ? EK_MAX_DIMS : t->ndim);
  w_u8(w, (uint8_t)t->type);
  w_u8(w, (uint8_t)ndim);
  for (int32_t d = 0; d < ndim; ++d) w_u32(w, (uint32_t)t->dims[d]);
  w_f32(w, t->scale);
  w_u32(w, (uint32_t)t->zero_point);
  w_u32(w, (uint32_t)t->bytes);
}

static void send_info(const ek_app *app) {
  writer w = {g_info, g_info + INFO_CAPACITY, 0};
  uint16_t flags = (uint16_t)((ek_cycles_available() ? 1u : 0u) | (app->init_status == 0 ? 2u : 0u) |
                              (EK_SEMIHOSTING ? 4u : 0u));
  int32_t n_in = app->init_status == 0 ? app->num_inputs : 0;
  int32_t n_out = app->init_status == 0 ? app->num_outputs : 0;
  w_u16(&w, EK_PROTO_VERSION);
  w_u16(&w, flags);
  w_u32(&w, EK_CPU_HZ);
  w_u32(&w, app->model_bytes);
  w_u32(&w, app->model_crc32);
  w_u32(&w, app->arena_bytes);
  w_u32(&w, app->arena_used);
  w_u32(&w, app->state_bytes);
  w_u32(&w, app->state_used);
  w_u32(&w, ek_stack_bytes());
  w_u32(&w, ek_stack_used());
  w_u32(&w, (uint32_t)app->init_status);
  w_u32(&w, (uint32_t)app->op_count);
  w_str8(&w, ek_board_name);
  w_str8(&w, app->runtime);
  w_str8(&w, app->model_name);
  w_str8(&w, app->init_message);
  w_u8(&w, (uint8_t)n_in);
  w_u8(&w, (uint8_t)n_out);
  for (int32_t i = 0; i < n_in; ++i) w_tensor(&w, app->inputs[i]);
  for (int32_t i = 0; i < n_out; ++i) w_tensor(&w, app->outputs[i]);
  if (w.overflow) {
    ek_proto_send_error(&g_tx, g_seq, EK_PERR_TOO_LONG, 0, "INFO does not fit the device's 2 KiB buffer");
    return;
  }
  ek_proto_send(&g_tx, EK_MSG_INFO, g_seq, g_info, (uint32_t)(w.p - g_info));
}

/* ---------------------------------------------------------------- INFER */

static void send_result(ek_app *app) {
  uint8_t head[16];
  uint16_t n_ops = app->op_cycles ? app->n_op_cycles : 0;
  int cycles_ok = ek_cycles_available();
  if (!cycles_ok) n_ops = 0;
  uint8_t *p = ek_put_u32(head, 0);                     /* status */
  p = ek_put_u16(p, (uint16_t)(cycles_ok ? 1u : 0u));  /* flags */
  p = ek_put_u16(p, n_ops);
  p = ek_put_u32(p, cycles_ok ? app->cycles : 0u);
  ek_put_u32(p, ek_stack_used());
  ek_proto_tx_begin(&g_tx, EK_MSG_RESULT, g_seq, (uint32_t)sizeof head + 4u * n_ops + output_bytes(app));
  ek_proto_tx_bytes(&g_tx, head, sizeof head);
  for (uint16_t i = 0; i < n_ops; ++i) {
    uint8_t c[4];
    ek_put_u32(c, app->op_cycles[i]);
    ek_proto_tx_bytes(&g_tx, c, 4);
  }
  for (int32_t i = 0; i < app->num_outputs; ++i)
    ek_proto_tx_bytes(&g_tx, app->outputs[i]->data, (size_t)app->outputs[i]->bytes);
  ek_proto_tx_end(&g_tx);
}

static void handle_infer(ek_app *app) {
  int32_t op_index = -1;
  const char *message = "";
  app->cycles = 0;
  int32_t status = app->infer(app, &op_index, &message);
  if (status != 0) {
    ek_proto_send_error(&g_tx, g_seq, EK_PERR_INVOKE, op_index, message);
    return;
  }
  send_result(app);
}

static void handle_rejected(const ek_app *app, const ek_proto_rx *rx) {
  switch (rx->type) {
    case EK_MSG_HELLO:
    case EK_MSG_RESET:
      ek_proto_send_error(&g_tx, rx->seq, EK_PERR_BAD_LENGTH, (int32_t)rx->len, "HELLO / RESET take no payload");
      break;
    case EK_MSG_ECHO:
      ek_proto_send_error(&g_tx, rx->seq, EK_PERR_TOO_LONG, (int32_t)rx->len, "ECHO payload above 512 bytes");
      break;
    case EK_MSG_INFER:
      if (app->init_status != 0)
        ek_proto_send_error(&g_tx, rx->seq, EK_PERR_NOT_READY, app->init_status,
                            app->init_message ? app->init_message : "runtime not initialised");
      else
        ek_proto_send_error(&g_tx, rx->seq, EK_PERR_BAD_LENGTH, (int32_t)input_bytes(app),
                            "INFER payload length differs from the input tensors' total bytes (detail)");
      break;
    default:
      ek_proto_send_error(&g_tx, rx->seq, EK_PERR_UNKNOWN_TYPE, rx->type, "unknown message type");
      break;
  }
}

/* BOOT: the device is ready to receive. The host waits for it after starting QEMU: QEMU's CMSDK UART
   model stalls input that arrives before the guest has enabled its receiver. */
static void send_boot(void) {
  uint8_t payload[3 + 255];
  size_t n = strlen(ek_board_name);
  if (n > 255) n = 255;
  uint8_t *p = ek_put_u16(payload, EK_PROTO_VERSION);
  p = ek_put_u8(p, (uint8_t)n);
  memcpy(p, ek_board_name, n);
  ek_proto_send(&g_tx, EK_MSG_BOOT, 0, payload, (uint32_t)(3 + n));
}

/* Faults arrive here from startup.c: report them as an ERROR frame (and on the semihosting console). */
void ek_fault_report(const ek_fault_info *info) {
  char line[200];
  size_t n = ek_fault_format(info, line, sizeof line - 1);
  if (g_tx.write) ek_proto_send_error(&g_tx, g_seq, EK_PERR_FAULT, (int32_t)info->exception, line);
  line[n] = '\n';
  line[n + 1] = '\0';
  ek_semihost_write(line);
}

void ek_serve(ek_app *app) {
  static ek_proto_rx rx;
  g_app = app;
  ek_proto_tx_init(&g_tx, uart_write, NULL);
  ek_proto_rx_init(&rx, sink, app);
  send_boot();
  for (;;) {
    ek_rx_result r = ek_proto_rx_byte(&rx, ek_uart_read());
    if (r == EK_RX_NONE) continue;
    g_seq = rx.seq;
    switch (r) {
      case EK_RX_FRAME:
        if (rx.type == EK_MSG_HELLO) send_info(g_app);
        else if (rx.type == EK_MSG_ECHO) ek_proto_send(&g_tx, EK_MSG_ECHO_REPLY, rx.seq, g_echo, rx.len);
        else if (rx.type == EK_MSG_INFER) handle_infer(g_app);
        else if (rx.type == EK_MSG_RESET) {
          if (g_app->reset) g_app->reset(g_app);
          ek_proto_send(&g_tx, EK_MSG_RESET_REPLY, rx.seq, g_empty, 0);
        }
        break;
      case EK_RX_BAD_CRC:
        ek_proto_send_error(&g_tx, rx.seq, EK_PERR_BAD_CRC, rx.type, "payload CRC-32 mismatch");
        break;
      case EK_RX_BAD_HEADER:
        g_seq = 0;
        ek_proto_send_error(&g_tx, 0, EK_PERR_BAD_HEADER, 0, "header CRC-8 mismatch or length above 16 MiB");
        break;
      case EK_RX_REJECTED:
        handle_rejected(g_app, &rx);
        break;
      default:
        break;
    }
  }
}
