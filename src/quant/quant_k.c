/* K-quants: 256-element super-blocks with sub-block scales (Q2_K .. Q6_K, Q8_K).
 *
 * Layouts (see blocks.h):
 *   Q2_K  16 sub-blocks of 16; scales[j] = 4-bit scale | 4-bit min << 4;
 *         x = d * sc * q - dmin * m, q in 0..3 (2 bits, 4 per byte).
 *   Q3_K  16 sub-blocks of 16; 6-bit signed scales (offset 32) packed into 12
 *         bytes; q = 2 low bits in qs + high bit in hmask, x = d * (sc - 32) * (q - 4).
 *   Q4_K  8 sub-blocks of 32; 6-bit scale and 6-bit min per sub-block packed into
 *         12 bytes (get_scale_min); x = d * sc * q - dmin * m, q in 0..15.
 *   Q5_K  as Q4_K with a fifth bit per element in qh.
 *   Q6_K  16 sub-blocks of 16; int8 scales; q = 4 bits in ql + 2 bits in qh,
 *         x = d * sc * (q - 32).
 *   Q8_K  the activation type: float d, int8 q, bsums = sums of 16 quants.
 * In every type the bit-planes are interleaved in groups of 32 (Q2/Q3/Q6: 128
 * elements share 32 bytes of qs, one 2-bit field each), which is why the loops
 * below walk elements in the order ggml does.
 *
 * The quantizers are those ggml_quantize_chunk runs with no importance matrix
 * (quantize_row_q*_K_ref): per sub-block a least-squares search for scale (and
 * min), then the sub-block scales quantized against the super-block scale and
 * the elements re-quantized with the rounded scales. Same operations, same order,
 * same bytes. */
#include "quant/quant_impl.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#define GROUP_MAX_EPS 1e-15f

