/* Host checks of the preprocessing engine's argument and table validation.
 * Built by tests/preprocessing/test_codegen.py with generated tables for symbol ek_pp_model. */
#include <stdio.h>
#include <string.h>

#include "ek_preprocess.h"
#include "ek_pp_model.h"

static uint8_t input[EK_PP_MODEL_INPUT_BYTES];
static uint8_t scratch[EK_PP_MODEL_SCRATCH_BYTES];
static uint8_t output[EK_PP_MODEL_OUTPUT_BYTES];
static int32_t start[EK_PP_MODEL_OUT_WIDTH];
static uint16_t count[EK_PP_MODEL_OUT_HEIGHT];

static int failures = 0;

static void expect(const char *what, ek_pp_status got, ek_pp_status want) {
  if (got != want) {
    printf("FAIL %s: status %d, expected %d\n", what, (int)got, (int)want);
    failures++;
  }
}

static ek_pp_status run(const ek_pp_config *cfg) {
  return ek_preprocess(cfg, input, sizeof input, output, sizeof output, scratch, sizeof scratch);
}

int main(void) {
  const ek_pp_config *good = &ek_pp_model;
  expect("valid tables", ek_pp_check_config(good), EK_PP_OK);
  expect("valid call", run(good), EK_PP_OK);
  expect("NULL config", ek_preprocess(NULL, input, sizeof input, output, sizeof output, scratch, sizeof scratch), EK_PP_ERR_ARG);
  expect("NULL input", ek_preprocess(good, NULL, sizeof input, output, sizeof output, scratch, sizeof scratch), EK_PP_ERR_ARG);
  expect("short input", ek_preprocess(good, input, sizeof input - 1, output, sizeof output, scratch, sizeof scratch), EK_PP_ERR_INPUT_SIZE);
  expect("short output", ek_preprocess(good, input, sizeof input, output, sizeof output - 1, scratch, sizeof scratch), EK_PP_ERR_OUTPUT_SIZE);
  expect("short scratch", ek_preprocess(good, input, sizeof input, output, sizeof output, scratch, sizeof scratch - 1), EK_PP_ERR_SCRATCH);

  ek_pp_config bad;
  bad = *good; bad.in_format = 9;  expect("unknown input format", run(&bad), EK_PP_ERR_CONFIG);
  bad = *good; bad.channels = 2;   expect("two channels", run(&bad), EK_PP_ERR_CONFIG);
  bad = *good; bad.layout = 5;     expect("unknown layout", run(&bad), EK_PP_ERR_CONFIG);
  bad = *good; bad.out_dtype = 7;  expect("unknown dtype", run(&bad), EK_PP_ERR_CONFIG);
  bad = *good; bad.lut = NULL;     expect("no table", run(&bad), EK_PP_ERR_ARG);
  bad = *good; bad.channel_map[0] = 3; expect("channel map out of range", run(&bad), EK_PP_ERR_CONFIG);
  bad = *good; bad.output_bytes += 1;  expect("output size inconsistent", run(&bad), EK_PP_ERR_CONFIG);
  bad = *good; bad.scratch_bytes = 0;  expect("scratch size too small", run(&bad), EK_PP_ERR_CONFIG);

  memcpy(start, good->horizontal.start, sizeof start);
  start[EK_PP_MODEL_OUT_WIDTH - 1] = EK_PP_MODEL_IN_WIDTH; /* a tap beyond the row */
  bad = *good; bad.horizontal.start = start; expect("horizontal index beyond the row", run(&bad), EK_PP_ERR_CONFIG);
  start[EK_PP_MODEL_OUT_WIDTH - 1] = -1;
  expect("negative index", run(&bad), EK_PP_ERR_CONFIG);

  memcpy(count, good->vertical.count, sizeof count);
  count[0] = (uint16_t)(good->vertical.ksize + 1); /* more taps than weights */
  bad = *good; bad.vertical.count = count; expect("more taps than ksize", run(&bad), EK_PP_ERR_CONFIG);

  if (!good->vertical_first) {
    bad = *good; bad.ring_rows = 0; expect("ring smaller than a window", run(&bad), EK_PP_ERR_CONFIG);
  }
  if (failures == 0) printf("all engine checks passed\n");
  return failures == 0 ? 0 : 1;
}
