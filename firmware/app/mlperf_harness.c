/* MLPerf Tiny (EEMBC ULPMark-ML) device under test, on edgekit's runtime and generated model.
 *
 * Written from the public MLPerf Tiny sources (github.com/mlcommons/tiny):
 *   api/internally_implemented.{h,cpp}: the command set and messages (EE_CMD_SIZE 80, terminator '%',
 *     "m-ready" after every command, "m-name-dut-[...]", "m-profile-[...]", "m-model-[...]", "db load N" ->
 *     "m-[Expecting N bytes]", "db HEX..." -> "m-load-done" at N bytes, "db print" -> "m-buffer-xx-xx-...",
 *     "infer N [W=10]" -> "m-warmup-start-W", "m-warmup-done", "m-infer-start-N", timestamp, N inferences,
 *     timestamp, "m-infer-done", results; errors "e-[...]"; "e-[Unknown command: X]");
 *   api/submitter_implemented.h: "m-lap-us-%lu" timestamps (performance mode), the GPIO pulse (energy mode),
 *     "m-timestamp-mode-performance|energy" at initialisation;
 *   reference_submissions/<task>/submitter_implemented.cpp: how each task takes its input and prints results
 *     (kws: int8 features as sent, results "0.%d%d%d" truncated; ic/vww: uint8 pixels - 128, results "%0.3f";
 *     ad: float32 LE spectrogram slices quantized with the input scale/zero point, result the mean squared
 *     error between the dequantized output and the float input, "m-results-[%0.3f]");
 *   benchmark/runner/device_under_test.py and script.py: what the host parses (^m-results-\[([^]]+)\]$,
 *     ^m-lap-us-([0-9]+)$, "m-ready" ends a response, 31 data bytes per "db" line).
 * Differences, on purpose: malformed input never overruns a buffer (the reference writes past gp_buff for
 * "db" before "db load" or an oversized load); over-long commands, a partial input and non-numeric counts are
 * refused with "e-[...]"; `outputs` (edgekit extension) prints the raw output tensor bytes for bit-exactness
 * checks. The model runs through the same generated model API (edgekit_model.h, the library's), model arrays and
 * memory plan as edgekit's normal firmware; the
 * planner may reuse input memory during an inference, so the converted input is copied into the input tensor
 * before every inference (a memcpy of the input size, inside the timed loop).
 *
 * Config (ek_config.h, generated): EK_MLPERF_TASK (1 kws, 2 ic, 3 vww, 4 ad), EK_MLPERF_MODEL_VERSION
 * ("kws01", ...), EK_MLPERF_DB_BYTES (the input as the runner sends it), EK_MLPERF_ENERGY_MODE.
 */
#include <stdint.h>
#include <math.h>
#include <string.h>

#include "ek_board.h"
#include "ek_config.h"
#include "edgekit_model.h" /* the model API the library emits (model/edgekit_model.c): one code path */
#include "ek_timestamp.h"
#include "model_data.h"

#define TASK_KWS 1
#define TASK_IC 2
#define TASK_VWW 3
#define TASK_AD 4

#ifndef EK_MLPERF_ENERGY_MODE
#define EK_MLPERF_ENERGY_MODE 0
#endif
#define CMD_SIZE 80u           /* EE_CMD_SIZE of the reference */
#define FW_VERSION "ULPMark for tinyML Firmware V0.0.1" /* EE_FW_VERSION: the runner logs it */
#define VENDOR_NAME "edgekit"  /* TH_VENDOR_NAME_STRING */
#define MAX_RESULTS 64u

static uint8_t g_db[EK_MLPERF_DB_BYTES] __attribute__((aligned(4))); /* the "db" buffer (gp_buff) */
static uint32_t g_db_size;     /* announced by "db load N"; 0 = none */
static uint32_t g_db_pos;      /* bytes received */
static int8_t *g_staged;       /* the converted input, copied into the input tensor before each inference */
static int8_t g_staged_buf[EK_MLPERF_DB_BYTES];
static int g_have_results;
static const edgekit_model_tensor *g_in, *g_out;
static const char *g_init_error;

/* ------------------------------------------------------------------ output */

static void puts_raw(const char *s) { ek_uart_write((const uint8_t *)s, strlen(s)); }

