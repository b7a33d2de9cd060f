/* ek_preprocess.c - the table-driven preprocessing engine (see ek_preprocess.h). */
#include "ek_preprocess.h"

#define EK_PP_PRECISION_BITS 22 /* Pillow: 32 - 8 - 2 */

static size_t bytes_per_pixel(uint8_t format) { return format == EK_PP_GRAY8 ? 1u : 3u; }

size_t ek_pp_input_bytes(const ek_pp_config *cfg) {
  return (size_t)cfg->in_height * cfg->in_width * bytes_per_pixel(cfg->in_format);
}

/* Pillow's clip8: floor(acc / 2^22) clamped to 0..255 (negative sums give 0). */
static uint8_t clip8(int32_t acc) {
  if (acc < 0) return 0;
  acc >>= EK_PP_PRECISION_BITS;
  return (uint8_t)(acc > 255 ? 255 : acc);
}

/* Pillow's RGB -> L (ITU-R 601-2 luma, 16-bit fixed point). */
static uint8_t luma(uint32_t r, uint32_t g, uint32_t b) {
  return (uint8_t)((r * 19595u + g * 38470u + b * 7471u + 0x8000u) >> 16);
}

/* Working-color channel c of source pixel x in an input row. */
static uint8_t work_pixel(const ek_pp_config *cfg, const uint8_t *row, int32_t x, int c) {
  if (cfg->in_format == EK_PP_GRAY8) return row[x];
  const uint8_t *p = row + 3 * (size_t)x;
  if (cfg->in_format == EK_PP_RGB888) return cfg->channels == 1 ? luma(p[0], p[1], p[2]) : p[c];
  return cfg->channels == 1 ? luma(p[2], p[1], p[0]) : p[2 - c]; /* BGR888 */
}

static ek_pp_status check_axis(const ek_pp_axis *axis, uint16_t out_size, uint16_t in_size, int monotonic) {
  if (!axis->start || !axis->count || !axis->weights || axis->ksize == 0) return EK_PP_ERR_CONFIG;
  int32_t previous = 0;
  for (uint16_t i = 0; i < out_size; i++) {
    const int32_t start = axis->start[i];
    const uint16_t count = axis->count[i];
    if (start < 0 || count == 0 || count > axis->ksize || (int64_t)start + count > in_size) return EK_PP_ERR_CONFIG;
    if (monotonic && start < previous) return EK_PP_ERR_CONFIG;
    previous = start;
  }
  return EK_PP_OK;
}

ek_pp_status ek_pp_check_config(const ek_pp_config *cfg) {
  if (!cfg || !cfg->lut) return EK_PP_ERR_ARG;
  if (cfg->in_format != EK_PP_GRAY8 && cfg->in_format != EK_PP_RGB888 && cfg->in_format != EK_PP_BGR888) return EK_PP_ERR_CONFIG;
  if (cfg->channels != 1 && cfg->channels != 3) return EK_PP_ERR_CONFIG;
  if (cfg->in_width == 0 || cfg->in_height == 0 || cfg->out_width == 0 || cfg->out_height == 0) return EK_PP_ERR_CONFIG;
  if (cfg->layout > EK_PP_NCHW || cfg->out_dtype > EK_PP_UINT8) return EK_PP_ERR_CONFIG;
  for (int c = 0; c < cfg->channels; c++) {
    if (cfg->channel_map[c] >= cfg->channels) return EK_PP_ERR_CONFIG;
  }
  if (check_axis(&cfg->horizontal, cfg->out_width, cfg->in_width, 0) != EK_PP_OK) return EK_PP_ERR_CONFIG;
  if (check_axis(&cfg->vertical, cfg->out_height, cfg->in_height, 1) != EK_PP_OK) return EK_PP_ERR_CONFIG;
  for (uint16_t y = 0; y < cfg->out_height && !cfg->vertical_first; y++) {
    if (cfg->vertical.count[y] > cfg->ring_rows) return EK_PP_ERR_CONFIG;
  }
  const uint32_t element = cfg->out_dtype == EK_PP_FLOAT32 ? 4u : 1u;
  const uint32_t scratch = cfg->vertical_first ? (uint32_t)cfg->in_width * cfg->channels
                                               : (uint32_t)cfg->ring_rows * cfg->out_width * cfg->channels;
  if (cfg->vertical_first > 1 || cfg->scratch_bytes < scratch) return EK_PP_ERR_CONFIG;
  if (cfg->output_bytes != (uint32_t)cfg->out_height * cfg->out_width * cfg->channels * element) return EK_PP_ERR_CONFIG;
  return EK_PP_OK;
}

static const uint8_t *input_row(const ek_pp_config *cfg, const uint8_t *input, int32_t r) {
  return input + (size_t)r * cfg->in_width * bytes_per_pixel(cfg->in_format);
}

/* Horizontal pass of one input row (pixels in cfg->in_format, converted on the fly) into
   out_width * channels bytes. */
static void horizontal_row(const ek_pp_config *cfg, const uint8_t *row, uint8_t *dst) {
  const ek_pp_axis *h = &cfg->horizontal;
  for (uint16_t x = 0; x < cfg->out_width; x++) {
    const int32_t start = h->start[x];
    const uint16_t count = h->count[x];
    const int32_t *w = h->weights + (size_t)x * h->ksize;
    for (int c = 0; c < cfg->channels; c++) {
      int32_t acc = 1 << (EK_PP_PRECISION_BITS - 1);
      for (uint16_t k = 0; k < count; k++) acc += (int32_t)work_pixel(cfg, row, start + k, c) * w[k];
      dst[(size_t)x * cfg->channels + c] = clip8(acc);
    }
  }
}

