/* Connection admission (see conns.h). */
#include "server/conns.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The peer's address bytes: IPv4 (also when mapped into IPv6) or IPv6; 0 bytes otherwise. */
static uint8_t peer_key(const struct sockaddr *a, socklen_t len, uint8_t out[16]) {
    if (a && a->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        memcpy(out, &((const struct sockaddr_in *)a)->sin_addr, 4);
        return 4;
    }
    if (a && a->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const uint8_t *b = ((const struct sockaddr_in6 *)a)->sin6_addr.s6_addr;
        static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (!memcmp(b, v4mapped, 12)) {
            memcpy(out, b + 12, 4);
            return 4;
        }
        memcpy(out, b, 16);
        return 16;
    }
    return 0;
}

void conns_init(conns *c, int max_connections, int max_per_peer) {
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    c->max_connections = max_connections;
    c->max_per_peer = max_per_peer;
}

void conns_free(conns *c) {
    conn_ctx *x = c->head;
    while (x) {
        conn_ctx *n = x->next;
        free(x);
        x = n;
    }
    pthread_mutex_destroy(&c->mu);
}

/* The idle connection to evict (c->mu held): of this peer only when `peer` is
 * given; never-authenticated ones first, then the one idle the longest. A
 * reserved connection is not one: it holds no slot a new one could take. */
static conn_ctx *pick_victim(conns *c, const uint8_t *peer, uint8_t peer_len) {
    conn_ctx *best = NULL;
    for (conn_ctx *x = c->head; x; x = x->next) {
        if (x->busy || x->evicted || x->reserved) continue;
        if (peer && (x->peer_len != peer_len || memcmp(x->peer, peer, peer_len))) continue;
        if (!best || (best->authenticated && !x->authenticated) ||
            (best->authenticated == x->authenticated && x->idle_since < best->idle_since)) {
            best = x;
        }
    }
    return best;
}

bool conns_admit(conns *c, const struct sockaddr *addr, socklen_t len) {
    uint8_t key[16];
    uint8_t klen = peer_key(addr, len, key);
    pthread_mutex_lock(&c->mu);
    int64_t n_live = 0, n_peer = 0;
    for (conn_ctx *x = c->head; x; x = x->next) {
        if (x->evicted || x->reserved) continue;
        n_live++;
        if (x->peer_len == klen && !memcmp(x->peer, key, klen)) n_peer++;
    }
    bool peer_full = c->max_per_peer > 0 && n_peer >= c->max_per_peer;
    bool all_full = n_live >= c->max_connections;
    /* evicting one of this peer's frees a slot of the peer's and of the server's */
    conn_ctx *victim = peer_full ? pick_victim(c, key, klen) : all_full ? pick_victim(c, NULL, 0) : NULL;
    bool ok = true;
    c->admit_reserved = 0;
    if (victim) {
        victim->evicted = true;
        shutdown(victim->fd, SHUT_RDWR); /* its thread sees the hang-up and closes it */
        c->evicted++;
    } else if (peer_full || all_full) {
        if (c->n_reserved < CONNS_RESERVED) {
            c->admit_reserved = 1;
        } else {
            ok = false;
            if (peer_full) c->refused_per_peer++;
            else c->refused_full++;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return ok;
}

conn_ctx *conns_add(conns *c, int fd, const struct sockaddr *addr, socklen_t len) {
    conn_ctx *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->fd = fd;
    x->peer_len = peer_key(addr, len, x->peer);
    x->idle_since = now_s();
    pthread_mutex_lock(&c->mu);
    x->reserved = c->admit_reserved != 0;
    c->admit_reserved = 0;
    if (x->reserved) c->n_reserved++;
    x->prev = c->tail;
    if (c->tail) c->tail->next = x;
    else c->head = x;
    c->tail = x;
    c->n_open++;
    pthread_mutex_unlock(&c->mu);
    return x;
}

void conns_remove(conns *c, conn_ctx *x) {
    pthread_mutex_lock(&c->mu);
    if (x->prev) x->prev->next = x->next;
    else c->head = x->next;
    if (x->next) x->next->prev = x->prev;
    else c->tail = x->prev;
    c->n_open--;
    if (x->reserved) c->n_reserved--;
    pthread_mutex_unlock(&c->mu);
    free(x);
}

void conns_set_busy(conns *c, conn_ctx *x, bool busy) {
    pthread_mutex_lock(&c->mu);
    x->busy = busy;
    if (!busy) x->idle_since = now_s();
    pthread_mutex_unlock(&c->mu);
}

void conns_set_authenticated(conns *c, conn_ctx *x) {
    pthread_mutex_lock(&c->mu);
    x->authenticated = true;
    pthread_mutex_unlock(&c->mu);
}

void conns_stats(conns *c, int64_t *open, uint64_t *refused_per_peer, uint64_t *refused_full, uint64_t *evicted) {
    pthread_mutex_lock(&c->mu);
    *open = c->n_open;
    *refused_per_peer = c->refused_per_peer;
    *refused_full = c->refused_full;
    *evicted = c->evicted;
    pthread_mutex_unlock(&c->mu);
}
