/* vt_context (vt.h) seen from inside: its KV cache, for tests that check what
 * the cache holds (a sliding-window group's pool and how much of it is in use). */
#ifndef VT_ENGINE_CONTEXT_H
#define VT_ENGINE_CONTEXT_H

#include "kvcache/kv_cache.h"
#include "vt.h"

/* The cache of c (owned by c, valid until vt_context_free). */
const kv_cache *context_kv(const vt_context *c);

#endif
