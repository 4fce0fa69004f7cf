// A TCP proxy on loopback shaped like a connection to a cloud object store:
// it adds a round trip and caps each TCP connection's throughput, in each
// direction (this kernel has no netem, so it is done in user space; the
// bench measures that the proxy itself is much faster than what it caps).
//
//   cloud_proxy --target HOST:PORT [--rtt-ms MS] [--rate-mib MIB_PER_S]
//               [--port 0] [--window BYTES] [--log PATH]
//
// Listens on 127.0.0.1 (port 0: a free one) and prints "READY <port>" on
// stdout once listening. Every accepted connection is forwarded to TARGET
// as a link of that round-trip time and bandwidth would carry it:
//
// * a new connection costs one round trip before its first byte moves (the
//   TCP handshake); nothing is read from the client until then;
// * each direction is a serialiser of MIB_PER_S followed by half a round
//   trip of propagation: a chunk read at t leaves the serialiser at
//   end = max(t - 4 ms, previous end) + bytes / rate (a token bucket 4 ms
//   deep) and is written to the other side at end + RTT/2, in order. The
//   reader sleeps until `end` before it reads again, so bytes the link has
//   not taken yet wait in the kernel's socket buffers (TCP backpressure on
//   the sender), and the proxy holds only what is "on the wire";
// * --rate-mib 0 (the default) is no cap, --rtt-ms 0 no delay.
//
// The bytes go socket -> pipe -> socket with splice(2), never through the
// proxy's memory; the pipe's capacity (--window, default 16 MiB) is the
// most one direction holds, and a writer whose reader is slow stops the
// reading. Two threads per direction per connection (a reader that paces
// and stamps chunks, a writer that delivers them when due) and one per
// connection that makes the handshake and waits for both directions. A
// connection ends when both directions have seen end of file (passed on as
// a half close) or either side failed (then both sockets are shut down).
//
// --log PATH appends the lines scripts/bench/delay_proxy.py writes, so that
// bench_helper.py round-trips reads both: "OPEN <time> <n>" when connection
// n is accepted, "REQ <time> <n>" when a request starts on it (its first
// bytes from the client, or the first after the server had answered), and
// "CONN <n> <bytes up> <bytes down> <seconds open>" when it closes; times
// are Unix seconds.
//
// Built by the bench with cc -O2 -pthread; SIGTERM ends it at once.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

// How far behind the clock a direction's link may fall and catch up (its
// token bucket's depth, in time at the capped rate).
#define BURST_NS 4000000

static struct sockaddr_in target;
static int64_t half_rtt_ns;  // propagation delay of one direction
static int64_t rtt_ns;       // the handshake
static double rate;          // bytes per second per direction; 0: no cap
static size_t chunk_size;    // largest read
static size_t window_bytes;  // most bytes held per direction
static FILE *log_file;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_long connections;

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_until(int64_t due_ns) {
    struct timespec ts = {.tv_sec = due_ns / 1000000000, .tv_nsec = due_ns % 1000000000};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

static void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void log_line(const char *fmt, ...) {
    if (!log_file) return;
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&log_lock);
    vfprintf(log_file, fmt, ap);
    fflush(log_file);
    pthread_mutex_unlock(&log_lock);
    va_end(ap);
}

static double unix_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

// One chunk on the wire: how many bytes, and when they reach the other
// side. The bytes themselves wait in the direction's pipe.
struct chunk {
    struct chunk *next;
    int64_t due_ns;
    size_t len;  // 0: end of file
};

struct conn;

// One direction of a connection: src is read, dst written. The bytes move
// src -> pipe -> dst with splice(2), never through user space (the proxy
// must be much faster than the links it imitates); the pipe's capacity is
// the most this direction holds.
struct pipe_dir {
    struct conn *conn;
    int src, dst;
    int pipe_r, pipe_w;
    int upstream;  // client -> server (requests start here)
    pthread_mutex_t lock;
    pthread_cond_t changed;
    struct chunk *head, *tail;
    int64_t serial_end;  // when the serialiser is free again
    atomic_long bytes;   // bytes read from src
    atomic_int reader_done;
};