/* Q4_K/Q5_K: the 6-bit scale and min of sub-block j from the 12 packed bytes. */
static inline void get_scale_min(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Q3_K: the 16 6-bit scales (still offset by 32) unpacked from 12 bytes. */
static void q3_K_unpack_scales(const uint8_t *packed, int8_t out[16]) {
    uint32_t w[4];
    q3_K_scale_words(packed, w);
    memcpy(out, w, 16);
}

/* Q4_K/Q5_K: the 8 scales (out[0..7]) and 8 mins (out[8..15]). */
static void q4_K_unpack_scales(const uint8_t *packed, uint8_t out[16]) {
    uint32_t w[4];
    q4_K_scale_words(packed, w);
    memcpy(out, w, 16);
}

/* ---- search helpers (the scale/min fitting of ggml's K-quant reference) ---------- */

/* Symmetric fit of n values to integers in [-nmax, nmax-1] (stored + nmax in L),
 * weighted by x^2 (rmse_type 1), trying 18 scales around nmax / max. */
static float make_qx_quants(int n, int nmax, const float *x, int8_t *L, int rmse_type) {
    float amax;
    const float max = quant_signed_absmax(x, n, &amax);
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float iscale = -nmax / max;
    if (rmse_type == 0) {
        for (int i = 0; i < n; ++i) {
            const int l = quant_nearest_int(iscale * x[i]);
            L[i] = (int8_t)(nmax + quant_max_i(-nmax, quant_min_i(nmax - 1, l)));
        }
        return 1 / iscale;
    }
    /* only rmse_type 1 (weights x^2) is used by the unweighted quantizers */
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = quant_nearest_int(iscale * x[i]);
        l = quant_max_i(-nmax, quant_min_i(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = quant_nearest_int(iscale * x[i]);
            l = quant_max_i(-nmax, quant_min_i(nmax - 1, l));
            const float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                const int l = quant_nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + quant_max_i(-nmax, quant_min_i(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Symmetric fit to [-nmax, nmax-1] with greedy per-element refinement (Q3_K). */
static float make_q3_quants(int n, int nmax, const float *x, int8_t *L) {
    float amax;
    const float max = quant_signed_absmax(x, n, &amax);
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    const float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = quant_nearest_int(iscale * x[i]);
        l = quant_max_i(-nmax, quant_min_i(nmax - 1, l));
        L[i] = (int8_t)l;
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; ++itry) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * L[i] * L[i];
                int new_l = quant_nearest_int(x[i] * sl2 / slx);
                new_l = quant_max_i(-nmax, quant_min_i(nmax - 1, new_l));
                if (new_l != L[i]) {
                    slx += w * x[i] * new_l;
                    sl2 += w * new_l * new_l;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; ++i) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Asymmetric fit x ~ scale * L - the_min, L in [0, nmax], minimizing the weighted
 * error (|.| if use_mad) over nstep+1 candidate scales. */
static float make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                              float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep,
                              bool use_mad) {
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        const int l = quant_nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)quant_max_i(0, quant_min_i(nmax, l));
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_error += weights[i] * diff;
    }
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = quant_nearest_int(iscale * (x[i] - min));
            l = quant_max_i(0, quant_min_i(nmax, l));
            Laux[i] = (uint8_t)l;
            const float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                cur_error += weights[i] * diff;
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; ++i) L[i] = Laux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* Pack 256 2-bit values: byte l of each 32-byte group holds elements
 * l, l+32, l+64, l+96 of its 128-element half. */
static void pack_2bit(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < QK_K; j += 128) {
        for (int l = 0; l < 32; ++l) {
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                      (L[j + l + 96] << 6));
        }
    }
}

/* ---- q2_K --------------------------------------------------------------------------- */

void quant_row_q2_K_ref(const float *x, void *dst, int64_t n) {
    block_q2_K *y = dst;
    uint8_t L[QK_K], Laux[16];
    float weights[16], mins[QK_K / 16], scales[QK_K / 16];
    const float q4scale = 15.f;

    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < QK_K / 16; ++j) {
            for (int l = 0; l < 16; ++l) weights[l] = fabsf(x[16 * j + l]);
            scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux,
                                         -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            const float iscale = q4scale / max_scale;
            for (int j = 0; j < QK_K / 16; ++j) {
                y[i].scales[j] = (uint8_t)quant_nearest_int(iscale * scales[j]);
            }
            y[i].d = f32_to_f16(max_scale / q4scale);
        } else {
            for (int j = 0; j < QK_K / 16; ++j) y[i].scales[j] = 0;
            y[i].d = f32_to_f16(0.f);
        }
        if (max_min > 0) {
            const float iscale = q4scale / max_min;
            for (int j = 0; j < QK_K / 16; ++j) {
                const int l = quant_nearest_int(iscale * mins[j]);
                y[i].scales[j] |= (uint8_t)(l << 4);
            }
            y[i].dmin = f32_to_f16(max_min / q4scale);
        } else {
            y[i].dmin = f32_to_f16(0.f);
        }
        for (int j = 0; j < QK_K / 16; ++j) {
            const float d = f16_to_f32(y[i].d) * (y[i].scales[j] & 0xF);
            if (!d) continue;
            const float dm = f16_to_f32(y[i].dmin) * (y[i].scales[j] >> 4);
            for (int ii = 0; ii < 16; ++ii) {
                const int l = quant_nearest_int((x[16 * j + ii] + dm) / d);
                L[16 * j + ii] = (uint8_t)quant_max_i(0, quant_min_i(3, l));
            }
        }
        pack_2bit(L, y[i].qs);
    }
}

void quant_dequant_q2_K_ref(const void *src, float *y, int64_t n) {
    const block_q2_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = f16_to_f32(x[i].d);
        const float min = f16_to_f32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        int is = 0;
        for (int half = 0; half < QK_K; half += 128) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int part = 0; part < 2; part++) {
                    const uint8_t sc = x[i].scales[is++];
                    const float dl = d * (sc & 0xF), ml = min * (sc >> 4);
                    for (int l = 0; l < 16; ++l) {
                        *y++ = dl * ((int8_t)((q[l + 16 * part] >> shift) & 3)) - ml;
                    }
                }
            }
            q += 32;
        }
    }
}

float quant_dot_q2_K_ref(int64_t n, const void *w, const void *xq) {
    const block_q2_K *x = w;
    const block_q8_K *y = xq;
    float sumf = 0;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const uint8_t *q2 = x[i].qs;
        const int8_t *q8 = y[i].qs;
        const uint8_t *sc = x[i].scales;
        int summs = 0;
        for (int j = 0; j < 16; ++j) summs += y[i].bsums[j] * (sc[j] >> 4);
        const float dall = y[i].d * f16_to_f32(x[i].d);
        const float dmin = y[i].d * f16_to_f32(x[i].dmin);
        int isum = 0, is = 0;
        for (int k = 0; k < QK_K / 128; ++k) {
            for (int shift = 0; shift < 8; shift += 2) {
                int d = sc[is++] & 0xF;
                int isuml = 0;
                for (int l = 0; l < 16; ++l) isuml += q8[l] * ((q2[l] >> shift) & 3);
                isum += d * isuml;
                d = sc[is++] & 0xF;
                isuml = 0;
                for (int l = 16; l < 32; ++l) isuml += q8[l] * ((q2[l] >> shift) & 3);
                isum += d * isuml;
                q8 += 32;
            }
            q2 += 32;
        }
        sumf += dall * isum - dmin * summs;
    }
    return sumf;
}

