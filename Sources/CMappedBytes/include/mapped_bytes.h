#ifndef BUCKETFS_MAPPED_BYTES_H
#define BUCKETFS_MAPPED_BYTES_H

#include <stddef.h>
#include <stdint.h>

/* Reading bytes of a shared file mapping (the block cache's chunk files)
 * where a fault is an error, not the end of the process.
 *
 * A page of a file mapping that cannot be read raises SIGBUS: the file
 * was cut short under the mapping, or its disk failed. pread would have
 * returned an error there; these functions return -1 instead, so such a
 * block reads as a miss. Only touches in these functions are guarded; a
 * SIGBUS anywhere else goes to the handler installed before (the Swift
 * runtime's crash reporter, or the default action). */

/* Nonzero when the guarded checksum can run (the CPU has SSE 4.2's crc32). */
int bucketfs_mapped_available(void);

/* The CRC-32C of `len` bytes at `buf` into `*crc`; 0, or -1 if reading
 * them faulted. Only call when bucketfs_mapped_available() is nonzero. */
int bucketfs_mapped_crc32c(const void *buf, size_t len, uint32_t *crc);

/* Copies `len` bytes from `src` to `dst`; 0, or -1 if reading `src`
 * faulted (then `dst` holds part of them). */
int bucketfs_mapped_copy(void *dst, const void *src, size_t len);

#endif