struct conn {
    long number;
    int client, server;
    int64_t opened_ns;
    atomic_int failed;
    long answered_down;  // bytes down when the last request started
    struct pipe_dir up, down;
};

static void wake(struct pipe_dir *d) {
    pthread_mutex_lock(&d->lock);
    pthread_cond_broadcast(&d->changed);
    pthread_mutex_unlock(&d->lock);
}

// Tears the connection down (a reset): every blocked read and write returns.
static void fail_conn(struct conn *c) {
    atomic_store(&c->failed, 1);
    shutdown(c->client, SHUT_RDWR);
    shutdown(c->server, SHUT_RDWR);
    wake(&c->up);
    wake(&c->down);
}

static int enqueue(struct pipe_dir *d, size_t len, int64_t due_ns) {
    struct chunk *ch = malloc(sizeof *ch);
    if (!ch) return -1;
    ch->next = NULL;
    ch->len = len;
    ch->due_ns = due_ns;
    pthread_mutex_lock(&d->lock);
    if (d->tail) d->tail->next = ch; else d->head = ch;
    d->tail = ch;
    pthread_cond_broadcast(&d->changed);
    pthread_mutex_unlock(&d->lock);
    return 0;
}

// splice(2) of at most LEN bytes from IN to OUT, without ever sleeping
// inside splice: a splice that blocks holds the pipe's lock, so a reader
// waiting for its socket would stop the writer draining the same pipe.
// Waits until IN is readable (IN_EVENTS), then splices without blocking; if
// that cannot move anything, waits for WAIT_FD (WAIT_EVENTS: the side that
// had no room) and tries again. Returns the bytes moved, 0 at end of file,
// -1 on an error.
static ssize_t splice_when_ready(int in, short in_events, int out, int wait_fd, short wait_events, size_t len) {
    struct pollfd p = {.fd = in, .events = in_events};
    while (poll(&p, 1, -1) < 0)
        if (errno != EINTR) return -1;
    for (;;) {
        ssize_t n = splice(in, NULL, out, NULL, len, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n >= 0) return n;
        if (errno != EAGAIN && errno != EINTR) return -1;
        struct pollfd w = {.fd = wait_fd, .events = wait_events};
        if (errno == EAGAIN && poll(&w, 1, -1) < 0 && errno != EINTR) return -1;
    }
}

static void *reader_main(void *arg) {
    struct pipe_dir *d = arg;
    struct conn *c = d->conn;
    while (!atomic_load(&c->failed)) {
        ssize_t n = splice_when_ready(d->src, POLLIN, d->pipe_w, d->pipe_w, POLLOUT, chunk_size);
        if (n <= 0) break;  // end of file, or a reset: passed on as end of file
        int64_t now = mono_ns();
        if (d->upstream) {
            long down = atomic_load(&c->down.bytes);
            if (c->answered_down != down) {
                c->answered_down = down;
                log_line("REQ %.6f %ld\n", unix_now(), c->number);
            }
        }
        atomic_fetch_add(&d->bytes, n);
        int64_t end = now;
        if (rate > 0) {
            // A token bucket BURST_NS deep: the time lost when this thread
            // wakes late from its sleep (a scheduler's fraction of a
            // millisecond, a few per cent of the rate at 2 ms a chunk) is
            // made up, and an idle link sends no more than that at once.
            int64_t start = d->serial_end > now - BURST_NS ? d->serial_end : now - BURST_NS;
            end = start + (int64_t)(n * 1e9 / rate);
            d->serial_end = end;
        }
        if (enqueue(d, (size_t)n, end + half_rtt_ns) != 0) {
            fail_conn(c);
            break;
        }
        if (end > now) sleep_until(end);  // the link is busy until then
    }
    if (enqueue(d, 0, mono_ns() + half_rtt_ns) != 0) fail_conn(c);
    atomic_store(&d->reader_done, 1);
    return NULL;
}