/* ---- q3_K --------------------------------------------------------------------------- */

void quant_row_q3_K_ref(const float *x, void *dst, int64_t n) {
    block_q3_K *y = dst;
    int8_t L[QK_K];
    float scales[QK_K / 16];

    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        for (int j = 0; j < QK_K / 16; ++j) scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
        const float max_scale = quant_signed_absmax(scales, QK_K / 16, NULL);
        memset(y[i].scales, 0, 12);
        if (max_scale) {
            const float iscale = -32.f / max_scale;
            for (int j = 0; j < QK_K / 16; ++j) {
                int8_t l = (int8_t)quant_nearest_int(iscale * scales[j]);
                l = (int8_t)(quant_max_i(-32, quant_min_i(31, l)) + 32);
                if (j < 8) {
                    y[i].scales[j] = l & 0xF;
                } else {
                    y[i].scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
                }
                l >>= 4;
                y[i].scales[j % 4 + 8] |= (uint8_t)(l << (2 * (j / 4)));
            }
            y[i].d = f32_to_f16(1 / iscale);
        } else {
            y[i].d = f32_to_f16(0.f);
        }

        int8_t sc[16];
        q3_K_unpack_scales(y[i].scales, sc);
        for (int j = 0; j < QK_K / 16; ++j) {
            const float d = f16_to_f32(y[i].d) * (sc[j] - 32);
            if (!d) continue;
            for (int ii = 0; ii < 16; ++ii) {
                const int l = quant_nearest_int(x[16 * j + ii] / d);
                L[16 * j + ii] = (int8_t)(quant_max_i(-4, quant_min_i(3, l)) + 4);
            }
        }

        /* high bit of element j goes to hmask[j % 32], bit j / 32 */
        memset(y[i].hmask, 0, QK_K / 8);
        for (int j = 0; j < QK_K; ++j) {
            if (L[j] > 3) {
                y[i].hmask[j % 32] |= (uint8_t)(1 << (j / 32));
                L[j] -= 4;
            }
        }
        pack_2bit((const uint8_t *)L, y[i].qs);
    }
}

void quant_dequant_q3_K_ref(const void *src, float *y, int64_t n) {
    const block_q3_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d_all = f16_to_f32(x[i].d);
        const uint8_t *q = x[i].qs;
        const uint8_t *hm = x[i].hmask;
        int8_t scales[16];
        q3_K_unpack_scales(x[i].scales, scales);
        uint8_t m = 1;
        int is = 0;
        for (int half = 0; half < QK_K; half += 128) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int part = 0; part < 32; part += 16) {
                    const float dl = d_all * (scales[is++] - 32);
                    for (int l = part; l < part + 16; ++l) {
                        *y++ = dl * ((int8_t)((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                    }
                }
                m <<= 1;
            }
            q += 32;
        }
    }
}

/* The integer part of ggml's generic K-quant dots: the 256 quants a times the
 * activation quants q8 in runs of 8 (int16 products), run k weighted by
 * sc[k / runs] into 8 int32 lanes; then sums[l] += d * lane l. */
static void k_aux_dot(const int8_t *a, const int8_t *q8, const int32_t *sc, int runs, float d, float sums[8]) {
    int16_t aux16[8];
    int32_t aux32[8] = {0};
    for (int k = 0; k < QK_K / 8; k++) {
        const int32_t scale = sc[k / runs];
        for (int l = 0; l < 8; ++l) aux16[l] = (int16_t)(q8[l] * a[l]);
        for (int l = 0; l < 8; ++l) aux32[l] += scale * aux16[l];
        q8 += 8;
        a += 8;
    }
    for (int l = 0; l < 8; ++l) sums[l] += d * aux32[l];
}

