/* Pre-tokenizer splitting. See pretok.h.
 *
 * Two kinds of step:
 *  - whole-pattern splitters for the GPT-2, Llama-3, Qwen2 and Qwen3.5 patterns,
 *    which behave as llama.cpp's hand-written versions of those regexes do
 *    (including their treatment of a piece's end: a lone trailing space is its own
 *    word, lookahead does not see past the piece), and for o200k's, which
 *    behaves as std::regex over llama.cpp's category-collapsed text does;
 *  - single patterns ("\s?\p{L}+", "[\r\n]", ...) that llama.cpp hands to std::regex:
 *    emulated with a find-leftmost-match function per pattern, which is what
 *    std::regex_iterator over ECMAScript gives for these patterns (none can match
 *    empty, none needs backtracking beyond an optional first character).
 *
 * Character classes follow llama.cpp's std::regex input: \p{..} by the codepoint's
 * category, \s by Unicode White_Space, and in the patterns with explicit non-ASCII
 * characters a non-ASCII whitespace codepoint counts as U+000B (llama.cpp replaces
 * it so), so e.g. U+3000 is \s but not in the class [　-。]. */
#include "tokenizer/pretok.h"

#include "tokenizer/unicode.h"

#include <stdlib.h>
#include <string.h>

#define F_SPACE 0x100          /* White_Space, next to the UNI_* category bit */
#define OUT_OF_RANGE 0xFFFFFFFFu

typedef enum step_kind {
    STEP_GPT2,
    STEP_LLAMA3,
    STEP_QWEN2,
    STEP_QWEN35,
    STEP_NEWLINES,
    STEP_O200K,
    STEP_EACH,        /* X        : every matching codepoint alone */
    STEP_RUN,         /* X+       */
    STEP_SPACE_RUN,   /* \s?X+    */
    STEP_DIGITS3,     /* [0-9][0-9][0-9] */
    STEP_TRAILING_WS, /* \s+$     */
    STEP_END,
} step_kind;

typedef enum cls {
    CLS_NONE,
    CLS_CRLF,           /* [\r\n] */
    CLS_NUMBER,         /* \p{N} */
    CLS_LETTER,         /* \p{L} */
    CLS_PUNCT,          /* \p{P} */
    CLS_PUNCT_FALCON,   /* [\p{P}\$\+<=>\^~\|`] */
    CLS_PUNCT_DEFAULT,  /* [\p{P}\$\+<=>\^~\|] */
    CLS_CJK,            /* [一-龥ࠀ-一가-퟿] */
    CLS_DSLLM_LETTER,   /* deepseek-llm's explicit letter class */
    CLS_DSLLM_PUNCT,    /* [!-/:-~！-／：-～‘-‟　-。] */
} cls;

typedef struct step {
    step_kind kind;
    cls cls;
} step;

typedef struct cp_range {
    uint32_t lo, hi;
} cp_range;

/* The character classes of deepseek-llm's pre-tokenizer (its tokenizer.json,
 * as llama.cpp adapts it), as inclusive codepoint ranges. */
static const cp_range dsllm_letter[] = {
    {0x41, 0x5A}, {0x61, 0x7A}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA},
    {0x1BC, 0x1BF}, {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377},
    {0x37B, 0x37D}, {0x37F, 0x37F}, {0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C}, {0x38E, 0x3A1},
    {0x3A3, 0x3F5}, {0x3F7, 0x481}, {0x48A, 0x52F}, {0x531, 0x556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5},
    {0x13F8, 0x13FD}, {0x1C90, 0x1CBA}, {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77},
    {0x1D79, 0x1D9A}, {0x1E00, 0x1F15}, {0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D},
    {0x1F50, 0x1F57}, {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D},
    {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC},
    {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC},
    {0x2102, 0x2102}, {0x2107, 0x2107}, {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D},
    {0x2124, 0x2124}, {0x2126, 0x2126}, {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134},
    {0x2139, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149}, {0x214E, 0x214E}, {0x2183, 0x2184},
    {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3}, {0xA640, 0xA66D},
    {0xA680, 0xA69B}, {0xA722, 0xA76F}, {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF},
    {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F},
    {0x104B0, 0x104D3}, {0x104D8, 0x104FB}, {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2},
    {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};
static const cp_range dsllm_punct[] = {
    {0x21, 0x2F}, {0x3A, 0x7E}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E}, {0x2018, 0x201F}, {0x3000, 0x3002},
};
static const cp_range cjk[] = {{0x4E00, 0x9FA5}, {0x800, 0x4E00}, {0xAC00, 0xD7FF}};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static bool in_ranges(uint32_t cp, const cp_range *r, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (cp >= r[i].lo && cp <= r[i].hi) return true;
    return false;
}