static void *writer_main(void *arg) {
    struct pipe_dir *d = arg;
    struct conn *c = d->conn;
    for (;;) {
        pthread_mutex_lock(&d->lock);
        while (!d->head && !atomic_load(&c->failed)) pthread_cond_wait(&d->changed, &d->lock);
        struct chunk *ch = d->head;
        if (ch) {
            d->head = ch->next;
            if (!d->head) d->tail = NULL;
        }
        pthread_mutex_unlock(&d->lock);
        if (!ch || atomic_load(&c->failed)) {
            free(ch);
            break;
        }
        if (ch->due_ns > mono_ns()) sleep_until(ch->due_ns);
        int eof = ch->len == 0;
        if (eof) shutdown(d->dst, SHUT_WR);
        size_t left = ch->len;
        while (left > 0) {
            ssize_t n = splice_when_ready(d->pipe_r, POLLIN, d->dst, d->dst, POLLOUT, left);
            if (n <= 0) {
                fail_conn(c);
                break;
            }
            left -= (size_t)n;
        }
        free(ch);
        if (eof || atomic_load(&c->failed)) break;
    }
    return NULL;
}

static int init_dir(struct pipe_dir *d, struct conn *c, int src, int dst, int upstream) {
    memset(d, 0, sizeof *d);
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return -1;
    d->pipe_r = fds[0];
    d->pipe_w = fds[1];
    // The window: as many bytes as the pipe holds (a root process may raise
    // it beyond /proc/sys/fs/pipe-max-size; otherwise that size it is).
    if (fcntl(d->pipe_w, F_SETPIPE_SZ, (int)window_bytes) < 0) {
        long max = 0;
        FILE *f = fopen("/proc/sys/fs/pipe-max-size", "r");
        if (f) {
            if (fscanf(f, "%ld", &max) != 1) max = 0;
            fclose(f);
        }
        if (max > 0) fcntl(d->pipe_w, F_SETPIPE_SZ, (int)max);
    }
    d->conn = c;
    d->src = src;
    d->dst = dst;
    d->upstream = upstream;
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->changed, NULL);
    return 0;
}

static void free_queue(struct pipe_dir *d) {
    struct chunk *ch = d->head;
    while (ch) {
        struct chunk *next = ch->next;
        free(ch);
        ch = next;
    }
    close(d->pipe_r);
    close(d->pipe_w);
    pthread_mutex_destroy(&d->lock);
    pthread_cond_destroy(&d->changed);
}

static void set_nodelay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void *conn_main(void *arg) {
    struct conn *c = arg;
    if (rtt_ns > 0) sleep_until(c->opened_ns + rtt_ns);  // the handshake
    c->server = socket(AF_INET, SOCK_STREAM, 0);
    if (c->server < 0 || connect(c->server, (struct sockaddr *)&target, sizeof target) != 0) {
        if (c->server >= 0) close(c->server);
        close(c->client);
        free(c);
        return NULL;
    }
    set_nodelay(c->client);
    set_nodelay(c->server);
    if (init_dir(&c->up, c, c->client, c->server, 1) != 0) {
        close(c->server);
        close(c->client);
        free(c);
        return NULL;
    }
    if (init_dir(&c->down, c, c->server, c->client, 0) != 0) {
        free_queue(&c->up);
        close(c->server);
        close(c->client);
        free(c);
        return NULL;
    }
    pthread_t threads[4];
    pthread_create(&threads[0], NULL, reader_main, &c->up);
    pthread_create(&threads[1], NULL, writer_main, &c->up);
    pthread_create(&threads[2], NULL, reader_main, &c->down);
    pthread_create(&threads[3], NULL, writer_main, &c->down);
    // A writer that gave up (its peer failed) leaves its reader blocked in
    // read until fail_conn shuts the sockets; join in an order that lets
    // every thread end: both writers first, then make sure the readers
    // return.
    pthread_join(threads[1], NULL);
    pthread_join(threads[3], NULL);
    shutdown(c->client, SHUT_RDWR);
    shutdown(c->server, SHUT_RDWR);
    atomic_store(&c->failed, 1);
    wake(&c->up);
    wake(&c->down);
    // A reader may be blocked on a full pipe that no writer drains any
    // more: drain it until the reader has seen its socket shut.
    struct pipe_dir *dirs[2] = {&c->up, &c->down};
    for (int i = 0; i < 2; i++) {
        fcntl(dirs[i]->pipe_r, F_SETFL, O_NONBLOCK);
        while (!atomic_load(&dirs[i]->reader_done)) {
            char discard[65536];
            if (read(dirs[i]->pipe_r, discard, sizeof discard) <= 0) usleep(1000);
        }
    }
    pthread_join(threads[0], NULL);
    pthread_join(threads[2], NULL);
    log_line("CONN %ld %ld %ld %.3f\n", c->number, atomic_load(&c->up.bytes), atomic_load(&c->down.bytes),
             (mono_ns() - c->opened_ns) / 1e9);
    close(c->client);
    close(c->server);
    free_queue(&c->up);
    free_queue(&c->down);
    free(c);
    return NULL;
}