float quant_dot_q3_K_ref(int64_t n, const void *w, const void *xq) {
    const block_q3_K *x = w;
    const block_q8_K *y = xq;
    int8_t aux8[QK_K];
    float sums[8] = {0};
    int8_t scales[16];

    for (int64_t i = 0; i < n / QK_K; ++i) {
        const uint8_t *q3 = x[i].qs;
        const uint8_t *hm = x[i].hmask;
        int8_t *a = aux8;
        uint8_t m = 1;
        for (int j = 0; j < QK_K; j += 128) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int l = 0; l < 32; ++l) {
                    a[l] = (int8_t)(((q3[l] >> shift) & 3) - (hm[l] & m ? 0 : 4));
                }
                a += 32;
                m <<= 1;
            }
            q3 += 32;
        }
        q3_K_unpack_scales(x[i].scales, scales);
        int32_t sc[16];
        for (int j = 0; j < 16; ++j) sc[j] = scales[j] - 32;
        k_aux_dot(aux8, y[i].qs, sc, 2, f16_to_f32(x[i].d) * y[i].d, sums);
    }
    float sumf = 0;
    for (int l = 0; l < 8; ++l) sumf += sums[l];
    return sumf;
}

/* ---- q4_K, q5_K ----------------------------------------------------------------------- */

/* Fit 8 sub-blocks of 32 with make_qkx2_quants and pack the 6-bit scales and
 * mins; shared by Q4_K (nmax 15) and Q5_K (nmax 31). L receives the re-quantized
 * values against the rounded scales. */