static void put_u32(uint32_t v) {
  char buf[11];
  int n = 0;
  do {
    buf[n++] = (char)('0' + v % 10u);
    v /= 10u;
  } while (v);
  while (n) ek_uart_write((const uint8_t *)&buf[--n], 1);
}

static void put_hex8(uint8_t v) {
  static const char digits[] = "0123456789abcdef";
  char b[2] = {digits[v >> 4], digits[v & 15u]};
  ek_uart_write((const uint8_t *)b, 2);
}

/* printf("%0.3f", v): rounded to 3 decimals (no float printf in newlib-nano). */
__attribute__((unused)) static void put_fixed3(float value) {
  double v = (double)value;
  if (v != v) {
    puts_raw("nan");
    return;
  }
  if (v < 0) {
    puts_raw("-");
    v = -v;
  }
  if (v > 4.0e6) v = 4.0e6; /* keeps the scaled value in 32 bits; never reached by these results */
  uint32_t milli = (uint32_t)(v * 1000.0 + 0.5);
  put_u32(milli / 1000u);
  puts_raw(".");
  char d[3] = {(char)('0' + milli / 100u % 10u), (char)('0' + milli / 10u % 10u), (char)('0' + milli % 10u)};
  ek_uart_write((const uint8_t *)d, 3);
}

/* The KWS reference prints "0.%d%d%d" of int(v*10), int(v*100)%10, int(v*1000)%10 (truncation). */
__attribute__((unused)) static void put_trunc3(float v) {
  puts_raw("0.");
  put_u32((uint32_t)(int)(v * 10));
  put_u32((uint32_t)((int)(v * 100) % 10));
  put_u32((uint32_t)((int)(v * 1000) % 10));
}

/* Echo untrusted text with non-printable bytes replaced, at most `max` characters. */
static void put_sanitized(const char *s, size_t max) {
  for (size_t i = 0; s[i] && i < max; ++i) {
    char c = (s[i] >= 0x20 && s[i] < 0x7f && s[i] != ']') ? s[i] : '?';
    ek_uart_write((const uint8_t *)&c, 1);
  }
}

static void error_begin(void) { puts_raw("e-["); }
static void error_end(void) { puts_raw("]\r\n"); }
static void error_text(const char *text) {
  error_begin();
  puts_raw(text);
  error_end();
}

/* ------------------------------------------------------------------ timestamps */

static void timestamp(void) {
#if EK_MLPERF_ENERGY_MODE
  ek_timestamp_pin_pulse();
#else
  uint32_t us = ek_timestamp_us();
  puts_raw("m-lap-us-");
  put_u32(us);
  puts_raw("\r\n");
#endif
}

/* ------------------------------------------------------------------ parsing helpers */

