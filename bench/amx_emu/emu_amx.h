/* Software AMX-INT8 tiles, for running gemm_amx.c where the CPU has no AMX. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
typedef struct { uint8_t palette, start_row, reserved[14]; uint16_t colsb[16]; uint8_t rows[16]; } emu_cfg_t;
static emu_cfg_t emu_cfg;
static uint8_t emu_t[8][16][64];
static inline void emu_ldtilecfg(const void *c) { memcpy(&emu_cfg, c, 64); memset(emu_t, 0, sizeof emu_t); }
static inline void emu_sttilecfg(void *c) { memcpy(c, &emu_cfg, 64); }
static inline void emu_release(void) { memset(&emu_cfg, 0, sizeof emu_cfg); }
static inline void emu_loadd(int t, const void *base, long stride) {
    for (int r = 0; r < emu_cfg.rows[t]; r++) memcpy(emu_t[t][r], (const uint8_t *)base + r * stride, emu_cfg.colsb[t]);
}
static inline void emu_stored(int t, void *base, long stride) {
    for (int r = 0; r < emu_cfg.rows[t]; r++) memcpy((uint8_t *)base + r * stride, emu_t[t][r], emu_cfg.colsb[t]);
}
static inline void emu_zero(int t) { memset(emu_t[t], 0, sizeof emu_t[t]); }
static inline void emu_dp(int c, int a, int b, int sa, int sb) {
    const int M = emu_cfg.rows[c], N = emu_cfg.colsb[c] / 4, K = emu_cfg.colsb[a] / 4;
    if (emu_cfg.rows[a] != M || emu_cfg.rows[b] != K || emu_cfg.colsb[b] != emu_cfg.colsb[c]) __builtin_trap();
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            int32_t acc;
            memcpy(&acc, &emu_t[c][m][4 * n], 4);
            for (int k = 0; k < K; k++)
                for (int i = 0; i < 4; i++) {
                    const int x = sa ? (int8_t)emu_t[a][m][4 * k + i] : emu_t[a][m][4 * k + i];
                    const int y = sb ? (int8_t)emu_t[b][k][4 * n + i] : emu_t[b][k][4 * n + i];
                    acc += x * y;
                }
            memcpy(&emu_t[c][m][4 * n], &acc, 4);
        }
}
#undef _tile_loadd
#undef _tile_stream_loadd
#undef _tile_stored
#undef _tile_zero
#undef _tile_dpbssd
#undef _tile_dpbsud
#undef _tile_dpbusd
#undef _tile_dpbuud
#undef _tile_release
#define _tile_loadd(t, b, s) emu_loadd(t, b, s)
#define _tile_stream_loadd(t, b, s) emu_loadd(t, b, s)
#define _tile_stored(t, b, s) emu_stored(t, b, s)
#define _tile_zero(t) emu_zero(t)
#define _tile_dpbssd(c, a, b) emu_dp(c, a, b, 1, 1)
#define _tile_dpbsud(c, a, b) emu_dp(c, a, b, 1, 0)
#define _tile_dpbusd(c, a, b) emu_dp(c, a, b, 0, 1)
#define _tile_dpbuud(c, a, b) emu_dp(c, a, b, 0, 0)
#define _tile_release() emu_release()
