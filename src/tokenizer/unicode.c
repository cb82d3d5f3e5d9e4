#include "tokenizer/unicode.h"

static inline bool is_cont(uint8_t c) { return (c & 0xc0) == 0x80; }

uint32_t uni_decode(const uint8_t *s, size_t n, size_t *adv) {
    uint8_t c = s[0];
    uint32_t cp;
    size_t len;
    if (c < 0x80) {
        *adv = 1;
        return c;
    }
    if (!(c & 0x40)) goto bad; /* continuation byte */
    if (!(c & 0x20)) {
        if (n < 2 || !is_cont(s[1])) goto bad;
        cp = ((uint32_t)(c & 0x1f) << 6) | (s[1] & 0x3f);
        len = 2;
    } else if (!(c & 0x10)) {
        if (n < 3 || !is_cont(s[1]) || !is_cont(s[2])) goto bad;
        cp = ((uint32_t)(c & 0x0f) << 12) | ((uint32_t)(s[1] & 0x3f) << 6) | (s[2] & 0x3f);
        len = 3;
    } else if (!(c & 0x08)) {
        if (n < 4 || !is_cont(s[1]) || !is_cont(s[2]) || !is_cont(s[3])) goto bad;
        cp = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[1] & 0x3f) << 12) |
             ((uint32_t)(s[2] & 0x3f) << 6) | (s[3] & 0x3f);
        len = 4;
        /* llama.cpp decodes these but then fails to re-encode them; vt treats
         * them as one bad byte. */
        if (cp >= UNI_MAX_CP) goto bad;
    } else {
        goto bad;
    }
    *adv = len;
    return cp;
bad:
    *adv = 1;
    return UNI_REPLACEMENT;
}

int uni_encode(uint32_t cp, uint8_t out[4]) {
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xc0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xe0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (uint8_t)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (uint8_t)(0xf0 | ((cp >> 18) & 0x07));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (uint8_t)(0x80 | (cp & 0x3f));
    return 4;
}

size_t uni_decode_all(const uint8_t *s, size_t n, uint32_t *cps) {
    size_t i = 0, k = 0;
    while (i < n) {
        size_t adv;
        cps[k++] = uni_decode(s + i, n - i, &adv);
        i += adv;
    }
    return k;
}

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the
 * other 68 bytes map, in byte order, to U+0100 onwards. */
static bool byte_is_printable(int b) {
    return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

/* The non-printable bytes are 0x00-0x20 (33), 0x7F-0xA0 (34) and 0xAD. */
uint32_t uni_byte_to_cp(uint8_t b) {
    if (byte_is_printable(b)) return b;
    if (b <= 0x20) return 0x100u + b;
    if (b <= 0xa0) return 0x100u + 33 + (b - 0x7fu);
    return 0x100u + 67; /* 0xAD */
}

int uni_cp_to_byte(uint32_t cp) {
    if (cp < 0x100) return byte_is_printable((int)cp) ? (int)cp : -1;
    uint32_t n = cp - 0x100;
    if (n < 33) return (int)n;
    if (n < 67) return (int)(0x7f + n - 33);
    if (n == 67) return 0xad;
    return -1;
}
