/* Whole-model quantization: read a GGUF, write it back with its weight matrices
 * converted to a llama.cpp "file type" (Q4_K_M, Q8_0, F16, ...).
 *
 * The type of every tensor is chosen as llama.cpp's llama_tensor_get_type does
 * for the same file type and no importance matrix: 1-D tensors, norms and a few
 * named small tensors keep their type; output.weight (and token_embd.weight when
 * the embeddings are tied) get Q6_K, or Q8_0 when the row length is not a
 * multiple of the block; the _S/_M/_L mixes give attn_v / ffn_down / attn_output
 * more bits in the layers llama.cpp picks; a type whose block does not divide the
 * row length falls back (Q4_K -> Q5_0, Q6_K -> Q8_0, IQ4_XS -> IQ4_NL, ..., F16
 * last). Mixture-of-experts files quantize as in llama.cpp: the 3-D expert
 * tensors blk.N.ffn_{gate,up,down}_exps.weight (ne = [n_in, n_out, n_expert])
 * row by row like any matrix, their layer taken from the name, the router
 * (ffn_gate_inp) kept as it is; MXFP4_MOE makes every 3-D tensor MXFP4 and the
 * other matrices (output and token_embd included) Q8_0. Data is produced with the quant_ref quantizers, byte-identical to
 * ggml_quantize_chunk, so vt and llama-quantize write the same tensor bytes. The
 * key/value metadata is copied, with general.file_type and
 * general.quantization_version set. */
#ifndef VT_QUANT_QUANTIZE_MODEL_H
#define VT_QUANT_QUANTIZE_MODEL_H

#include "base/status.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

#include <stdbool.h>

/* llama.cpp's llama_ftype ids (the value of general.file_type). */
typedef enum quant_ftype {
    QUANT_FTYPE_ALL_F32 = 0,
    QUANT_FTYPE_F16 = 1,
    QUANT_FTYPE_Q4_0 = 2,
    QUANT_FTYPE_Q4_1 = 3,
    QUANT_FTYPE_Q8_0 = 7,
    QUANT_FTYPE_Q5_0 = 8,
    QUANT_FTYPE_Q5_1 = 9,
    QUANT_FTYPE_Q2_K = 10,
    QUANT_FTYPE_Q3_K_S = 11,
    QUANT_FTYPE_Q3_K_M = 12,
    QUANT_FTYPE_Q3_K_L = 13,
    QUANT_FTYPE_Q4_K_S = 14,
    QUANT_FTYPE_Q4_K_M = 15,
    QUANT_FTYPE_Q5_K_S = 16,
    QUANT_FTYPE_Q5_K_M = 17,
    QUANT_FTYPE_Q6_K = 18,
    QUANT_FTYPE_IQ4_NL = 25,
    QUANT_FTYPE_IQ4_XS = 30,
    QUANT_FTYPE_BF16 = 32,
    QUANT_FTYPE_MXFP4_MOE = 38, /* the expert tensors MXFP4, the other matrices Q8_0 */
} quant_ftype;

/* The file type named `name` ("Q4_K_M", "q8_0", "f16", "F32"; case-insensitive,
 * as llama-quantize spells them). False if vt cannot write it. */
bool quant_ftype_parse(const char *name, quant_ftype *out);
/* Canonical name ("Q4_K_M"), or NULL for an id vt does not write. */
const char *quant_ftype_name(quant_ftype ftype);
/* The default tensor type of a file type (Q4_K for Q4_K_M, F16 for F16). */
vt_dtype quant_ftype_default_type(quant_ftype ftype);

/* Choose the type of every tensor of f for `ftype`: types[i] for f->tensors[i]
 * (types has f->n_tensors entries). Reads general.architecture, block_count,
 * head counts and expert_count as llama.cpp does. VT_E_FORMAT when a tensor name
 * or the metadata is not what the rules need (as llama.cpp would fail). */
vt_status quant_model_plan(const gguf_file *f, quant_ftype ftype, vt_dtype *types);

/* The order llama.cpp walks (and writes) tensors in: non-layer tensors first,
 * then by layer number, by name within a layer. order[] gets n_tensors indices. */
void quant_model_order(const gguf_file *f, int64_t *order);

typedef struct quant_model_opts {
    quant_ftype ftype;
    int n_threads;         /* <= 0: online CPUs (at most 64) */
    bool allow_requantize; /* convert already-quantized tensors (via f32) instead of failing */
    bool verbose;          /* one line per tensor on stderr */
} quant_model_opts;

/* Quantize the GGUF at in_path into out_path (written atomically by the gguf
 * writer). The input is mapped read-only; converted tensors are held in memory
 * until the file is written. VT_E_INVALID, before anything is read, when
 * out_path is the input file (outfile_check_not_input). */
vt_status quant_model_file(const char *in_path, const char *out_path, const quant_model_opts *opts);

#endif
