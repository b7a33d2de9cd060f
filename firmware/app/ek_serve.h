/* edgekit device side of the UART protocol: answers HELLO with INFO, INFER with RESULT or ERROR,
 * ECHO with ECHO_REPLY, and reports CPU faults as ERROR frames. Used by main.c (model firmware) and
 * selftest.c (board/protocol test firmware). Payload layouts: firmware/protocol/PROTOCOL.md.
 */
#ifndef EK_SERVE_H
#define EK_SERVE_H

#include <stdint.h>

#include "ek_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

#define EK_APP_MAX_IO 16

typedef struct ek_app ek_app;

struct ek_app {
  /* reported by INFO */
  const char *runtime;        /* e.g. "edgekit-rt 1" */
  const char *model_name;     /* "" if unknown */
  uint32_t model_bytes, model_crc32;
  uint32_t arena_bytes, arena_used, state_bytes, state_used;
  int32_t init_status;        /* 0 = ready; otherwise INFER is answered with ERROR NOT_READY */
  const char *init_message;
  int32_t op_count;
  int32_t num_inputs, num_outputs;
  ek_tensor *inputs[EK_APP_MAX_IO];
  ek_tensor *outputs[EK_APP_MAX_IO];
  /* Runs one inference on the inputs already received into inputs[i]->data. Returns 0 or an
     ek_status with *op_index (-1 if none) and *message set. Sets cycles / op_cycles below. */
  int32_t (*infer)(ek_app *app, int32_t *op_index, const char **message);
  /* RESET: the model's state (resource variables) back to its initial values; NULL if the app has none. */
  void (*reset)(ek_app *app);
  uint32_t cycles;            /* device cycles of the last inference (valid if ek_cycles_available()) */
  const uint32_t *op_cycles;  /* per-op device cycles of the last inference, or NULL */
  uint16_t n_op_cycles;
};

/* Serves the protocol forever on the board UART. */
void ek_serve(ek_app *app) __attribute__((noreturn));

#ifdef __cplusplus
}
#endif
#endif