/* Vertical pass of output row y over every input column, into in_width * channels bytes. */
static void vertical_row(const ek_pp_config *cfg, const uint8_t *input, uint16_t y, uint8_t *dst) {
  const ek_pp_axis *v = &cfg->vertical;
  const int32_t start = v->start[y];
  const uint16_t count = v->count[y];
  const int32_t *w = v->weights + (size_t)y * v->ksize;
  for (uint16_t x = 0; x < cfg->in_width; x++) {
    for (int c = 0; c < cfg->channels; c++) {
      int32_t acc = 1 << (EK_PP_PRECISION_BITS - 1);
      for (uint16_t k = 0; k < count; k++) acc += (int32_t)work_pixel(cfg, input_row(cfg, input, start + k), x, c) * w[k];
      dst[(size_t)x * cfg->channels + c] = clip8(acc);
    }
  }
}

static void store(const ek_pp_config *cfg, void *output, uint16_t y, uint16_t x, int oc, uint8_t v) {
  const size_t index = cfg->layout == EK_PP_NHWC
                           ? ((size_t)y * cfg->out_width + x) * cfg->channels + (size_t)oc
                           : ((size_t)oc * cfg->out_height + y) * cfg->out_width + x;
  const size_t entry = (size_t)oc * 256u + v;
  if (cfg->out_dtype == EK_PP_FLOAT32) {
    ((float *)output)[index] = ((const float *)cfg->lut)[entry];
  } else if (cfg->out_dtype == EK_PP_INT8) {
    ((int8_t *)output)[index] = ((const int8_t *)cfg->lut)[entry];
  } else {
    ((uint8_t *)output)[index] = ((const uint8_t *)cfg->lut)[entry];
  }
}

ek_pp_status ek_preprocess(const ek_pp_config *cfg, const uint8_t *input, size_t input_bytes,
                           void *output, size_t output_bytes, uint8_t *scratch, size_t scratch_bytes) {
  if (!cfg || !input || !output || !scratch) return EK_PP_ERR_ARG;
  const ek_pp_status status = ek_pp_check_config(cfg);
  if (status != EK_PP_OK) return status;
  if (input_bytes < ek_pp_input_bytes(cfg)) return EK_PP_ERR_INPUT_SIZE;
  if (output_bytes < cfg->output_bytes) return EK_PP_ERR_OUTPUT_SIZE;
  if (scratch_bytes < cfg->scratch_bytes) return EK_PP_ERR_SCRATCH;

  if (cfg->vertical_first) {
    /* scratch: one vertically resampled input row; the output row is built in place, pixel by
       pixel, from it (no second buffer: each output pixel is stored as soon as it is computed) */
    for (uint16_t y = 0; y < cfg->out_height; y++) {
      vertical_row(cfg, input, y, scratch);
      const ek_pp_axis *h = &cfg->horizontal;
      for (uint16_t x = 0; x < cfg->out_width; x++) {
        const int32_t start = h->start[x];
        const uint16_t count = h->count[x];
        const int32_t *w = h->weights + (size_t)x * h->ksize;
        uint8_t work[3];
        for (int c = 0; c < cfg->channels; c++) {
          int32_t acc = 1 << (EK_PP_PRECISION_BITS - 1);
          for (uint16_t k = 0; k < count; k++) acc += (int32_t)scratch[(size_t)(start + k) * cfg->channels + c] * w[k];
          work[c] = clip8(acc);
        }
        for (int oc = 0; oc < cfg->channels; oc++) store(cfg, output, y, x, oc, work[cfg->channel_map[oc]]);
      }
    }
    return EK_PP_OK;
  }

  const size_t ring_row_bytes = (size_t)cfg->out_width * cfg->channels;
  const ek_pp_axis *v = &cfg->vertical;
  int32_t computed_upto = 0; /* input rows below this were horizontally resampled already */
  for (uint16_t y = 0; y < cfg->out_height; y++) {
    const int32_t start = v->start[y];
    const uint16_t count = v->count[y];
    const int32_t end = start + count;
    /* rows of this window not in the ring yet; earlier ones stay valid because windows move
       forward and are never longer than ring_rows */
    for (int32_t r = computed_upto > start ? computed_upto : start; r < end; r++) {
      horizontal_row(cfg, input_row(cfg, input, r), scratch + (size_t)(r % cfg->ring_rows) * ring_row_bytes);
    }
    if (end > computed_upto) computed_upto = end;
    const int32_t *w = v->weights + (size_t)y * v->ksize;
    for (uint16_t x = 0; x < cfg->out_width; x++) {
      uint8_t work[3];
      for (int c = 0; c < cfg->channels; c++) {
        int32_t acc = 1 << (EK_PP_PRECISION_BITS - 1);
        for (uint16_t k = 0; k < count; k++) {
          const uint8_t *ring_row = scratch + (size_t)((start + k) % cfg->ring_rows) * ring_row_bytes;
          acc += (int32_t)ring_row[(size_t)x * cfg->channels + c] * w[k];
        }
        work[c] = clip8(acc);
      }
      for (int oc = 0; oc < cfg->channels; oc++) store(cfg, output, y, x, oc, work[cfg->channel_map[oc]]);
    }
  }
  return EK_PP_OK;
}