static void q45_K_fit(const float *x, int nmax, float rmin, float rdelta, int nstep,
                      uint8_t *packed_scales, vt_f16 *d_out, vt_f16 *dmin_out, uint8_t *L) {
    uint8_t Laux[32];
    float weights[32], mins[QK_K / 32], scales[QK_K / 32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 32; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux,
                                     rmin, rdelta, nstep, false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < QK_K / 32; ++j) {
        uint8_t ls = (uint8_t)quant_nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)quant_nearest_int(inv_min * mins[j]);
        ls = ls < 63 ? ls : 63;
        lm = lm < 63 ? lm : 63;
        if (j < 4) {
            packed_scales[j] = ls;
            packed_scales[j + 4] = lm;
        } else {
            packed_scales[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            packed_scales[j - 4] |= (uint8_t)((ls >> 4) << 6);
            packed_scales[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d_out = f32_to_f16(max_scale / 63.f);
    *dmin_out = f32_to_f16(max_min / 63.f);

    for (int j = 0; j < QK_K / 32; ++j) {
        uint8_t sc, m;
        get_scale_min(j, packed_scales, &sc, &m);
        const float d = f16_to_f32(*d_out) * sc;
        if (!d) continue;
        const float dm = f16_to_f32(*dmin_out) * m;
        for (int ii = 0; ii < 32; ++ii) {
            const int l = quant_nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = (uint8_t)quant_max_i(0, quant_min_i(nmax, l));
        }
    }
}

void quant_row_q4_K_ref(const float *x, void *dst, int64_t n) {
    block_q4_K *y = dst;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        q45_K_fit(x, 15, -1.f, 0.1f, 20, y[i].scales, &y[i].d, &y[i].dmin, L);
        uint8_t *q = y[i].qs;
        for (int j = 0; j < QK_K; j += 64) {
            for (int l = 0; l < 32; ++l) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
            q += 32;
        }
    }
}

void quant_dequant_q4_K_ref(const void *src, float *y, int64_t n) {
    const block_q4_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *q = x[i].qs;
        const float d = f16_to_f32(x[i].d);
        const float min = f16_to_f32(x[i].dmin);
        uint8_t sc, m;
        for (int is = 0; is < QK_K / 32; is += 2) {
            get_scale_min(is, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            get_scale_min(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
            q += 32;
        }
    }
}

/* The scale/min part shared by the Q4_K and Q5_K dots; aux8 holds the 256
 * unsigned quants. Accumulates into sums[8] and *sumf as ggml's generic does. */
static void q45_K_dot_block(const uint8_t *packed_scales, vt_f16 xd, vt_f16 xdmin,
                            const block_q8_K *y, const int8_t *aux8, float sums[8], float *sumf) {
    uint8_t sm[16];
    q4_K_unpack_scales(packed_scales, sm);
    const uint8_t *mins = sm + 8;
    int sumi = 0;
    for (int j = 0; j < QK_K / 16; ++j) sumi += y->bsums[j] * mins[j / 2];
    int32_t sc[8];
    for (int j = 0; j < 8; ++j) sc[j] = sm[j];
    k_aux_dot(aux8, y->qs, sc, 4, f16_to_f32(xd) * y->d, sums);
    const float dmin = f16_to_f32(xdmin) * y->d;
    *sumf -= dmin * sumi;
}

float quant_dot_q4_K_ref(int64_t n, const void *w, const void *xq) {
    const block_q4_K *x = w;
    const block_q8_K *y = xq;
    int8_t aux8[QK_K];
    float sums[8] = {0};
    float sumf = 0;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const uint8_t *q4 = x[i].qs;
        int8_t *a = aux8;
        for (int j = 0; j < QK_K / 64; ++j) {
            for (int l = 0; l < 32; ++l) a[l] = (int8_t)(q4[l] & 0xF);
            a += 32;
            for (int l = 0; l < 32; ++l) a[l] = (int8_t)(q4[l] >> 4);
            a += 32;
            q4 += 32;
        }
        q45_K_dot_block(x[i].scales, x[i].d, x[i].dmin, &y[i], aux8, sums, &sumf);
    }
    for (int l = 0; l < 8; ++l) sumf += sums[l];
    return sumf;
}

void quant_row_q5_K_ref(const float *x, void *dst, int64_t n) {
    block_q5_K *y = dst;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        q45_K_fit(x, 31, -0.5f, 0.1f, 15, y[i].scales, &y[i].d, &y[i].dmin, L);
        uint8_t *qh = y[i].qh;
        uint8_t *ql = y[i].qs;
        memset(qh, 0, QK_K / 8);
        uint8_t m1 = 1, m2 = 2;
        for (int base = 0; base < QK_K; base += 64) {
            for (int j = 0; j < 32; ++j) {
                int l1 = L[base + j];
                if (l1 > 15) {
                    l1 -= 16;
                    qh[j] |= m1;
                }
                int l2 = L[base + j + 32];
                if (l2 > 15) {
                    l2 -= 16;
                    qh[j] |= m2;
                }
                ql[j] = (uint8_t)(l1 | (l2 << 4));
            }
            m1 <<= 2;
            m2 <<= 2;
            ql += 32;
        }
    }
}

void quant_dequant_q5_K_ref(const void *src, float *y, int64_t n) {
    const block_q5_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *ql = x[i].qs;
        const uint8_t *qh = x[i].qh;
        const float d = f16_to_f32(x[i].d);
        const float min = f16_to_f32(x[i].dmin);
        uint8_t sc, m;
        uint8_t u1 = 1, u2 = 2;
        for (int is = 0; is < QK_K / 32; is += 2) {
            get_scale_min(is, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            get_scale_min(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
            ql += 32;
            u1 <<= 2;
            u2 <<= 2;
        }
    }
}

float quant_dot_q5_K_ref(int64_t n, const void *w, const void *xq) {
    const block_q5_K *x = w;
    const block_q8_K *y = xq;
    int8_t aux8[QK_K];
    float sums[8] = {0};
    float sumf = 0;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const uint8_t *q4 = x[i].qs;
        const uint8_t *hm = x[i].qh;
        int8_t *a = aux8;
        uint8_t m = 1;
        for (int j = 0; j < QK_K / 64; ++j) {
            for (int l = 0; l < 32; ++l) a[l] = (int8_t)((q4[l] & 0xF) + (hm[l] & m ? 16 : 0));
            a += 32;
            m <<= 1;
            for (int l = 0; l < 32; ++l) a[l] = (int8_t)((q4[l] >> 4) + (hm[l] & m ? 16 : 0));
            a += 32;
            m <<= 1;
            q4 += 32;
        }
        q45_K_dot_block(x[i].scales, x[i].d, x[i].dmin, &y[i], aux8, sums, &sumf);
    }
    for (int l = 0; l < 8; ++l) sumf += sums[l];
    return sumf;
}

/* ---- q6_K ---------------------------------------------------------------------------- */

void quant_row_q6_K_ref(const float *x, void *dst, int64_t n) {
    block_q6_K *y = dst;
    int8_t L[QK_K];
    float scales[QK_K / 16];

    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        for (int ib = 0; ib < QK_K / 16; ++ib) scales[ib] = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, 1);
        float max_abs_scale;
        const float max_scale = quant_signed_absmax(scales, QK_K / 16, &max_abs_scale);
        if (max_abs_scale < GROUP_MAX_EPS) {
            memset(&y[i], 0, sizeof(block_q6_K));
            y[i].d = f32_to_f16(0.f);
            continue;
        }
        const float iscale = -128.f / max_scale;
        y[i].d = f32_to_f16(1 / iscale);
        for (int ib = 0; ib < QK_K / 16; ++ib) {
            y[i].scales[ib] = (int8_t)quant_min_i(127, quant_nearest_int(iscale * scales[ib]));
        }
        for (int j = 0; j < QK_K / 16; ++j) {
            const float d = f16_to_f32(y[i].d) * y[i].scales[j];
            if (!d) continue;
            for (int ii = 0; ii < 16; ++ii) {
                const int l = quant_nearest_int(x[16 * j + ii] / d);
                L[16 * j + ii] = (int8_t)(quant_max_i(-32, quant_min_i(31, l)) + 32);
            }
        }
        uint8_t *ql = y[i].ql;
        uint8_t *qh = y[i].qh;
        for (int j = 0; j < QK_K; j += 128) {
            for (int l = 0; l < 32; ++l) {
                const uint8_t q1 = L[j + l] & 0xF;
                const uint8_t q2 = L[j + l + 32] & 0xF;
                const uint8_t q3 = L[j + l + 64] & 0xF;
                const uint8_t q4 = L[j + l + 96] & 0xF;
                ql[l] = (uint8_t)(q1 | (q3 << 4));
                ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
                qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                  ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
            }
            ql += 64;
            qh += 32;
        }
    }
}

