/* Board + protocol self-test firmware (no model). Build with -DEK_SELFTEST_MODE=<mode>:
 *
 *   0 serve  : speaks the protocol. One int8 input [1,16], one int8 output [1,16] = input XOR 0x5A.
 *              INFER input bytes: [0..3] u32 loop count N, [4] number of "ops" K (0..8),
 *              [5] != 0: use 4 KiB of extra stack first, [6] == 1: hang mid-inference,
 *              [6] == 2: fault (load from an unmapped address) mid-inference,
 *              [6] == 3: overflow the stack (unbounded recursion) mid-inference.
 *              Op k runs ek_selftest_loop(N * (k + 1)): exactly 2 * N * (k + 1) + 2 instructions from
 *              the op-begin marker to the op-end marker (see the assembly below).
 *   1 silent : boots and never answers (a hung device).
 *   2 garble : sends a valid BOOT frame, then answers every byte with garbage and a frame whose CRC is wrong.
 */
#include <stdint.h>
#include <string.h>

#include "ek_board.h"
#include "ek_proto.h"
#include "ek_serve.h"

#ifndef EK_SELFTEST_MODE
#define EK_SELFTEST_MODE 0
#endif

/* r0 = n >= 1. Between the two markers: the begin marker's bx lr, n x (subs, bne), the bl to the end
   marker: 2n + 2 instructions. */
void ek_selftest_loop(uint32_t n);
__asm__(
    "  .section .text.ek_selftest_loop, \"ax\", %progbits\n"
    "  .global ek_selftest_loop\n"
    "  .type ek_selftest_loop, %function\n"
    "  .thumb_func\n"
    "ek_selftest_loop:\n"
    "  push {r4, lr}\n"
    "  mov r4, r0\n"
    "  bl ek_marker_op_begin\n"
    "1:\n"
    "  subs r4, r4, #1\n"
    "  bne 1b\n"
    "  bl ek_marker_op_end\n"
    "  pop {r4, pc}\n"
    "  .size ek_selftest_loop, . - ek_selftest_loop\n");

#if EK_SELFTEST_MODE == 0
static int8_t input_data[16] __attribute__((aligned(16)));
static int8_t output_data[16] __attribute__((aligned(16)));
static ek_tensor input = {.data = input_data, .dims = {1, 16}, .ndim = 2, .type = EK_INT8, .bytes = 16,
                          .scale = 0.5f, .zero_point = -3, .num_scales = 1};
static ek_tensor output = {.data = output_data, .dims = {1, 16}, .ndim = 2, .type = EK_INT8, .bytes = 16,
                           .scale = 0.25f, .zero_point = 7, .num_scales = 1};

static uint32_t deep_stack(uint32_t seed) {
  volatile uint8_t block[4096];
  for (uint32_t i = 0; i < sizeof block; ++i) block[i] = (uint8_t)(seed + i);
  return block[seed % sizeof block];
}

static volatile uint32_t g_never = 0xFFFFFFFFu;

static uint32_t recurse(uint32_t depth) {
  volatile uint8_t pad[64];
  pad[depth % sizeof pad] = (uint8_t)depth;
  if (depth == g_never) return 0;
  return recurse(depth + 1) + pad[depth % sizeof pad];
}

static int32_t selftest_infer(ek_app *app, int32_t *op_index, const char **message) {
  uint32_t n = (uint32_t)(uint8_t)input_data[0] | ((uint32_t)(uint8_t)input_data[1] << 8) |
               ((uint32_t)(uint8_t)input_data[2] << 16) | ((uint32_t)(uint8_t)input_data[3] << 24);
  uint32_t ops = (uint8_t)input_data[4];
  if (ops > 8 || n == 0) {
    *op_index = -1;
    *message = "selftest input: loop count must be >= 1 and ops <= 8";
    return EK_ERR_SHAPE;
  }
  if (input_data[5]) (void)deep_stack((uint32_t)input_data[5]);
  for (int i = 0; i < 16; ++i) output_data[i] = (int8_t)(input_data[i] ^ 0x5A);
  uint32_t start = ek_cycles();
  ek_marker_infer_begin();
  if (input_data[6] == 1) {
    for (;;) {
    }
  }
  if (input_data[6] == 2) {
    volatile uint32_t *unmapped = (volatile uint32_t *)0xF0000000u;
    (void)*unmapped;
  }
  if (input_data[6] == 3) (void)recurse(0);
  for (uint32_t k = 0; k < ops; ++k) ek_selftest_loop(n * (k + 1));
  ek_marker_infer_end();
  app->cycles = ek_cycles() - start;
  return 0;
}
#endif

int main(void) {
#if EK_SELFTEST_MODE == 1
  for (;;) {
  }
#elif EK_SELFTEST_MODE == 2
  static const uint8_t garbage[] = {0x00, 0x13, 0xEB, 0x37, 0x90};
  uint8_t boot[64];
  uint8_t payload[3 + sizeof EK_BOARD_NAME];
  ek_put_u16(payload, EK_PROTO_VERSION);
  payload[2] = (uint8_t)(sizeof EK_BOARD_NAME - 1);
  memcpy(payload + 3, EK_BOARD_NAME, sizeof EK_BOARD_NAME - 1);
  ek_uart_write(boot, ek_proto_encode(boot, sizeof boot, EK_MSG_BOOT, 0, payload, (uint32_t)sizeof payload - 1));
  for (;;) {
    (void)ek_uart_read();
    uint8_t frame[32];
    size_t n = ek_proto_encode(frame, sizeof frame, EK_MSG_INFO, 0, "garbled", 7);
    frame[n - 1] ^= 0xFFu; /* break the CRC */
    ek_uart_write(garbage, sizeof garbage);
    ek_uart_write(frame, n);
  }
#else
  static ek_app app;
  memset(&app, 0, sizeof app);
  app.runtime = "selftest";
  app.model_name = "selftest-loop";
  app.init_message = "";
  app.num_inputs = 1;
  app.num_outputs = 1;
  app.inputs[0] = &input;
  app.outputs[0] = &output;
  app.op_count = 8;
  app.infer = selftest_infer;
  ek_serve(&app);
#endif
}