/* ---- word list ------------------------------------------------------------ */

static bool words_push(pretok_words *w, size_t len) {
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        uint32_t *p = realloc(w->len, cap * sizeof *p);
        if (!p) return false;
        w->len = p;
        w->cap = cap;
    }
    w->len[w->n++] = (uint32_t)len;
    return true;
}

/* One piece being split: codepoints and flags of the whole text, the piece's
 * [ini, end), and the output. */
typedef struct span {
    const uint32_t *cps;
    const uint16_t *fl;
    size_t ini, end;
    size_t prev; /* end of the last emitted word */
    pretok_words *out;
    bool oom;
} span;

static inline uint32_t cp_at(const span *s, size_t p) {
    return p >= s->ini && p < s->end ? s->cps[p] : OUT_OF_RANGE;
}

static inline uint16_t fl_at(const span *s, size_t p) {
    return p >= s->ini && p < s->end ? s->fl[p] : 0;
}

/* Emit the word [prev, end) if non-empty; returns its length. */
static size_t emit(span *s, size_t end) {
    size_t len = end - s->prev;
    if (len > 0 && !words_push(s->out, len)) s->oom = true;
    s->prev = end;
    return len;
}

static inline uint32_t ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* 's 't 're 've 'm 'll 'd at pos (the quote). Returns the match length or 0. */
static size_t contraction(const span *s, size_t pos, bool fold) {
    if (cp_at(s, pos) != '\'' || pos + 1 >= s->end) return 0;
    uint32_t a = cp_at(s, pos + 1);
    if (fold) a = ascii_lower(a);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (pos + 2 >= s->end) return 0;
    uint32_t b = cp_at(s, pos + 2);
    if (fold) b = ascii_lower(b);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

/* Whitespace tail shared by the patterns: \s+(?!\S) | \s+, with \s*[\r\n]+ first
 * when crlf. Returns false if pos is not whitespace. */
static bool split_spaces(span *s, size_t *pos, bool crlf) {
    size_t p = *pos, n = 0, last_crlf = 0;
    while (fl_at(s, p + n) & F_SPACE) {
        uint32_t c = cp_at(s, p + n);
        if (c == '\r' || c == '\n') last_crlf = p + n + 1;
        n++;
    }
    if (crlf && last_crlf > 0) {
        *pos = last_crlf;
    } else if (n > 1 && cp_at(s, p + n) != OUT_OF_RANGE) {
        *pos = p + n - 1; /* leave the last space to prefix the next word */
    } else if (n > 0) {
        *pos = p + n;
    } else {
        return false;
    }
    emit(s, *pos);
    return true;
}

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static void split_gpt2(span *s) {
    const uint16_t lnw = UNI_LETTER | UNI_NUMBER | F_SPACE;
    for (size_t pos = s->ini; pos < s->end && !s->oom;) {
        uint32_t cp = cp_at(s, pos);
        size_t k = contraction(s, pos, false);
        if (k) {
            pos += emit(s, pos + k);
            continue;
        }
        uint16_t f2 = cp == ' ' ? fl_at(s, pos + 1) : fl_at(s, pos);
        if (f2 & UNI_LETTER) {
            pos += cp == ' ';
            while (f2 & UNI_LETTER) f2 = fl_at(s, ++pos);
            emit(s, pos);
            continue;
        }
        if (f2 & UNI_NUMBER) {
            pos += cp == ' ';
            while (f2 & UNI_NUMBER) f2 = fl_at(s, ++pos);
            emit(s, pos);
            continue;
        }
        if (!(f2 & lnw) && f2) {
            pos += cp == ' ';
            while (!(f2 & lnw) && f2) f2 = fl_at(s, ++pos);
            emit(s, pos);
            continue;
        }
        if (split_spaces(s, &pos, false)) continue;
        emit(s, ++pos);
    }
}

/* Llama-3 family:
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?L+|\p{N}{1,max_digits}|
 *    ?[^\s L \p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * with L = \p{L} (llama3, qwen2) or [\p{L}\p{M}] (qwen35); max_digits 3 (llama3)
 * or 1 (qwen2, qwen35). */
static void split_llama3_like(span *s, int max_digits, bool marks) {
    const uint16_t word = marks ? (UNI_LETTER | UNI_MARK) : UNI_LETTER;
    const uint16_t stop = word | UNI_NUMBER | F_SPACE;
    for (size_t pos = s->ini; pos < s->end && !s->oom;) {
        uint32_t cp = cp_at(s, pos);
        uint16_t f = fl_at(s, pos);
        size_t k = contraction(s, pos, true);
        if (k) {
            pos += emit(s, pos + k);
            continue;
        }
        if (!(cp == '\r' || cp == '\n' || (f & UNI_NUMBER))) {
            if ((f & word) || (fl_at(s, pos + 1) & word)) {
                pos++;
                while (fl_at(s, pos) & word) pos++;
                emit(s, pos);
                continue;
            }
        }
        if (f & UNI_NUMBER) {
            size_t start = pos;
            while (fl_at(s, pos) & UNI_NUMBER) {
                if ((int)(++pos - start) >= max_digits) {
                    emit(s, pos);
                    start = pos;
                }
            }
            emit(s, pos);
            continue;
        }
        uint16_t f2 = cp == ' ' ? fl_at(s, pos + 1) : f;
        if (!(f2 & stop) && f) {
            pos += cp == ' ';
            while (!(f2 & stop) && f2) f2 = fl_at(s, ++pos);
            uint32_t c2 = cp_at(s, pos);
            while (c2 == '\r' || c2 == '\n') c2 = cp_at(s, ++pos);
            emit(s, pos);
            continue;
        }
        if (split_spaces(s, &pos, true)) continue;
        emit(s, ++pos);
    }
}

/* o200k (gpt-4o), as llama.cpp runs it:
 *   [^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+C?
 *  |[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*C?
 *  |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * with C = (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]). llama.cpp has
 * no hand-written splitter for it: std::regex runs it over the text with every
 * non-ASCII codepoint collapsed to one byte per category, so an "upper" letter
 * ((?=\p{L})[^a-z]) is A-Z or any non-ASCII letter and a "lower" one
 * ((?=\p{L})[^A-Z]) is a-z or any non-ASCII letter, whatever its case, and \p{M}
 * is no letter. tokenizer.json's regex ([\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*
 * [\p{Ll}\p{Lm}\p{Lo}\p{M}]+...) splits otherwise: "ÉCOLE" is one word there and
 * "É" + "COLE" here, "e" + U+0301 one word there and two here. vt follows
 * llama.cpp. */
static inline bool o200k_upper(const span *s, size_t p) {
    return (fl_at(s, p) & UNI_LETTER) && !(cp_at(s, p) - 'a' < 26);
}

static inline bool o200k_lower(const span *s, size_t p) {
    return (fl_at(s, p) & UNI_LETTER) && !(cp_at(s, p) - 'A' < 26);
}

/* The end of the letters of a word that starts with the letter at pos, as the
 * backtracking matcher finds it: the first alternative (upper* lower+) takes the
 * whole upper run when a-z follows it; else it backs up to the run's last
 * non-ASCII letter (both upper and lower) and ends after it; with none, the
 * second alternative (upper+ lower*) takes the run of A-Z alone. */
static size_t o200k_letters(const span *s, size_t pos) {
    size_t u = pos;
    while (o200k_upper(s, u)) u++;
    if (o200k_lower(s, u)) {
        while (o200k_lower(s, u)) u++;
        return u;
    }
    size_t j = u;
    while (j > pos && !o200k_lower(s, j - 1)) j--;
    return j > pos ? j : u;
}

/* [\r\n]: the ends of the \s*[\r\n]+ and ?[^\s\p{L}\p{N}]+[\r\n/]* alternatives */
static inline bool is_crlf(uint32_t c) { return c == '\r' || c == '\n'; }

static void split_o200k(span *s) {
    const uint16_t stop = UNI_LETTER | UNI_NUMBER | F_SPACE;
    for (size_t pos = s->ini; pos < s->end && !s->oom;) {
        uint32_t cp = cp_at(s, pos);
        uint16_t f = fl_at(s, pos);
        /* [^\r\n\p{L}\p{N}]? then letters, then an optional contraction */
        size_t w = pos + !((f & (UNI_LETTER | UNI_NUMBER)) || is_crlf(cp));
        if (fl_at(s, w) & UNI_LETTER) {
            size_t e = o200k_letters(s, w);
            e += contraction(s, e, true);
            emit(s, e);
            pos = e;
            continue;
        }
        if (f & UNI_NUMBER) {
            size_t e = pos;
            while (e < pos + 3 && (fl_at(s, e) & UNI_NUMBER)) e++;
            emit(s, e);
            pos = e;
            continue;
        }
        /*  ?[^\s\p{L}\p{N}]+[\r\n/]* */
        size_t e = pos + (cp == ' ');
        if (fl_at(s, e) && !(fl_at(s, e) & stop)) {
            while (fl_at(s, e) && !(fl_at(s, e) & stop)) e++;
            while (is_crlf(cp_at(s, e)) || cp_at(s, e) == '/') e++;
            emit(s, e);
            pos = e;
            continue;
        }
        if (split_spaces(s, &pos, true)) continue;
        emit(s, ++pos);
    }
}

/* [^\n]+|[\n]+ */
static void split_newlines(span *s) {
    size_t pos = s->ini;
    while (pos < s->end && !s->oom) {
        bool nl = s->cps[pos] == '\n';
        while (pos < s->end && (s->cps[pos] == '\n') == nl) pos++;
        emit(s, pos);
    }
}

/* ---- single patterns, leftmost-first ---------------------------------------- */

static bool in_class(cls c, uint32_t cp, uint16_t f) {
    /* the classes with explicit non-ASCII members see non-ASCII spaces as U+000B */
    uint32_t wcp = (cp >= 0x80 && (f & F_SPACE)) ? 0x0B : cp;
    switch (c) {
    case CLS_CRLF: return cp == '\r' || cp == '\n';
    case CLS_NUMBER: return f & UNI_NUMBER;
    case CLS_LETTER: return f & UNI_LETTER;
    case CLS_PUNCT: return f & UNI_PUNCT;
    case CLS_PUNCT_FALCON:
        return (f & UNI_PUNCT) || (cp < 0x80 && cp && strchr("$+<=>^~|`", (int)cp));
    case CLS_PUNCT_DEFAULT:
        return (f & UNI_PUNCT) || (cp < 0x80 && cp && strchr("$+<=>^~|", (int)cp));
    case CLS_CJK: return in_ranges(wcp, cjk, N_OF(cjk));
    case CLS_DSLLM_LETTER: return in_ranges(wcp, dsllm_letter, N_OF(dsllm_letter));
    case CLS_DSLLM_PUNCT: return in_ranges(wcp, dsllm_punct, N_OF(dsllm_punct));
    case CLS_NONE: break;
    }
    return false;
}

static inline bool cls_at(const span *s, cls c, size_t p) {
    return p < s->end && in_class(c, s->cps[p], s->fl[p]);
}

/* The leftmost match of the step's pattern in [from, end): [*ms, *me). */
static bool find_match(const span *s, const step *st, size_t from, size_t *ms, size_t *me) {
    const size_t end = s->end;
    switch (st->kind) {
    case STEP_EACH:
        for (size_t p = from; p < end; p++) {
            if (cls_at(s, st->cls, p)) {
                *ms = p;
                *me = p + 1;
                return true;
            }
        }
        return false;
    case STEP_RUN:
    case STEP_SPACE_RUN:
        for (size_t p = from; p < end; p++) {
            size_t q;
            if (st->kind == STEP_SPACE_RUN && (s->fl[p] & F_SPACE) && cls_at(s, st->cls, p + 1)) {
                q = p + 1; /* \s? takes the space when letters follow */
            } else if (cls_at(s, st->cls, p)) {
                q = p;
            } else {
                continue;
            }
            while (cls_at(s, st->cls, q)) q++;
            *ms = p;
            *me = q;
            return true;
        }
        return false;
    case STEP_DIGITS3:
        for (size_t p = from; p + 3 <= end; p++) {
            if (s->cps[p] - '0' < 10 && s->cps[p + 1] - '0' < 10 && s->cps[p + 2] - '0' < 10) {
                *ms = p;
                *me = p + 3;
                return true;
            }
        }
        return false;
    case STEP_TRAILING_WS: {
        size_t p = end;
        while (p > from && (s->fl[p - 1] & F_SPACE)) p--;
        if (p == end) return false;
        *ms = p;
        *me = end;
        return true;
    }
    default: break;
    }
    return false;
}

static void split_pattern(span *s, const step *st) {
    size_t cur = s->ini, ms, me;
    while (cur < s->end && !s->oom && find_match(s, st, cur, &ms, &me)) {
        emit(s, ms); /* the gap before the match, if any */
        emit(s, me);
        cur = me;
    }
    emit(s, s->end);
}

/* ---- pre-tokenizer definitions -------------------------------------------- */

static const step *steps_of(pretok_type t) {
    static const step def[] = {{STEP_RUN, CLS_PUNCT_DEFAULT}, {STEP_GPT2, CLS_NONE},
                               {STEP_RUN, CLS_NUMBER}, {STEP_DIGITS3, CLS_NONE}, {STEP_END, 0}};
    static const step gpt2[] = {{STEP_GPT2, CLS_NONE}, {STEP_END, 0}};
    static const step llama3[] = {{STEP_LLAMA3, CLS_NONE}, {STEP_END, 0}};
    static const step qwen2[] = {{STEP_QWEN2, CLS_NONE}, {STEP_END, 0}};
    static const step qwen35[] = {{STEP_QWEN35, CLS_NONE}, {STEP_END, 0}};
    static const step dsllm[] = {{STEP_EACH, CLS_CRLF},
                                 {STEP_SPACE_RUN, CLS_DSLLM_LETTER},
                                 {STEP_SPACE_RUN, CLS_DSLLM_PUNCT},
                                 {STEP_TRAILING_WS, CLS_NONE},
                                 {STEP_RUN, CLS_CJK},
                                 {STEP_RUN, CLS_NUMBER},
                                 {STEP_END, 0}};
    static const step dscoder[] = {{STEP_EACH, CLS_CRLF}, {STEP_SPACE_RUN, CLS_LETTER},
                                   {STEP_SPACE_RUN, CLS_PUNCT}, {STEP_RUN, CLS_CJK},
                                   {STEP_EACH, CLS_NUMBER}, {STEP_END, 0}};
    static const step falcon[] = {{STEP_RUN, CLS_PUNCT_FALCON}, {STEP_GPT2, CLS_NONE},
                                  {STEP_DIGITS3, CLS_NONE}, {STEP_END, 0}};
    static const step starcoder[] = {{STEP_EACH, CLS_NUMBER}, {STEP_GPT2, CLS_NONE}, {STEP_END, 0}};
    static const step newlines[] = {{STEP_NEWLINES, CLS_NONE}, {STEP_END, 0}};
    static const step o200k[] = {{STEP_O200K, CLS_NONE}, {STEP_END, 0}};
    switch (t) {
    case PRETOK_DEFAULT: return def;
    case PRETOK_GPT2: return gpt2;
    case PRETOK_LLAMA3: return llama3;
    case PRETOK_QWEN2: return qwen2;
    case PRETOK_QWEN35: return qwen35;
    case PRETOK_DEEPSEEK_LLM: return dsllm;
    case PRETOK_DEEPSEEK_CODER: return dscoder;
    case PRETOK_FALCON: return falcon;
    case PRETOK_STARCODER: return starcoder;
    case PRETOK_NEWLINES: return newlines;
    case PRETOK_GPT4O: return o200k;
    }
    return gpt2;
}

vt_status pretok_split(pretok_type type, const uint32_t *cps, size_t n, pretok_words *w) {
    w->n = 0;
    if (n == 0) return VT_OK;
    if (n > UINT32_MAX) return vt_errorf(VT_E_RANGE, "tokenizer: text of %zu codepoints is too long", n);
    uint16_t *fl = malloc(n * sizeof *fl);
    pretok_words next = {0};
    if (!fl) goto oom;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = cps[i];
        fl[i] = (uint16_t)(uni_flags(c) | (uni_is_space(c) ? F_SPACE : 0));
    }
    if (!words_push(w, n)) goto oom;
    for (const step *st = steps_of(type); st->kind != STEP_END; st++) {
        next.n = 0;
        span s = {.cps = cps, .fl = fl, .out = &next};
        size_t start = 0;
        for (size_t i = 0; i < w->n && !s.oom; i++) {
            s.ini = s.prev = start;
            s.end = start + w->len[i];
            start = s.end;
            switch (st->kind) {
            case STEP_GPT2: split_gpt2(&s); break;
            case STEP_LLAMA3: split_llama3_like(&s, 3, false); break;
            case STEP_QWEN2: split_llama3_like(&s, 1, false); break;
            case STEP_QWEN35: split_llama3_like(&s, 1, true); break;
            case STEP_NEWLINES: split_newlines(&s); break;
            case STEP_O200K: split_o200k(&s); break;
            default: split_pattern(&s, st); break;
            }
            emit(&s, s.end); /* the splitters cover their piece; keep any rest */
        }
        if (s.oom) goto oom;
        pretok_words tmp = *w;
        *w = next;
        next = tmp;
    }
    free(next.len);
    free(fl);
    return VT_OK;
oom:
    free(next.len);
    free(fl);
    return vt_errorf(VT_E_NOMEM, "tokenizer: out of memory splitting %zu codepoints", n);
}
