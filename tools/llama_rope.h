/* vt_rope_params into llama.cpp's context parameters, for the two places that
 * give llama.cpp the same rope overrides as vt: vt bench (tools/llama_dl.c, the
 * dlopen'd libraries) and the parity tests (tests/llama/llama_ref.c, linked).
 * vt_rope_params mirrors llama_context_params' rope and YaRN fields, with
 * enum llama_rope_scaling_type's values; NULL leaves cp as it is (the file's
 * rope). Include after llama.h and vt.h. */
#ifndef VT_TOOLS_LLAMA_ROPE_H
#define VT_TOOLS_LLAMA_ROPE_H

static inline void llama_cparams_rope(struct llama_context_params *cp, const vt_rope_params *rope) {
    if (!rope) return;
    cp->rope_scaling_type = (enum llama_rope_scaling_type)rope->scaling_type;
    cp->rope_freq_base = rope->freq_base;
    cp->rope_freq_scale = rope->freq_scale;
    cp->yarn_orig_ctx = (uint32_t)rope->yarn_orig_ctx;
    cp->yarn_ext_factor = rope->yarn_ext_factor;
    cp->yarn_attn_factor = rope->yarn_attn_factor;
    cp->yarn_beta_fast = rope->yarn_beta_fast;
    cp->yarn_beta_slow = rope->yarn_beta_slow;
}

#endif
