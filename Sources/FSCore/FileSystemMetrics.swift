import CoreMetrics

/// Filesystem counters through swift-metrics (a no-op unless the process
/// bootstrapped a backend, as `bucketfs mount --metrics-address` does):
///
/// - `bucketfs_read_bytes_total`, `bucketfs_written_bytes_total`: bytes
///   returned by read and accepted by write (what processes moved through
///   the mount, not what went over the network).
/// - `bucketfs_block_cache_hits_total`, `bucketfs_block_cache_misses_total`:
///   lookups of a block in the on-disk block cache; a block read-ahead
///   downloads because the cache lacks it is a miss too.
/// - `bucketfs_block_cache_dropped_total`: downloaded blocks not cached
///   because the cache's write queue was full (the disk fell behind).
/// - `bucketfs_block_cache_write_waits_total`,
///   `bucketfs_block_cache_write_wait_seconds_total`: reads held until the
///   cache's writer caught up (`CacheWriteBacklog`), and for how long in
///   all: a disk or a CPU slower than the downloads.
///
/// Gauges (cache size, read-ahead in use, uploads in flight, recovery
/// entries) are read from `FileSystem.status()` when scraped. The counters
/// are made at first use, which in a mount comes after the bootstrap.
enum FileSystemMetrics {
    static let readBytes = Counter(label: "bucketfs_read_bytes_total")
    static let writtenBytes = Counter(label: "bucketfs_written_bytes_total")
    static let blockCacheHits = Counter(label: "bucketfs_block_cache_hits_total")
    static let blockCacheMisses = Counter(label: "bucketfs_block_cache_misses_total")
    static let blockCacheDropped = Counter(label: "bucketfs_block_cache_dropped_total")
    static let blockCacheWriteWaits = Counter(label: "bucketfs_block_cache_write_waits_total")
    static let blockCacheWriteWaitSeconds = FloatingPointCounter(label: "bucketfs_block_cache_write_wait_seconds_total")
}
