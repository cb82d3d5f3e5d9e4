/* Connection admission: which TCP connections may hold one of the server's
 * threads, so that idle or slow sockets cannot lock everyone out.
 *
 * libmicrohttpd runs a thread per connection and stops accepting at its limit;
 * a peer that opens that many sockets and sends nothing would lock out every
 * client, /health included, until they time out. The policy here, applied at
 * accept time (MHD's accept-policy callback, on its listening thread):
 *
 *   - a peer address holds at most max_per_peer connections (0: no limit);
 *   - all peers together hold at most max_connections;
 *   - a new connection that would pass either limit first evicts an idle
 *     connection (one with no request in progress: waiting for a request line
 *     or idle between keep-alive requests) of that peer, or of anyone when the
 *     server is full; connections that never sent an authenticated request go
 *     first, then the oldest idle. Eviction is shutdown(2) on the socket, which
 *     the connection's own thread sees as a hang-up;
 *   - with nothing idle to evict, up to CONNS_RESERVED more connections are
 *     admitted as "reserved": they may ask for /health and /metrics, and, when
 *     an API key is set, anything with the key; other requests get 503;
 *   - past that the connection is refused (closed at once) and counted.
 *
 * Connections are recorded in MHD's NOTIFY_CONNECTION callback (STARTED and
 * CLOSED, both on the listening thread, which also closes sockets, so a
 * recorded fd is never a reused one); request threads mark their connection
 * busy or idle. One mutex guards the table. */
#ifndef VT_SERVER_CONNS_H
#define VT_SERVER_CONNS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#define CONNS_RESERVED 16

typedef struct conn_ctx {
    struct conn_ctx *next, *prev; /* in the table, oldest first */
    int fd;
    uint8_t peer[16];             /* IPv4 (4 bytes, also for v4-mapped IPv6) or IPv6 address */
    uint8_t peer_len;
    bool busy;                    /* a request is being read or answered */
    bool authenticated;           /* sent a request with the API key (or no key is set) */
    bool reserved;                /* admitted past the limits: /health, /metrics, keyed requests only */
    bool evicted;                 /* shut down to make room; its thread is closing it */
    double idle_since;            /* seconds (monotonic) */
    /* per-request, written and read by the connection's own thread */
    bool close_after;             /* answer with Connection: close (body framing unknown) */
    char reason[240];             /* the message of an error answer, for the log line */
} conn_ctx;

typedef struct conns {
    pthread_mutex_t mu;
    conn_ctx *head, *tail;
    int64_t n_open, n_reserved;
    int max_connections, max_per_peer;
    /* counters for /metrics (under mu) */
    uint64_t refused_per_peer, refused_full, evicted;
    int64_t admit_reserved;       /* the last accept decision: 1 reserved, 0 normal */
} conns;

void conns_init(conns *c, int max_connections, int max_per_peer);
void conns_free(conns *c);
/* The accept decision for a peer (MHD_AcceptPolicyCallback semantics): true to
 * admit. May evict an idle connection to make room. */
bool conns_admit(conns *c, const struct sockaddr *addr, socklen_t len);
/* Record an admitted connection (after conns_admit said yes); NULL when out of memory. */
conn_ctx *conns_add(conns *c, int fd, const struct sockaddr *addr, socklen_t len);
void conns_remove(conns *c, conn_ctx *x);
/* A request started (headers received) / ended on x. */
void conns_set_busy(conns *c, conn_ctx *x, bool busy);
void conns_set_authenticated(conns *c, conn_ctx *x);
/* Open connections and the counters, for /metrics. */
void conns_stats(conns *c, int64_t *open, uint64_t *refused_per_peer, uint64_t *refused_full, uint64_t *evicted);

#endif