static void usage(void) {
    fprintf(stderr,
            "usage: cloud_proxy --target HOST:PORT [--rtt-ms MS] [--rate-mib MIB_PER_S] [--port 0]"
            " [--window BYTES] [--log PATH]\n");
    exit(2);
}

static void on_term(int sig) {
    (void)sig;
    _exit(0);
}

int main(int argc, char **argv) {
    const char *target_arg = NULL, *log_path = NULL;
    double rtt_ms = 0, rate_mib = 0;
    int port = 0;
    window_bytes = 16u << 20;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) usage();
        if (!strcmp(argv[i], "--target")) target_arg = argv[++i];
        else if (!strcmp(argv[i], "--rtt-ms")) rtt_ms = atof(argv[++i]);
        else if (!strcmp(argv[i], "--rate-mib")) rate_mib = atof(argv[++i]);
        else if (!strcmp(argv[i], "--port")) port = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--window")) window_bytes = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--log")) log_path = argv[++i];
        else usage();
    }
    if (!target_arg) usage();
    const char *colon = strrchr(target_arg, ':');
    if (!colon) usage();
    char host[64];
    snprintf(host, sizeof host, "%.*s", (int)(colon - target_arg), target_arg);
    memset(&target, 0, sizeof target);
    target.sin_family = AF_INET;
    target.sin_port = htons((uint16_t)atoi(colon + 1));
    if (inet_pton(AF_INET, host[0] ? host : "127.0.0.1", &target.sin_addr) != 1) usage();
    rtt_ns = (int64_t)(rtt_ms * 1e6);
    half_rtt_ns = rtt_ns / 2;
    rate = rate_mib * 1048576.0;
    // With a cap, chunks of about 2 ms of the link keep the pacing smooth;
    // without one, large chunks keep the proxy's own cost per byte low.
    chunk_size = 1u << 20;
    if (rate > 0) {
        chunk_size = (size_t)(rate / 500);
        if (chunk_size < (16u << 10)) chunk_size = 16u << 10;
        if (chunk_size > (256u << 10)) chunk_size = 256u << 10;
    }
    if (window_bytes < 2 * chunk_size) window_bytes = 2 * chunk_size;
    if (log_path && !(log_file = fopen(log_path, "a"))) {
        perror(log_path);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, on_term);
    signal(SIGINT, on_term);

    int listener = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(listener, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(listener, 256) != 0) {
        perror("cloud_proxy: listen");
        return 1;
    }
    socklen_t len = sizeof addr;
    getsockname(listener, (struct sockaddr *)&addr, &len);
    printf("READY %d\n", ntohs(addr.sin_port));
    fflush(stdout);

    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (;;) {
        int fd = accept(listener, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            perror("cloud_proxy: accept");
            return 1;
        }
        struct conn *c = calloc(1, sizeof *c);
        if (!c) { close(fd); continue; }
        c->number = atomic_fetch_add(&connections, 1) + 1;
        c->client = fd;
        c->server = -1;
        c->opened_ns = mono_ns();
        c->answered_down = -1;
        log_line("OPEN %.6f %ld\n", unix_now(), c->number);
        pthread_t t;
        if (pthread_create(&t, &attr, conn_main, c) != 0) {
            close(fd);
            free(c);
        }
    }
}