/* Strict decimal: digits only, no sign, at most 9 digits. Returns -1 if not a number. */
static int32_t parse_count(const char *s) {
  int32_t v = 0;
  int n = 0;
  if (!s || !*s) return -1;
  for (; *s; ++s, ++n) {
    if (*s < '0' || *s > '9' || n >= 9) return -1;
    v = v * 10 + (*s - '0');
  }
  return v;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

#define MAX_TOKENS 6
static int tokenize(char *line, char **tok) {
  int n = 0;
  char *p = line;
  while (*p && n < MAX_TOKENS) {
    while (*p == ' ') ++p;
    if (!*p) break;
    tok[n++] = p;
    while (*p && *p != ' ') ++p;
    if (*p) *p++ = '\0';
  }
  while (*p == ' ') ++p;
  return *p ? -1 : n; /* -1: more tokens than any command takes */
}

/* ------------------------------------------------------------------ the model */

static int input_complete(void) { return g_db_size == EK_MLPERF_DB_BYTES && g_db_pos == g_db_size; }

/* th_load_tensor: the db buffer -> the int8 input, as the task's reference submission does it. */
static void load_tensor(void) {
#if EK_MLPERF_TASK == TASK_AD
  float scale = g_in->scale;
  int32_t zp = g_in->zero_point;
  for (uint32_t i = 0; i < EK_MLPERF_DB_BYTES / 4u; ++i) {
    float x;
    memcpy(&x, g_db + 4u * i, 4); /* FP32LE: the Cortex-M is little-endian */
    float q = roundf(x / scale); /* QuantizeFloatToInt8: round(value / scale) + zero_point, saturated */
    int32_t r = q != q ? 0 : (q < -1000.0f ? -1000 : (q > 1000.0f ? 1000 : (int32_t)q)); /* NaN, inf: no UB */
    r += zp;
    g_staged[i] = (int8_t)(r < -128 ? -128 : (r > 127 ? 127 : r));
  }
#elif EK_MLPERF_TASK == TASK_IC || EK_MLPERF_TASK == TASK_VWW
  for (uint32_t i = 0; i < EK_MLPERF_DB_BYTES; ++i) g_staged[i] = (int8_t)((int32_t)g_db[i] - 128);
#else
  memcpy(g_staged, g_db, EK_MLPERF_DB_BYTES);
#endif
}

static int infer_once(void) {
  memcpy(g_in->data, g_staged, (size_t)g_in->bytes);
  ek_marker_infer_begin();
  edgekit_model_status status = edgekit_model_invoke();
  ek_marker_infer_end();
  return status == EDGEKIT_MODEL_OK;
}

static float dequantized_output(int32_t i) {
  return ((float)((const int8_t *)g_out->data)[i] - (float)g_out->zero_point) * g_out->scale;
}

/* th_results */
static void results(void) {
  puts_raw("m-results-[");
#if EK_MLPERF_TASK == TASK_AD
  float diffsum = 0.0f;
  uint32_t n = (uint32_t)g_out->bytes;
  for (uint32_t i = 0; i < n; ++i) {
    float x;
    memcpy(&x, g_db + 4u * i, 4);
    float diff = dequantized_output((int32_t)i) - x;
    diffsum += diff * diff;
  }
  diffsum /= (float)n;
  put_fixed3(diffsum);
#else
  uint32_t n = (uint32_t)g_out->bytes;
  if (n > MAX_RESULTS) n = MAX_RESULTS;
  for (uint32_t i = 0; i < n; ++i) {
#if EK_MLPERF_TASK == TASK_KWS
    put_trunc3(dequantized_output((int32_t)i));
#else
    put_fixed3(dequantized_output((int32_t)i));
#endif
    if (i + 1u < n) puts_raw(",");
  }
#endif
  puts_raw("]\r\n");
}

/* ------------------------------------------------------------------ commands */

static void cmd_help(void) {
  puts_raw(FW_VERSION "\r\n\r\n");
  puts_raw("help         : Print this information\r\n");
  puts_raw("name         : Print the name of the device\r\n");
  puts_raw("timestamp    : Generate a timestamp\r\n");
  puts_raw("db SUBCMD    : Manipulate a generic byte buffer\r\n");
  puts_raw("  load N     : Allocate N bytes and set load counter\r\n");
  puts_raw("  db HH[HH]* : Load 8-bit hex byte(s) until N bytes\r\n");
  puts_raw("  print [N] [offset=0]\r\n");
  puts_raw("             : Print N bytes at offset as hex\r\n");
  puts_raw("infer N [W=10]: Load input, execute N inferences after W warmup loops\r\n");
  puts_raw("results      : Return the result fp32 vector\r\n");
  puts_raw("outputs      : (edgekit) Print the raw output tensor bytes as hex\r\n");
}

static void cmd_db(char **tok, int n) {
  if (n < 2) {
    error_text("Command 'db' requires a subcommand");
  } else if (strcmp(tok[1], "load") == 0) {
    int32_t size = n == 3 ? parse_count(tok[2]) : -1;
    if (n != 3 || size < 0) {
      error_text("Command 'db load' requires the # of bytes");
    } else if (size == 0) {
      error_text("Command 'db load' must be >0 bytes");
    } else if ((uint32_t)size > EK_MLPERF_DB_BYTES) {
      error_begin();
      puts_raw("db load ");
      put_u32((uint32_t)size);
      puts_raw(" exceeds the input buffer of ");
      put_u32(EK_MLPERF_DB_BYTES);
      puts_raw(" bytes");
      error_end();
    } else {
      g_db_size = (uint32_t)size;
      g_db_pos = 0;
      puts_raw("m-[Expecting ");
      put_u32(g_db_size);
      puts_raw(" bytes]\r\n");
    }
  } else if (strcmp(tok[1], "print") == 0) {
    int32_t count = n >= 3 ? parse_count(tok[2]) : (int32_t)g_db_pos;
    int32_t offset = n >= 4 ? parse_count(tok[3]) : 0;
    if (n > 4 || count < 0 || offset < 0) {
      error_text("Usage: db print [N] [offset]");
      return;
    }
    uint32_t end = (uint32_t)offset + (uint32_t)count;
    if (end > g_db_pos) end = g_db_pos;
    uint32_t printed = 0;
    for (uint32_t i = (uint32_t)offset; i < end; ++i, ++printed) {
      if (printed % 8u == 0u) puts_raw("m-buffer-");
      put_hex8(g_db[i]);
      puts_raw((printed % 8u == 7u || i + 1u == end) ? "\r\n" : "-");
    }
  } else if (n != 2) {
    error_text("Command 'db' takes one run of hex digits");
  } else {
    const char *hex = tok[1];
    size_t digits = strlen(hex);
    if (g_db_size == 0u) {
      error_text("db: no 'db load N' before the data");
      return;
    }
    if (g_db_pos >= g_db_size) {
      error_text("db: all announced bytes are loaded; send 'db load N' to load again");
      return;
    }
    if (digits & 1u) {
      error_text("Insufficient number of hex digits");
      return;
    }
    for (size_t i = 0; i < digits; ++i) {
      if (hex_value(hex[i]) < 0) {
        error_begin();
        puts_raw("Invalid hex digit '");
        put_sanitized(hex + (i & ~(size_t)1), 2);
        puts_raw("'");
        error_end();
        return; /* nothing of this line was stored */
      }
    }
    for (size_t i = 0; i < digits; i += 2) {
      g_db[g_db_pos++] = (uint8_t)((hex_value(hex[i]) << 4) | hex_value(hex[i + 1]));
      if (g_db_pos == g_db_size) {
        puts_raw("m-load-done\r\n");
        return; /* the reference disregards the remainder of the digits */
      }
    }
  }
}

static void cmd_infer(char **tok, int n) {
  int32_t iterations = 1, warmups = 10; /* the reference's defaults */
  if (n >= 2) iterations = parse_count(tok[1]);
  if (n >= 3) warmups = parse_count(tok[2]);
  if (n > 3) {
    error_text("Usage: infer N [W]");
    return;
  }
  if (iterations <= 0) {
    error_text("Inference iterations must be >0");
    return;
  }
  if (warmups < 0) {
    error_text("Inference warmup must be >=0");
    return;
  }
  if (g_init_error) {
    error_begin();
    puts_raw("runtime not initialised: ");
    put_sanitized(g_init_error, 120);
    error_end();
    return;
  }
  if (!input_complete()) {
    error_begin();
    puts_raw("infer: the input has ");
    put_u32(g_db_pos);
    puts_raw(" of ");
    put_u32(EK_MLPERF_DB_BYTES);
    puts_raw(" bytes; send 'db load ");
    put_u32(EK_MLPERF_DB_BYTES);
    puts_raw("' and the data first");
    error_end();
    return;
  }
  load_tensor();
  g_have_results = 0;
  puts_raw("m-warmup-start-");
  put_u32((uint32_t)warmups);
  puts_raw("\r\n");
  int ok = 1;
  for (int32_t i = 0; i < warmups && ok; ++i) ok = infer_once();
  puts_raw("m-warmup-done\r\n");
  puts_raw("m-infer-start-");
  put_u32((uint32_t)iterations);
  puts_raw("\r\n");
  timestamp();
  for (int32_t i = 0; i < iterations && ok; ++i) ok = infer_once();
  timestamp();
  puts_raw("m-infer-done\r\n");
  if (!ok) {
    error_begin();
    puts_raw("inference failed: ");
    put_sanitized(edgekit_model_message(), 120);
    error_end();
    return;
  }
  g_have_results = 1;
  results();
}

static void cmd_outputs(void) {
  if (!g_have_results) {
    error_text("outputs: no inference has run on the current input");
    return;
  }
  puts_raw("m-outputs-[");
  for (size_t i = 0; i < g_out->bytes; ++i) put_hex8(((const uint8_t *)g_out->data)[i]);
  puts_raw("]\r\n");
}

static void dispatch(char *line) {
  char *tok[MAX_TOKENS];
  int n = tokenize(line, tok);
  if (n == 0) {
    /* an empty command ("%" alone) only gets m-ready */
  } else if (n < 0) {
    error_text("Too many arguments");
  } else if (strcmp(tok[0], "name") == 0) {
    puts_raw("m-name-dut-[" VENDOR_NAME " ");
    puts_raw(ek_board_name);
    puts_raw("]\r\n");
  } else if (strcmp(tok[0], "timestamp") == 0) {
    timestamp();
  } else if (strcmp(tok[0], "profile") == 0) {
    puts_raw("m-profile-[" FW_VERSION "]\r\n");
    puts_raw("m-model-[" EK_MLPERF_MODEL_VERSION "]\r\n");
  } else if (strcmp(tok[0], "help") == 0) {
    cmd_help();
  } else if (strcmp(tok[0], "db") == 0) {
    cmd_db(tok, n);
  } else if (strcmp(tok[0], "infer") == 0) {
    cmd_infer(tok, n);
  } else if (strcmp(tok[0], "results") == 0) {
    if (g_have_results) results();
    else error_text("results: no inference has run on the current input");
  } else if (strcmp(tok[0], "outputs") == 0) {
    cmd_outputs();
  } else {
    error_begin();
    puts_raw("Unknown command: ");
    put_sanitized(tok[0], 40);
    error_end();
  }
  puts_raw("m-ready\r\n");
}

/* ------------------------------------------------------------------ main */

int main(void) {
  g_staged = g_staged_buf;
  ek_timestamp_init();
#if EK_MLPERF_ENERGY_MODE
  ek_timestamp_pin_init();
#endif
  edgekit_model_status status = edgekit_model_init();
  if (status != EDGEKIT_MODEL_OK) {
    g_init_error = edgekit_model_message();
  } else if (EDGEKIT_MODEL_NUM_INPUTS != 1 || EDGEKIT_MODEL_NUM_OUTPUTS != 1) {
    g_init_error = "the MLPerf Tiny harness needs one input and one output tensor";
  } else {
    g_in = edgekit_model_input(0);
    g_out = edgekit_model_output(0);
    uint32_t expect = EK_MLPERF_TASK == TASK_AD ? (uint32_t)g_in->bytes * 4u : (uint32_t)g_in->bytes;
    if (g_in->type != EDGEKIT_MODEL_INT8 || g_out->type != EDGEKIT_MODEL_INT8) g_init_error = "model input and output must be int8";
    else if (expect != EK_MLPERF_DB_BYTES) g_init_error = "the input size differs from the task's";
    else if (EK_MLPERF_TASK == TASK_AD && g_out->bytes != g_in->bytes) g_init_error = "AD output size differs from its input";
  }
  /* ee_benchmark_initialize: timestamp mode, one timestamp, init done, ready */
#if EK_MLPERF_ENERGY_MODE
  puts_raw("m-timestamp-mode-energy\r\n");
#else
  puts_raw("m-timestamp-mode-performance\r\n");
#endif
  timestamp();
  if (g_init_error) {
    error_begin();
    puts_raw("runtime not initialised: ");
    put_sanitized(g_init_error, 120);
    error_end();
  }
  puts_raw("m-init-done\r\n");
  puts_raw("m-ready\r\n");

  static char line[CMD_SIZE + 1];
  uint32_t pos = 0, dropped = 0;
  for (;;) {
    uint8_t c = ek_uart_read();
    if (c == '%') { /* EE_CMD_TERMINATOR */
      if (dropped) {
        error_begin();
        puts_raw("Command too long: ");
        put_u32(pos + dropped);
        puts_raw(" bytes, the limit is ");
        put_u32(CMD_SIZE);
        error_end();
        puts_raw("m-ready\r\n");
      } else {
        line[pos] = '\0';
        dispatch(line);
      }
      pos = 0;
      dropped = 0;
    } else if (c == '\r' || c == '\n') {
      /* line ends typed in a terminal are not part of a command */
    } else if (pos < CMD_SIZE) {
      line[pos++] = (char)(c == 0 ? '?' : c); /* NUL would cut the command short */
    } else {
      ++dropped;
    }
  }
}
