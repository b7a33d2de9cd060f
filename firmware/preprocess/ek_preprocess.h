/* ek_preprocess.h - image preprocessing for a model input: a small engine driven by tables that
 * edgekit generates from a preprocessing spec (edgekit.preprocessing.codegen.generate_c).
 *
 * Integer-only at run time (no FPU needed): resize/crop is Pillow's 8-bit resampling algorithm
 * (fixed-point Q22 weights, rounding after the horizontal and after the vertical pass), color
 * conversion is Pillow's luma; the value stage (scale, mean/std, quantization) is one lookup
 * table per output channel computed by edgekit with the reference's own arithmetic. The result
 * is bit-exact with edgekit's Pillow reference for the same decoded pixels.
 *
 * C99, no dynamic allocation, no global state; the caller provides the scratch buffer
 * (cfg->scratch_bytes: a ring of cfg->ring_rows horizontally resampled rows, or one vertically
 * resampled input row when cfg->vertical_first).
 */
#ifndef EK_PREPROCESS_H
#define EK_PREPROCESS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* input pixel formats: interleaved 8-bit rows, no padding between rows */
#define EK_PP_GRAY8 1
#define EK_PP_RGB888 3
#define EK_PP_BGR888 4

#define EK_PP_NHWC 0
#define EK_PP_NCHW 1

#define EK_PP_FLOAT32 0
#define EK_PP_INT8 1
#define EK_PP_UINT8 2

typedef enum {
  EK_PP_OK = 0,
  EK_PP_ERR_ARG = 1,          /* a NULL pointer */
  EK_PP_ERR_INPUT_SIZE = 2,   /* input_bytes < ek_pp_input_bytes(cfg) */
  EK_PP_ERR_OUTPUT_SIZE = 3,  /* output_bytes < cfg->output_bytes */
  EK_PP_ERR_SCRATCH = 4,      /* scratch_bytes < cfg->scratch_bytes */
  EK_PP_ERR_CONFIG = 5        /* inconsistent tables (see ek_pp_check_config) */
} ek_pp_status;

/* One axis of the resize (crop included): output index i reads source indices
 * start[i] .. start[i] + count[i] - 1 with Q22 weights weights[i * ksize + k]. */
typedef struct {
  const int32_t *start;
  const uint16_t *count;
  const int32_t *weights;
  uint16_t ksize;
} ek_pp_axis;

typedef struct {
  uint16_t in_width, in_height;
  uint8_t in_format;           /* EK_PP_GRAY8 / EK_PP_RGB888 / EK_PP_BGR888 */
  uint8_t channels;            /* working (and output) channels: 1 gray, 3 color */
  uint16_t out_width, out_height;
  ek_pp_axis horizontal;       /* out_width entries, indices into the input row */
  ek_pp_axis vertical;         /* out_height entries, indices into input rows; start nondecreasing */
  uint8_t vertical_first;      /* 0: horizontal pass first (ring of ring_rows rows); 1: vertical pass
                                  first into one row of in_width pixels (Pillow 13 does this for some
                                  sizes; the generator reproduces Pillow's choice) */
  uint16_t ring_rows;          /* rows of the scratch ring (>= every vertical count); 1 if vertical_first */
  uint8_t channel_map[3];      /* output channel c takes working (R,G,B or gray) channel channel_map[c] */
  uint8_t layout;              /* EK_PP_NHWC / EK_PP_NCHW */
  uint8_t out_dtype;           /* EK_PP_FLOAT32 / EK_PP_INT8 / EK_PP_UINT8 */
  const void *lut;             /* [channels][256] float / int8_t / uint8_t per output channel */
  uint32_t scratch_bytes;      /* ring_rows * out_width * channels, or in_width * channels if vertical_first */
  uint32_t output_bytes;       /* out_height * out_width * channels * sizeof(element) */
} ek_pp_config;

/* Bytes of one input frame: in_height * in_width * (1 or 3). */
size_t ek_pp_input_bytes(const ek_pp_config *cfg);

/* Validate the tables (bounds, monotonic rows, ring size): EK_PP_OK or EK_PP_ERR_CONFIG. */
ek_pp_status ek_pp_check_config(const ek_pp_config *cfg);

/* Preprocess one frame into the model-input tensor (no batch dimension).
 * input: in_height rows of in_width pixels in cfg->in_format; output: cfg->output_bytes bytes in
 * cfg->layout / cfg->out_dtype; scratch: cfg->scratch_bytes bytes (any alignment). */
ek_pp_status ek_preprocess(const ek_pp_config *cfg, const uint8_t *input, size_t input_bytes,
                           void *output, size_t output_bytes, uint8_t *scratch, size_t scratch_bytes);

#ifdef __cplusplus
}
#endif

#endif
