/* Exhaustive check of the LOGISTIC kernel's exp against glibc expf over every non-NaN float.
 *
 * LiteRT (BUILTIN_REF) fills LOGISTIC's 256-entry table with glibc expf; our kernel uses lut_expf
 * (double arithmetic only, same bits on every target). This counts the floats where the two
 * disagree and, what matters, where the table entry round(256 / (1 + exp(-x))) differs.
 * Build and run (2.5-5.5 min on 2 cores):
 *   gcc -O2 -ffp-contract=off -Ifirmware/runtime/include -Ifirmware/runtime/src tests/benchmarks/check_logistic_expf_exhaustive.c \
 *       firmware/runtime/src/ek_util.c -lm -o /tmp/expf_check
 *   /tmp/expf_check      # expect lut_diff=0
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../../firmware/runtime/src/kernels/logistic.c" /* for the static lut_expf */

#define my_expf lut_expf

static int lut_q(float v, float (*e)(float)) {
  float t = 1.0f / (1.0f + e(-v));
  float r = roundf(t * 256.0f);
  return (int)r;
}

int main(int argc, char **argv) {
  uint64_t diff_exp = 0, diff_cr = 0, diff_lut = 0, glibc_not_cr = 0, n = 0;
  for (uint64_t u = 0; u <= 0xffffffffull; ++u) {
    uint32_t b = (uint32_t)u; float x; memcpy(&x, &b, 4);
    if (x != x) continue;
    ++n;
    float g = expf(x), m = my_expf(x);
    float c = (float)exp((double)x);
    if (memcmp(&g, &m, 4)) diff_exp++;
    if (memcmp(&c, &m, 4)) diff_cr++;
    if (memcmp(&c, &g, 4)) glibc_not_cr++;
    if (lut_q(x, expf) != lut_q(x, my_expf)) { if (diff_lut < 20) printf("lut diff at %a\n", x); diff_lut++; }
  }
  printf("n=%llu expf_diff=%llu mine_vs_doubleexp=%llu glibc_vs_doubleexp=%llu lut_diff=%llu\n",
    (unsigned long long)n, (unsigned long long)diff_exp, (unsigned long long)diff_cr, (unsigned long long)glibc_not_cr, (unsigned long long)diff_lut);
  return 0;
}
