/* CRC-32C with the SSE 4.2 `crc32` instruction, three streams at a time.
 *
 * One `crc32` of 8 bytes has a latency of about 3 cycles and a throughput
 * of one a cycle, so a single chain runs at a third of what the unit can
 * do. The buffer is therefore cut into three consecutive segments of equal
 * length whose CRCs run interleaved, each from register 0 but the first;
 * CRC is linear, so the register after A|B is Z(crc(A)) ^ crc0(B), where
 * Z advances a register over as many zero bytes as B holds. Z for the two
 * segment lengths used is a 32x32 bit matrix, kept as four 256-entry
 * tables (one per byte of the register), built once from the instruction
 * itself. The idea is Intel's ("Fast CRC Computation for iSCSI Polynomial
 * Using CRC32 Instruction", 2011) and the shape of Mark Adler's crc32c.c;
 * written here from the algebra.
 *
 * Unaligned 8-byte loads go through memcpy (defined behaviour; compiles to
 * one load). Every pointer stays within [buf, buf + len). */
#include "crc32c_hw.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__)

#define LONG_SEGMENT 8192
#define SHORT_SEGMENT 256

static uint32_t long_shift[4][256];
static uint32_t short_shift[4][256];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;
static int has_sse42;

__attribute__((target("sse4.2"))) static inline uint64_t step64(uint64_t reg, const unsigned char *p) {
    uint64_t word;
    memcpy(&word, p, 8);
    return __builtin_ia32_crc32di(reg, word);
}

__attribute__((target("sse4.2"))) static uint32_t single(uint32_t reg, const unsigned char *p, size_t len) {
    uint64_t r = reg;
    while (len >= 8) {
        r = step64(r, p);
        p += 8;
        len -= 8;
    }
    uint32_t r32 = (uint32_t)r;
    while (len > 0) {
        r32 = __builtin_ia32_crc32qi(r32, *p);
        p++;
        len--;
    }
    return r32;
}

/* The register `reg` advanced over `count` zero bytes (count a multiple
 * of 8), by the instruction: used only to build the tables. */
__attribute__((target("sse4.2"))) static uint32_t zeros(uint32_t reg, size_t count) {
    uint64_t r = reg;
    for (size_t i = 0; i < count; i += 8) r = __builtin_ia32_crc32di(r, 0);
    return (uint32_t)r;
}

static void build(uint32_t table[4][256], size_t count) {
    /* Z is linear: Z(a ^ b) = Z(a) ^ Z(b). Its value on each of the 32
     * bits, then every byte value of each register byte by XOR of those. */
    uint32_t bit[32];
    for (int b = 0; b < 32; b++) bit[b] = zeros((uint32_t)1 << b, count);
    for (int byte = 0; byte < 4; byte++) {
        for (int v = 0; v < 256; v++) {
            uint32_t z = 0;
            for (int b = 0; b < 8; b++)
                if (v & (1 << b)) z ^= bit[byte * 8 + b];
            table[byte][v] = z;
        }
    }
}

static void build_tables(void) {
    build(long_shift, LONG_SEGMENT);
    build(short_shift, SHORT_SEGMENT);
}

static inline uint32_t shift(uint32_t table[4][256], uint32_t reg) {
    return table[0][reg & 0xff] ^ table[1][(reg >> 8) & 0xff] ^ table[2][(reg >> 16) & 0xff] ^ table[3][reg >> 24];
}

/* Three segments of `segment` bytes each from `p`, interleaved. */
__attribute__((target("sse4.2"))) static uint32_t triple(uint32_t reg, const unsigned char *p, size_t segment,
                                                         uint32_t table[4][256]) {
    uint64_t a = reg, b = 0, c = 0;
    const unsigned char *end = p + segment;
    while (p < end) {
        a = step64(a, p);
        b = step64(b, p + segment);
        c = step64(c, p + 2 * segment);
        p += 8;
    }
    uint32_t r = shift(table, (uint32_t)a) ^ (uint32_t)b;
    return shift(table, r) ^ (uint32_t)c;
}

static void detect(void) {
    __builtin_cpu_init();
    has_sse42 = __builtin_cpu_supports("sse4.2") ? 1 : 0;
}

int bucketfs_crc32c_hw_available(void) {
    pthread_once(&cpu_once, detect);
    return has_sse42;
}

uint32_t bucketfs_crc32c_hw_update(uint32_t reg, const void *buf, size_t len) {
    const unsigned char *p = buf;
    if (len >= 3 * SHORT_SEGMENT) {
        pthread_once(&tables_once, build_tables);
        while (len >= 3 * LONG_SEGMENT) {
            reg = triple(reg, p, LONG_SEGMENT, long_shift);
            p += 3 * LONG_SEGMENT;
            len -= 3 * LONG_SEGMENT;
        }
        while (len >= 3 * SHORT_SEGMENT) {
            reg = triple(reg, p, SHORT_SEGMENT, short_shift);
            p += 3 * SHORT_SEGMENT;
            len -= 3 * SHORT_SEGMENT;
        }
    }
    return single(reg, p, len);
}

#else

int bucketfs_crc32c_hw_available(void) { return 0; }

uint32_t bucketfs_crc32c_hw_update(uint32_t reg, const void *buf, size_t len) {
    (void)buf;
    (void)len;
    return reg; /* never called: not available */
}

#endif
