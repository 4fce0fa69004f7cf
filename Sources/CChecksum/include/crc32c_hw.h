#ifndef BUCKETFS_CRC32C_HW_H
#define BUCKETFS_CRC32C_HW_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C (Castagnoli) with the CPU's own instruction (SSE 4.2 `crc32`):
 * the one checksum Cloud Storage keeps for every object, and the block
 * cache's. Swift has no way to emit that instruction, so this is C; the
 * portable slicing-by-8 in StorageKit's CRC32C stays the fallback. */

/* Nonzero when this CPU has the instruction (checked once). */
int bucketfs_crc32c_hw_available(void);

/* Advances the CRC register `reg` (bit-inverted, as the algorithm keeps it:
 * ~0 at the start, the checksum is its inverse) over `len` bytes at `buf`.
 * Only call when bucketfs_crc32c_hw_available() is nonzero. */
uint32_t bucketfs_crc32c_hw_update(uint32_t reg, const void *buf, size_t len);

#endif