void quant_dequant_q6_K_ref(const void *src, float *y, int64_t n) {
    const block_q6_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = f16_to_f32(x[i].d);
        const uint8_t *ql = x[i].ql;
        const uint8_t *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int half = 0; half < QK_K; half += 128) {
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                const int8_t q1 = (int8_t)((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int8_t q2 = (int8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int8_t q3 = (int8_t)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int8_t q4 = (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * sc[is] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
            y += 128;
            ql += 64;
            qh += 32;
            sc += 8;
        }
    }
}

float quant_dot_q6_K_ref(int64_t n, const void *w, const void *xq) {
    const block_q6_K *x = w;
    const block_q8_K *y = xq;
    int8_t aux8[QK_K];
    float sums[8] = {0};
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const uint8_t *q4 = x[i].ql;
        const uint8_t *qh = x[i].qh;
        int8_t *a = aux8;
        for (int j = 0; j < QK_K; j += 128) {
            for (int l = 0; l < 32; ++l) {
                a[l] = (int8_t)((q4[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                a[l + 32] = (int8_t)((q4[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                a[l + 64] = (int8_t)((q4[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                a[l + 96] = (int8_t)((q4[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            }
            a += 128;
            q4 += 64;
            qh += 32;
        }
        int32_t sc[16];
        for (int j = 0; j < 16; ++j) sc[j] = x[i].scales[j];
        k_aux_dot(aux8, y[i].qs, sc, 2, f16_to_f32(x[i].d) * y[i].d, sums);
    }
    float sumf = 0;
    for (int l = 0; l < 8; ++l) sumf += sums[l];
    return sumf;
}

/* ---- q8_K ---------------------------------------------------------------------------- */

void quant_row_q8_K_ref(const float *x, void *dst, int64_t n) {
    block_q8_K *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float amax;
        const float max = quant_signed_absmax(x, QK_K, &amax);
        if (!amax) {
            /* ggml leaves bsums untouched here; vt zeroes them (they are sums of zeros) */
            y[i].d = 0;
            memset(y[i].qs, 0, QK_K);
            memset(y[i].bsums, 0, sizeof y[i].bsums);
            continue;
        }
        /* -127 rather than -128, as ggml: q stays in [-127, 127] */
        const float iscale = -127.f / max;
        for (int j = 0; j < QK_K; ++j) {
            y[i].qs[j] = (int8_t)quant_min_i(127, quant_nearest_int(iscale * x[j]));
        }
        for (int j = 0; j < QK_K / 16; ++j) {
            int sum = 0;
            for (int ii = 0; ii < 16; ++ii) sum += y[i].qs[j * 16 + ii];
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
    }
}

void quant_dequant_q8_K_ref(const void *src, float *y, int64_t n) {
    const block_q8_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        for (int j = 0; j < QK_K; ++j) *y++ = x[i].d * x[i].qs[j];
    }
}
