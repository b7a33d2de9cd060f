/* edgekit on-device input pipeline (issue 15): the host sends the raw camera frame; the firmware runs
 *   preprocess  the generated integer preprocessing (firmware/preprocess, tables from the spec): RGB565
 *               unpacking, colour conversion, resize/crop from the sensor frame, quantization to the
 *               model's input scale/zero-point
 *   inference   edgekit_model_invoke (the generated model API)
 *   postprocess top-k on the int8 output (value descending, ties: lower class index first)
 * each phase between ek_marker_op_begin/end (the QEMU plugin counts instructions per phase; DWT cycles per
 * phase on real cores go to the RESULT's per-op cycle slots), the whole between ek_marker_infer_begin/end.
 * The device's input becomes the frame (uint8 [H, W, bytes per pixel]) and its output the top-k
 * (int32 [K, 2]: class index, int8 value).
 *
 * Generated inputs: ek_pipeline_config.h (EK_PIPE_FRAME_FORMAT / _WIDTH / _HEIGHT, EK_PIPE_TOPK) and the
 * preprocessing tables ek_pp_pipeline.h/.c (symbol ek_pp_pipeline). main.c calls ek_pipeline_attach when
 * ek_config.h defines EK_PIPELINE.
 */
#ifndef EK_PIPELINE_H
#define EK_PIPELINE_H

#include "ek_serve.h"

#ifdef __cplusplus
extern "C" {
#endif

#define EK_PIPE_GRAY8 0
#define EK_PIPE_RGB888 1
#define EK_PIPE_RGB565 2

/* Replaces app's input/output/infer with the pipeline's, over the model API (edgekit_model.h). */
void ek_pipeline_attach(ek_app *app);

#ifdef __cplusplus
}
#endif
#endif
